"""The kill switch: the cleanup's event source mapping id as a stack output, and the synth
warning of a cleanup deployed paused.

``cleanup_enabled=False`` needs a deploy; in an incident the operator disables the mapping in
place instead (``aws lambda update-event-source-mapping --uuid UUID --no-enabled``, or
``python -m session_expiry_runtime.kill_switch disable --uuid UUID``) and needs its UUID: the
construct exposes it as ``event_source_mapping_id`` and as this stack output.

Deploying ``cleanup_enabled=False`` is a pause with a deadline: the stream keeps records
24 hours, so synth warns (`warn_when_paused`) with the dates that matter.
"""

from __future__ import annotations

from aws_cdk import Annotations, CfnOutput, Duration
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .. import validation
from ..monitoring import alarms as alarm_defaults

#: Construct id of the output (its logical id is derived from the construct's path).
OUTPUT_ID = "CleanupEventSourceMappingId"
#: Id of the synth warning of `warn_when_paused` (acknowledge it with
#: ``Annotations.of(scope).acknowledge_warning(WARNING_CLEANUP_PAUSED)``).
WARNING_CLEANUP_PAUSED = "cdk-session-expiry:cleanupPaused"


def warn_when_paused(
    scope: Construct,
    *,
    cleanup_enabled: bool,
    max_record_age: Duration,
    paused_after: Duration,
    retention: Duration = validation.STREAM_RETENTION,
) -> None:
    """A synth warning when ``cleanup_enabled`` is ``False``: the mapping is deployed disabled,
    records age out of the change source ``retention`` after the pause (default a DynamoDB
    stream's 24 hours), those older than ``max_record_age``
    at resume go to the on-failure destination, and the paused-cleanup alarm fires after
    ``paused_after``."""
    if cleanup_enabled:
        return
    kept = alarm_defaults.retention_text(retention)
    Annotations.of(scope).add_warning_v2(
        WARNING_CLEANUP_PAUSED,
        "cleanup_enabled=False: the event source mapping is deployed disabled and nothing is "
        f"cleaned. The stream keeps records {kept}: records written from the pause on age out "
        f"of the stream {kept} after it and are then never cleaned; resumed after "
        f"max_record_age ({validation.shown(max_record_age)}), the older ones go to the "
        f"on-failure destination instead (replay them within the {kept}). The paused-cleanup "
        f"alarm fires after {validation.shown(paused_after)}. Resume with cleanup_enabled=True "
        "(docs/operating.md#kill-switch).",
    )


def mapping_id_output(scope: Construct, mapping: lambda_.EventSourceMapping) -> CfnOutput:
    """A stack output holding ``mapping``'s UUID, its description the commands that use it."""
    return CfnOutput(
        scope,
        OUTPUT_ID,
        value=mapping.event_source_mapping_id,
        description=(
            "Kill switch of the session cleanup without a deploy (UUID in docs/operating.md): "
            "aws lambda update-event-source-mapping --uuid <this value> --no-enabled (resume: "
            "--enabled); "
            "then set cleanup_enabled to match before the next deploy."
        ),
    )
