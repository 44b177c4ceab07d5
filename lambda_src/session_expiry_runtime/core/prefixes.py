"""Scratch prefix rules: how a session's S3 scratch prefix is built and when it may be deleted.

Layout (S3 keys are flat; ``/`` is only a convention, so every rule here is textual): the root,
the tenant when the scratch is tenant-scoped, **the item's whole key**, then the incarnation:

* no sort key:                        ``{root}{session_id}/{incarnation}/``
* no sort key, tenant-scoped:         ``{root}{tenant}/{session_id}/{incarnation}/``
* sort key:                           ``{root}{partition}/{session_id}/{incarnation}/``
* sort key, tenant-scoped (a tenant
  attribute of its own):              ``{root}{tenant}/{partition}/{session_id}/{incarnation}/``
* sort key, the tenant is the
  partition (scoped or not):          ``{root}{tenant}/{session_id}/{incarnation}/``

Every segment that binds the prefix to one item comes from the item's key, which the cleanup
reads from the stream record's ``Keys`` (no writer of the item can change them), and the
incarnation from the item itself. Keys are unique table-wide, so with a sort key the partition
segment keeps ``u-1/s-1`` and ``u-2/s-1`` apart: a prefix naming another partition's session is
not this record's (issue 20). With a tenant attribute of its own, the tenant segment is the
item's word, but the whole key follows it, so it cannot reach another session's objects.

*Legacy layout*: before the whole key was used, a table with a sort key had
``{root}[{tenant}/]{session_id}/{incarnation}/`` (`legacy_scratch_prefix`), which does not
name the partition. The cleanup never deletes such a prefix (it cannot be bound to its
partition); the S3 lifecycle rule of the scratch root expires it. Tables without a sort key, and
tables whose partition is the tenant with tenant-scoped scratch, have the same layout as before.

``incarnation`` is unique per `build_scratch_prefix` call, so a session id reused after
expiry never shares a prefix with the session that expired (the late REMOVE of the old one
deletes only the old prefix). S3 ``ListObjectsV2`` with ``Prefix=sessions/s-1`` would also
match ``sessions/s-10/...``; every accepted prefix therefore ends in ``/``
(Amazon S3 User Guide, "Organizing objects using prefixes").

Pure functions only: no AWS calls.
"""

from __future__ import annotations

import re
import uuid

#: Characters allowed in a session id or tenant id used as a prefix segment.
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@=+-]{0,254}")
_WILDCARDS = frozenset("*?[]")


class ScratchPrefixError(ValueError):
    """A scratch root or prefix breaks the rules above; the message names value and rule."""


def _has_control(value: str) -> bool:
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value)


def validate_scratch_root(root: str) -> str:
    """Check a scratch root such as ``sessions/`` and return it unchanged.

    Raises:
        ScratchPrefixError: ``root`` is empty, starts with ``/``, does not end with ``/``,
            holds an empty, ``.`` or ``..`` segment, a wildcard or a control character.
    """
    if not isinstance(root, str) or not root:
        raise ScratchPrefixError(
            f"scratch root {root!r}: expected a non-empty prefix like 'sessions/'"
        )
    if root.startswith("/"):
        raise ScratchPrefixError(f"scratch root {root!r}: must not start with '/'")
    if not root.endswith("/"):
        raise ScratchPrefixError(f"scratch root {root!r}: must end with '/', e.g. {root + '/'!r}")
    if _WILDCARDS & set(root) or _has_control(root):
        raise ScratchPrefixError(
            f"scratch root {root!r}: literal prefix expected, no wildcards or control characters"
        )
    for segment in root[:-1].split("/"):
        if segment in {"", ".", ".."}:
            raise ScratchPrefixError(
                f"scratch root {root!r}: segment {segment!r} is not allowed (no '//', '.' or '..')"
            )
    return root


def validate_segment(value: str, what: str) -> str:
    """Check a session id or tenant id used as one prefix segment and return it.

    Raises:
        ScratchPrefixError: ``value`` is not 1-255 characters of ``A-Z a-z 0-9 . _ : @ = + -``
            starting with a letter or digit.
    """
    if not isinstance(value, str) or not _SEGMENT.fullmatch(value):
        raise ScratchPrefixError(
            f"{what} {value!r}: expected 1-255 characters from A-Z a-z 0-9 . _ : @ = + - "
            "starting with a letter or digit"
        )
    return value


def new_incarnation() -> str:
    """A fresh incarnation token (32 lowercase hex characters, random)."""
    return uuid.uuid4().hex


