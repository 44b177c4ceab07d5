"""``DeleteScratch``: delete every object under the session's scratch prefix.

Plan: the prefix is **derived, not trusted**. The step builds the one prefix this record may
delete from the record's own ``Keys`` and the old image's ``incarnation``
(`build_scratch_prefix`:
``<root>[<tenant>/]<key segments>/<incarnation>/``, the partition as well as the session id on a
table with a sort key) and deletes the image's ``scratchPrefix`` only when it is exactly that.
Any other prefix the image names — a neighbour's (``sessions/s-10/...`` for ``s-1``), the whole
session without an incarnation, another partition's or another tenant's, one whose last segment
is not the image's incarnation — is **refused** (counted as ``ScratchPrefixesRefused``, alarmed,
logged, never retried, nothing deleted), whoever wrote the image.

Items written before the ``incarnation`` attribute existed (*legacy* items) have none: their
incarnation is their prefix's last segment, so on a table without a sort key their prefix is
checked and deleted as before. On a table with a sort key, a legacy item's prefix in the old
layout (``<root>[<tenant>/]<session id>/<incarnation>/``, which does not name the partition) is
**left to the scratch root's S3 lifecycle rule**: the step makes no call and reports
``legacy-layout`` (the record counts as cleaned; the log line says ``scratchRefusal: Legacy``;
not a refusal of the record, not alarmed), because such a prefix cannot be bound to its
partition.

The tenant segment (``tenant_scoped_scratch``): when the tenant attribute is one of the table's
key attributes (the construct and ``SessionStore`` allow it as the partition key of a table with
a sort key), it is the partition from the record's ``Keys``, and a record whose old image names
another tenant is refused (DynamoDB's own records always agree; a record that does not was
altered, e.g. a replayed failure-destination payload). When it is not a key attribute, the
tenant is **the old image's word**, but the whole key and the incarnation follow it, and keys are
unique table-wide, so it cannot reach another session's objects.

Run: every key under the prefix is listed (``ListObjectsV2``, page after page; botocore requests
``EncodingType=url`` and decodes the keys, so control characters survive the XML) and handed to
the `ScratchDeleter`. It hands them to the invocation's one
`BatchingDeleter` (`shared`: a new one per
invocation, so a call abandoned at one invocation's hard stop never holds up the next), which
sends ``DeleteObjects`` (at most 1,000 keys, ``Quiet``) **shared by the sessions cleaned side by
side** and gives each session back the
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

from ..core.clients import CleanupClients
from ..core.config import ACTION_DELETE_SCRATCH, ACTION_TIME_GUARD, REFUSAL_LEGACY, RuntimeConfig
from ..core.decode import to_json_value
from ..core.prefixes import (
    ScratchPrefixError,
    build_scratch_prefix,
    incarnation_of,
    legacy_scratch_prefix,
)
from ..owners.outcomes import STEP_DONE, STEP_DRY_RUN, StepFailed, error_text
from .base import CleanupStep, Plan, Session, StepContext
from .delete_objects import DELETE_OBJECTS_MAX_KEYS, BatchingDeleter

__all__ = [
    "DELETE_OBJECTS_MAX_KEYS",
    "NOT_XML_SAFE",
    "STEP_LEGACY_LAYOUT",
    "ScratchDeleter",
    "ScratchStep",
]
#: Characters outside XML 1.0's Char production (``#x9 | #xA | #xD | [#x20-#xD7FF] |
#: [#xE000-#xFFFD] | [#x10000-#x10FFFF]``), plus CR (normalised to LF by XML parsers): written as
#: the class of those characters rather than the negation of the allowed ones, which compiles in
#: a fourth of the time (part of the function's cold start).
NOT_XML_SAFE = re.compile(r"[\x00-\x08\x0b-\x1f\ud800-\udfff\ufffe\uffff]")
#: The step's outcome for a legacy item's old-layout prefix on a table with a sort key: no call,
#: left to the lifecycle rule (module docstring); a success, not a refusal of the record.
STEP_LEGACY_LAYOUT = "legacy-layout"


class _LegacyLayout(str):
    """A plan payload: the old-layout prefix of a legacy item, which the step does not delete."""


class ScratchDeleter:
    """Deletes sessions' keys of one bucket: ``DeleteObjects`` shared between the sessions
    of one invocation (`BatchingDeleter`), unsafe keys one by one.
    One per invocation (`ScratchStep.deleter`)."""

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
        (`delete`).

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
        self.attributes = (
            config.scratch_prefix_attribute,
            config.tenant_attribute,
            config.incarnation_attribute,
        )

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> ScratchStep | None:
        return cls(config, clients.s3) if clients.s3 is not None else None

    def deleter(self, ctx: StepContext) -> ScratchDeleter:
        """The invocation's deleter of the scratch bucket, shared by its sessions (made on
        first use; never one of another invocation)."""
        return ctx.shared(self, lambda: ScratchDeleter(self.s3, self.bucket))

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
        legacy = cfg.incarnation_attribute not in session.image
        incarnation = incarnation_of(prefix) if legacy else session.image[cfg.incarnation_attribute]
        expected, why = self._expected(session, tenant, incarnation)
        if expected is not None and prefix == expected:
            return Plan.run(expected, log=log)
        if legacy and cfg.sort_key and prefix == self._legacy(session, tenant, incarnation):
            log["scratchRefusal"] = REFUSAL_LEGACY
            return Plan.run(_LegacyLayout(prefix), log=log)
        return Plan.refused(
            f"scratch prefix {to_json_value(prefix)!r}: not the session's own prefix; "
            + (why or f"expected {expected!r} (from the record's Keys and its incarnation)"),
            log=log,
        )

    def _expected(
        self, session: Session, tenant: object, incarnation: object
    ) -> tuple[str | None, str | None]:
        """The prefix this record may delete, or why none can be built (a key value or an
        incarnation that cannot be a segment)."""
        cfg = self.config
        try:
            return build_scratch_prefix(
                cfg.scratch_root,
                _text(session.keys.get(cfg.sort_key or cfg.partition_key), "session id"),
                partition=_text(session.keys.get(cfg.partition_key), "partition")
                if cfg.sort_key
                else None,
                tenant_id=self._tenant_segment(tenant),
                tenant_scoped=cfg.tenant_scoped_scratch,
                tenant_is_partition=_tenant_is_partition(cfg),
                incarnation=_text(incarnation, "incarnation"),
            ), None
        except ScratchPrefixError as exc:
            return None, f"no prefix of this record can be built: {exc}"

    def _legacy(self, session: Session, tenant: object, incarnation: object) -> str | None:
        """The old layout of a legacy item on a table with a sort key, else ``None``."""
        cfg = self.config
        try:
            return legacy_scratch_prefix(
                cfg.scratch_root,
                _text(session.keys.get(cfg.sort_key or cfg.partition_key), "session id"),
                _text(incarnation, "incarnation"),
                tenant_id=self._tenant_segment(tenant),
                tenant_scoped=cfg.tenant_scoped_scratch,
            )
        except ScratchPrefixError:
            return None

    def _tenant_segment(self, tenant: object) -> str | None:
        """The tenant for the prefix: only tenant-scoped scratch has one (checked as a segment)."""
        if not self.config.tenant_scoped_scratch or _tenant_is_partition(self.config):
            return None
        return _text(tenant, "tenant id")

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
        if isinstance(plan.payload, _LegacyLayout):
            return STEP_LEGACY_LAYOUT
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
        deleter = self.deleter(ctx)
        try:
            for page in self._pages(prefix, ctx):
                keys = self._keys_under(prefix, page)
                problems.extend(deleter.delete(keys, ctx.count_objects_deleted, ctx.waiting))
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
        if isinstance(plan.payload, _LegacyLayout):
            return STEP_LEGACY_LAYOUT
        prefix, count = plan.payload, 0
        try:
            for page in self._pages(prefix, ctx):
                contents = page.get("Contents") or ()
                count += sum(1 for item in contents if item["Key"].startswith(prefix))
        except (ClientError, BotoCoreError) as exc:
            raise StepFailed(self.name, error_text(exc)) from exc
        finally:
            ctx.note("objectsDeleted", 0)
        ctx.note("objectsWouldBeDeleted", count)
        return STEP_DRY_RUN

    def _pages(self, prefix: str, ctx: StepContext) -> Iterator[dict[str, Any]]:
        """Every ``ListObjectsV2`` page under ``prefix``: each page's ``NextContinuationToken``
        is the next request's ``ContinuationToken`` until a page says ``IsTruncated`` false
        (Amazon S3 API Reference, "ListObjectsV2"). The loop botocore's paginator runs, without
        what it costs: a paginator class built by every ``get_paginator`` and JMESPath on every
        page, about 0.06 ms of CPU for a session whose prefix is empty (BENCHMARKS.md). The time
        guard is checked before every page after the first, for ``run`` and ``preview`` alike.

        Raises:
            StepFailed: time ran out between pages (action ``TimeGuard``), or a page that does
                not say how the listing goes on (`_unlistable`): the rest of the prefix
                could not be listed, so the session is not reported clean.
        """
        request: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        sent: set[str] = set()
        while True:
            page = self.s3.list_objects_v2(**request)
            yield page
            token = page.get("NextContinuationToken")
            if page.get("IsTruncated") is False and not token:
                return
            problem = _unlistable(page.get("IsTruncated"), token, sent)
            if problem:
                raise StepFailed(
                    self.name,
                    f"ListObjectsV2 under {prefix!r} answered {problem}: the rest of the prefix "
                    "cannot be listed",
                )
            if ctx.out_of_time():
                raise StepFailed(ACTION_TIME_GUARD, f"time guard reached while listing {prefix!r}")
            sent.add(token)
            request["ContinuationToken"] = token

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


def _unlistable(truncated: object, token: object, sent: set[str]) -> str | None:
    """What is wrong with a page that does not end the listing, or ``None`` when its token
    goes on to a page not listed yet. S3 sends ``NextContinuationToken`` exactly when
    ``IsTruncated`` is true, and a new one every page; botocore's paginator stopped at a
    truncated page without one as if the listing were complete, and caught only a token
    repeated at once."""
    if truncated is None:
        return "a page without IsTruncated"
    if truncated is not True:
        return "a page that is not truncated but names a NextContinuationToken"
    if not isinstance(token, str) or not token:
        return "a truncated page without a NextContinuationToken"
    if token in sent:
        return "a continuation token it was sent before"
    return None


def _tenant_is_partition(config: RuntimeConfig) -> bool:
    return config.sort_key is not None and config.tenant_attribute == config.partition_key


def _text(value: object, what: str) -> str:
    """``value`` when it is a string (a segment candidate, checked by the prefix builder)."""
    if isinstance(value, str):
        return value
    raise ScratchPrefixError(f"{what} {to_json_value(value)!r}: expected a String")
