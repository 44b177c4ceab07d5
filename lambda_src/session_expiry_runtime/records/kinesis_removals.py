"""A ``REMOVE`` that came through Kinesis must name an item the table no longer holds.

DynamoDB alone writes a DynamoDB stream. A Kinesis data stream takes records from anyone
allowed ``kinesis:PutRecord`` on it, and such a writer can copy a live item into a ``REMOVE``:
its old image then names the live session's key, incarnation and ids exactly and passes the
ownership check (`claims`), so its connection, grant and objects would be released while
it is live. So, before a ``REMOVE`` that came through Kinesis
(`decode.StreamRecord.through_kinesis`: the Lambda record's ``eventSourceARN``, set by
Lambda) is cleaned, the table is read back under the record's ``Keys`` (``BatchGetItem``,
strongly consistent, the key attributes, the incarnation, ``notAfter`` and
``previousIncarnation`` only), and `RemovalCheck.removal` answers:

* `HELD` — the table holds an item with the old image's incarnation (or, for an image without
  one, any item): the ``REMOVE`` did not happen. The record is skipped (``RecordsSkipped``,
  cause ``ItemStillInTable``, watched by the skipped-records alarm) and nothing is called;
* `GONE` — no item: the removal is real;
* an item Y with another incarnation: a later session under the same key (Kinesis may deliver an
  earlier incarnation X's ``REMOVE`` after the key was created again), or a forged ``REMOVE``
  with a made-up incarnation of a live key. Told apart only by facts the record's writer does
  not write: Y's creation (its ``notAfter`` less the maximum session lifetime: ``SessionStore``
  writes ``notAfter`` once, at ``create``, in whole seconds rounded down, so this is at most
  one second early and never late; an item written before ``notAfter`` existed gets one at
  its first heartbeat, dated from then), the record's arrival in Kinesis
  (``approximateArrivalTimestamp``, set by Kinesis), Y's own item, and the ownership table:

  * Y created at or after the arrival: `GONE`. The record was in Kinesis before Y existed, so
    it cannot be a copy of Y; the ownership check keeps Y's resources;
  * Y created before the arrival by more than `ARRIVAL_SLACK_SECONDS` (DynamoDB's delivery into
    Kinesis): Y was live when the removal is said to have happened: `HELD`;
  * Y created before the arrival, within the slack: the removal is real only with **proof that
    X existed**. Y's item naming X as the incarnation it replaced (``previousIncarnation``:
    ``SessionStore.create`` writes it when it removed the key's dead item X itself, and only a
    writer of Y's key writes Y's item) is proof here: `GONE`. Otherwise `UNPROVEN`: the runner
    (`runner.CleanupRunner.removal_refusal`) reads the ownership records of the ids the record's
    steps would act on (only the claim registrar and the cleanup write them) and takes a claim
    naming the record's ``Keys`` and X, as its owner or in its ``formerOwners``, as proof. With
    neither, the record is skipped as ``ItemStillInTable`` (alarmed; the log line says
    ``readBack: unproven``): nothing called, nothing counted cleaned, archived or published.
    A made-up X is named by no claim (an id whose claim named X would be one X owned), so such a
    record would have released nothing anyway; it is refused before any step, the archive
    included, runs;
  * Y without ``notAfter`` (written around ``SessionStore``) or a record without an arrival time
    cannot be placed in time: `HELD`. Nor can Y dated after the read-back itself: its
    ``notAfter`` was written with a larger maximum lifetime than the cleanup's (lowered at a
    deploy: every session created before it, for up to the old lifetime; or a store configured
    on its own), which would date it after any arrival and pass a made-up incarnation unproven.

  What this refuses of genuine records (docs/security.md): the ``REMOVE`` of a session X without
  ids whose key was removed by something other than ``SessionStore.create`` (its time to live,
  the expiry sweep, ``end``) and created again within DynamoDB's delivery delay into Kinesis (plus
  the second ``notAfter`` rounds away), before X's ``REMOVE`` reached the stream: alarmed, and
  X's scratch objects are left to the scratch lifecycle rule.
* the read failed: the record fails (action ``Ownership``) and is retried.

The records of one invocation are read together before any record starts (100 keys a call,
DynamoDB's ``BatchGetItem`` limit): 0.01 calls and one strongly consistent read (1 read request
unit for an item up to 4 KB) per session; an `UNPROVEN` record adds one read of its ids'
ownership records. The cleanup function's role may read the table (``dynamodb:BatchGetItem``)
only with the Kinesis change source. A DynamoDB stream record is never read back (the drain of
deferred work reads it back as such: another incarnation in its place is a later session).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.config import PREVIOUS_INCARNATION_ATTRIBUTE
from ..core.decode import DecodeError, StreamRecord, decode_binary
from ..owners.outcomes import error_text

__all__ = ["GONE", "HELD", "MAX_KEYS_PER_CALL", "UNPROVEN", "ReadBackFailed", "RemovalCheck"]

#: ``BatchGetItem`` takes at most 100 keys (Amazon DynamoDB API Reference).
MAX_KEYS_PER_CALL = 100
#: Calls per chunk at most (the first and the retries of its ``UnprocessedKeys``).
MAX_ROUNDS = 3
#: How long before a Kinesis record's arrival its removal may have happened: DynamoDB delivers
#: a change into Kinesis "typically within seconds"; the replay's arrival slack (15 minutes)
#: bounds it here too. A ``REMOVE`` of another incarnation than the one a key created within
#: this window before the record's arrival holds must prove its incarnation existed.
ARRIVAL_SLACK_SECONDS = 15 * 60
#: `RemovalCheck.removal`: the removal happened (clean the record) ...
GONE = "gone"
#: ... the table holds the removed item: it did not (``ItemStillInTable``) ...
HELD = "held"
#: ... or only a claim naming the record's key and incarnation can tell (module docstring).
UNPROVEN = "unproven"
_ABSENT = object()


class ReadBackFailed(RuntimeError):
    """The table could not be read (a failed call, keys left unprocessed, no table name): the
    record may be fine, ask again later. Its plain `RuntimeError` siblings mean the record
    itself cannot be read back (no ``Keys``, keys of another table, values no key can hold)."""


def _identity(key: Mapping[str, Any]) -> str:
    """A key in boto3's shape (`_request_key`, or an answered item's key attributes) as
    text that is equal for equal DynamoDB keys: numbers compared by value (DynamoDB stores
    ``1``, ``1.0`` and ``01`` as one number), binary values by their bytes.

    Raises:
        DecodeError: a number DynamoDB would not take.
    """
    canonical: dict[str, list[str]] = {}
    for name, value in key.items():
        ((kind, raw),) = dict(value).items()
        if kind == "N":
            try:
                raw = str(Decimal(str(raw)).normalize())
            except ArithmeticError:
                raise DecodeError(f"Keys.{name}.N={raw!r}: expected a number") from None
        elif kind == "B":
            raw = bytes(raw).hex()
        canonical[name] = [kind, str(raw)]
    return json.dumps(canonical, sort_keys=True)


def _request_key(keys: Mapping[str, Any]) -> dict[str, Any]:
    """``Keys`` as Lambda delivers them (``B`` as base64 text) in boto3's shape (``bytes``).

    Raises:
        DecodeError: a key value that is not one S, N or B value.
    """
    out: dict[str, Any] = {}
    for name, value in keys.items():
        if not (isinstance(value, Mapping) and len(value) == 1):
            raise DecodeError(f"Keys.{name}={value!r}: expected one S, N or B value")
        ((kind, raw),) = value.items()
        if kind == "B":
            raw = decode_binary(raw, f"Keys.{name}.B")
        elif kind not in ("S", "N") or not isinstance(raw, str):
            raise DecodeError(f"Keys.{name}={value!r}: expected one S, N or B value")
        out[name] = {kind: raw}
    return out


def _number(value: object) -> Decimal | None:
    try:
        number = Decimal(str(value)) if isinstance(value, str) else None
    except ArithmeticError:
        return None
    return number if number is not None and number.is_finite() else None


def _text(value: object) -> str | None:
    text = value.get("S") if isinstance(value, Mapping) else None
    return text if isinstance(text, str) else None


class RemovalCheck:
    """The read-back of one invocation's Kinesis ``REMOVE`` records (module docstring).

    Args:
        dynamodb: a boto3 DynamoDB client (the cleanup's ownership client).
        table_name: the session table (``SESSION_EXPIRY_TABLE_NAME``); ``None``: every check
            fails (a function deployed before the construct set it: redeploy).
        key_names: the table's key attribute names (partition key, and sort key if any): a
            record whose ``Keys`` name others is no item of this table and fails on its own,
            never the call that reads the others.
        incarnation_attribute: the items' incarnation attribute name.
        not_after_attribute: the items' absolute-end attribute (``notAfter``).
        max_lifetime_seconds: the maximum session lifetime
            (``SESSION_EXPIRY_MAX_SESSION_LIFETIME_SECONDS``): ``notAfter`` less it is when the
            held session was created.
        clock: epoch seconds now (default ``time.time``): a held session dated after it cannot
            be placed in time.
    """

    def __init__(
        self,
        dynamodb: Any,
        table_name: str | None,
        key_names: Sequence[str],
        incarnation_attribute: str,
        *,
        not_after_attribute: str = "notAfter",
        max_lifetime_seconds: int = 8 * 3600,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.dynamodb, self.table_name = dynamodb, table_name
        self.clock = clock
        self.key_names = frozenset(key_names)
        self.incarnation_attribute = incarnation_attribute
        self.not_after_attribute = not_after_attribute
        self.max_lifetime = Decimal(max_lifetime_seconds)
        #: key identity -> the held item's (incarnation, notAfter, previousIncarnation) (None:
        #: absent) or _ABSENT
        self._read: dict[str, object] = {}
        self._failed: dict[str, str] = {}

    def prefetch(self, records: Sequence[StreamRecord], *, every_source: bool = False) -> None:
        """Read back every Kinesis ``REMOVE`` of ``records`` (with ``every_source``, every
        ``REMOVE``: the drain of deferred work, `levers`) in as few calls as they allow;
        never raises (what could not be read is read again, or fails, in `removal`)."""
        self._read_keys(
            [
                r.keys
                for r in records
                if (every_source or r.through_kinesis) and r.event_name == "REMOVE" and r.keys
            ]
        )

    def removal(self, record: StreamRecord, incarnation: str | None) -> str:
        """Whether the item ``record`` says was removed is gone: `GONE`, `HELD` or `UNPROVEN`
        (module docstring).

        Raises:
            ReadBackFailed: the table could not be read (no table name, a failed call, keys
                left unprocessed); the text says why.
            RuntimeError: the record cannot be read back (no ``Keys``, Keys that are not the
                table's key or not S, N or B); the text says why.
        """
        held = self._held(record)
        if held is _ABSENT:
            return GONE
        assert isinstance(held, tuple)
        held_incarnation, held_not_after, replaced = held
        if incarnation is None or held_incarnation is None or held_incarnation == incarnation:
            return HELD
        if not record.through_kinesis:
            # A DynamoDB stream record (deferred by the cleanup, read back by the drain):
            # DynamoDB wrote it, so another incarnation in its place is a later session.
            return GONE
        created, arrival = self._created(held_not_after), record.arrival_time
        if (
            created is None
            or arrival is None
            or created < arrival - ARRIVAL_SLACK_SECONDS
            or created > Decimal(str(self.clock()))  # dated in the future: cannot be placed
        ):
            return HELD
        if created >= arrival or replaced == incarnation:
            return GONE
        return UNPROVEN

    def _held(self, record: StreamRecord) -> object:
        """What the read-back found under ``record``'s ``Keys`` (`_ABSENT`: nothing)."""
        if record.keys is None:
            raise RuntimeError("a REMOVE record without Keys cannot be read back")
        if set(record.keys) != self.key_names:
            raise RuntimeError(
                f"Keys name {sorted(record.keys)}: expected the table's key "
                f"{sorted(self.key_names)}; no item of this table can be read back"
            )
        try:
            identity = _identity(_request_key(record.keys))
        except DecodeError as exc:
            raise RuntimeError(f"the item cannot be read back: {exc}") from None
        if identity not in self._read:
            self._read_keys([record.keys])
        if identity not in self._read:
            raise ReadBackFailed(self._failed.get(identity, "the item could not be read back"))
        return self._read[identity]

    def _created(self, not_after: Decimal | None) -> Decimal | None:
        """When the held session was created (at most one second early: ``notAfter`` is whole
        seconds rounded down); ``None`` when it has no ``notAfter``."""
        return None if not_after is None else not_after - self.max_lifetime

    def _read_keys(self, keys: list[Mapping[str, Any]]) -> None:
        for start in range(0, len(keys), MAX_KEYS_PER_CALL):
            self._read_chunk(keys[start : start + MAX_KEYS_PER_CALL])

    def _read_chunk(self, keys: list[Mapping[str, Any]]) -> None:
        todo: dict[str, dict[str, Any]] = {}
        for keys_of in keys:
            if set(keys_of) != self.key_names:
                continue  # removal says why
            try:
                request = _request_key(keys_of)
                identity = _identity(request)
            except DecodeError:
                continue  # removal says why
            if identity not in self._read:
                todo[identity] = request
        if self.table_name is None:
            why = "SESSION_EXPIRY_TABLE_NAME is not set (redeploy: the construct sets it)"
            self._failed.update(dict.fromkeys(todo, why))
            return
        for _ in range(MAX_ROUNDS):
            if not todo:
                return
            try:
                todo = self._get(todo)
            except (ClientError, BotoCoreError) as exc:
                self._failed.update(
                    dict.fromkeys(todo, f"reading the item back: {error_text(exc)}")
                )
                return
        self._failed.update(dict.fromkeys(todo, "reading the item back: UnprocessedKeys"))

    def _get(self, todo: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """One ``BatchGetItem``; the keys it left unprocessed."""
        names = {f"#k{i}": n for i, n in enumerate(sorted(next(iter(todo.values()))))}
        names["#inc"] = self.incarnation_attribute
        names["#na"] = self.not_after_attribute
        names["#prev"] = PREVIOUS_INCARNATION_ATTRIBUTE
        request = {
            "Keys": list(todo.values()),
            "ConsistentRead": True,
            "ProjectionExpression": ", ".join(names),
            "ExpressionAttributeNames": names,
        }
        page = self.dynamodb.batch_get_item(RequestItems={str(self.table_name): request})
        key_names = [n for k, n in names.items() if k not in ("#inc", "#na", "#prev")]
        for item in (page.get("Responses") or {}).get(self.table_name) or []:
            identity = _identity({name: item[name] for name in key_names})
            self._read[identity] = (
                _text(item.get(self.incarnation_attribute)),
                _number((item.get(self.not_after_attribute) or {}).get("N")),
                _text(item.get(PREVIOUS_INCARNATION_ATTRIBUTE)),
            )
        left = ((page.get("UnprocessedKeys") or {}).get(self.table_name) or {}).get("Keys") or []
        unprocessed = {_identity(k) for k in left}
        for identity in todo:
            if identity not in unprocessed:
                self._read.setdefault(identity, _ABSENT)
        return {i: k for i, k in todo.items() if i in unprocessed}
