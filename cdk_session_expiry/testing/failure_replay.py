"""Replaying the on-failure destination in a test, as an operator does after an incident.

``LocalPipeline.replay_failures`` runs the replay CLI (``python -m
session_expiry_runtime.replay``) from the cleanup function's deployed code asset with the
function's settings, against the event source mapping's on-failure destination: the SQS queue
(``--queue-url``) or every object of the S3 bucket (``--bucket``/``--key --delete``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cdk_session_expiry.testing.pipeline import LocalPipeline

#: The replay CLI's module in the code asset.
REPLAY_MODULE = "session_expiry_runtime.recovery.replay"


@dataclass
class ReplayResult:
    """What
    [`LocalPipeline.replay_failures`][cdk_session_expiry.testing.LocalPipeline.replay_failures] did.

    Attributes:
        outcomes: one JSON object per message or object, as the CLI prints them: ``source``,
            ``status`` (``replayed``, ``dry-run``, ``failed``, ``aged-out``, ...), ``records``,
            ``removes``, ``cleaned``, ``deleted``, ... (docs: Operating it, "Replay").
        exit_codes: the CLI's exit status of each run (one for a queue, one per S3 object):
            0 every message replayed, 1 some kept, 2 could not run.
        stderr: what the CLI wrote to stderr (its trust notice and errors).
    """

    outcomes: list[dict[str, Any]] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)
    stderr: str = ""

    @property
    def ok(self) -> bool:
        """Every run exited 0: every message or object was replayed (or dry-run) and removed."""
        return all(code == 0 for code in self.exit_codes)

    @property
    def replayed(self) -> int:
        """Outcomes with status ``replayed``."""
        return sum(1 for o in self.outcomes if o.get("status") == "replayed")


def replay_from_destination(pipeline: LocalPipeline, *, dry_run: bool) -> ReplayResult:
    """Run the replay CLI for the mapping's on-failure destination (see the module docstring).

    Raises:
        LookupError: the mapping has no SQS or S3 on-failure destination.
    """
    destination = pipeline.mapping.on_failure_destination or ""
    extra = ["--dry-run"] if dry_run else []
    runs: list[list[str]] = []
    if ":sqs:" in destination:
        runs.append(["--queue-url", str(pipeline.on_failure_queue_url()), *extra])
    elif destination.startswith("arn:aws:s3:::") or ":s3:::" in destination:
        bucket = destination.split(":::", 1)[1]
        s3 = pipeline.emulator.client("s3")
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for obj in page.get("Contents", []):
                delete = [] if dry_run else ["--delete"]
                runs.append(["--bucket", bucket, "--key", obj["Key"], *delete, *extra])
    else:
        raise LookupError(
            f"event source mapping {pipeline.mapping.uuid} has no SQS or S3 on-failure "
            f"destination ({destination!r}): nothing to replay"
        )
    result = ReplayResult()
    for args in runs:
        done = pipeline.run_module(REPLAY_MODULE, *args)
        result.exit_codes.append(done.returncode)
        result.stderr += done.stderr
        for line in done.stdout.splitlines():
            if line.strip().startswith("{"):
                result.outcomes.append(json.loads(line))
    return result
