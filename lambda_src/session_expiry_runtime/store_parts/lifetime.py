"""A session's lifetime: create, get, list, touch (heartbeat) and end.

A session has an absolute lifetime (``max_session_lifetime_seconds``, default 8 hours):
``create`` records its not-after time, no heartbeat sets the TTL past it, and from then on it
is gone whatever its TTL says.
"""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeSerializer
from botocore.exceptions import ClientError

from ..core.config import CLAIM_TOKEN_ATTRIBUTE, PREVIOUS_INCARNATION_ATTRIBUTE
from ..core.ownership import KIND_CONNECTION
from ..core.prefixes import build_scratch_prefix, new_incarnation
from .agent_sessions import agent_session_ids, agent_session_values
from .claims import (
    RACED,
    RELEASING_RETRY_DELAYS,
    Claimed,
    ClaimRequest,
    ClaimWriter,
    TransactionCancelled,
    refusal,
)
from .core import LIVE_TTL, NOT_LIVE, StoreCore
from .errors import (
    LOGGER,
    ResourceOwnedError,
    SessionConflictError,
    SessionGoneError,
    describe,
    is_condition_failure,
)
from .keys import Key, number, number_value, require_text, whole_seconds
from .registrar_client import RegistrarClaims
from .session import Session

# Lost races with concurrent creators/enders before create gives up with a conflict.
_CREATE_ATTEMPTS = 3
_SERIALIZER = TypeSerializer()


