"""The claim registrar (session_expiry_runtime.registrar): the one writer of ownership records
besides the cleanup, and ``SessionStore`` going through it (issue 35, route 2).

Real boto3 calls against moto. The registrar runs in-process (its ``handle``, through a JSON
round trip like Lambda's ``Invoke``) with a DynamoDB client of its own, so each test can show
which client wrote what: the application's client never writes the ownership table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import boto3
import pytest
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.ownership import owner_token
from session_expiry_runtime.registrar import UNDO_WINDOW_SECONDS, Registrar
from session_expiry_runtime.store import ResourceOwnedError, SessionGoneError, SessionStore

from ._support import (
    OWNERSHIP_TABLE,
    TABLE,
    FakeClock,
    claim_of,
    create_ownership_table,
    create_table,
)

HOUR = timedelta(hours=1)
SORT = "sessionId"
A, B = "tenant-a", "tenant-b"


def calls_of(client: Any) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    client.meta.events.register(
        "provide-client-params.dynamodb.*",
        lambda params, model, **_: calls.append((model.name, dict(params))),
    )
    return calls


def ownership_writes(calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The calls that touched the ownership table."""
    out = []
    for name, params in calls:
        if params.get("TableName") == OWNERSHIP_TABLE:
            out.append(name)
        for action in params.get("TransactItems") or []:
            if next(iter(action.values())).get("TableName") == OWNERSHIP_TABLE:
                out.append(f"{name}/{next(iter(action))}")
    return out


