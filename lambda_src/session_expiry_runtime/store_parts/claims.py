"""Ownership records, the writer side: the store claims every connection, AgentCore session and
KMS grant id for the session incarnation that records it (format and states:
`ownership`).

**The invariant the cleanup relies on**: every id a non-legacy session item names has an
ownership record naming that item's key and incarnation, unless a later claimant took it
legitimately. So a claim is written *before* (or atomically with) the id being recorded on the
item, and the claim condition refuses an id another live session holds. A claim is written in
one of two ways:

**Fresh** (`CLAIM_CONDITION`, the common case, one write):

``attribute_not_exists(#resource)``
    no one ever claimed it (or its record expired);
``OR (#owner = :owner AND #state IN (:held, :released))``
    this very key holds it or held it: this incarnation again (an idempotent retry), or an
    earlier incarnation of the key, which cannot be live — the item write that goes with the
    claim (``attribute_not_exists`` in ``create``'s transaction, ``#incarnation = :incarnation``
    on the live item in an attach) proves this incarnation is the key's live one.

**Taken over** (`ClaimWriter.take_over`), when the fresh write was refused by a record of
another key (or a stale one of this key) that may be taken: released by its owner's cleanup,
held past its owner's absolute end (``notAfter``), or left ``releasing`` longer than
`ownership.RELEASING_STALE_SECONDS` by a cleanup that stopped half-way. The new record
is put with a condition pinning exactly the record that was judged (owner, incarnation, state,
``claimedAt``, ``stateSince``) and names its former holder in ``formerOwners``
(`ownership.ATTR_FORMER_OWNERS`): a late ``REMOVE`` of that holder is then
``Superseded`` by the record's own word, while a forged image naming the id is ``NotOwned``
(`ownership.classify` reads nothing of the image but its incarnation).

A claim that is ``releasing`` (not stale) belongs to a session that ended and whose cleanup is
acting on it right now: the store waits a little (`RELEASING_RETRY_DELAYS`, an injectable
sleep) and asks again, then gives up with
[`ResourceOwnedError`][session_expiry_runtime.store.ResourceOwnedError]. Any other
refusal raises it at once, naming the id, its kind, the requesting session and the owner (read
from the refused record itself, ``ReturnValuesOnConditionCheckFailure=ALL_OLD``: Amazon DynamoDB
API Reference, "PutItem" and "TransactWriteItems").
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.kinds import DECLARED_KINDS
from ..core.ownership import (
    ATTR_CLAIMED_AT,
    ATTR_EXPIRES_AT,
    ATTR_FORMER_OWNERS,
    ATTR_GONE_SINCE,
    ATTR_INCARNATION,
    ATTR_NOT_AFTER,
    ATTR_OWNER,
    ATTR_RESOURCE,
    ATTR_STATE,
    ATTR_STATE_SINCE,
    CLAIM_RETENTION_SECONDS,
    KIND_CONNECTION,
    KIND_GRANT,
    MAX_FORMER_OWNERS,
    RELEASING_STALE_SECONDS,
    STATE_HELD,
    STATE_RELEASED,
    STATE_RELEASING,
    Claim,
    former_owner,
    resource_key,
)
from .errors import LOGGER, ResourceOwnedError, is_condition_failure
from .keys import number

#: Waits (seconds) before asking again for an id whose previous owner's cleanup is releasing
#: it (or whose transaction conflicted with another): about 3 seconds in all, then the error.
RELEASING_RETRY_DELAYS = (0.2, 0.4, 0.8, 1.6)

#: How each kind reads in an error message.
KIND_LABELS = {
    KIND_CONNECTION: "WebSocket connection",
    KIND_GRANT: "KMS grant",
    **{kind.kind: kind.label for kind in DECLARED_KINDS},
}

_NAMES = {
    "#resource": ATTR_RESOURCE,
    "#owner": ATTR_OWNER,
    "#incarnation": ATTR_INCARNATION,
    "#state": ATTR_STATE,
    "#stateSince": ATTR_STATE_SINCE,
    "#notAfter": ATTR_NOT_AFTER,
}
CLAIM_CONDITION = (
    "attribute_not_exists(#resource) OR (#owner = :owner AND #state IN (:held, :released))"
)
#: A grant id is new by construction (``CreateGrant`` just made it): it may only be claimed
#: fresh, or again by the same incarnation (``CreateGrant`` answers a retried request with the
#: same name, grantee and operations with the same grant id: AWS KMS API Reference).
GRANT_CLAIM_CONDITION = (
    "attribute_not_exists(#resource) OR (#owner = :owner AND #incarnation = :incarnation)"
)
_OURS = "#owner = :owner AND #incarnation = :incarnation"
#: A takeover's condition: exactly the record that was judged takeable, unchanged.
_PINNED = (
    "#owner = :was_owner AND #incarnation = :was_incarnation AND #state = :was_state"
    " AND #claimedAt = :was_claimed_at"
    " AND (#stateSince = :was_state_since OR attribute_not_exists(#stateSince))"
)
#: What `ClaimWriter.take_over` answers when the record may not be taken.
NOT_TAKEABLE = object()
#: What `ClaimWriter.take_over` answers when the record changed before the write.
RACED = object()
_PLACEHOLDER = re.compile(r"[#:][A-Za-z]+")


@dataclass(frozen=True)
class Holder:
    """The session incarnation that records ids: its owner token, incarnation and absolute end,
    and how an error message names it."""

    owner: str
    incarnation: str
    not_after: int
    session_id: str
    partition: str | None
    label: str
    #: The session's claim token (`config.CLAIM_TOKEN_ATTRIBUTE`), shown to the registrar; its
    #: hash is kept on each claim (`token_hash`) so that only the session may undo it.
    token: str | None = dataclasses.field(default=None, repr=False)


#: A claim's hash of its holder's claim token (String, hex SHA-256).
ATTR_TOKEN_HASH = "tokenHash"  # noqa: S105 (an attribute name)


def token_hash(token: str | None) -> str:
    """The hex SHA-256 of ``token`` (``""`` for ``None``): what a claim keeps of it."""
    return hashlib.sha256((token or "").encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ClaimRequest:
    """One id a `Holder` is about to record; ``former_owners`` is what a taken-over
    record names as its earlier holders (`ClaimWriter.take_over`)."""

    kind: str
    resource_id: str
    holder: Holder
    former_owners: tuple[str, ...] = ()

    @property
    def resource(self) -> str:
        return resource_key(self.kind, self.resource_id)


@dataclass(frozen=True)
class Claimed:
    """A claim written by `ClaimWriter.put`: when, and the record it replaced (to undo)."""

    request: ClaimRequest
    claimed_at: Decimal
    previous: dict[str, Any] | None


class TransactionCancelled(Exception):
    """A ``TransactionCanceledException`` other than a transaction conflict: ``error`` is the
    botocore error, ``reasons`` its ``CancellationReasons`` in request order (``Code``
    ``"None"`` for the items that passed; Amazon DynamoDB API Reference, "TransactWriteItems")."""

    def __init__(self, error: ClientError) -> None:
        super().__init__(str(error))
        self.error = error
        self.reasons: list[Mapping[str, Any]] = list(
            error.response.get("CancellationReasons") or []
        )

    def failed(self, index: int) -> Mapping[str, Any] | None:
        """The reason of item ``index`` when its condition failed, else ``None``."""
        reason = self.reasons[index] if index < len(self.reasons) else {}
        return reason if reason.get("Code") == "ConditionalCheckFailed" else None


class ClaimWriter:
    """Writes, undoes and releases ownership records in the ownership table.

    Args:
        ddb: a boto3 DynamoDB client.
        table_name: the ownership table (``SESSION_EXPIRY_OWNERSHIP_TABLE_NAME``).
        clock: the current time in epoch seconds.
        sleep: waits that many seconds (``time.sleep`` by default in the store; tests pass
            their own, so no test sleeps).
    """

    def __init__(
        self,
        ddb: Any,
        table_name: str,
        *,
        clock: Callable[[], Decimal],
        sleep: Callable[[float], None],
    ) -> None:
        self.ddb = ddb
        self.table_name = table_name
        self.clock = clock
        self.sleep = sleep

    # --- claiming ----------------------------------------------------------------------------
    def put(self, request: ClaimRequest) -> Claimed:
        """Claim one id (an attach: the item update follows): fresh with a conditional
        PutItem, or taken over from a record that may be taken (`take_over`).

        Raises:
            ResourceOwnedError: another session owns it (after a few waits while its previous
                owner's cleanup releases it); nothing was written.
        """
        for delay in (*RELEASING_RETRY_DELAYS, None):
            now = self.clock()
            try:
                resp = self.ddb.put_item(**self.put_request(request, now), ReturnValues="ALL_OLD")
            except ClientError as err:
                if not is_condition_failure(err):
                    raise
                held = err.response.get("Item")
            else:
                return Claimed(request, now, resp.get("Attributes"))
            taken = self.take_over(request, held)
            if isinstance(taken, Claimed):
                return taken
            error = refusal(request, held)
            if not (error.releasing or taken is RACED) or delay is None:
                raise error from None
            self.sleep(delay)
        raise AssertionError("unreachable: the last attempt raises or returns")

    def take_over(self, request: ClaimRequest, held: Mapping[str, Any] | None) -> Claimed | object:
        """Take the id from ``held``, the record that refused a fresh claim, when it may be
        taken (module docstring): one PutItem pinned to exactly that record, naming its holder
        in ``formerOwners``.

        Returns:
            the `Claimed` (its ``previous`` is ``held``, for `undo`);
            `NOT_TAKEABLE` when ``held`` may not be taken (or is not a claim);
            `RACED` when the record changed before the write (ask again).
        """
        claim = Claim.from_item(held)
        now = self.clock()
        if held is None or claim is None or not takeable(claim, now):
            return NOT_TAKEABLE
        taking = self.successor(request, claim)
        params = self.put_request(taking, now, condition=_PINNED)
        params["ExpressionAttributeNames"] = _pinned_names()
        params["ExpressionAttributeValues"] = _pinned_values(claim, held)
        try:
            self.ddb.put_item(**params)
        except ClientError as err:
            if not is_condition_failure(err):
                raise
            return RACED
        return Claimed(taking, now, dict(held))

    @staticmethod
    def successor(request: ClaimRequest, claim: Claim) -> ClaimRequest:
        """``request`` as the successor of ``claim``: its former holders, plus ``claim``'s own
        holder when that is another key (at most `ownership.MAX_FORMER_OWNERS`)."""
        former = list(claim.former_owners)
        if claim.owner != request.holder.owner:
            former.append(former_owner(claim.owner, claim.incarnation))
        return dataclasses.replace(request, former_owners=tuple(former[-MAX_FORMER_OWNERS:]))

    def put_request(
        self, request: ClaimRequest, now: Decimal, *, condition: str = CLAIM_CONDITION
    ) -> dict[str, Any]:
        """The PutItem parameters of a claim (also a ``TransactWriteItems`` ``Put``)."""
        holder = request.holder
        values = {
            ":owner": {"S": holder.owner},
            ":incarnation": {"S": holder.incarnation},
            ":held": {"S": STATE_HELD},
            ":released": {"S": STATE_RELEASED},
            ":releasing": {"S": STATE_RELEASING},
            ":now": {"N": number(now)},
            ":stale": {"N": number(now - RELEASING_STALE_SECONDS)},
        }
        # DynamoDB refuses placeholders the expression does not use.
        used = set(_PLACEHOLDER.findall(condition))
        return {
            "TableName": self.table_name,
            "Item": _claim_item(request, now),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {n: a for n, a in _NAMES.items() if n in used},
            "ExpressionAttributeValues": {n: v for n, v in values.items() if n in used},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def transact(self, items: Sequence[Mapping[str, Any]]) -> None:
        """One ``TransactWriteItems``; a transaction conflict (another transaction on one of
        the items) is asked again after a wait, a few times.

        Raises:
            TransactionCancelled: the transaction was cancelled for another reason (a
                condition failed: read ``reasons``).
        """
        for delay in (*RELEASING_RETRY_DELAYS, None):
            try:
                self.ddb.transact_write_items(TransactItems=list(items))
                return
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    raise
                cancelled = TransactionCancelled(err)
            conflict = any(r.get("Code") == "TransactionConflict" for r in cancelled.reasons)
            if not conflict or delay is None:
                raise cancelled
            self.sleep(delay)

    # --- undoing and releasing ------------------------------------------------------------------
    def undo(self, claimed: Claimed) -> None:
        """Put back what a claim replaced (or delete it), while it is still this claim; best
        effort: a claim left behind only delays another owner until its time to live."""
        holder = claimed.request.holder
        condition = f"{_OURS} AND #claimedAt = :claimedAt"
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {
                "#owner": ATTR_OWNER,
                "#incarnation": ATTR_INCARNATION,
                "#claimedAt": ATTR_CLAIMED_AT,
            },
            "ExpressionAttributeValues": {
                ":owner": {"S": holder.owner},
                ":incarnation": {"S": holder.incarnation},
                ":claimedAt": {"N": number(claimed.claimed_at)},
            },
        }
        try:
            if claimed.previous:
                self.ddb.put_item(**params, Item=claimed.previous)
            else:
                self.ddb.delete_item(**params, Key=_key(claimed.request.resource))
        except ClientError as err:
            if not is_condition_failure(err):
                _not_undone(claimed)
        except BotoCoreError:
            _not_undone(claimed)

    def mark_releasing(self, requests: Sequence[ClaimRequest]) -> list[ClaimRequest]:
        """Of the holder's claims, mark those it still holds ``releasing`` (it is about to close
        or stop them itself, as the cleanup does); return those. An id whose claim names
        another session is left alone: the store acts only on ids it owns."""
        return [r for r in requests if self._set_state(r, STATE_RELEASING, STATE_HELD)]

    def hold_again(self, requests: Sequence[ClaimRequest]) -> None:
        """Put claims marked ``releasing`` back to ``held`` (the close or stop failed: the ids
        stay recorded for the cleanup); best effort, logged.

        The same ``UpdateItem`` removes ``goneSince`` (`ownership.ATTR_GONE_SINCE`): a
        grant sweep that ran while a detach had forgotten the grant saw its session "gone";
        held again, the grant is on its live session, and that sighting must not start the
        pending bound of the session's later end (a normal end would count as an orphan)."""
        for request in requests:
            self._set_state(request, STATE_HELD, STATE_RELEASING, forget_gone=True)

    def release(self, requests: Sequence[ClaimRequest]) -> None:
        """Mark the holder's claims on ids it closed or stopped itself ``released``; best
        effort, logged (a claim left ``releasing`` is taken over after
        `ownership.RELEASING_STALE_SECONDS`)."""
        for request in requests:
            self._set_state(request, STATE_RELEASED, None)

    def _set_state(
        self, request: ClaimRequest, state: str, expected: str | None, *, forget_gone: bool = False
    ) -> bool:
        """Set a claim's state while it is the holder's (and in state ``expected``); with
        ``forget_gone`` also remove ``goneSince``. ``False`` when it is not the holder's (or the
        write failed, logged)."""
        holder = request.holder
        names = {
            "#owner": ATTR_OWNER,
            "#incarnation": ATTR_INCARNATION,
            "#state": ATTR_STATE,
            "#stateSince": ATTR_STATE_SINCE,
        }
        update = "SET #state = :state, #stateSince = :now"
        if forget_gone:
            update += " REMOVE #goneSince"
            names["#goneSince"] = ATTR_GONE_SINCE
        values = {
            ":owner": {"S": holder.owner},
            ":incarnation": {"S": holder.incarnation},
            ":state": {"S": state},
            ":now": {"N": number(self.clock())},
        }
        condition = _OURS
        if expected is not None:
            condition += " AND #state = :expected"
            values[":expected"] = {"S": expected}
        try:
            self.ddb.update_item(
                TableName=self.table_name,
                Key=_key(request.resource),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as err:
            if not is_condition_failure(err):
                _not_set(request, state)
            return False
        except BotoCoreError:
            _not_set(request, state)
            return False
        return True


def refusal(request: ClaimRequest, held: Mapping[str, Any] | None) -> ResourceOwnedError:
    """The error for a refused claim, from the record that refused it (if DynamoDB returned it)."""
    claim = Claim.from_item(held)
    owner_key = decode_owner(claim.owner) if claim is not None else None
    releasing = claim is not None and claim.state == STATE_RELEASING
    holder = request.holder
    label = KIND_LABELS.get(request.kind) or f"{request.kind.removeprefix('custom:')} resource"
    owner = f"session {owner_key!r}" if owner_key is not None else "another session"
    if claim is not None:
        owner += f" (incarnation {claim.incarnation!r}, absolute end {_iso(claim.not_after)})"
    if releasing:
        message = (
            f"{label} {request.resource_id!r} is being released by the cleanup of {owner}, "
            f"which has ended; {holder.label} cannot record it yet and nothing was written: "
            "retry in a few seconds"
        )
    else:
        message = (
            f"{label} {request.resource_id!r} is owned by {owner}; {holder.label} cannot "
            "record it and nothing was written. An id belongs to one session at a time: end "
            "the owning session first, or use another id"
        )
    return ResourceOwnedError(
        message,
        session_id=holder.session_id,
        partition=holder.partition,
        kind=request.kind,
        resource_id=request.resource_id,
        owner_key=owner_key,
        owner_incarnation=claim.incarnation if claim is not None else None,
        releasing=releasing,
    )


def decode_owner(token: str) -> dict[str, str] | None:
    """The key an ``owner`` token encodes (`ownership.owner_token`), or ``None``."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        key = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(key, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in key.items()
    ):
        return None
    return key


def takeable(claim: Claim, now: Decimal) -> bool:
    """Whether a new claimant may take the id from ``claim``: released by its owner's cleanup,
    held past its owner's absolute end, or left ``releasing`` by a cleanup that stopped."""
    if claim.state == STATE_RELEASED:
        return True
    if claim.state == STATE_HELD:
        return claim.not_after <= now
    return claim.state_since <= now - RELEASING_STALE_SECONDS


def _pinned_names() -> dict[str, str]:
    return {
        "#owner": ATTR_OWNER,
        "#incarnation": ATTR_INCARNATION,
        "#state": ATTR_STATE,
        "#claimedAt": ATTR_CLAIMED_AT,
        "#stateSince": ATTR_STATE_SINCE,
    }


def _pinned_values(claim: Claim, held: Mapping[str, Any]) -> dict[str, Any]:
    since = held.get(ATTR_STATE_SINCE)
    return {
        ":was_owner": {"S": claim.owner},
        ":was_incarnation": {"S": claim.incarnation},
        ":was_state": {"S": claim.state},
        ":was_claimed_at": dict(held[ATTR_CLAIMED_AT]),
        # A record without stateSince matches the second half of the condition instead.
        ":was_state_since": dict(since) if isinstance(since, Mapping) else {"N": "-1"},
    }


def _claim_item(request: ClaimRequest, now: Decimal) -> dict[str, Any]:
    holder = request.holder
    former = {ATTR_FORMER_OWNERS: {"L": [{"S": f} for f in request.former_owners]}}
    hashed = {ATTR_TOKEN_HASH: {"S": token_hash(holder.token)}}
    return {
        **(former if request.former_owners else {}),
        **(hashed if holder.token else {}),
        ATTR_RESOURCE: {"S": request.resource},
        ATTR_OWNER: {"S": holder.owner},
        ATTR_INCARNATION: {"S": holder.incarnation},
        ATTR_STATE: {"S": STATE_HELD},
        ATTR_STATE_SINCE: {"N": number(now)},
        ATTR_CLAIMED_AT: {"N": number(now)},
        ATTR_NOT_AFTER: {"N": str(holder.not_after)},
        ATTR_EXPIRES_AT: {"N": str(holder.not_after + CLAIM_RETENTION_SECONDS)},
    }


def _key(resource: str) -> dict[str, dict[str, str]]:
    return {ATTR_RESOURCE: {"S": resource}}


def _iso(seconds: Decimal) -> str:
    try:
        return datetime.fromtimestamp(int(seconds), tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return str(seconds)


def _not_undone(claimed: Claimed) -> None:
    LOGGER.warning(
        "could not undo the ownership record of %s %r for %s; it expires with its time to live",
        claimed.request.kind,
        claimed.request.resource_id,
        claimed.request.holder.label,
        exc_info=True,
    )


def _not_set(request: ClaimRequest, state: str) -> None:
    LOGGER.warning(
        "could not set the ownership record of %s %r for %s to %s",
        request.kind,
        request.resource_id,
        request.holder.label,
        state,
        exc_info=True,
    )