class LifetimePart(StoreCore):
    """create, get, iter_sessions, list, touch/heartbeat, end (see
    [`SessionStore`][session_expiry_runtime.store.SessionStore])."""

    def create(
        self,
        session_id: str,
        *,
        ttl: timedelta | None = None,
        expires_at: datetime | int | None = None,
        connection_id: str | None = None,
        tenant_id: str | None = None,
        partition: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        runtime_session_id: str | None = None,
        code_interpreter_session_id: str | None = None,
        browser_session_id: str | None = None,
    ) -> Session:
        """Create a session: a new incarnation with its own scratch prefix; conditional PutItem.

        The TTL attribute is a Number of epoch seconds, ``now + ttl`` rounded up; ``notAfter``
        records the absolute end, ``now +`` the maximum session lifetime (default 8 hours), and
        no TTL is ever set past it. The item's ``incarnation`` (32 random hex characters) is the
        last segment of its scratch prefix, which names the whole key
        (`prefixes`: ``{root}[{tenant}/][{partition}/]{id}/{incarnation}/``).

        With ownership records (``SESSION_EXPIRY_OWNERSHIP_TABLE_NAME``) and ids given, one
        ``TransactWriteItems`` puts the item and an ownership record per id (`claims`): an id
        another live session owns is refused with
        [`ResourceOwnedError`][session_expiry_runtime.store.ResourceOwnedError], nothing written.

        Reuse after expiry: an item that exists but is not live does not block the id. It is
        removed first with a DeleteItem conditioned on it still being not live (its REMOVE
        record has the cleanup release the old incarnation's resources), then the new item is
        put with ``attribute_not_exists``; the new incarnation takes over the ids the old one
        claimed, whose cleanup then leaves them alone. The new item names the one it replaced
        (``previousIncarnation``): the proof the Kinesis read-back takes that its REMOVE is real.

        Args:
            session_id: 1-255 characters ``A-Z a-z 0-9 . _ : @ = + -``, starting with a
                letter or digit (a scratch prefix segment).
            ttl: lifetime, 1 second to ``max_ttl``; default the store's ``default_ttl`` (1
                hour). Mutually exclusive with ``expires_at`` (aware ``datetime`` or epoch
                seconds).
            connection_id: WebSocket connection id (``connectionId`` and the ``connectionIds``
                String Set); default none.
            tenant_id: tenant to store; required with tenant-scoped scratch. When the tenant
                attribute is the partition key, the tenant is ``partition``.
            partition: partition key value; required with a sort key (then a prefix segment
                too: the same rule as ``session_id``), else must be ``None``.
            attributes: extra application attributes, stored as top-level attributes of the
                item (boto3 ``TypeSerializer`` types: ``Decimal`` not ``float``); not the key, TTL
                or runtime attribute names; a custom step's ``attributes={"secretName": name}``
                (one with a ``resource_attribute`` acts on ids `attach_resource` records). Read
                back as `Session.attributes`. Default: none.
            runtime_session_id: an Amazon Bedrock AgentCore Runtime session the cleanup stops;
                default none; see
                [`attach_agent_session`][session_expiry_runtime.store.SessionStore.attach_agent_session].
            code_interpreter_session_id: an AgentCore Code Interpreter session, likewise.
            browser_session_id: an AgentCore Browser session, likewise.

        Raises:
            SessionConflictError: a live session with this id exists.
            ResourceOwnedError: another session owns one of the ids.
            ValueError: a bad id, partition, tenant, connection id, attribute name or TTL.
        """
        key = self._key(session_id, partition)
        agents = agent_session_ids(
            runtime_session_id, code_interpreter_session_id, browser_session_id
        )
        incarnation = new_incarnation()
        item = self._new_item(key, ttl, expires_at, tenant_id, partition, attributes, incarnation)
        item.update(agent_session_values(self._config, agents))
        ids = [(kind.kind, agent_id) for kind, agent_id in agents]
        if connection_id is not None:
            c = self._config
            item[c.connection_id_attribute] = {"S": require_text(connection_id, "connection id")}
            item[c.connection_ids_attribute] = {"SS": [connection_id]}
            ids.insert(0, (KIND_CONNECTION, connection_id))
        if self._claims is None or not ids:
            return self._put_new(key, item, session_id, partition)
        not_after = whole_seconds(item[self._config.not_after_attribute])
        holder = self._holder(key, incarnation, not_after, item[CLAIM_TOKEN_ATTRIBUTE]["S"])
        return self._transact_new(key, item, [ClaimRequest(k, i, holder) for k, i in ids])

    def _new_item(
        self,
        key: Key,
        ttl: timedelta | None,
        expires_at: datetime | int | None,
        tenant_id: str | None,
        partition: str | None,
        attributes: Mapping[str, Any] | None,
        incarnation: str,
    ) -> dict[str, Any]:
        """The new incarnation's item (everything but its connection and agent sessions)."""
        now = self._now()
        not_after = self._not_after_from(now)
        expiry = min(self._expiry(ttl, expires_at, now), not_after)
        c = self._config
        if tenant_id is not None:
            require_text(tenant_id, "tenant id")
        if self._tenant_is_partition:
            tenant_id = self._tenant_from_partition(tenant_id, partition)
        prefix = build_scratch_prefix(
            c.scratch_root,
            key[c.sort_key or c.partition_key]["S"],
            partition=partition if c.sort_key else None,
            tenant_id=tenant_id,
            tenant_scoped=c.tenant_scoped_scratch,
            tenant_is_partition=self._tenant_is_partition,
            incarnation=incarnation,
        )
        item: dict[str, Any] = dict(key)
        item.update(self._application_attributes(attributes))
        item[c.ttl_attribute] = {"N": str(expiry)}
        item[c.not_after_attribute] = {"N": str(not_after)}
        item[c.scratch_prefix_attribute] = {"S": prefix}
        item[c.incarnation_attribute] = {"S": incarnation}
        item[CLAIM_TOKEN_ATTRIBUTE] = {"S": secrets.token_hex(16)}  # the registrar's secret
        if c.sweep_shard_attribute:
            item[c.sweep_shard_attribute] = {"S": self._sweep_shard(key)}
        if c.owner_region_attribute:
            item[c.owner_region_attribute] = {"S": self._owner_region}
        if tenant_id is not None and not self._tenant_is_partition:
            item[c.tenant_attribute] = {"S": tenant_id}
        return item

    def _application_attributes(self, attributes: Mapping[str, Any] | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in (attributes or {}).items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"attribute name {name!r}: expected a non-empty string")
            if name in self._reserved:
                raise ValueError(
                    f"attribute name {name!r}: reserved for the key or the runtime; "
                    f"choose a name other than {sorted(self._reserved)}"
                )
            out[name] = _SERIALIZER.serialize(value)
        return out

    def _put_new(
        self, key: Key, item: dict[str, Any], session_id: str, partition: str | None
    ) -> Session:
        """Put ``item`` unless a live session holds the key; remove a dead one first."""
        c = self._config
        for _ in range(_CREATE_ATTEMPTS):
            try:
                self._ddb.put_item(
                    TableName=self.table_name,
                    Item=item,
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": c.partition_key},
                )
                return self._to_session(item)
            except ClientError as err:
                if not is_condition_failure(err):
                    raise
            self._replace_dead(key, item, session_id, partition)
        raise _lost_races(session_id, partition)

    def _transact_new(
        self, key: Key, item: dict[str, Any], requests: Sequence[ClaimRequest]
    ) -> Session:
        """`_put_new` and the claims of ``requests`` in one ``TransactWriteItems``.

        A claim refused by a record that may be taken (released, past its owner's absolute
        end, left ``releasing``) is taken over first, on its own and naming its former holder
        (``ClaimWriter.take_over``); the transaction then writes it again as this incarnation's.
        If the session is not created in the end, those takeovers are undone."""
        claims = self._claims
        assert claims is not None
        if isinstance(claims, RegistrarClaims):
            return self._registered_new(key, item, requests, claims)
        taken: list[Claimed] = []
        try:
            return self._transact_new_once(key, item, list(requests), taken)
        except BaseException:
            for claimed in reversed(taken):
                claims.undo(claimed)
            raise

    def _registered_new(
        self,
        key: Key,
        item: dict[str, Any],
        requests: Sequence[ClaimRequest],
        claims: RegistrarClaims,
    ) -> Session:
        """With the claim registrar: the item first (the registrar claims only for the key's
        current incarnation, which only a writer of the key can have put there), then the
        claims, all or none; if they are refused (or the call fails), the ids are taken off the
        item and the item is deleted, so its REMOVE names nothing unclaimed (no refusal, no
        alarm), and the error is raised."""
        holder = requests[0].holder
        session = self._put_new(key, item, holder.session_id, holder.partition)
        try:
            claims.put_all(requests)
        except BaseException:
            self._forget_ids(key, holder.incarnation)
            self._delete_incarnation(key, holder.incarnation)
            raise
        return session

    def _forget_ids(self, key: Key, incarnation: str) -> None:
        """Take every id attribute ``create`` writes off the item while it is ``incarnation``
        (best effort, logged)."""
        c = self._config
        names = sorted(
            {
                c.connection_id_attribute,
                c.connection_ids_attribute,
                c.agent_runtime_session_attribute,
                c.agent_runtime_session_ids_attribute,
                c.code_interpreter_session_attribute,
                c.code_interpreter_session_ids_attribute,
                c.browser_session_attribute,
                c.browser_session_ids_attribute,
            }
        )
        placeholders = {f"#a{i}": name for i, name in enumerate(names)}
        try:
            self._ddb.update_item(
                TableName=self.table_name,
                Key=key,
                UpdateExpression="REMOVE " + ", ".join(placeholders),
                ConditionExpression="#inc = :inc",
                ExpressionAttributeNames={**placeholders, "#inc": c.incarnation_attribute},
                ExpressionAttributeValues={":inc": {"S": incarnation}},
            )
        except Exception:
            LOGGER.warning("could not take refused ids off the new session %s", key, exc_info=True)

    def _delete_incarnation(self, key: Key, incarnation: str) -> None:
        """Delete the item while it is still ``incarnation`` (best effort, logged)."""
        try:
            self._ddb.delete_item(
                TableName=self.table_name,
                Key=key,
                ConditionExpression="#inc = :inc",
                ExpressionAttributeNames={"#inc": self._config.incarnation_attribute},
                ExpressionAttributeValues={":inc": {"S": incarnation}},
            )
        except Exception:
            LOGGER.warning(
                "could not delete the new session under %s after its claims were refused; its "
                "ids are unclaimed (the cleanup refuses them when it ends)",
                key,
                exc_info=True,
            )

    def _transact_new_once(
        self, key: Key, item: dict[str, Any], requests: list[ClaimRequest], taken: list[Claimed]
    ) -> Session:
        claims, holder = self._claims, requests[0].holder
        assert isinstance(claims, ClaimWriter)
        put_item = {
            "TableName": self.table_name,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": self._config.partition_key},
        }
        races, waits = 0, iter(RELEASING_RETRY_DELAYS)
        while True:
            now = self._now()
            puts = [put_item] + [claims.put_request(r, now) for r in requests]
            try:
                claims.transact([{"Put": put} for put in puts])
                return self._to_session(item)
            except TransactionCancelled as cancelled:
                if cancelled.failed(0):  # an item holds the key: remove it while it is dead
                    races += 1
                    if races >= _CREATE_ATTEMPTS:
                        raise _lost_races(holder.session_id, holder.partition) from None
                    self._replace_dead(key, item, holder.session_id, holder.partition)
                    continue
                outcome, index = _take_over_refused(claims, cancelled, requests, taken)
                if outcome is TAKEN:
                    continue
                error = _claim_refused(cancelled, requests, index)
            delay = next(waits, None) if (error.releasing or outcome is RACED) else None
            if delay is None:
                raise error
            claims.sleep(delay)

    def _replace_dead(
        self, key: Key, item: dict[str, Any], session_id: str, partition: str | None
    ) -> None:
        """`_remove_dead`, and the new ``item`` names the incarnation it removed
        (`config.PREVIOUS_INCARNATION_ATTRIBUTE`): the proof the Kinesis read-back takes that
        the removed incarnation's ``REMOVE`` really happened, when it arrives after the new item
        was put (`kinesis_removals`)."""
        removed = self._remove_dead(key, session_id, partition)
        if removed is not None:
            item[PREVIOUS_INCARNATION_ATTRIBUTE] = {"S": removed}

    def _remove_dead(self, key: Key, session_id: str, partition: str | None) -> str | None:
        """Delete the item holding the key while it is still not live (its REMOVE record
        has the cleanup release the old incarnation); a live one is a conflict. The removed
        item's incarnation (``ReturnValues=ALL_OLD``, no extra capacity: a delete consumes the
        deleted item's size either way), ``None`` when it had none or was already gone."""
        try:
            answer = self._ddb.delete_item(
                TableName=self.table_name,
                Key=key,
                ConditionExpression=NOT_LIVE,
                ExpressionAttributeNames=self._names(),
                ExpressionAttributeValues=self._time_values(self._now()),
                ReturnValues="ALL_OLD",
            )
        except ClientError as err:
            if not is_condition_failure(err):
                raise
            raise SessionConflictError(
                f"{describe(session_id, partition)} already exists and is live; "
                "end it or wait for it to expire before creating it again",
                session_id=session_id,
                partition=partition,
            ) from None
        removed = (answer.get("Attributes") or {}).get(self._config.incarnation_attribute) or {}
        return removed.get("S") if isinstance(removed.get("S"), str) else None

    def get(
        self, session_id: str, *, partition: str | None = None, consistent: bool = False
    ) -> Session | None:
        """Read a session; ``None`` unless it exists and is live (fails closed on time).

        Args:
            consistent: strongly consistent read (``ConsistentRead``; twice the read
                capacity). Default ``False``: eventually consistent, may miss a write made
                within about a second.

        Raises:
            ValueError: a bad id or partition.
        """
        return self._get_live(self._key(session_id, partition), consistent=consistent)

    def iter_sessions(
        self, partition: str, *, consistent: bool = False, page_size: int | None = None
    ) -> Iterator[Session]:
        """Yield the live sessions of one partition, page by page (lazy
        [`list`][session_expiry_runtime.store.SessionStore.list]).

        Arguments are checked at once; liveness is judged against the clock read once, here.
        Arguments and errors as for [`list`][session_expiry_runtime.store.SessionStore.list].
        """
        if not self._config.sort_key:
            raise ValueError(
                f"list({partition!r}): the table has no sort key, so a partition holds one "
                "session; configure a sort key or use get()"
            )
        if page_size is not None and (
            isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1
        ):
            raise ValueError(f"page_size {page_size!r}: expected a positive int or None")
        pk_value = self._partition_value(partition)
        now = self._now()
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk",
            # The filter saves transfer; _pages checks each item again.
            "FilterExpression": LIVE_TTL,
            "ExpressionAttributeNames": self._names(),
            "ExpressionAttributeValues": {":pk": {"S": pk_value}, **self._time_values(now)},
            "ConsistentRead": consistent,
        }
        if page_size is not None:
            request["Limit"] = page_size
        return self._pages(request, now)

    def _pages(self, request: dict[str, Any], now: Decimal) -> Iterator[Session]:
        while True:
            resp = self._ddb.query(**request)
            for item in resp.get("Items", []):
                if self._live(item, now):
                    yield self._to_session(item)
            # A page the filter emptied still carries LastEvaluatedKey: keep going.
            last = resp.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last

    def list(
        self, partition: str, *, consistent: bool = False, page_size: int | None = None
    ) -> builtins.list[Session]:
        """The live sessions of one partition (tables with a sort key only).

        A Query on the partition key with a FilterExpression on the TTL, following
        ``LastEvaluatedKey`` across all pages, including pages the filter empties entirely
        (Developer Guide, "Paginating table query results": the filter applies after
        ``Limit``). Items are ordered by sort key (session id).

        Args:
            partition: the partition key value (e.g. the user or tenant id).
            consistent: strongly consistent Query; default ``False``.
            page_size: ``Limit`` per Query page; default DynamoDB's (up to 1 MB per page).

        Raises:
            ValueError: no sort key configured, or a bad partition or page size.
        """
        return builtins.list(
            self.iter_sessions(partition, consistent=consistent, page_size=page_size)
        )

    def touch(
        self,
        session_id: str,
        *,
        ttl: timedelta | None = None,
        expires_at: datetime | int | None = None,
        partition: str | None = None,
    ) -> Session:
        """Heartbeat: set a new expiry on a live session; conditional UpdateItem.

        The condition requires the item to exist and be live (``attribute_exists(#pk) AND
        #t > :now AND #t <= :horizon``, and its not-after, if any, after now), so an expired
        session is never revived, even while DynamoDB has not deleted it yet. ``ttl`` counts
        from now (it may shorten the session).

        Absolute lifetime: the TTL is never set past the session's not-after time (recorded
        by [`create`][session_expiry_runtime.store.SessionStore.create]); a heartbeat asking for
        more gets exactly the not-after time (a
        second conditional UpdateItem when the first finds the cap), and from the not-after
        time on the session is gone. An item written before the not-after attribute existed
        gets one at its first heartbeat (now plus the maximum session lifetime).

        Args:
            ttl: new lifetime from now; default the store's ``default_ttl`` (1 hour).
            expires_at: absolute new expiry instead (aware ``datetime`` or epoch seconds).

        Returns:
            The updated [`Session`][session_expiry_runtime.store.Session].

        Raises:
            SessionGoneError: the session is missing, not live, or past its not-after time;
                the item is unchanged.
            ValueError: a bad id, partition or TTL.
        """
        key = self._key(session_id, partition)
        now = self._now()
        not_after = self._not_after_from(now)
        expiry = min(self._expiry(ttl, expires_at, now), not_after)
        update = "SET #t = :expiry, #na = if_not_exists(#na, :na)"
        names: dict[str, str] = {}
        values: dict[str, Any] = {":expiry": {"N": str(expiry)}, ":na": {"N": str(not_after)}}
        update += self._index_update(key, names, values)
        new, old = self._try_update(
            key, now, update, names, values, "(attribute_not_exists(#na) OR #na >= :expiry)"
        )
        if new is None and old is not None and self._live(old, now):
            cap = number_value(old.get(self._config.not_after_attribute))
            if cap is not None and cap < expiry:  # ask again for exactly the not-after time
                capped = {**values, ":expiry": {"N": number(cap)}, ":cap": {"N": number(cap)}}
                new, old = self._try_update(key, now, update, names, capped, "#na = :cap")
        if new is None:
            raise SessionGoneError(
                f"{describe(session_id, partition)} is missing, expired or past its absolute "
                "lifetime; nothing was written",
                session_id=session_id,
                partition=partition,
            )
        return self._to_session(new)

    def _index_update(self, key: Key, names: dict[str, str], values: dict[str, Any]) -> str:
        """The heartbeat's SET clauses for the sweep shard and the owner Region (``""`` if
        neither is configured). Sessions created before the sweeper was turned on join its
        index here. On a global table both are set only where absent (``if_not_exists``): a
        heartbeat from another Region after a failover never changes the session's owner, nor
        moves it into that Region's sweep shards."""
        c, clauses = self._config, ""
        if c.owner_region_attribute:
            clauses += ", #or = if_not_exists(#or, :or)"
            names["#or"] = c.owner_region_attribute
            values[":or"] = {"S": self._owner_region}
        if c.sweep_shard_attribute:
            shard = "if_not_exists(#shard, :shard)" if c.owner_region_attribute else ":shard"
            clauses += f", #shard = {shard}"
            names["#shard"] = c.sweep_shard_attribute
            values[":shard"] = {"S": self._sweep_shard(key)}
        return clauses

    def end(self, session_id: str, *, partition: str | None = None) -> bool:
        """End a session: an unconditional DeleteItem.

        The REMOVE record on the table's stream (no ``userIdentity``: an explicit delete)
        carries the old image, from which the cleanup function closes the connection,
        retires the grant and deletes the scratch prefix. Ending an expired session that
        DynamoDB has not deleted yet is allowed and starts that cleanup sooner.

        Returns:
            ``True`` if an item (live or expired) was deleted, ``False`` if none existed.

        Raises:
            ValueError: a bad id or partition.
        """
        key = self._key(session_id, partition)
        resp = self._ddb.delete_item(TableName=self.table_name, Key=key, ReturnValues="ALL_OLD")
        return bool(resp.get("Attributes"))


