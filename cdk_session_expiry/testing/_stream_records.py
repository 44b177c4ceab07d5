"""DynamoDB Streams API records (GetRecords, via boto3) to Lambda event records.

Lambda delivers the same record with a few differences in spelling, all applied here:

* ``dynamodb.ApproximateCreationDateTime`` is epoch **seconds** (a number), not a timestamp;
* binary attribute values (``B``, ``BS``) are **base64 text**, not bytes;
* ``userIdentity`` keys are ``type``/``principalId`` instead of ``Type``/``PrincipalId``;
* each record carries ``eventSourceARN``, the stream ARN.

Source: "Using AWS Lambda with Amazon DynamoDB" (example event) in the Lambda developer guide,
and the DynamoDB Streams API reference (``Record``, ``StreamRecord``, ``Identity``).
"""

from __future__ import annotations

# The local pipeline stands in for the event source mapping, so it must reshape records exactly
# as the runtime's failure replay does: both use the runtime's one implementation. (Test
# tooling, not infrastructure: the construct itself never imports the runtime.)
from session_expiry_runtime.records.stream_records import (
    TTL_USER_IDENTITY,
    sequence_number,
    to_lambda_record,
)

__all__ = ["TTL_USER_IDENTITY", "sequence_number", "to_lambda_record"]
