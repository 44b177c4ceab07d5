"""The backstops that run on a schedule: the sweeper of expired items the stream missed (`sweeper`),
the sweeper of orphan KMS grants (`grant_sweeper`) and its progress marker
(`grant_sweep_marker`), and the sweeper of orphan AgentCore tool sessions
(`tool_session_sweeper`) and its listings (`tool_session_listing`). It imports `core` and
`owners`; the store imports `sweeper`.
"""
