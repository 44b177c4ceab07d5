"""``DeleteScratch``: delete every object under the session's scratch prefix.

Plan: only the session's own incarnation prefix runs, as
:func:`~session_expiry_runtime.prefixes.validate_session_prefix` derives it from the record's
own ``Keys`` (plus the tenant and the incarnation):
``<root>[<tenant>/]<session id>/<incarnation>/``.
Any other prefix the image names — a neighbour's (``sessions/s-10/...`` for ``s-1``), the whole
session without an incarnation, another tenant's — is **refused** (counted as
``ScratchPrefixesRefused``, logged, never retried, nothing deleted), whoever wrote the image.

The tenant segment (``tenant_scoped_scratch``): when the tenant attribute is one of the table's
key attributes (the construct and ``SessionStore`` allow it as the partition key of a table with
a sort key), it comes from the record's ``Keys``, and a record whose old image names another
tenant is refused (DynamoDB's own records always agree; a record that does not was altered,
e.g. a replayed failure-destination payload). When it is not a key attribute, the tenant is
**the old image's word**: the session id and the single incarnation segment still come from
``Keys`` and the prefix's shape, so a writer of the table can at most name
``<root><another tenant>/<this record's session id>/<incarnation>/``, the objects of a session
with the same id under another tenant (possible only with a sort key, where ids are unique
per partition only) whose incarnation it has read.

Run: every key under the prefix is listed (``ListObjectsV2``, paginated; botocore requests
``EncodingType=url`` and decodes the keys, so control characters survive the XML) and handed to
the :class:`ScratchDeleter`. It hands them to the process's one
:class:`~.delete_objects.BatchingDeleter`, which sends ``DeleteObjects`` (at most 1,000 keys,
``Quiet``) **shared by the sessions cleaned side by side** and gives each session back the
``Errors`` entries of its own keys, so a key that fails fails only the record that owns it; keys
that XML 1.0 cannot carry in the DeleteObjects body (most C0 controls) or holding a carriage
return (XML parsers turn it into a line feed, so S3 would delete a different key) go one by one
through ``DeleteObject``, whose key travels in the URL. A missing key counts as deleted (S3
reports it so): idempotent. The time guard is checked between pages.

Preview (dry run): the same listing, no deletion; logs ``objectsWouldBeDeleted``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..clients import CleanupClients
from ..config import ACTION_DELETE_SCRATCH, ACTION_TIME_GUARD, RuntimeConfig
from ..decode import to_json_value
from ..outcomes import STEP_DONE, STEP_DRY_RUN, StepFailed, error_text
from ..prefixes import ScratchPrefixError, validate_session_prefix
from .base import CleanupStep, Plan, Session, StepContext
from .delete_objects import DELETE_OBJECTS_MAX_KEYS, BatchingDeleter

__all__ = ["DELETE_OBJECTS_MAX_KEYS", "NOT_XML_SAFE", "ScratchDeleter", "ScratchStep"]
#: Characters outside XML 1.0's Char production (``#x9 | #xA | #xD | [#x20-#xD7FF] |
#: [#xE000-#xFFFD] | [#x10000-#x10FFFF]``), plus CR (normalised to LF by XML parsers): written as
#: the class of those characters rather than the negation of the allowed ones, which compiles in
#: a fourth of the time (part of the function's cold start).
NOT_XML_SAFE = re.compile(r"[\x00-\x08\x0b-\x1f\ud800-\udfff\ufffe\uffff]")


class ScratchDeleter:
    """Deletes one session's keys of one bucket: ``DeleteObjects`` shared with the other
    sessions of the invocation (:class:`~.delete_objects.BatchingDeleter`), unsafe keys one by
    one."""

    def __init__(self, s3: Any, bucket: str | None) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.batcher = BatchingDeleter(s3, bucket)

    def delete(
        self,
        keys: Sequence[str],
        on_deleted: Callable[[int], None],
        waiting: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> list[str]:
        """Delete ``keys``; return one text per ``Errors`` entry that names one of them.

        ``waiting`` wraps the waits for other steps' shared calls
        (:meth:`~.delete_objects.BatchingDeleter.delete`).

        ``on_deleted(n)`` is called as soon as ``n`` keys are gone, so a failure half-way still
        counts what was deleted. Raises botocore errors unchanged (the step turns them into
        ``StepFailed``), also when the failed call carried other sessions' keys as well.
        """
        batchable = [k for k in keys if not NOT_XML_SAFE.search(k)]
        errors = self.batcher.delete(batchable, waiting)
        on_deleted(len(set(batchable)) - len({e.get("Key") for e in errors}))
        problems = [
            f"{e.get('Key')!r}: {e.get('Code')} {e.get('Message', '')}".rstrip() for e in errors
        ]
        for key in (k for k in keys if NOT_XML_SAFE.search(k)):
            self.s3.delete_object(Bucket=self.bucket, Key=key)
            on_deleted(1)
        return problems


class ScratchStep(CleanupStep):
    name = ACTION_DELETE_SCRATCH

    def __init__(self, config: RuntimeConfig, s3: Any) -> None:
        self.config = config
        self.s3 = s3
        self.bucket = config.scratch_bucket
        self.deleter = ScratchDeleter(s3, config.scratch_bucket)
        self.attributes = (config.scratch_prefix_attribute, config.tenant_attribute)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> ScratchStep | None:
        return cls(config, clients.s3) if clients.s3 is not None else None

    def plan(self, session: Session) -> Plan:
        cfg = self.config
        if cfg.scratch_prefix_attribute not in session.image:
            return Plan.missing_attributes(missing=(cfg.scratch_prefix_attribute,))
        prefix = session.image[cfg.scratch_prefix_attribute]
        tenant, mismatch = self._tenant(session)
        log: dict[str, Any] = {"scratchPrefix": to_json_value(prefix)}
        if cfg.tenant_scoped_scratch:
            log["tenant"] = to_json_value(tenant)
        if cfg.tenant_scoped_scratch and mismatch is not None:
            return Plan.refused(mismatch, log=log)
        session_id = session.keys.get(cfg.sort_key or cfg.partition_key)
        try:
            accepted = validate_session_prefix(
                prefix,
                cfg.scratch_root,
                session_id,
                tenant_id=tenant,
                tenant_scoped=cfg.tenant_scoped_scratch,
            )
        except ScratchPrefixError as exc:
            return Plan.refused(str(exc), log=log)
        return Plan.run(accepted, log=log)

    def _tenant(self, session: Session) -> tuple[object, str | None]:
        """The tenant of the prefix and, when the image contradicts the key, why it is refused:
        from ``Keys`` when the tenant attribute is a key attribute, else the image's."""
        name = self.config.tenant_attribute
        image_tenant = session.image.get(name)
        if name not in session.keys:
            return image_tenant, None  # not in the key: the image's word (module docstring)
        key_tenant = session.keys[name]
        if name in session.image and image_tenant != key_tenant:
            return key_tenant, (
                f"tenant {to_json_value(image_tenant)!r} in the old image is not the tenant "
                f"{to_json_value(key_tenant)!r} of the record's Keys"
            )
        return key_tenant, None

    def run(self, plan: Plan, ctx: StepContext) -> str:
        try:
            return self.delete_scratch(plan.payload, ctx)
        finally:
            ctx.note("objectsDeleted", ctx.objects_deleted)

    def delete_scratch(self, prefix: str, ctx: StepContext) -> str:
        """Delete every object under an *already validated* ``prefix`` (see the module docstring).

        Raises:
            StepFailed: a call failed, ``DeleteObjects`` answered ``Errors``, a listed key lay
                outside the prefix (never deleted), or time ran out between pages.
        """
        problems: list[str] = []
        try:
            for page in self._pages(prefix):
                keys = self._keys_under(prefix, page)
                problems.extend(self.deleter.delete(keys, ctx.count_objects_deleted, ctx.waiting))
                if page.get("IsTruncated") and ctx.out_of_time():
                    raise StepFailed(
                        ACTION_TIME_GUARD, f"time guard reached while deleting {prefix!r}"
                    )
        except (ClientError, BotoCoreError) as exc:
            raise StepFailed(self.name, error_text(exc)) from exc
        if problems:
            shown = "; ".join(problems[:5])
            more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
            raise StepFailed(
                self.name, f"DeleteObjects reported {len(problems)} error(s): {shown}{more}"
            )
        return STEP_DONE

    def preview(self, plan: Plan, ctx: StepContext) -> str:
        """List (never delete) the objects under the prefix; logs ``objectsWouldBeDeleted``."""
        prefix, count = plan.payload, 0
        try:
            for page in self._pages(prefix):
                contents = page.get("Contents") or ()
                count += sum(1 for item in contents if item["Key"].startswith(prefix))
        except (ClientError, BotoCoreError) as exc:
            raise StepFailed(self.name, error_text(exc)) from exc
        finally:
            ctx.note("objectsDeleted", 0)
        ctx.note("objectsWouldBeDeleted", count)
        return STEP_DRY_RUN

    def _pages(self, prefix: str) -> Iterator[dict[str, Any]]:
        paginator = self.s3.get_paginator("list_objects_v2")
        return iter(paginator.paginate(Bucket=self.bucket, Prefix=prefix))

    def _keys_under(self, prefix: str, page: dict[str, Any]) -> list[str]:
        keys = [item["Key"] for item in page.get("Contents") or ()]
        outside = [k for k in keys if not k.startswith(prefix)]
        if outside:
            raise StepFailed(
                self.name,
                f"ListObjectsV2 returned {len(outside)} key(s) outside {prefix!r}, "
                f"e.g. {outside[0]!r}; nothing outside the prefix is deleted",
            )
        return keys
