"""Ownership records: which session incarnation a connection, agent session or grant belongs to.

An old image is whatever the last writer of an item wrote, so the ids it names (a WebSocket
connection id, an Amazon Bedrock AgentCore session id, a KMS grant id) are only a question.
The answer is an **ownership record** (a *claim*) in the construct's ownership table, written by
[`SessionStore`][session_expiry_runtime.store.SessionStore] *before* (or atomically with) the id is
recorded on the session, with a condition that refuses an id another live session holds:

=================  ==================================================================
attribute          value
=================  ==================================================================
``resource``       partition key: ``<kind>#<id>`` (`resource_key`)
``owner``          the owning item's key, canonical (`owner_token`)
``incarnation``    the owning session incarnation (the session item's ``incarnation``)
``state``          ``held`` → ``releasing`` (the cleanup is acting) → ``released``
``stateSince``     epoch seconds of the last state change
``claimedAt``      epoch seconds of the claim
``notAfter``       the owner's absolute end (epoch seconds): after it the owner cannot be live
``expiresAt``      time to live: ``notAfter`` + `CLAIM_RETENTION_SECONDS`
``goneSince``      grants only: when the grant sweep first saw the session gone (epoch
                   seconds); removed when the grant is held again (`ATTR_GONE_SINCE`)
``handedOverAt``   grants only: when the cleanup, finding no grant in KMS, left it to the
                   grant sweep instead of retrying its record (`ATTR_HANDED_OVER_AT`)
``formerOwners``   the holders the record took the id over from (`ATTR_FORMER_OWNERS`)
=================  ==================================================================

The cleanup acts on an id only when its claim names the REMOVE record's own ``Keys`` (which no
writer of the item can change) and the old image's incarnation (`classify`); anything else
is refused and counted by reason. Pure functions and names only: no AWS calls. The store writes
claims (``store``), the cleanup checks and releases them (``claims``), the grant sweep reads them.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .config import (
    ENV_CUSTOM_KINDS,
    REFUSAL_LEGACY,
    REFUSAL_NOT_OWNED,
    REFUSAL_SUPERSEDED,
    REFUSAL_UNCLAIMED,
)
from .kinds import BUILTIN_KIND_NAMES

__all__ = [
    "ALARMED_REFUSALS",
    "ATTR_CLAIMED_AT",
    "ATTR_EXPIRES_AT",
    "ATTR_FORMER_OWNERS",
    "ATTR_GONE_SINCE",
    "ATTR_HANDED_OVER_AT",
    "ATTR_INCARNATION",
    "ATTR_NOT_AFTER",
    "ATTR_OWNER",
    "ATTR_RESOURCE",
    "ATTR_STATE",
    "ATTR_STATE_SINCE",
    "CLAIM_RETENTION_SECONDS",
    "CUSTOM_KIND_PREFIX",
    "KINDS",
    "MAX_FORMER_OWNERS",
    "RELEASING_STALE_SECONDS",
    "Claim",
    "Verdict",
    "classify",
    "custom_kind",
    "custom_kinds_of",
    "former_owner",
    "is_kind",
    "names_incarnation",
    "owner_key_of_token",
    "owner_token",
    "resource_key",
]

# --- resource kinds (the first part of the ``resource`` key) ---------------------------------
KIND_CONNECTION = "connection"
KIND_GRANT = "grant"
#: The declared kinds' names (`session_expiry_runtime.core.kinds`), kept for their importers.
KIND_AGENT_RUNTIME = "agentRuntime"
KIND_CODE_INTERPRETER = "codeInterpreter"
KIND_BROWSER = "browser"
#: An AgentCore Memory session: ``<actorId>/<sessionId>`` (`agent_sessions`).
KIND_AGENT_MEMORY = "agentMemory"
#: The store's own kinds, not declarations (their release and recording are their own:
#: `session_expiry_runtime.core.kinds`' docstring says why).
_STORE_KINDS = (KIND_CONNECTION, KIND_GRANT)
#: Every built-in kind: the store's own (connections, grants), then each declared kind
#: (`session_expiry_runtime.core.kinds.DECLARED_KINDS`) in declaration order.
KINDS = (*_STORE_KINDS, *BUILTIN_KIND_NAMES)

# --- attributes of an ownership record -------------------------------------------------------
ATTR_RESOURCE = "resource"
ATTR_OWNER = "owner"
ATTR_INCARNATION = "incarnation"
ATTR_STATE = "state"
ATTR_STATE_SINCE = "stateSince"
ATTR_CLAIMED_AT = "claimedAt"
ATTR_NOT_AFTER = "notAfter"
#: The ownership table's time to live attribute (Number, epoch seconds).
ATTR_EXPIRES_AT = "expiresAt"
#: A grant's record only (Number, epoch seconds): when the grant sweep first saw the grant's
#: session gone while the record was unreleased (the start of its pending bound). Removed by
#: every write that records the grant on a live session again (a new claim is a whole new item;
#: ``hold_again`` removes it in the same ``UpdateItem``; a sweep whose sighting lands after
#: that put-back takes it back), so a later, normal end of that session starts its pending
#: time afresh.
ATTR_GONE_SINCE = "goneSince"
#: A grant's record only (Number, epoch seconds): when the cleanup handed the grant over to the
#: grant sweep. ``RetireGrant`` answered ``NotFoundException`` within KMS's consistency window
#: of the claim (a made-up id, or a real grant KMS does not show yet): the record was refused
#: (``GrantsRefused``) instead of failed and retried, so that one tenant's grant never holds its
#: shard's later records. Written only on a ``releasing`` record of the REMOVE's own owner and
#: incarnation; a new claim is a whole new item. The sweep retires such a grant as soon as KMS
#: lists it and its session is gone, without the pending bound (`ATTR_GONE_SINCE`).
ATTR_HANDED_OVER_AT = "handedOverAt"
#: List of Strings: the holders this record took the id over from, oldest first, each
#: ``<owner token>#<incarnation>`` (`former_owner`), at most `MAX_FORMER_OWNERS`.
#: Written by the claim that takes an id from another key's record (released, past its owner's
#: absolute end, or left ``releasing``), so a late ``REMOVE`` of a former holder is told apart
#: from a forged one by the record alone (`classify`): ``Superseded``, not ``NotOwned``.
ATTR_FORMER_OWNERS = "formerOwners"
#: How many earlier holders a record remembers (the oldest are dropped first).
MAX_FORMER_OWNERS = 8

STATE_HELD = "held"
STATE_RELEASING = "releasing"
STATE_RELEASED = "released"

#: An ownership record outlives its owner's absolute end by this much (21 days), so every
#: ``REMOVE`` the cleanup can still be asked to clean finds it: DynamoDB's time to live deletes
#: "typically within a few days" of expiry, a record may fail for up to the event source
#: mapping's maximum record age (6 hours) and then wait in the on-failure destination for up to
#: its 14 days' retention before a replay. Without a record, an id is ``Unclaimed`` (alarmed):
#: the refusal is decided from the record, never from the image's times (`classify`).
CLAIM_RETENTION_SECONDS = 21 * 24 * 3600
#: A claim left ``releasing`` this long (a cleanup that stopped between its mark and its act)
#: may be taken by a new claimant: the cleanup's own run is bounded by its 15-minute maximum.
RELEASING_STALE_SECONDS = 15 * 60

# --- verdicts ----------------------------------------------------------------------------------
#: The claim names the record's key and incarnation: act.
VERDICT_OWNED = "owned"
#: Owned, and an earlier run already released it: the act is done, make no call.
VERDICT_RELEASED = "released"
# Refusals are the ``Refusal`` dimension values of ``ResourcesRefused`` (``config.REFUSAL_*``).
#: Refusals only a forged image or a writer other than ``SessionStore`` produces: alarmed. The
#: others happen in normal operation (an id reused by a later incarnation, items written before
#: ownership records existed, a REMOVE later than the claim's retention) and are counted only.
ALARMED_REFUSALS = frozenset({REFUSAL_NOT_OWNED, REFUSAL_UNCLAIMED})


#: A custom step's own resource kind: ``custom:<step name>`` (a letter, then up to 63 letters,
#: digits, ``-`` or ``_``), declared by the step (its ``resourceAttribute``) and recorded by
#: ``SessionStore.attach_resource`` with the same ownership records as the built-in kinds.
CUSTOM_KIND_PREFIX = "custom:"
_CUSTOM_KIND = re.compile(r"custom:[A-Za-z][A-Za-z0-9_-]{0,63}")


def custom_kind(step_name: str) -> str:
    """The resource kind of the custom step ``step_name`` (``custom:<name>``).

    Raises:
        ValueError: ``step_name`` is not a custom step name.
    """
    kind = f"{CUSTOM_KIND_PREFIX}{step_name}"
    if not isinstance(step_name, str) or not _CUSTOM_KIND.fullmatch(kind):
        raise ValueError(
            f"custom step name {step_name!r}: expected a letter, then up to 63 letters, digits, "
            "'-' or '_'"
        )
    return kind


def custom_kinds_of(raw: str | None) -> dict[str, str]:
    """``SESSION_EXPIRY_CUSTOM_KINDS`` (a JSON object of custom step names to the session
    attribute holding their ids) as ``custom:<name>`` → attribute; ``{}`` for none.

    Raises:
        ValueError: not a JSON object of step names to non-empty attribute names.
    """
    if not raw:
        return {}
    try:
        kinds = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{ENV_CUSTOM_KINDS}: {raw!r} is not JSON ({exc})") from None
    if not isinstance(kinds, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in kinds.items()
    ):
        raise ValueError(
            f"{ENV_CUSTOM_KINDS}: {raw!r}; expected an object of custom step names to the "
            'attribute holding their ids, e.g. {"DeleteSessionSecret": "secretArns"}'
        )
    return {custom_kind(name): attribute for name, attribute in kinds.items()}


def is_kind(kind: object) -> bool:
    """A built-in kind (`KINDS`) or a custom step's (`custom_kind`)."""
    return kind in KINDS or (isinstance(kind, str) and _CUSTOM_KIND.fullmatch(kind) is not None)


