"""DynamoDB for the bench endpoint: the calls the cleanup and the sweeper make, CPU-cheap.

JSON 1.0 (``X-Amz-Target: DynamoDB_20120810.<Operation>``), answering what botocore parses from
DynamoDB (Amazon DynamoDB API Reference, each operation's page):

* ``TransactWriteItems`` (``Update`` with ``SET``, ``Put``, ``Delete``, ``ConditionCheck``; at most
  100 actions, one per item): all or nothing; a failed condition cancels the whole call with
  ``TransactionCanceledException`` and one ``CancellationReasons`` entry per action in request
  order (``{"Code": "None"}`` for the others; ``"Item"`` with
  ``ReturnValuesOnConditionCheckFailure=ALL_OLD``) — what the ownership marks and releases of
  ``session_expiry_runtime.owners.claims`` read;
* ``BatchGetItem`` (at most 100 keys; every key answered, no ``UnprocessedKeys``): the dry run's
  ownership reads;
* ``UpdateItem`` (``SET``, with ``ConditionExpression``): the shared pace budget's counter;
* ``GetItem``, ``PutItem``, ``DeleteItem`` (with ``ConditionExpression``:
  ``ConditionalCheckFailedException``), ``Query`` on a global secondary index
  (``KeyConditionExpression`` ``<hash> = :v AND <range> <= :w``, ``Limit``,
  ``ExclusiveStartKey``, ``LastEvaluatedKey``; projection ``KEYS_ONLY``): the expiry sweeper;
* a table created with a stream keeps the ``REMOVE`` records of its deletes in ``GetRecords``'
  shape (``NEW_AND_OLD_IMAGES``), read by the bench with :meth:`Tables.take_removes`.

Expressions: comparisons (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``), ``AND``, ``OR``, ``NOT``,
parentheses, ``attribute_exists``, ``attribute_not_exists``, ``attribute_type``,
``begins_with``; top-level attribute names (``#name`` or plain); ``SET a = :v, ...`` and
``REMOVE a, ...`` updates. Anything else answers ``ValidationException`` naming the expression,
so a new call of the runtime fails the bench loudly instead of being answered wrongly. Values
compare as DynamoDB does: Numbers numerically, Strings by code point, different types never
equal. Parsed expressions are cached (the runtime sends the same few strings every time).
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

Item = dict[str, dict[str, Any]]
Key = tuple[Any, ...]
#: A parsed condition: evaluates against (item or None, values, names)
Condition = Callable[[Mapping[str, Any] | None, Mapping[str, Any], Mapping[str, str]], bool]

MAX_TRANSACT_ITEMS = 100
MAX_BATCH_GET_KEYS = 100


class DynamoError(Exception):
    """An error answer: ``code`` (the ``__type`` suffix), HTTP ``status``, message, extras."""

    def __init__(self, code: str, message: str, status: int = 400, **extra: Any) -> None:
        super().__init__(message)
        self.code, self.status, self.extra = code, status, extra

    def body(self) -> dict[str, Any]:
        return {
            "__type": f"com.amazonaws.dynamodb.v20120810#{self.code}",
            "message": str(self),
            **self.extra,
        }


def validation(message: str) -> DynamoError:
    return DynamoError("ValidationException", message)


# --- values ------------------------------------------------------------------------------------
def _comparable(value: Mapping[str, Any] | None) -> tuple[str, Any] | None:
    if not value:
        return None
    (kind, raw), *_ = value.items()
    if kind == "N":
        return "N", Decimal(raw)
    if kind in ("S", "B", "BOOL", "NULL"):
        return kind, raw
    return kind, repr(raw)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


# --- expressions -------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(<>|<=|>=|[=<>(),]|[#:]?[A-Za-z_][A-Za-z0-9_]*)")


def _tokens(expression: str) -> list[str]:
    out, pos = [], 0
    while pos < len(expression):
        match = _TOKEN.match(expression, pos)
        if match is None:
            if expression[pos:].strip():
                raise validation(f"expression {expression!r}: cannot read {expression[pos:]!r}")
            break
        out.append(match.group(1))
        pos = match.end()
    return out


def _name(token: str, names: Mapping[str, str]) -> str:
    if token.startswith("#"):
        if token not in names:
            raise validation(f"{token} is not in ExpressionAttributeNames")
        return names[token]
    return token


def _value(token: str, values: Mapping[str, Any]) -> Any:
    if token not in values:
        raise validation(f"{token} is not in ExpressionAttributeValues")
    return values[token]


class _Parser:
    """Recursive descent over the condition grammar this module supports."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = _tokens(expression)
        self.i = 0

    def parse(self) -> Condition:
        node = self._or()
        if self.i != len(self.tokens):
            raise validation(f"expression {self.expression!r}: unexpected {self.tokens[self.i]!r}")
        return node

    def _peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> str:
        token = self._peek()
        if token is None or (expected is not None and token.upper() != expected):
            raise validation(f"expression {self.expression!r}: expected {expected or 'more'}")
        self.i += 1
        return token

    def _or(self) -> Condition:
        left = self._and()
        while (self._peek() or "").upper() == "OR":
            self._take()
            right = self._and()
            left = (lambda a, b: lambda i, v, n: a(i, v, n) or b(i, v, n))(left, right)
        return left

    def _and(self) -> Condition:
        left = self._not()
        while (self._peek() or "").upper() == "AND":
            self._take()
            right = self._not()
            left = (lambda a, b: lambda i, v, n: a(i, v, n) and b(i, v, n))(left, right)
        return left

    def _not(self) -> Condition:
        if (self._peek() or "").upper() == "NOT":
            self._take()
            inner = self._not()
            return lambda i, v, n: not inner(i, v, n)
        return self._primary()

    def _primary(self) -> Condition:
        token = self._take()
        if token == "(":  # noqa: S105 - a token of the expression, not a secret
            node = self._or()
            self._take(")")
            return node
        if self._peek() == "(":
            return self._function(token)
        op = self._take()
        if op not in _COMPARE:
            raise validation(f"expression {self.expression!r}: {op!r} is not supported here")
        right = self._take()
        compare = _COMPARE[op]

        def operand(tok: str, item: Mapping[str, Any] | None, v: Any, n: Any) -> Any:
            if tok.startswith(":"):
                return _comparable(_value(tok, v))
            return _comparable((item or {}).get(_name(tok, n)))

        def cond(item: Mapping[str, Any] | None, v: Any, n: Any) -> bool:
            a, b = operand(token, item, v, n), operand(right, item, v, n)
            return a is not None and b is not None and a[0] == b[0] and compare(a[1], b[1])

        return cond

    def _function(self, name: str) -> Condition:
        self._take("(")
        args = [self._take()]
        while self._peek() == ",":
            self._take()
            args.append(self._take())
        self._take(")")
        fn = name.lower()
        path = args[0]
        if fn == "attribute_exists":
            return lambda i, v, n: _name(path, n) in (i or {})
        if fn == "attribute_not_exists":
            return lambda i, v, n: _name(path, n) not in (i or {})
        if fn == "attribute_type" and len(args) == 2:
            return lambda i, v, n: (
                _name(path, n) in (i or {})
                and _value(args[1], v).get("S") in ((i or {})[_name(path, n)])
            )
        if fn == "begins_with" and len(args) == 2:
            return lambda i, v, n: str((i or {}).get(_name(path, n), {}).get("S", "")).startswith(
                str(_value(args[1], v).get("S"))
            )
        raise validation(f"expression {self.expression!r}: function {name} is not supported")