def _lost_races(session_id: str, partition: str | None) -> SessionConflictError:
    return SessionConflictError(
        f"{describe(session_id, partition)}: lost {_CREATE_ATTEMPTS} races with concurrent "
        "writers of the same id",
        session_id=session_id,
        partition=partition,
    )


#: What `_take_over_refused` answers when every refused claim was taken over.
TAKEN = object()


def _take_over_refused(
    claims: ClaimWriter,
    cancelled: TransactionCancelled,
    requests: list[ClaimRequest],
    taken: list[Claimed],
) -> tuple[object, int]:
    """Take over each claim the transaction refused whose record may be taken, replacing its
    request by the successor's (``formerOwners``) and noting it in ``taken``: ``(TAKEN, 0)``
    when all were, else `claims.NOT_TAKEABLE` or `claims.RACED` of the first that was not and
    its index in the transaction; ``(None, 0)`` when the transaction refused no claim (it was
    cancelled for another reason: asking again would loop)."""
    refused = False
    for index, request in enumerate(list(requests), start=1):
        reason = cancelled.failed(index)
        if reason is None:
            continue
        refused = True
        outcome = claims.take_over(request, reason.get("Item"))
        if not isinstance(outcome, Claimed):
            return outcome, index
        taken.append(outcome)
        requests[index - 1] = outcome.request
    return (TAKEN if refused else None), 0


def _claim_refused(
    cancelled: TransactionCancelled, requests: Sequence[ClaimRequest], index: int
) -> ResourceOwnedError:
    """The error of the claim at ``index`` of the transaction (from 1), which it refused and
    which could not be taken over — never one taken over meanwhile; the botocore error itself
    when it was cancelled for another reason (``index`` 0)."""
    reason = cancelled.failed(index) if index else None
    if reason is None:
        raise cancelled.error
    return refusal(requests[index - 1], reason.get("Item"))
