"""``Archive``: write the old image to the archive bucket before anything else (a gate step).

Runs first; if the write fails the record fails and no other step runs, so a session is never
cleaned without its archive copy (the retry starts over). The key is deterministic (see
:mod:`session_expiry_runtime.archive`), so a redelivered record overwrites its own object:
idempotent. ``done`` means the object was written. Dry run: no write (``dry-run``).
"""

from __future__ import annotations

from typing import Any

from .. import archive
from ..clients import CleanupClients
from ..config import ACTION_ARCHIVE, RuntimeConfig
from ..outcomes import STEP_DONE
from .base import PHASE_GATE, CleanupStep, Plan, Session, StepContext


class ArchiveStep(CleanupStep):
    name = ACTION_ARCHIVE
    phase = PHASE_GATE

    def __init__(self, config: RuntimeConfig, s3: Any) -> None:
        self.config = config
        self.s3 = s3
        self.attributes = (config.tenant_attribute, config.ttl_attribute)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> ArchiveStep | None:
        return cls(config, clients.archive) if clients.archive is not None else None

    def plan(self, session: Session) -> Plan:
        return Plan.run()

    def run(self, plan: Plan, ctx: StepContext) -> str:
        session, cfg = ctx.session, self.config
        tenant = session.image.get(cfg.tenant_attribute)
        key = archive.archive_key(
            cfg,
            keys=session.keys,
            tenant=tenant,
            sequence_number=str(session.record.sequence_number),
            approximate_creation_time=session.record.approximate_creation_time,
        )
        document = archive.archive_document(
            session.record,
            keys=session.keys,
            image=session.image,
            tenant=tenant,
            reason=session.reason,
            ttl=session.image.get(cfg.ttl_attribute),
            lag_seconds=session.lag_seconds,
        )
        archive.put_archive(self.s3, cfg, key, document)
        ctx.note("archiveKey", key)
        return STEP_DONE