class Deployment:
    """A session table keyed by tenant (partition) and session id, its ownership table, the
    registrar, and a store per tenant that reaches the ownership table only through it."""

    def __init__(self, ddb: Any, clock: FakeClock, connections: Any) -> None:
        create_table(ddb, partition_key="tenant", sort_key=SORT)
        create_ownership_table(ddb)
        self.config = RuntimeConfig(
            table_name=TABLE,
            partition_key="tenant",
            sort_key=SORT,
            ownership_table_name=OWNERSHIP_TABLE,
            custom_kinds='{"DeleteSessionSecret": "secretArns"}',
        )
        self.clock, self.connections = clock, connections
        self.registrar_ddb = boto3.client("dynamodb", region_name="us-east-1")
        self.metrics: list[dict[str, Any]] = []
        self.registrar = Registrar(
            self.config,
            self.registrar_ddb,
            clock=lambda: clock().timestamp(),
            sleep=lambda _: None,
            emit=self.metrics.append,
        )
        self.requests: list[dict[str, Any]] = []

    def invoke(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        wire = json.loads(json.dumps(request))  # what Lambda's Invoke carries
        self.requests.append(wire)
        return json.loads(json.dumps(self.registrar.handle(wire)))

    def store(self) -> tuple[SessionStore, list[tuple[str, dict[str, Any]]]]:
        app_ddb = boto3.client("dynamodb", region_name="us-east-1")
        calls = calls_of(app_ddb)
        store = SessionStore(
            config=self.config,
            dynamodb_client=app_ddb,
            connections_client=self.connections,
            clock=self.clock,
            sleep=lambda _: None,
            claim_registrar=self.invoke,
        )
        return store, calls


@pytest.fixture
def deployment(ddb: Any, clock: FakeClock, connections: Any) -> Deployment:
    return Deployment(ddb, clock, connections)


def key(tenant: str, session_id: str) -> dict[str, str]:
    return {"tenant": tenant, SORT: session_id}


def test_create_claims_through_the_registrar_and_the_application_never_writes_claims(
    deployment: Deployment,
) -> None:
    store, calls = deployment.store()

    session = store.create("s-1", partition=A, ttl=HOUR, connection_id="c-1")

    claim = claim_of(deployment.registrar_ddb, "connection#c-1")
    assert claim is not None
    assert claim["owner"] == {"S": owner_token(key(A, "s-1"))}
    assert claim["incarnation"] == {"S": session.incarnation}
    # notAfter comes from the item the registrar read, not from the request.
    assert claim["notAfter"] == {"N": str(session.not_after)}
    assert ownership_writes(calls) == []
    assert [r["op"] for r in deployment.requests] == ["claim"]


def test_a_store_on_a_clock_of_its_own_still_claims(deployment: Deployment) -> None:
    # A test's store "two hours behind" creates sessions expired at the real time: the
    # registrar asks whether the item is that incarnation, not whether it is live.
    behind = SessionStore(
        config=deployment.config,
        dynamodb_client=boto3.client("dynamodb", region_name="us-east-1"),
        clock=lambda: deployment.clock() - 2 * HOUR,
        sleep=lambda _: None,
        claim_registrar=deployment.invoke,
    )
    behind.create("s-past", partition=A, ttl=HOUR, connection_id="c-past")
    assert claim_of(deployment.registrar_ddb, "connection#c-past") is not None


def test_a_tenant_cannot_rewrite_release_or_undo_another_tenants_claim(
    deployment: Deployment,
) -> None:
    """Route 2: A knows B's connection id, key and incarnation (claims are readable to an
    operator; assume the worst). Every way A may ask the registrar leaves B's claim as it was,
    and a request for a session that is not the key's live incarnation is counted."""
    store_b, _ = deployment.store()
    b = store_b.create("s-b", partition=B, ttl=HOUR, connection_id="b-conn")
    store_a, calls_a = deployment.store()
    store_a.create("s-a", partition=A, ttl=HOUR)
    before = claim_of(deployment.registrar_ddb, "connection#b-conn")

    with pytest.raises(ResourceOwnedError) as refused:
        store_a.attach_connection("s-a", "b-conn", partition=A, close_previous=False)
    asks = [
        # release B's claim while B's item still names the id: kept
        {"op": "release", "key": key(B, "s-b"), "incarnation": b.incarnation},
        # undo B's claim while B is live with it: kept
        {"op": "undo", "key": key(B, "s-b"), "incarnation": b.incarnation},
        # claim it for B's key under a made-up incarnation: B's key is live as another one
        {"op": "claim", "key": key(B, "s-b"), "incarnation": "0" * 32},
    ]
    answers = [deployment.invoke({**ask, "resources": [["connection", "b-conn"]]}) for ask in asks]

    assert claim_of(deployment.registrar_ddb, "connection#b-conn") == before
    # Without B's claim token (only a reader of B's item has it) every one is refused.
    assert [(a["ok"], a["error"]) for a in answers] == [
        (False, "WrongClaimToken"),
        (False, "WrongClaimToken"),
        (False, "SessionNotLive"),
    ]
    assert [m["ClaimRequestsRefused"] for m in deployment.metrics] == [1, 1, 1]
    # A learns nothing of B's key from the refusal (another partition).
    assert refused.value.owner_key is None and "tenant-b" not in str(refused.value)
    assert ownership_writes(calls_a) == []


def test_a_refused_create_deletes_the_item_it_wrote(deployment: Deployment) -> None:
    store_b, _ = deployment.store()
    store_b.create("s-b", partition=B, ttl=HOUR, connection_id="b-conn")
    store_a, _ = deployment.store()

    with pytest.raises(ResourceOwnedError):
        store_a.create("s-a", partition=A, ttl=HOUR, connection_id="b-conn")

    assert store_a.get("s-a", partition=A, consistent=True) is None


def test_attach_closes_and_releases_earlier_connections_through_the_registrar(
    deployment: Deployment,
) -> None:
    store, calls = deployment.store()
    store.create("s-1", partition=A, ttl=HOUR, connection_id="c-1")

    after = store.attach_connection("s-1", "c-2", partition=A)

    assert after.connection_ids == frozenset({"c-2"})
    first = claim_of(deployment.registrar_ddb, "connection#c-1")
    assert first is not None and first["state"] == {"S": "released"}
    assert [r["op"] for r in deployment.requests] == ["claim", "claim", "owned", "release"]
    assert ownership_writes(calls) == []


def test_fails_a_claim_for_an_incarnation_that_is_not_the_keys(deployment: Deployment) -> None:
    store, _ = deployment.store()
    session = store.create("s-1", partition=A, ttl=HOUR)
    store.end("s-1", partition=A)  # the key holds no item any more

    answers = [
        deployment.invoke(
            {
                "op": "claim",
                "key": key(A, sid),
                "incarnation": incarnation,
                "resources": [["connection", "c-9"]],
            }
        )
        for sid, incarnation in (("s-1", session.incarnation), ("s-never", "0" * 32))
    ]

    assert [(a["ok"], a["error"]) for a in answers] == [(False, "SessionNotLive")] * 2
    assert claim_of(deployment.registrar_ddb, "connection#c-9") is None
    with pytest.raises(SessionGoneError):
        store.attach_connection("s-1", "c-9", partition=A, close_previous=False)


def test_a_refused_create_leaves_no_item_naming_the_ids(
    deployment: Deployment, make_stream: Any
) -> None:
    # The item is written first (the registrar's proof); refused, its ids are taken off before
    # it is deleted, so its REMOVE names nothing unclaimed (no refusal, no alarm).
    store_b, _ = deployment.store()
    store_b.create("s-b", partition=B, ttl=HOUR, connection_id="b-conn")
    store_a, _ = deployment.store()
    make_stream()  # read what came before

    with pytest.raises(ResourceOwnedError):
        store_a.create("s-a", partition=A, ttl=HOUR, connection_id="b-conn")

    removes = [r for r in make_stream() if r["eventName"] == "REMOVE"]
    assert removes and all("connectionId" not in r["dynamodb"]["OldImage"] for r in removes)


def test_undo_only_takes_back_a_young_claim_of_a_write_that_did_not_happen(
    deployment: Deployment,
) -> None:
    store, _ = deployment.store()
    session = store.create("s-1", partition=A, ttl=HOUR)
    incarnation = session.incarnation
    claim = {
        "key": key(A, "s-1"),
        "incarnation": incarnation,
        "token": session.claim_token,
        "resources": [["connection", "c-x"]],
    }
    assert deployment.invoke({"op": "claim", **claim})["ok"] is True  # the item never names it

    deployment.clock.advance(UNDO_WINDOW_SECONDS + 1)
    assert deployment.invoke({"op": "undo", **claim}) == {"ok": True, "undone": []}
    assert claim_of(deployment.registrar_ddb, "connection#c-x") is not None


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ("not an object", "event"),
        ({"op": "rewrite"}, "op"),
        ({"op": "claim", "key": {"tenant": "a"}}, "key"),
        ({"op": "claim", "key": key(A, "s"), "incarnation": ""}, "incarnation"),
        ({"op": "claim", "key": key(A, "s"), "incarnation": "i", "resources": []}, "resources"),
        (
            {"op": "claim", "key": key(A, "s"), "incarnation": "i", "resources": [["x", "1"]]},
            "resource",
        ),
    ],
)
def test_fails_a_request_that_is_not_one(deployment: Deployment, event: object, field: str) -> None:
    answer = deployment.registrar.handle(event)
    assert answer["ok"] is False and answer["error"] == "BadRequest"
    assert answer["message"].startswith(field)


