"""``Archive``: write the archived record of the session before anything else (a gate step).

Runs first; if the record is not durable the step fails, the record fails and no other step
runs, so a session is never cleaned without its archive copy (the retry starts over).

* **Per-object mode** (``archive_bucket``): one ``PutObject`` of the session's line under its
  deterministic key (`session_expiry_runtime.sinks.archive`), so a redelivered record overwrites
  its own object: idempotent. Durable: S3 answered the ``PutObject``.
* **Firehose mode** (``archive_delivery_stream``): the line goes to the delivery stream through
  the invocation's `FirehoseBatcher` (``PutRecordBatch`` shared with the invocation's other
  sessions, never with another invocation's: ``StepContext.shared``, as the scratch step's
  ``DeleteObjects``; `session_expiry_runtime.core.invocation`). Durable: Firehose accepted
  the record (see that module for what this means and for how long). A redelivered record is
  put again (at least once: queries count ``DISTINCT sequence_number``). A line longer than a
  Firehose record may be (1,000 KiB: an old image near DynamoDB's 400 KB item limit) is
  written with ``PutObject`` as in the per-object mode, under the same partitions.

``done`` means the record is durable. Dry run: no write (``dry-run``).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.clients import CleanupClients
from ..core.config import ACTION_ARCHIVE, RuntimeConfig
from ..owners.outcomes import STEP_DONE, StepFailed, error_text
from ..sinks import archive
from ..sinks.archive_delivery import MAX_RECORD_BYTES, DeliveryRefused, FirehoseBatcher
from .base import PHASE_GATE, CleanupStep, Plan, Session, StepContext


class ArchiveStep(CleanupStep):
    name = ACTION_ARCHIVE
    phase = PHASE_GATE

    def __init__(
        self, config: RuntimeConfig, s3: Any, delivery: FirehoseBatcher | None = None
    ) -> None:
        self.config = config
        self.s3 = s3
        self.delivery = delivery
        self.attributes = (
            config.tenant_attribute,
            config.ttl_attribute,
            config.incarnation_attribute,
        )

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> ArchiveStep | None:
        if clients.archive is None:
            return None
        delivery = (
            FirehoseBatcher(clients.firehose, config.archive_delivery_stream)
            if config.archive_delivery_stream and clients.firehose is not None
            else None
        )
        return cls(config, clients.archive, delivery)

    def plan(self, session: Session) -> Plan:
        return Plan.run()

    def run(self, plan: Plan, ctx: StepContext) -> str:
        session, cfg = ctx.session, self.config
        key = archive.archive_key(
            cfg,
            keys=session.keys,
            tenant=archive.archived_tenant(cfg, keys=session.keys, image=session.image),
            sequence_number=str(session.record.sequence_number),
            approximate_creation_time=session.record.approximate_creation_time,
        )
        document = archive.archive_document(
            cfg,
            session.record,
            keys=session.keys,
            image=session.image,
            reason=session.reason,
            lag_seconds=session.lag_seconds,
        )
        line = archive.archive_line(document)
        delivery = self._batcher(ctx)
        if delivery is not None and len(line) <= MAX_RECORD_BYTES:
            _deliver(delivery, line, ctx)
            ctx.note("archiveDelivery", delivery.stream_name)
            return STEP_DONE
        archive.put_archive(self.s3, cfg, key, line)
        ctx.note("archiveKey", key)
        return STEP_DONE

    def _batcher(self, ctx: StepContext) -> FirehoseBatcher | None:
        """The invocation's batcher, made like ``delivery`` (``None`` in the per-object mode):
        a call abandoned at a hard stop holds only its own invocation's lines (issue 21), and
        invocations sharing a process never share a call, nor its deadline."""
        made = self.delivery
        if made is None:
            return None
        return ctx.shared(
            self,
            lambda: FirehoseBatcher(
                made.firehose,
                made.stream_name,
                max_records=made.max_records,
                max_bytes=made.max_bytes,
            ),
        )


def _deliver(delivery: FirehoseBatcher, line: bytes, ctx: StepContext) -> None:
    """Firehose accepted ``line``, or ``StepFailed(Archive, ...)`` naming why not."""
    try:
        delivery.put(line, ctx.waiting)
    except DeliveryRefused as exc:
        raise StepFailed(ACTION_ARCHIVE, f"PutRecordBatch refused the record: {exc}") from exc
    except (ClientError, BotoCoreError) as exc:
        raise StepFailed(ACTION_ARCHIVE, f"PutRecordBatch: {error_text(exc)}") from exc
