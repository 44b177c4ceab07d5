"""Cleanup and session runtime for DynamoDB sessions that fail closed on time.

Only the standard library and boto3 (shipped by the Lambda Python runtime) are used,
so the deployed function and layer need nothing beyond the assets the construct builds.
"""