def test_attach_resource_records_and_claims_a_custom_kind_through_the_registrar(
    deployment: Deployment,
) -> None:
    """Issue 35, route 5: a custom step's own resource is recorded like a connection."""
    store_b, _ = deployment.store()
    b = store_b.create("s-b", partition=B, ttl=HOUR)
    after = store_b.attach_resource("s-b", "DeleteSessionSecret", "arn:secret:b", partition=B)
    store_a, calls_a = deployment.store()
    store_a.create("s-a", partition=A, ttl=HOUR)

    with pytest.raises(ResourceOwnedError):
        store_a.attach_resource("s-a", "DeleteSessionSecret", "arn:secret:b", partition=A)

    assert after.attributes["secretArns"] == {"arn:secret:b"}
    claim = claim_of(deployment.registrar_ddb, "custom:DeleteSessionSecret#arn:secret:b")
    assert claim is not None and claim["incarnation"] == {"S": b.incarnation}
    assert claim["owner"] == {"S": owner_token(key(B, "s-b"))}
    a = store_a.get("s-a", partition=A, consistent=True)
    assert a is not None and "secretArns" not in a.attributes
    assert ownership_writes(calls_a) == []


@pytest.mark.parametrize("kind", ["DeleteOtherThing", "custom:Nope"])
def test_fails_attach_resource_of_a_kind_no_step_declares(
    deployment: Deployment, kind: str
) -> None:
    store, _ = deployment.store()
    store.create("s-1", partition=A, ttl=HOUR)
    with pytest.raises(ValueError, match="expected the name of a custom step"):
        store.attach_resource("s-1", kind, "x", partition=A)