def resource_key(kind: str, resource_id: str) -> str:
    """The ownership table's partition key value for one resource.

    Raises:
        ValueError: an unknown ``kind`` or an empty ``resource_id``.
    """
    if not is_kind(kind):
        raise ValueError(
            f"resource kind {kind!r}: expected one of {list(KINDS)} or 'custom:<step name>'"
        )
    if not isinstance(resource_id, str) or not resource_id:
        raise ValueError(f"resource id {resource_id!r}: expected a non-empty string")
    return f"{kind}#{resource_id}"


def owner_token(key: Mapping[str, str]) -> str:
    """The canonical form of an item's key: base64url (no padding) of its compact, sorted JSON.

    The same encoding a grant name carries (`grant_names`), so two keys are the same
    owner exactly when their tokens are equal.

    Raises:
        ValueError: ``key`` is not a non-empty mapping of non-empty strings to non-empty strings.
    """
    if (
        not isinstance(key, Mapping)
        or not key
        or not all(isinstance(k, str) and k and isinstance(v, str) and v for k, v in key.items())
    ):
        raise ValueError(
            f"owner key {key!r}: expected a non-empty mapping of attribute names to non-empty "
            "String values, e.g. {'pk': 's-1'}"
        )
    text = json.dumps(dict(key), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def owner_key_of_token(token: object) -> dict[str, str] | None:
    """The key an `owner_token` encodes, or ``None`` for anything `owner_token`
    does not write (not base64url, padding, JSON that is not an object of non-empty strings,
    a non-canonical encoding). Any length: a record names its owner whatever the key's size
    (a grant name, at most 256 characters, cannot hold every key). Never raises."""
    if not isinstance(token, str) or not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        key = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, RecursionError):
        return None
    if (
        not isinstance(key, dict)
        or not key
        or not all(isinstance(k, str) and k and isinstance(v, str) and v for k, v in key.items())
    ):
        return None
    return key if owner_token(key) == token else None


