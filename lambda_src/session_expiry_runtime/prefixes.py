"""Scratch prefix rules: how a session's S3 scratch prefix is built and when it may be deleted.

Layout (S3 keys are flat; ``/`` is only a convention, so every rule here is textual):

* plain:         ``{root}{session_id}/{incarnation}/``
* tenant-scoped: ``{root}{tenant_id}/{session_id}/{incarnation}/``

``incarnation`` is unique per :func:`build_scratch_prefix` call, so a session id reused after
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
    tenant_id: str | None = None,
    tenant_scoped: bool = False,
    incarnation: str | None = None,
) -> str:
    """Build the scratch prefix of one session incarnation.

    Args:
        root: scratch root, e.g. ``"sessions/"`` (see :func:`validate_scratch_root`).
        session_id: the session's id, one segment.
        tenant_id: the session's tenant; required when ``tenant_scoped``.
        tenant_scoped: put the prefix under ``{root}{tenant_id}/``.
        incarnation: token unique to this incarnation; default a new random one.

    Returns:
        The prefix, always ending in ``/``; it passes :func:`validate_scratch_prefix`.

    Raises:
        ScratchPrefixError: a bad root, id or tenant, or ``tenant_scoped`` without a tenant.
    """
    validate_scratch_root(root)
    validate_segment(session_id, "session id")
    token = validate_segment(incarnation or new_incarnation(), "incarnation")
    if tenant_scoped:
        if tenant_id is None:
            raise ScratchPrefixError("tenant-scoped scratch layout: expected a tenant id, got None")
        return f"{root}{validate_segment(tenant_id, 'tenant id')}/{session_id}/{token}/"
    return f"{root}{session_id}/{token}/"


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


def validate_session_prefix(
    prefix: object,
    root: str,
    session_id: object,
    *,
    tenant_id: object = None,
    tenant_scoped: bool = False,
) -> str:
    """Accept ``prefix`` for deletion only if it is the session's own incarnation prefix.

    The one form the cleanup deletes is ``{root}[{tenant_id}/]{session_id}/{incarnation}/``,
    where ``session_id`` comes from the stream record's own ``Keys`` (not from the image's
    other attributes) and ``incarnation`` is exactly one segment. So an image that names a
    neighbour (``sessions/s-10/...`` for ``s-1``), the whole session (``sessions/s-1/``, which
    holds every incarnation, the live one included), or another tenant's prefix is refused,
    whoever wrote it. :func:`validate_scratch_prefix`'s rules apply first.

    Returns:
        ``prefix`` unchanged.

    Raises:
        ScratchPrefixError: any rule is broken; the message names the prefix and the form
            expected.
    """
    prefix = validate_scratch_prefix(prefix, root, tenant_id=tenant_id, tenant_scoped=tenant_scoped)
    if not isinstance(session_id, str) or not _SEGMENT.fullmatch(session_id):
        raise ScratchPrefixError(
            f"scratch prefix {prefix!r}: the record's session id {session_id!r} cannot be a "
            "prefix segment, so no prefix of it is deleted"
        )
    base = f"{root}{tenant_id}/{session_id}/" if tenant_scoped else f"{root}{session_id}/"
    incarnation = prefix[len(base) : -1] if prefix.startswith(base) else ""
    if not _SEGMENT.fullmatch(incarnation):
        raise ScratchPrefixError(
            f"scratch prefix {prefix!r}: not the session's own prefix; expected "
            f"{base + '<incarnation>/'!r} (one incarnation segment)"
        )
    return prefix
