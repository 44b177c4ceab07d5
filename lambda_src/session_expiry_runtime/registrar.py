"""The claim registrar: the one writer of ownership records besides the cleanup.

The cleanup acts on a connection, an AgentCore session or a grant only when its ownership
record (a *claim*, `ownership`) names the removed session's key and incarnation, so the
records are what it trusts. IAM cannot make a writer use a condition (no condition key requires
a ``ConditionExpression``), so an application role allowed ``PutItem`` on the ownership table
could rewrite another session's claim to name its own session, record the id on its own item,
end its session, and have the cleanup close the other session's live connection. So no
application role may write the ownership table: ``SessionStore`` asks this function (invoked
synchronously, ``lambda:InvokeFunction`` on it only) and the function decides from facts the
caller does not choose — the session item as the table holds it now (a strongly consistent
``GetItem``: only a writer of the item's partition can have put it there) and the claim as the
ownership table holds it:

=========== ==================================================================== ============
operation   what it requires (read by the registrar itself)                       writes
=========== ==================================================================== ============
``claim``   the key's item is the named incarnation (``notAfter`` is taken from   the claims,
            that item, not from the request)                                      all or none
``release`` the key's item is the named incarnation and no longer names the id    ``released``
            (the session gave it up); the claim is that incarnation's
``undo``    the claim is that incarnation's, at most `UNDO_WINDOW_SECONDS`  deleted
            old, and the key's item is not that incarnation or no longer names
            the id (the write the claim was for did not happen)
``owned``   the key's item is that incarnation (else: none), read only: its ids   nothing
=========== ==================================================================== ============

Lambda does not tell the function who invoked it, and the incarnation is no secret (the last
segment of the scratch prefix, part of the grant's name, a column of the archive). So every
request must also show the session's **claim token** (``token``; `config.CLAIM_TOKEN_ATTRIBUTE`,
32 random hex characters ``SessionStore.create`` writes on the item and nowhere else that
another tenant may read): a request for a live incarnation whose item holds another token is
refused (``WrongClaimToken``, counted ``ClaimRequestsRefused``); the claims keep its hash
(``tokenHash``), which decides an ``undo`` once the item is gone. Without it, tenant A knowing
B's incarnation could ``undo`` or ``release`` B's new claim between B's claim and B's item
update, take the id for its own session, and have the cleanup close B's live connection. An
item written before claim tokens existed has none: its incarnation is all it shows.

So a writer confined to tenant A's partition can claim only for A's own live sessions, can
release or undo only what A's own items gave up, and cannot rewrite, release or delete a claim
of tenant B's live session: the claim conditions (`store_parts.claims`) refuse an id
another live session holds, and ``release`` of B's id needs B's item to have dropped it. A
request the registrar refuses for its session's state is answered ``SessionNotLive`` and
counted (``ClaimRequestsRefused``, alarmed): in normal operation only a session that ended
while one of its own ids was being recorded produces it.

The event (JSON): ``{"op": "claim"|"release"|"undo"|"owned", "key": {<name>: <String>},
"incarnation": "<32 hex>", "token": "<claim token>", "resources": [["<kind>", "<id>"], ...],
"grant": false}``;
``grant`` true claims a new KMS grant (fresh only: no takeover). The answer: ``{"ok": true,
...}`` or ``{"ok": false, "error": "<code>", "message": "..."}``; a refused claim answers
``"error": "ResourceOwned"`` with the refusing record (``held``: its owner shown only to a
caller of the same partition) and nothing written.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from .core.config import (
    DEFAULT_METRICS_NAMESPACE,
    ENV_METRICS_NAMESPACE,
    METRIC_CLAIM_REQUESTS_REFUSED,
    RuntimeConfig,
)
from .core.kind_settings import recorded_kinds
from .core.metrics import gauge_document
from .core.ownership import (
    ATTR_CLAIMED_AT,
    ATTR_INCARNATION,
    ATTR_OWNER,
    ATTR_RESOURCE,
    ATTR_STATE,
    KIND_CONNECTION,
    KIND_GRANT,
    KINDS,
    STATE_HELD,
    STATE_RELEASED,
    Claim,
    is_kind,
    owner_token,
    resource_key,
)
from .store_parts.claims import (
    ATTR_TOKEN_HASH,
    GRANT_CLAIM_CONDITION,
    Claimed,
    ClaimRequest,
    ClaimWriter,
    Holder,
    TransactionCancelled,
    token_hash,
)
from .store_parts.errors import ResourceOwnedError, is_condition_failure
from .store_parts.session import Session

__all__ = [
    "OPERATIONS",
    "UNDO_WINDOW_SECONDS",
    "Registrar",
    "RegistrarRequest",
    "handler",
]

LOGGER = logging.getLogger("session_expiry_runtime.registrar")

OP_CLAIM, OP_RELEASE, OP_UNDO, OP_OWNED = "claim", "release", "undo", "owned"
OPERATIONS = (OP_CLAIM, OP_RELEASE, OP_UNDO, OP_OWNED)
#: A claim may be undone by its own incarnation only this long after it was taken: the undo
#: follows the failed item write at once; later, a claim is the cleanup's to release.
UNDO_WINDOW_SECONDS = 60
#: At most this many ids in one request (a session's ids of one write).
MAX_RESOURCES = 100
ERROR_NOT_LIVE = "SessionNotLive"
ERROR_OWNED = "ResourceOwned"
ERROR_BAD_REQUEST = "BadRequest"
ERROR_WRONG_TOKEN = "WrongClaimToken"  # noqa: S105 (an error code)


class BadRequest(ValueError):
    """The event is not a registrar request; the message names the field."""


@dataclass(frozen=True)
class RegistrarRequest:
    """One parsed request (module docstring)."""

    op: str
    key: dict[str, str]
    incarnation: str
    resources: tuple[tuple[str, str], ...]
    grant: bool = False
    #: The session's claim token (`config.CLAIM_TOKEN_ATTRIBUTE`), ``None`` when not shown.
    token: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, event: object, key_names: Sequence[str]) -> RegistrarRequest:
        """The request in ``event``.

        Raises:
            BadRequest: a field is missing or malformed (the message names it and what was
                expected).
        """
        if not isinstance(event, Mapping):
            raise BadRequest(f"event {event!r}: expected a JSON object")
        op = event.get("op")
        if op not in OPERATIONS:
            raise BadRequest(f"op {op!r}: expected one of {list(OPERATIONS)}")
        key = event.get("key")
        if (
            not isinstance(key, Mapping)
            or sorted(key) != sorted(key_names)
            or not all(isinstance(v, str) and v for v in key.values())
        ):
            raise BadRequest(f"key {key!r}: expected String values of exactly {list(key_names)}")
        incarnation = event.get("incarnation")
        if not isinstance(incarnation, str) or not incarnation:
            raise BadRequest(f"incarnation {incarnation!r}: expected the session's incarnation")
        return cls(
            op=str(op),
            key=dict(key),
            incarnation=incarnation,
            resources=_resources(event.get("resources")),
            grant=event.get("grant") is True,
            token=_token(event.get("token")),
        )


def _token(value: object) -> str | None:
    if value is None or (isinstance(value, str) and 0 < len(value) <= 64):
        return value
    raise BadRequest(f"token {value!r}: expected the session's claim token (a String)")


def _resources(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_RESOURCES:
        raise BadRequest(f"resources {value!r}: expected 1..{MAX_RESOURCES} [kind, id] pairs")
    out: list[tuple[str, str]] = []
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2 and is_kind(pair[0])):
            raise BadRequest(
                f"resource {pair!r}: expected [kind, id], kind one of {list(KINDS)} or "
                "'custom:<step name>'"
            )
        try:
            resource_key(pair[0], pair[1])  # a non-empty id
        except ValueError as exc:  # a bad request, answered as one: never a function error
            raise BadRequest(f"resource {pair!r}: {exc}") from None
        out.append((str(pair[0]), str(pair[1])))
    return tuple(dict.fromkeys(out))


class Registrar:
    """Answers registrar requests against the session table and the ownership table.

    Args:
        config: the runtime configuration (the session table, its key and attribute names,
            the ownership table).
        dynamodb: a boto3 DynamoDB client.
        clock: epoch seconds now. Default: `time.time`.
        sleep: the wait before asking again for an id whose previous owner's cleanup is
            releasing it. Default: `time.sleep`.
        emit: where the ``ClaimRequestsRefused`` metric document goes. Default: printed (EMF).

    Raises:
        ValueError: the configuration names no session table or no ownership table.
    """

    def __init__(
        self,
        config: RuntimeConfig,
        dynamodb: Any,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        emit: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        from .store import SessionStore  # the store's own reading of a session

        if not config.table_name or not config.ownership_table_name:
            raise ValueError(
                f"table {config.table_name!r}, ownership table {config.ownership_table_name!r}:"
                " the registrar needs both (SESSION_EXPIRY_TABLE_NAME and "
                "SESSION_EXPIRY_OWNERSHIP_TABLE_NAME, which the construct sets)"
            )
        self.config = config
        self._clock = clock
        self._emit = emit or (lambda doc: print(json.dumps(doc)))
        self._sessions = SessionStore(
            config=config,
            dynamodb_client=dynamodb,
            clock=lambda: _utc(clock()),
            sleep=sleep,
            claim_registrar=None,
        )
        self._writer = ClaimWriter(
            dynamodb,
            config.ownership_table_name,
            clock=lambda: Decimal(str(clock())),
            sleep=sleep,
        )
        self._ddb = dynamodb
        self._key_names = [config.partition_key] + ([config.sort_key] if config.sort_key else [])

    # --- entry ------------------------------------------------------------------------------
    def handle(self, event: object) -> dict[str, Any]:
        """The answer to one request (module docstring); never raises for a bad request."""
        try:
            request = RegistrarRequest.parse(event, self._key_names)
        except BadRequest as exc:
            return _error(ERROR_BAD_REQUEST, str(exc))
        wire_key = {name: {"S": value} for name, value in request.key.items()}
        item, session = self._read(wire_key)
        live_here = session is not None and session.incarnation == request.incarnation
        if live_here and session is not None and not _shows(session.claim_token, request.token):
            return self._refused(request, ERROR_WRONG_TOKEN, "shows not the session's claim token")
        if request.op == OP_OWNED:
            return {"ok": True, "owned": self._owned(request) if live_here else []}
        if request.op == OP_CLAIM:
            if not live_here or session is None:
                return self._not_live(request)
            return self._claim(request, session)
        if request.op == OP_RELEASE:
            if not live_here or item is None:
                return self._not_live(request)
            return self._release(request, item)
        return self._undo(request, item if live_here else None)

    # --- the session as the table holds it ---------------------------------------------------
    def _read(self, key: dict[str, Any]) -> tuple[dict[str, Any] | None, Session | None]:
        """The item under ``key`` (strongly consistent) and its session; ``(None, None)``
        without one. Liveness is not asked: only a writer of the item's partition can have put
        this incarnation there, which is what authenticates a request (an expired item's own
        ids are its own; its REMOVE is what its cleanup answers)."""
        sessions = self._sessions
        answer = self._ddb.get_item(TableName=sessions.table_name, Key=key, ConsistentRead=True)
        item = answer.get("Item")
        if item is None:
            return None, None
        return dict(item), sessions._to_session(item)

    def _holder(self, request: RegistrarRequest, not_after: int) -> Holder:
        c = self.config
        session_id = request.key[c.sort_key or c.partition_key]
        partition = request.key[c.partition_key] if c.sort_key else None
        return Holder(
            owner=owner_token(request.key),
            incarnation=request.incarnation,
            not_after=not_after,
            session_id=session_id,
            partition=partition,
            label=f"session {session_id!r} (incarnation {request.incarnation!r})",
            token=request.token,
        )

    # --- operations ---------------------------------------------------------------------------
    def _claim(self, request: RegistrarRequest, session: Session) -> dict[str, Any]:
        not_after = session.not_after
        if not_after is None:
            not_after = int(self._clock()) + self.config.max_session_lifetime_seconds
        holder = self._holder(request, int(not_after))
        done: list[Claimed] = []
        for kind, resource_id in request.resources:
            claim = ClaimRequest(kind, resource_id, holder)
            try:
                done.append(self._put(claim, request.grant))
            except ResourceOwnedError as refused:
                for claimed in reversed(done):
                    self._writer.undo(claimed)
                return self._owned_error(request, claim, refused)
        return {
            "ok": True,
            "claimed": [
                {
                    "kind": c.request.kind,
                    "id": c.request.resource_id,
                    "claimedAt": str(c.claimed_at),
                }
                for c in done
            ],
        }

    def _put(self, claim: ClaimRequest, grant: bool) -> Claimed:
        if not grant:
            return self._writer.put(claim)
        now = Decimal(str(self._clock()))
        params = self._writer.put_request(claim, now, condition=GRANT_CLAIM_CONDITION)
        try:
            self._writer.transact([{"Put": params}])
        except TransactionCancelled as cancelled:
            reason = cancelled.failed(0)
            if reason is None:
                raise cancelled.error from None
            from .store_parts.claims import refusal

            raise refusal(claim, reason.get("Item")) from None
        return Claimed(claim, now, None)

    def _owned_error(
        self, request: RegistrarRequest, claim: ClaimRequest, refused: ResourceOwnedError
    ) -> dict[str, Any]:
        same_partition = refused.owner_key is not None and refused.owner_key.get(
            self.config.partition_key
        ) == request.key.get(self.config.partition_key)
        return {
            **_error(ERROR_OWNED, str(refused) if same_partition else _redacted(claim)),
            "kind": claim.kind,
            "id": claim.resource_id,
            "releasing": refused.releasing,
            "ownerKey": refused.owner_key if same_partition else None,
            "ownerIncarnation": refused.owner_incarnation if same_partition else None,
        }

    def _release(self, request: RegistrarRequest, item: Mapping[str, Any]) -> dict[str, Any]:
        named = self._named(item)
        holder = self._holder(request, 0)
        gave_up = [
            ClaimRequest(kind, rid, holder)
            for kind, rid in request.resources
            if rid not in named.get(kind, frozenset())
        ]
        kept = [[k, i] for k, i in request.resources if i in named.get(k, frozenset())]
        self._writer.release(gave_up)
        return {"ok": True, "released": [[c.kind, c.resource_id] for c in gave_up], "kept": kept}

    def _undo(
        self, request: RegistrarRequest, live_item: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        named = self._named(live_item) if live_item is not None else {}
        owner, now = owner_token(request.key), Decimal(str(self._clock()))
        undone: list[list[str]] = []
        for kind, resource_id in request.resources:
            if resource_id in named.get(kind, frozenset()):
                continue  # the write happened: the id is the session's, the cleanup's to release
            # The item is gone (or another incarnation): the claim's hash of the token decides.
            shown = None if live_item is not None else token_hash(request.token)
            if self._delete_young(kind, resource_id, owner, request.incarnation, now, shown):
                undone.append([kind, resource_id])
        return {"ok": True, "undone": undone}

    def _owned(self, request: RegistrarRequest) -> list[list[str]]:
        owner = owner_token(request.key)
        out: list[list[str]] = []
        for kind, resource_id in request.resources:
            answer = self._ddb.get_item(
                TableName=self.config.ownership_table_name,
                Key={ATTR_RESOURCE: {"S": resource_key(kind, resource_id)}},
                ConsistentRead=True,
            )
            claim = Claim.from_item(answer.get("Item"))
            if (
                claim is not None
                and (claim.owner, claim.incarnation) == (owner, request.incarnation)
                and claim.state == STATE_HELD
            ):
                out.append([kind, resource_id])
        return out

    # --- helpers ------------------------------------------------------------------------------
    def _delete_young(
        self,
        kind: str,
        resource_id: str,
        owner: str,
        incarnation: str,
        now: Decimal,
        token_hash_shown: str | None,
    ) -> bool:
        hashed = " AND #tokenHash = :tokenHash" if token_hash_shown is not None else ""
        names = {"#tokenHash": ATTR_TOKEN_HASH} if token_hash_shown is not None else {}
        values = {":tokenHash": {"S": token_hash_shown}} if token_hash_shown is not None else {}
        try:
            self._ddb.delete_item(
                TableName=self.config.ownership_table_name,
                Key={ATTR_RESOURCE: {"S": resource_key(kind, resource_id)}},
                ConditionExpression=(
                    "#owner = :owner AND #incarnation = :incarnation AND #claimedAt >= :young"
                    " AND #state <> :released" + hashed
                ),
                ExpressionAttributeNames={
                    "#owner": ATTR_OWNER,
                    "#incarnation": ATTR_INCARNATION,
                    "#claimedAt": ATTR_CLAIMED_AT,
                    "#state": ATTR_STATE,
                    **names,
                },
                ExpressionAttributeValues={
                    ":owner": {"S": owner},
                    ":incarnation": {"S": incarnation},
                    ":young": {"N": str(int(now) - UNDO_WINDOW_SECONDS)},
                    ":released": {"S": STATE_RELEASED},
                    **values,
                },
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def _named(self, item: Mapping[str, Any]) -> dict[str, frozenset[str]]:
        """Every id the item names, by kind: connections and the grant (the store's own), then
        every declared and custom kind's attributes (`kind_settings.recorded_kinds`)."""
        session = self._sessions._to_session(item)
        named = {
            name: frozenset(
                value
                for attribute in settings.attributes
                for value in _strings(item.get(attribute))
            )
            for name, settings in recorded_kinds(self.config).items()
        }
        return {
            **named,
            KIND_CONNECTION: session.connection_ids
            | frozenset([session.connection_id] if session.connection_id else []),
            KIND_GRANT: frozenset([session.grant_id] if session.grant_id else []),
        }

    def _not_live(self, request: RegistrarRequest) -> dict[str, Any]:
        return self._refused(request, ERROR_NOT_LIVE, "is not the key's live session")

    def _refused(self, request: RegistrarRequest, code: str, why: str) -> dict[str, Any]:
        """Refuse ``request`` (nothing written), log it and count ``ClaimRequestsRefused``."""
        LOGGER.warning(
            "refused to %s %d id(s) for key %s incarnation %s: the request %s (%s)",
            request.op,
            len(request.resources),
            json.dumps(request.key, sort_keys=True),
            request.incarnation,
            why,
            code,
        )
        namespace = os.environ.get(ENV_METRICS_NAMESPACE) or DEFAULT_METRICS_NAMESPACE
        self._emit(
            gauge_document(
                namespace,
                METRIC_CLAIM_REQUESTS_REFUSED,
                1,
                unit="Count",
                dimensions={},
                timestamp_ms=int(self._clock() * 1000),
            )
        )
        return _error(
            code,
            f"key {request.key!r} incarnation {request.incarnation!r}: the request {why}; "
            f"nothing was written ({request.op})",
        )


def _shows(expected: str | None, shown: str | None) -> bool:
    """Whether a request showing ``shown`` may speak for an item whose claim token is
    ``expected`` (an item written before claim tokens has none: its incarnation is all)."""
    if expected is None:
        return True
    return shown is not None and hmac.compare_digest(expected, shown)


def _strings(value: object) -> list[str]:
    """A low-level String (``{"S": ...}``) or String Set's values; nothing for anything else."""
    if not isinstance(value, Mapping):
        return []
    if isinstance(value.get("S"), str):
        return [str(value["S"])]
    return [str(v) for v in value.get("SS") or [] if isinstance(v, str)]


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": code, "message": message}


def _redacted(claim: ClaimRequest) -> str:
    return (
        f"{claim.kind} {claim.resource_id!r} is owned by another session; "
        f"{claim.holder.label} cannot record it and nothing was written"
    )


def _utc(seconds: float) -> Any:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(seconds, tz=timezone.utc)


_registrar: Registrar | None = None


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point: `Registrar.handle` with the configuration of the environment."""
    global _registrar
    if _registrar is None:
        import boto3

        _registrar = Registrar(RuntimeConfig.from_env(), boto3.client("dynamodb"))
    return _registrar.handle(event)
