"""Stream records into removals: DynamoDB stream and Kinesis records (`kinesis_records`,
`stream_records`), the REMOVE events among them (`kinesis_removals`) and why a removal is cleaned
(`classify`). It imports `core` and `owners`; the cleanup, recovery and handler import it.
"""