@dataclass(frozen=True)
class Claim:
    """One ownership record as read from the table (numbers in epoch seconds)."""

    resource: str
    owner: str
    incarnation: str
    state: str
    claimed_at: Decimal
    not_after: Decimal
    state_since: Decimal
    #: The holders this record took the id over from (`ATTR_FORMER_OWNERS`).
    former_owners: tuple[str, ...] = ()

    @classmethod
    def from_item(cls, item: Mapping[str, Any] | None) -> Claim | None:
        """A claim from a low-level DynamoDB item (``{"S": ...}``/``{"N": ...}`` values);
        ``None`` for no item or one that is not a well-formed claim (treated as no claim)."""
        if not item:
            return None
        texts = {n: _text(item.get(n)) for n in (ATTR_RESOURCE, ATTR_OWNER, ATTR_INCARNATION)}
        state = _text(item.get(ATTR_STATE))
        numbers = {n: _number(item.get(n)) for n in (ATTR_CLAIMED_AT, ATTR_NOT_AFTER)}
        if None in texts.values() or None in numbers.values() or state not in _STATES:
            return None
        since = _number(item.get(ATTR_STATE_SINCE))
        return cls(
            resource=str(texts[ATTR_RESOURCE]),
            owner=str(texts[ATTR_OWNER]),
            incarnation=str(texts[ATTR_INCARNATION]),
            state=str(state),
            claimed_at=numbers[ATTR_CLAIMED_AT] or Decimal(0),
            not_after=numbers[ATTR_NOT_AFTER] or Decimal(0),
            state_since=since if since is not None else numbers[ATTR_CLAIMED_AT] or Decimal(0),
            former_owners=_texts(item.get(ATTR_FORMER_OWNERS)),
        )