def build_scratch_prefix(
    root: str,
    session_id: str,
    *,
    partition: str | None = None,
    tenant_id: str | None = None,
    tenant_scoped: bool = False,
    tenant_is_partition: bool = False,
    incarnation: str | None = None,
) -> str:
    """Build the scratch prefix of one session incarnation (the layout in the module docstring).

    Args:
        root: scratch root, e.g. ``"sessions/"`` (see `validate_scratch_root`).
        session_id: the session's id (the partition key value, or the sort key value on a
            table with a sort key), one segment.
        partition: the partition key value on a table with a sort key; ``None`` without one.
        tenant_id: the session's tenant; required when ``tenant_scoped`` (unless the tenant
            is the partition).
        tenant_scoped: put the prefix under ``{root}{tenant_id}/``.
        tenant_is_partition: the tenant attribute is the partition key (a table with a sort
            key): the partition is the tenant segment, and ``tenant_id`` is not used.
        incarnation: token unique to this incarnation; default a new random one.

    Returns:
        The prefix, always ending in ``/``; it passes `validate_scratch_prefix`.

    Raises:
        ScratchPrefixError: a bad root, id, partition, tenant or incarnation (the message names
            the value and the rule), ``tenant_scoped`` without a tenant, or
            ``tenant_is_partition`` without a partition.
    """
    validate_scratch_root(root)
    segments = [validate_segment(session_id, "session id")]
    if partition is not None:
        segments.insert(0, validate_segment(partition, "partition"))
    if tenant_is_partition:
        if partition is None:
            raise ScratchPrefixError(
                "scratch layout with the tenant as the partition: expected a partition, got None"
            )
    elif tenant_scoped:
        if tenant_id is None:
            raise ScratchPrefixError("tenant-scoped scratch layout: expected a tenant id, got None")
        segments.insert(0, validate_segment(tenant_id, "tenant id"))
    token = validate_segment(incarnation or new_incarnation(), "incarnation")
    return root + "".join(f"{segment}/" for segment in segments) + f"{token}/"


def legacy_scratch_prefix(
    root: str,
    session_id: str,
    incarnation: str,
    *,
    tenant_id: str | None = None,
    tenant_scoped: bool = False,
) -> str:
    """The layout a table with a sort key had before the prefix named the whole key:
    ``{root}[{tenant}/]{session_id}/{incarnation}/`` (see the module docstring).

    Raises:
        ScratchPrefixError: as `build_scratch_prefix`.
    """
    return build_scratch_prefix(
        root, session_id, tenant_id=tenant_id, tenant_scoped=tenant_scoped, incarnation=incarnation
    )


def incarnation_of(prefix: object) -> str | None:
    """The last segment of a prefix ending in ``/`` (its incarnation), else ``None``."""
    if not isinstance(prefix, str) or not prefix.endswith("/"):
        return None
    return prefix[:-1].rsplit("/", 1)[-1] or None


def validate_scratch_prefix(
    prefix: object,
    root: str,
    *,
    tenant_id: object = None,
    tenant_scoped: bool = False,
) -> str:
    """Accept ``prefix`` for deletion only if it is a strict, normalised sub-prefix of ``root``.

    Accepted: a ``str`` that starts with ``root``, is longer than it, ends with ``/``, has no
    empty, ``.`` or ``..`` segment (so no ``//``), no leading ``/``, no control character and no
    wildcard; with ``tenant_scoped`` it must also sit strictly below ``{root}{tenant_id}/``.
    The check is textual and applies to the value exactly as stored: nothing is normalised
    into acceptance.

    Returns:
        ``prefix`` unchanged.

    Raises:
        ScratchPrefixError: any rule is broken; the message names the prefix and the rule.
    """
    validate_scratch_root(root)
    if not isinstance(prefix, str):
        raise ScratchPrefixError(f"scratch prefix {prefix!r}: expected a string")
    if not prefix.startswith(root):
        raise ScratchPrefixError(f"scratch prefix {prefix!r}: not under the scratch root {root!r}")
    if prefix == root:
        raise ScratchPrefixError(f"scratch prefix {prefix!r}: is the scratch root itself")
    if not prefix.endswith("/"):
        raise ScratchPrefixError(f"scratch prefix {prefix!r}: must end with '/'")
    if _has_control(prefix) or _WILDCARDS & set(prefix):
        raise ScratchPrefixError(
            f"scratch prefix {prefix!r}: control characters and wildcards are not allowed"
        )
    for segment in prefix[:-1].split("/"):
        if segment in {"", ".", ".."}:
            raise ScratchPrefixError(
                f"scratch prefix {prefix!r}: segment {segment!r} is not allowed "
                "(no '//', '.' or '..')"
            )
    if tenant_scoped:
        if not isinstance(tenant_id, str) or not _SEGMENT.fullmatch(tenant_id):
            raise ScratchPrefixError(
                f"scratch prefix {prefix!r}: tenant-scoped layout needs a valid tenant id, "
                f"got {tenant_id!r}"
            )
        tenant_root = f"{root}{tenant_id}/"
        if not prefix.startswith(tenant_root) or prefix == tenant_root:
            raise ScratchPrefixError(
                f"scratch prefix {prefix!r}: not strictly under the session's tenant prefix "
                f"{tenant_root!r}"
            )
    return prefix