@lru_cache(maxsize=256)
def condition(expression: str) -> Condition:
    """The parsed condition (cached by its text).

    Raises:
        DynamoError: ``ValidationException`` for anything outside the supported grammar.
    """
    return _Parser(expression).parse()


_SET = re.compile(r"^\s*SET\s+(.*)$", re.IGNORECASE | re.DOTALL)
_REMOVE = re.compile(r"^\s*REMOVE\s+(.*)$", re.IGNORECASE | re.DOTALL)
#: ``if_not_exists(#n, :zero) + :one``: a counter (the shared pace budget's).
_COUNTER = re.compile(r"^if_not_exists\(\s*([#\w]+)\s*,\s*(:\w+)\s*\)\s*\+\s*(:\w+)$")
#: One update: (name token, None for REMOVE, or (value token,) or (name, default, addend)).
_Step = tuple[str, tuple[str, ...] | None]


def _set_step(expression: str, part: str) -> _Step:
    left, eq, right = part.partition("=")
    right = right.strip()
    if eq and left.strip() and right.startswith(":"):
        return left.strip(), (right,)
    if eq and left.strip() and (counter := _COUNTER.match(right)):
        return left.strip(), counter.groups()
    raise validation(
        f"update {expression!r}: only SET name = :value or "  # noqa: S608
        "name = if_not_exists(name, :v) + :w is supported"
    )