class MidAttach:
    """A registrar transport that lets tenant A ask right after B's ``claim`` of ``target``
    was answered, before B's item names it: the window of every attach."""

    def __init__(self, deployment: Deployment, target: str, attack: dict[str, Any]) -> None:
        self.deployment, self.target, self.attack = deployment, target, attack
        self.answers: list[Mapping[str, Any]] = []

    def __call__(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        answer = self.deployment.invoke(request)
        if request["op"] == "claim" and ["connection", self.target] in request["resources"]:
            self.answers.append(self.deployment.invoke(self.attack))
        return answer


@pytest.mark.parametrize("op", ["undo", "release"])
def test_route_registrar_mid_attach_a_tenant_knowing_the_incarnation_cannot_free_a_claim(
    deployment: Deployment, op: str
) -> None:
    """Issue 35, registrar route (found attacking it): the registrar cannot tell who invokes it,
    so a request naming B's key and incarnation was B's. The incarnation is no secret (it is
    the last segment of B's scratch prefix, part of its grant's name, a column of the
    archive): between B's claim of a new connection and B's update naming it, A asked the
    registrar to ``undo`` (deleted) or ``release`` it; A then claimed B's live connection for
    its own session, and its end would have the cleanup close it. Now every request must
    show the session's claim token, which only a reader of B's item has."""
    store_b, _ = deployment.store()
    b = store_b.create("s-b", partition=B, ttl=HOUR)
    attack = {
        "op": op,
        "key": key(B, "s-b"),
        "incarnation": b.incarnation,
        "resources": [["connection", "b-live"]],
    }
    mid = MidAttach(deployment, "b-live", attack)
    store_b_racing = SessionStore(
        config=deployment.config,
        dynamodb_client=boto3.client("dynamodb", region_name="us-east-1"),
        connections_client=deployment.connections,
        clock=deployment.clock,
        sleep=lambda _: None,
        claim_registrar=mid,
    )
    store_a, _ = deployment.store()
    store_a.create("s-a", partition=A, ttl=HOUR)

    store_b_racing.attach_connection("s-b", "b-live", partition=B, close_previous=False)

    claim = claim_of(deployment.registrar_ddb, "connection#b-live")
    assert claim is not None and claim["state"] == {"S": "held"}
    assert claim["owner"] == {"S": owner_token(key(B, "s-b"))}
    assert [a["ok"] for a in mid.answers] == [False]
    assert deployment.metrics and deployment.metrics[-1]["ClaimRequestsRefused"] == 1
    with pytest.raises(ResourceOwnedError):
        store_a.attach_connection("s-a", "b-live", partition=A, close_previous=False)


def test_route_registrar_undo_after_the_end_takes_the_claim_token_not_the_incarnation(
    deployment: Deployment,
) -> None:
    """The undo of a claim whose session is gone (its item no longer there to show the token
    against): the claim's hash of the token decides, so knowing the incarnation is not enough."""
    store, _ = deployment.store()
    session = store.create("s-1", partition=B, ttl=HOUR)
    ask = {"key": key(B, "s-1"), "incarnation": session.incarnation}
    resources = {"resources": [["connection", "c-young"]]}
    claimed = deployment.invoke({"op": "claim", **ask, **resources, "token": session.claim_token})
    assert claimed["ok"] is True
    store.end("s-1", partition=B)

    forged = deployment.invoke({"op": "undo", **ask, **resources, "token": "f" * 32})
    assert forged == {"ok": True, "undone": []}
    assert claim_of(deployment.registrar_ddb, "connection#c-young") is not None
    own = deployment.invoke({"op": "undo", **ask, **resources, "token": session.claim_token})
    assert own == {"ok": True, "undone": [["connection", "c-young"]]}
