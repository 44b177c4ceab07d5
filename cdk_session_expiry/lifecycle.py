"""Scratch root prefix rules and the S3 lifecycle backstop.

The scratch root is used three ways, and each constrains it:
- as an S3 lifecycle rule prefix, which is a literal (no wildcards, no leading ``/``);
- inside IAM resource ARNs and the ``s3:prefix`` condition as ``<root>*``, where ``*`` and
  ``?`` are wildcards and ``${`` starts a policy variable;
- by the runtime, which refuses any session prefix not strictly inside it.
A root without a trailing ``/`` would also match its neighbours (``sessions`` matches
``sessions-archive/``), so it is rejected rather than silently rewritten.

AWS references: S3 user guide, "Lifecycle configuration elements"; IAM user guide, "IAM
policy elements: Variables and tags".
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_s3 as s3

from .validation import is_token

#: S3 object keys, and so prefixes, are at most 1,024 bytes.
#: S3 keys are at most 1,024 bytes. A session's scratch prefix adds its tenant and session id
#: (255 characters each at most) and a 32-character incarnation under the root, an archive key
#: up to about 600 bytes under its prefix: 256 bytes for the root leaves them room.
_MAX_PREFIX_BYTES = 256
#: ``[`` and ``]`` too: the runtime (``prefixes.validate_scratch_root``) refuses them as
#: wildcards, and a deployed cleanup would then fail on every invocation.
_FORBIDDEN = {
    "*": "a wildcard",
    "?": "a wildcard",
    "[": "a wildcard",
    "]": "a wildcard",
    "$": "an IAM policy variable marker",
}

#: Objects under the scratch root expire this long after creation when the cleanup missed them.
DEFAULT_SCRATCH_RETENTION = Duration.days(7)
#: Incomplete multipart uploads are aborted this long after they start.
ABORT_INCOMPLETE_MULTIPART_AFTER = Duration.days(1)
#: Versions made noncurrent (by the cleanup's deletes, on a versioned bucket) expire after this.
NONCURRENT_VERSION_EXPIRATION = Duration.days(1)


def check_scratch_root(root: str, name: str = "scratch_root") -> None:
    """Reject a scratch root that is not a safe literal S3 prefix ending in ``/``.

    Accepted: ``"sessions/"``, ``"app/sessions/"``. Rejected, each with a ``ValueError`` naming
    the value and the expected form: empty, a leading ``/``, ``*``, ``?``, ``[``, ``]`` or ``$``, no
    trailing ``/``, an empty, ``.`` or ``..`` path segment, control characters, and more than
    256 bytes (room for the per-session parts within S3's 1,024-byte keys). ``name`` is the
    prop named in the message (the archive prefix uses the same rules).
    """
    if is_token(root):
        return
    expected = "expected a literal S3 prefix such as 'sessions/'"
    if not isinstance(root, str) or root == "":
        raise ValueError(f"{name}={root!r}: {expected}, not an empty prefix")
    if root.startswith("/"):
        raise ValueError(f"{name}={root!r}: {expected}, without a leading '/'")
    for char, what in _FORBIDDEN.items():
        if char in root:
            raise ValueError(f"{name}={root!r}: {expected}; {char!r} is {what}")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in root):
        raise ValueError(f"{name}={root!r}: {expected}, without control characters")
    if not root.endswith("/"):
        raise ValueError(
            f"{name}={root!r}: expected a prefix ending in '/', e.g. {root + '/'!r}, "
            "so that it cannot match neighbouring keys"
        )
    segments = root[:-1].split("/")
    if any(segment in {"", ".", ".."} for segment in segments):
        raise ValueError(f"{name}={root!r}: {expected}, without empty, '.' or '..' path segments")
    if len(root.encode("utf-8")) > _MAX_PREFIX_BYTES:
        raise ValueError(f"{name}={root!r}: expected at most {_MAX_PREFIX_BYTES} bytes")


def can_add_lifecycle_rule(bucket: s3.IBucket) -> bool:
    """True when ``bucket`` is defined in this app, so a lifecycle rule can be added to it."""
    return isinstance(bucket, s3.Bucket)


def add_scratch_lifecycle_rule(
    bucket: s3.Bucket, *, rule_id: str, scratch_root: str, retention: Duration
) -> None:
    """Add the one backstop rule for ``scratch_root`` to ``bucket``.

    The rule expires current objects ``retention`` after creation, aborts incomplete
    multipart uploads after 1 day, and expires noncurrent versions after 1 day. The
    noncurrent-version action is always set: it is a no-op on an unversioned bucket and keeps
    the backstop working if versioning is turned on later.
    """
    bucket.add_lifecycle_rule(
        id=rule_id,
        enabled=True,
        prefix=scratch_root,
        expiration=retention,
        abort_incomplete_multipart_upload_after=ABORT_INCOMPLETE_MULTIPART_AFTER,
        noncurrent_version_expiration=NONCURRENT_VERSION_EXPIRATION,
    )