def _top_level_parts(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


@lru_cache(maxsize=256)
def _update_plan(expression: str) -> tuple[_Step, ...]:
    """The steps of ``SET``/``REMOVE`` updates (`_Step`)."""
    if match := _SET.match(expression):
        return tuple(_set_step(expression, p) for p in _top_level_parts(match.group(1)))
    if match := _REMOVE.match(expression):
        return tuple((part.strip(), None) for part in match.group(1).split(","))
    raise validation(f"update {expression!r}: only SET and REMOVE are supported")  # noqa: S608


def apply_update(
    item: Item, expression: str, values: Mapping[str, Any], names: Mapping[str, str]
) -> None:
    for name_token, value in _update_plan(expression):
        name = _name(name_token, names)
        if value is None:
            item.pop(name, None)
        elif len(value) == 1:
            item[name] = _value(value[0], values)
        else:
            current = item.get(_name(value[0], names)) or _value(value[1], values)
            total = Decimal(current["N"]) + Decimal(_value(value[2], values)["N"])
            item[name] = {"N": str(total)}


# --- tables ------------------------------------------------------------------------------------
@dataclass
class Index:
    """A global secondary index (hash and range key names), projection ``KEYS_ONLY``.

    Entries are kept per hash value as a sorted list of ``(range value, table key)``; deleted
    items are dropped lazily when a Query passes them (their entry no longer matches the item).
    """

    hash_key: str
    range_key: str
    entries: dict[Any, list[tuple[Decimal, Key]]] = field(default_factory=dict)

    def add(self, item: Mapping[str, Any], key: Key) -> None:
        h, r = _comparable(item.get(self.hash_key)), _comparable(item.get(self.range_key))
        if h is None or r is None or r[0] != "N":
            return  # sparse: an item without both keys is not in the index
        bisect.insort(self.entries.setdefault(h[1], []), (r[1], key))


@dataclass
class Table:
    name: str
    hash_key: str
    range_key: str | None = None
    stream: bool = False
    items: dict[Key, Item] = field(default_factory=dict)
    indexes: dict[str, Index] = field(default_factory=dict)

    def key_of(self, key_or_item: Mapping[str, Any]) -> Key:
        names = (self.hash_key,) + ((self.range_key,) if self.range_key else ())
        try:
            return tuple(_comparable(key_or_item[n]) for n in names)
        except KeyError as exc:
            raise validation(f"table {self.name}: key attribute {exc} missing") from None

    def key_item(self, item: Mapping[str, Any]) -> Item:
        names = (self.hash_key,) + ((self.range_key,) if self.range_key else ())
        return {n: dict(item[n]) for n in names}

    def put(self, item: Item) -> None:
        key = self.key_of(item)
        self.items[key] = item
        for index in self.indexes.values():
            index.add(item, key)


class Tables:
    """Every table of the endpoint under one lock (each operation is short)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tables: dict[str, Table] = {}
        self.removes: list[dict[str, Any]] = []
        self.clock: Callable[[], float] = __import__("time").time
        self._sequence = 10**20

    def reset(self) -> None:
        with self.lock:
            self.tables.clear()
            self.removes.clear()

    def create(
        self,
        name: str,
        hash_key: str,
        range_key: str | None = None,
        *,
        stream: bool = False,
        indexes: Mapping[str, tuple[str, str]] | None = None,
    ) -> Table:
        table = Table(name, hash_key, range_key, stream)
        for index_name, (h, r) in (indexes or {}).items():
            table.indexes[index_name] = Index(h, r)
        with self.lock:
            self.tables[name] = table
        return table

    def table(self, name: str) -> Table:
        try:
            return self.tables[name]
        except KeyError:
            raise DynamoError(
                "ResourceNotFoundException",
                f"Requested resource not found: Table: {name} not found",
            ) from None

    def seed(self, name: str, items: list[Item]) -> int:
        with self.lock:
            table = self.table(name)
            for item in items:
                table.put(item)
        return len(items)

    def take_removes(self) -> list[dict[str, Any]]:
        """The ``REMOVE`` records written since the last call (``GetRecords`` shape)."""
        with self.lock:
            out, self.removes = self.removes, []
        return out

    # --- operations ----------------------------------------------------------------------
    def dispatch(self, operation: str, doc: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one operation; raises :class:`DynamoError` for an error answer."""
        handler = getattr(self, f"_op_{operation}", None)
        if handler is None:
            raise DynamoError("UnknownOperationException", f"{operation} is not served")
        with self.lock:
            return dict(handler(doc))

    def _op_GetItem(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        table = self.table(doc["TableName"])
        item = table.items.get(table.key_of(doc["Key"]))
        return {"Item": item} if item is not None else {}

    def _op_BatchGetItem(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        requests = doc.get("RequestItems") or {}
        if sum(len(r.get("Keys") or ()) for r in requests.values()) > MAX_BATCH_GET_KEYS:
            raise validation("Too many items requested for the BatchGetItem call")
        responses: dict[str, list[Item]] = {}
        for name, request in requests.items():
            table = self.table(name)
            found = [table.items.get(table.key_of(k)) for k in request.get("Keys") or ()]
            responses[name] = [item for item in found if item is not None]
        return {"Responses": responses, "UnprocessedKeys": {}}

    def _op_PutItem(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        table = self.table(doc["TableName"])
        old = table.items.get(table.key_of(doc["Item"]))
        _check(doc, old, "ConditionalCheckFailedException")
        table.put(dict(doc["Item"]))
        return {}

    def _op_UpdateItem(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        table = self.table(doc["TableName"])
        key = table.key_of(doc["Key"])
        old = table.items.get(key)
        _check(doc, old, "ConditionalCheckFailedException")
        item = dict(old or table.key_item(doc["Key"]))
        apply_update(
            item,
            doc["UpdateExpression"],
            doc.get("ExpressionAttributeValues") or {},
            doc.get("ExpressionAttributeNames") or {},
        )
        table.put(item)
        return {}

    def _op_DeleteItem(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        table = self.table(doc["TableName"])
        key = table.key_of(doc["Key"])
        old = table.items.get(key)
        _check(doc, old, "ConditionalCheckFailedException")
        if old is not None:
            self._remove(table, key, old)
        return {"Attributes": old} if old is not None and doc.get("ReturnValues") else {}

    def _remove(self, table: Table, key: Key, old: Item) -> None:
        del table.items[key]
        if table.stream:
            self._sequence += 1
            self.removes.append(
                {
                    "eventID": f"{self._sequence:x}",
                    "eventName": "REMOVE",
                    "eventVersion": "1.1",
                    "eventSource": "aws:dynamodb",
                    "awsRegion": "us-east-1",
                    "dynamodb": {
                        "ApproximateCreationDateTime": self.clock(),
                        "Keys": table.key_item(old),
                        "OldImage": old,
                        "SequenceNumber": str(self._sequence),
                        "SizeBytes": 512,
                        "StreamViewType": "NEW_AND_OLD_IMAGES",
                    },
                }
            )

    def _op_Query(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        table = self.table(doc["TableName"])
        index = table.indexes.get(doc.get("IndexName") or "")
        if index is None:
            raise validation(f"Query: only global secondary indexes are served, not {doc}")
        names, values = (
            doc.get("ExpressionAttributeNames") or {},
            doc.get("ExpressionAttributeValues") or {},
        )
        hash_value, upper = _key_condition(doc["KeyConditionExpression"], index, names, values)
        entries = index.entries.get(hash_value, [])
        start = 0
        if doc.get("ExclusiveStartKey"):
            after = doc["ExclusiveStartKey"]
            start = bisect.bisect_right(
                entries,
                (_comparable(after[index.range_key])[1], table.key_of(after)),  # type: ignore[index]
            )
        limit = int(doc.get("Limit") or 10**9)
        out: list[Item] = []
        last: tuple[Decimal, Key] | None = None
        i = start
        while i < len(entries) and len(out) < limit:
            range_value, key = entries[i]
            if range_value > upper:
                break
            item = table.items.get(key)
            i += 1
            if item is None or _comparable(item.get(index.range_key)) != ("N", range_value):
                continue  # deleted or changed since it was indexed
            out.append(
                {
                    **table.key_item(item),
                    index.hash_key: item[index.hash_key],
                    index.range_key: item[index.range_key],
                }
            )
            last = (range_value, key)
        answer: dict[str, Any] = {"Items": out, "Count": len(out), "ScannedCount": len(out)}
        if last is not None and len(out) == limit:
            answer["LastEvaluatedKey"] = out[-1]  # as DynamoDB: whenever the Limit stopped it
        if (i - start) - len(out) > 1024:  # many deleted items passed: drop their entries
            self._compact(table, index)
        return answer

    @staticmethod
    def _compact(table: Table, index: Index) -> None:
        """Drop the index entries of deleted items (they pile up under a storm of deletes)."""
        for hash_value, entries in index.entries.items():
            index.entries[hash_value] = [
                (r, key)
                for r, key in entries
                if key in table.items
                and _comparable(table.items[key].get(index.range_key)) == ("N", r)
            ]

    def _op_TransactWriteItems(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        actions = doc.get("TransactItems") or []
        if not 1 <= len(actions) <= MAX_TRANSACT_ITEMS:
            raise validation(f"TransactItems: {len(actions)} actions, expected 1..100")
        plans = [_action(a) for a in actions]
        keys = [
            (
                kind,
                body["TableName"],
                self.table(body["TableName"]).key_of(body.get("Key") or body.get("Item") or {}),
            )
            for kind, body in plans
        ]
        if len(set((t, k) for _, t, k in keys)) != len(keys):
            raise validation("Transaction request cannot include multiple operations on one item")
        reasons, failed = [], False
        for (_kind, body), (_, name, key) in zip(plans, keys, strict=True):
            old = self.table(name).items.get(key)
            if _passes(body, old):
                reasons.append({"Code": "None"})
                continue
            failed = True
            reason: dict[str, Any] = {
                "Code": "ConditionalCheckFailed",
                "Message": "The conditional request failed",
            }
            if old is not None and body.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
                reason["Item"] = old
            reasons.append(reason)
        if failed:
            codes = ", ".join(r["Code"] for r in reasons)
            raise DynamoError(
                "TransactionCanceledException",
                f"Transaction cancelled, please refer cancellation reasons for specific reasons "
                f"[{codes}]",
                CancellationReasons=reasons,
            )
        for (kind, body), (_, name, key) in zip(plans, keys, strict=True):
            self._apply(kind, body, self.table(name), key)
        return {}

    def _apply(self, kind: str, body: Mapping[str, Any], table: Table, key: Key) -> None:
        if kind == "Put":
            table.put(dict(body["Item"]))
        elif kind == "Delete":
            old = table.items.get(key)
            if old is not None:
                self._remove(table, key, old)
        elif kind == "Update":
            item = dict(table.items.get(key) or table.key_item(body["Key"]))
            apply_update(
                item,
                body["UpdateExpression"],
                body.get("ExpressionAttributeValues") or {},
                body.get("ExpressionAttributeNames") or {},
            )
            table.put(item)


def _action(action: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    if len(action) != 1:
        raise validation(f"TransactItems entry {action}: exactly one action expected")
    kind, body = next(iter(action.items()))
    if kind not in ("Put", "Delete", "Update", "ConditionCheck"):
        raise validation(f"TransactItems: {kind} is not an action")
    return kind, body


def _passes(body: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    expression = body.get("ConditionExpression")
    if not expression:
        return True
    return condition(expression)(
        old, body.get("ExpressionAttributeValues") or {}, body.get("ExpressionAttributeNames") or {}
    )


def _check(doc: Mapping[str, Any], old: Mapping[str, Any] | None, code: str) -> None:
    """Refuse a write whose condition fails; with ``ReturnValuesOnConditionCheckFailure`` of
    ``ALL_OLD`` the refusal carries the item it saw, as DynamoDB's does."""
    if not _passes(doc, old):
        extra = {}
        if doc.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and old is not None:
            extra["Item"] = dict(old)
        raise DynamoError(code, "The conditional request failed", **extra)


_KEY_CONDITION = re.compile(
    r"^\s*([#:]?\w+)\s*=\s*(:\w+)\s+AND\s+([#:]?\w+)\s*<=\s*(:\w+)\s*$", re.IGNORECASE
)


def _key_condition(
    expression: str, index: Index, names: Mapping[str, str], values: Mapping[str, Any]
) -> tuple[Any, Decimal]:
    """``(hash value, upper bound of the range key)`` of ``h = :v AND r <= :w``."""
    match = _KEY_CONDITION.match(expression)
    if match is None:
        raise validation(f"KeyConditionExpression {expression!r}: only 'h = :v AND r <= :w'")
    h, hv, r, rv = match.groups()
    if _name(h, names) != index.hash_key or _name(r, names) != index.range_key:
        raise validation(f"KeyConditionExpression {expression!r}: not this index's keys")
    hash_value = _comparable(_value(hv, values))
    upper = _comparable(_value(rv, values))
    if hash_value is None or upper is None or upper[0] != "N":
        raise validation(f"KeyConditionExpression {expression!r}: bad values")
    return hash_value[1], upper[1]