@dataclass(frozen=True)
class Verdict:
    """What the cleanup may do with one resource id: ``status`` is `VERDICT_OWNED`,
    `VERDICT_RELEASED` or one of the ``REFUSAL_*`` values; ``claim`` is what was read."""

    status: str
    claim: Claim | None = None

    @property
    def owned(self) -> bool:
        """The cleanup may act (or has already acted) on the id."""
        return self.status in (VERDICT_OWNED, VERDICT_RELEASED)

    @property
    def alarmed(self) -> bool:
        return self.status in ALARMED_REFUSALS


def classify(claim: Claim | None, *, owner: str, incarnation: str | None) -> Verdict:
    """Decide whether the REMOVE of ``owner``'s incarnation ``incarnation`` may act on a resource.

    Decided from the ownership record alone — who holds the id, and whom it took the id from —
    never from the old image's times or a stream record's timestamps: an image and (on Kinesis) a
    record are whatever their writer chose, so a refusal's class (alarmed or counted only) must
    not depend on them (``docs/security.md``, the threat model).

    Args:
        claim: the resource's ownership record, or ``None`` when there is none.
        owner: `owner_token` of the record's ``Keys`` (never of the old image).
        incarnation: the old image's incarnation; ``None`` for an item written before ownership
            records existed.

    Returns:
        ``owned``/``released`` when the claim names exactly this key and incarnation;
        ``Superseded`` when the id is now held by another incarnation of this very key, or by a
        claimant whose record says it took the id over from exactly this incarnation
        (`Claim.former_owners`); ``NotOwned`` for a claim of anyone else; without a claim,
        ``Legacy`` (an item without an incarnation) or ``Unclaimed``.
    """
    if claim is None:
        return Verdict(REFUSAL_LEGACY if incarnation is None else REFUSAL_UNCLAIMED)
    if claim.owner == owner:
        if incarnation is not None and claim.incarnation == incarnation:
            status = VERDICT_RELEASED if claim.state == STATE_RELEASED else VERDICT_OWNED
            return Verdict(status, claim)
        return Verdict(REFUSAL_SUPERSEDED, claim)  # another incarnation of this very key
    if incarnation is not None and former_owner(owner, incarnation) in claim.former_owners:
        return Verdict(REFUSAL_SUPERSEDED, claim)  # taken over from exactly this incarnation
    return Verdict(REFUSAL_NOT_OWNED, claim)


def names_incarnation(claim: Claim | None, *, owner: str, incarnation: str) -> bool:
    """Whether ``claim`` shows that ``owner``'s incarnation ``incarnation`` existed: it names
    it as the id's holder, or in `Claim.former_owners` (a holder the id was taken over from).
    Only ``SessionStore`` (through the claim registrar, or a writer of the whole ownership table)
    and the cleanup write claims, and a claim names an incarnation only once it was created, so
    a made-up incarnation is named by none (`kinesis_removals`, the proof a Kinesis ``REMOVE``
    of a re-created key needs)."""
    if claim is None:
        return False
    if claim.owner == owner and claim.incarnation == incarnation:
        return True
    return former_owner(owner, incarnation) in claim.former_owners


def former_owner(owner: str, incarnation: str) -> str:
    """How `ATTR_FORMER_OWNERS` names one earlier holder: ``<owner token>#<incarnation>``
    (an owner token is base64url, so it holds no ``#``)."""
    return f"{owner}#{incarnation}"


_STATES = frozenset({STATE_HELD, STATE_RELEASING, STATE_RELEASED})


def _text(value: object) -> str | None:
    if isinstance(value, Mapping) and isinstance(value.get("S"), str) and value["S"]:
        return str(value["S"])
    return None


def _texts(value: object) -> tuple[str, ...]:
    """A List of Strings (``{"L": [{"S": ...}, ...]}``); anything else reads as empty."""
    if not isinstance(value, Mapping) or not isinstance(value.get("L"), list):
        return ()
    return tuple(t for t in (_text(v) for v in value["L"]) if t is not None)


def _number(value: object) -> Decimal | None:
    if not isinstance(value, Mapping) or not isinstance(value.get("N"), str):
        return None
    try:
        number = Decimal(value["N"])
    except ArithmeticError:
        return None
    return number if number.is_finite() else None
