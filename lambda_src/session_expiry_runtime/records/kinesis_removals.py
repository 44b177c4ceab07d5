"""A ``REMOVE`` that came through Kinesis must name an item the table no longer holds.

DynamoDB alone writes a DynamoDB stream. A Kinesis data stream takes records from anyone
allowed ``kinesis:PutRecord`` on it, and such a writer can copy a live item into a ``REMOVE``:
its old image then names the live session's key, incarnation and ids exactly and passes the
ownership check (`claims`), so its connection, grant and objects would be released while
it is live. So, before a ``REMOVE`` that came through Kinesis
(`decode.StreamRecord.through_kinesis`: the Lambda record's ``eventSourceARN``, set by
Lambda) is cleaned, the table is read back under the record's ``Keys`` (``BatchGetItem``,
strongly consistent, the key attributes and the incarnation only):

* the table holds an item with the old image's incarnation (or, for an image without one, any
  item): the ``REMOVE`` did not happen. The record is skipped (``RecordsSkipped``, cause
  ``ItemStillInTable``, watched by the skipped-records alarm) and nothing is called;
* an item with another incarnation: a later session under the same key (Kinesis may deliver an
  earlier one's ``REMOVE`` after the key was created again), or a forged ``REMOVE`` with a
  made-up incarnation of a live key. Told apart by facts its writer does not write: the held
  item's creation (its ``notAfter`` less the maximum session lifetime: ``SessionStore`` writes
  ``notAfter`` once, at ``create``) against the record's arrival in Kinesis
  (``approximateArrivalTimestamp``, set by Kinesis). A session created after the removal was
  created after (or, allowing `ARRIVAL_SLACK_SECONDS` for DynamoDB's delivery into Kinesis,
  just before) the arrival: the removal is real and the ownership check keeps the later
  session's resources. A session created earlier was live when the removal is said to have
  happened: skipped as ``ItemStillInTable``, nothing called, nothing counted cleaned, archived
  or published. An item without ``notAfter`` (written around ``SessionStore``) or a record
  without an arrival time cannot be placed in time: skipped the same way;
* no item: the removal is real;
* the read failed: the record fails (action ``Ownership``) and is retried.

The records of one invocation are read together before any record starts (100 keys a call,
DynamoDB's ``BatchGetItem`` limit; the key, the incarnation and ``notAfter`` only): 0.01 calls
and one strongly consistent read (1 read request
unit for an item up to 4 KB) per session. The cleanup function's role may read the table
(``dynamodb:BatchGetItem``) only with the Kinesis change source. A DynamoDB stream record is
never read back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.decode import DecodeError, StreamRecord, decode_binary
from ..owners.outcomes import error_text

__all__ = ["MAX_KEYS_PER_CALL", "ReadBackFailed", "RemovalCheck"]

#: ``BatchGetItem`` takes at most 100 keys (Amazon DynamoDB API Reference).
MAX_KEYS_PER_CALL = 100
#: Calls per chunk at most (the first and the retries of its ``UnprocessedKeys``).
MAX_ROUNDS = 3
#: How long before a Kinesis record's arrival its removal may have happened: DynamoDB delivers
#: a change into Kinesis "typically within seconds"; the replay's arrival slack (15 minutes)
#: bounds it here too. A forged ``REMOVE`` of a key re-created within this window passes as
#: real, and its made-up incarnation's ids and prefix are still checked by ownership.
ARRIVAL_SLACK_SECONDS = 15 * 60
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
    ) -> None:
        self.dynamodb, self.table_name = dynamodb, table_name
        self.key_names = frozenset(key_names)
        self.incarnation_attribute = incarnation_attribute
        self.not_after_attribute = not_after_attribute
        self.max_lifetime = Decimal(max_lifetime_seconds)
        #: key identity -> the held item's (incarnation, notAfter) (None: absent) or _ABSENT
        self._read: dict[str, object] = {}
        self._failed: dict[str, str] = {}

    def prefetch(self, records: Sequence[StreamRecord], *, every_source: bool = False) -> None:
        """Read back every Kinesis ``REMOVE`` of ``records`` (with ``every_source``, every
        ``REMOVE``: the drain of deferred work, `levers`) in as few calls as they allow;
        never raises (what could not be read is read again, or fails, in `still_held`)."""
        self._read_keys(
            [
                r.keys
                for r in records
                if (every_source or r.through_kinesis) and r.event_name == "REMOVE" and r.keys
            ]
        )

    def still_held(self, record: StreamRecord, incarnation: str | None) -> bool:
        """``True`` when the table holds the item ``record`` says was removed (module docstring).

        Raises:
            ReadBackFailed: the table could not be read (no table name, a failed call, keys
                left unprocessed); the text says why.
            RuntimeError: the record cannot be read back (no ``Keys``, Keys that are not the
                table's key or not S, N or B); the text says why.
        """
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
        held = self._read[identity]
        if held is _ABSENT:
            return False
        assert isinstance(held, tuple)
        held_incarnation: str | None = held[0]
        held_not_after: Decimal | None = held[1]
        if incarnation is None or held_incarnation is None or held_incarnation == incarnation:
            return True
        if not record.through_kinesis:
            # A DynamoDB stream record (deferred by the cleanup, read back by the drain):
            # DynamoDB wrote it, so another incarnation in its place is a later session.
            return False
        return not self._created_after(held_not_after, record.arrival_time)

    def _created_after(self, not_after: Decimal | None, arrival: Decimal | None) -> bool:
        """Whether the held session was created after the removal ``arrival`` reports (within
        `ARRIVAL_SLACK_SECONDS`); ``False`` when either time is unknown."""
        if not_after is None or arrival is None:
            return False
        return not_after - self.max_lifetime >= arrival - ARRIVAL_SLACK_SECONDS

    def _read_keys(self, keys: list[Mapping[str, Any]]) -> None:
        for start in range(0, len(keys), MAX_KEYS_PER_CALL):
            self._read_chunk(keys[start : start + MAX_KEYS_PER_CALL])

    def _read_chunk(self, keys: list[Mapping[str, Any]]) -> None:
        todo: dict[str, dict[str, Any]] = {}
        for keys_of in keys:
            if set(keys_of) != self.key_names:
                continue  # still_held says why
            try:
                request = _request_key(keys_of)
                identity = _identity(request)
            except DecodeError:
                continue  # still_held says why
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
        request = {
            "Keys": list(todo.values()),
            "ConsistentRead": True,
            "ProjectionExpression": ", ".join(names),
            "ExpressionAttributeNames": names,
        }
        page = self.dynamodb.batch_get_item(RequestItems={str(self.table_name): request})
        key_names = [n for k, n in names.items() if k not in ("#inc", "#na")]
        for item in (page.get("Responses") or {}).get(self.table_name) or []:
            identity = _identity({name: item[name] for name in key_names})
            incarnation = (item.get(self.incarnation_attribute) or {}).get("S")
            self._read[identity] = (
                incarnation if isinstance(incarnation, str) else None,
                _number((item.get(self.not_after_attribute) or {}).get("N")),
            )
        left = ((page.get("UnprocessedKeys") or {}).get(self.table_name) or {}).get("Keys") or []
        unprocessed = {_identity(k) for k in left}
        for identity in todo:
            if identity not in unprocessed:
                self._read.setdefault(identity, _ABSENT)
        return {i: k for i, k in todo.items() if i in unprocessed}
