"""The kill switch without a deploy: the cleanup's event source mapping id, as a stack output.

``cleanup_enabled=False`` needs a deploy; in an incident the operator disables the mapping in
place instead (``aws lambda update-event-source-mapping --uuid UUID --no-enabled``, or
``python -m session_expiry_runtime.kill_switch disable --uuid UUID``) and needs its UUID: the
construct exposes it as ``event_source_mapping_id`` and as this stack output.
"""

from __future__ import annotations

from aws_cdk import CfnOutput
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

#: Construct id of the output (its logical id is derived from the construct's path).
OUTPUT_ID = "CleanupEventSourceMappingId"


def mapping_id_output(scope: Construct, mapping: lambda_.EventSourceMapping) -> CfnOutput:
    """A stack output holding ``mapping``'s UUID, its description the commands that use it."""
    return CfnOutput(
        scope,
        OUTPUT_ID,
        value=mapping.event_source_mapping_id,
        description=(
            "Kill switch of the session cleanup without a deploy: aws lambda "
            "update-event-source-mapping --uuid <this value> --no-enabled (resume: --enabled); "
            "then set cleanup_enabled to match before the next deploy."
        ),
    )
