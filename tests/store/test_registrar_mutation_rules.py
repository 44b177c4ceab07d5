"""The claim registrar's refusals and writes, each pinned by the value that matters (issue 40:
mutation testing of ``registrar.py``, the trusted writer of ownership records).

Every request goes to `Registrar.handle` through a JSON round trip, as Lambda's ``Invoke``
carries it, against moto's DynamoDB. Each test is named after the rule it keeps: a refusal's
code, text and count; what each operation reads from the table rather than from the request;
what it writes, and only that.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import boto3
import pytest
from session_expiry_runtime.core.config import (
    DEFAULT_METRICS_NAMESPACE,
    ENV_METRICS_NAMESPACE,
    RuntimeConfig,
)
from session_expiry_runtime.core.metrics import gauge_document
from session_expiry_runtime.core.ownership import KINDS
from session_expiry_runtime.registrar import MAX_RESOURCES, UNDO_WINDOW_SECONDS, Registrar
from session_expiry_runtime.store_parts.session import Session

from ._support import OWNERSHIP_TABLE, TABLE, FakeClock, claim_of, create_table
from .test_claim_registrar import HOUR, SORT, Deployment, key

A, B = "tenant-a", "tenant-b"
CONNECTION = "connection"


@pytest.fixture
def deployment(
    ddb: Any, clock: FakeClock, connections: Any, monkeypatch: pytest.MonkeyPatch
) -> Deployment:
    monkeypatch.delenv(ENV_METRICS_NAMESPACE, raising=False)
    return Deployment(ddb, clock, connections)


def create(deployment: Deployment, tenant: str, sid: str, **ids: Any) -> Session:
    store, _ = deployment.store()
    return store.create(sid, partition=tenant, ttl=HOUR, **ids)


def ask(
    deployment: Deployment,
    op: str,
    session: Session,
    tenant: str,
    sid: str,
    resources: list[list[str]],
    **extra: Any,
) -> Any:
    request = {
        "op": op,
        "key": key(tenant, sid),
        "incarnation": session.incarnation,
        "token": session.claim_token,
        "resources": resources,
        **extra,
    }
    return deployment.invoke(request)


def set_item(deployment: Deployment, tenant: str, sid: str, expression: str, **values: Any) -> None:
    """Change the session item as a writer of its partition could (low-level values)."""
    deployment.registrar_ddb.update_item(
        TableName=TABLE,
        Key={"tenant": {"S": tenant}, SORT: {"S": sid}},
        UpdateExpression=expression,
        **({"ExpressionAttributeValues": values} if values else {}),
    )


def refused_metric(deployment: Deployment) -> dict[str, Any]:
    return gauge_document(
        DEFAULT_METRICS_NAMESPACE,
        "ClaimRequestsRefused",
        1,
        unit="Count",
        dimensions={},
        timestamp_ms=int(deployment.clock().timestamp() * 1000),
    )


def state_of(deployment: Deployment, resource_id: str, kind: str = CONNECTION) -> str | None:
    claim = claim_of(deployment.registrar_ddb, f"{kind}#{resource_id}")
    return None if claim is None else str(claim["state"]["S"])


# --- WrongClaimToken ----------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["claim", "release", "undo", "owned"])
@pytest.mark.parametrize("token", [None, "f" * 32], ids=["no-token", "another-token"])
def test_rule_registrar_refuses_a_live_incarnation_without_its_claim_token(
    deployment: Deployment, op: str, token: str | None
) -> None:
    session = create(deployment, A, "s-1")
    ask(deployment, "claim", session, A, "s-1", [[CONNECTION, "c-1"]])  # not on the item
    before = claim_of(deployment.registrar_ddb, "connection#c-1")
    request = {
        "op": op,
        "key": key(A, "s-1"),
        "incarnation": session.incarnation,
        "resources": [[CONNECTION, "c-1"]],
        **({"token": token} if token else {}),
    }

    answer = deployment.invoke(request)

    assert answer == {
        "ok": False,
        "error": "WrongClaimToken",
        "message": f"key {key(A, 's-1')!r} incarnation {session.incarnation!r}: the request "
        f"shows not the session's claim token; nothing was written ({op})",
    }
    assert deployment.metrics == [refused_metric(deployment)]
    assert claim_of(deployment.registrar_ddb, "connection#c-1") == before


def test_rule_registrar_refusal_counts_under_the_configured_namespace(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_METRICS_NAMESPACE, "Tenant/Sessions")
    session = create(deployment, A, "s-1")
    deployment.invoke(
        {"op": "claim", "key": key(A, "s-1"), "incarnation": session.incarnation}
        | {"resources": [[CONNECTION, "c-1"]], "token": "f" * 32}
    )
    doc = deployment.metrics[0]
    assert doc["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Tenant/Sessions"


def test_rule_registrar_an_item_without_a_claim_token_is_spoken_for_by_its_incarnation(
    deployment: Deployment,
) -> None:
    """An item written before claim tokens existed holds none: its incarnation is all it
    shows, whatever token the request carries."""
    session = create(deployment, A, "s-1")
    set_item(deployment, A, "s-1", "REMOVE claimToken")

    bare = {"op": "claim", "key": key(A, "s-1"), "incarnation": session.incarnation}
    first = deployment.invoke({**bare, "resources": [[CONNECTION, "c-1"]]})
    second = deployment.invoke({**bare, "resources": [[CONNECTION, "c-2"]], "token": "f" * 32})

    assert (first["ok"], second["ok"]) == (True, True)
    assert state_of(deployment, "c-1") == state_of(deployment, "c-2") == "held"
    assert deployment.metrics == []


# --- SessionNotLive -----------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["claim", "release"])
@pytest.mark.parametrize("item", ["another-incarnation", "gone"])
def test_rule_registrar_refuses_claim_and_release_for_an_incarnation_not_the_keys(
    deployment: Deployment, op: str, item: str
) -> None:
    old = create(deployment, A, "s-1")
    ask(deployment, "claim", old, A, "s-1", [[CONNECTION, "c-1"]])
    store, _ = deployment.store()
    store.end("s-1", partition=A)
    if item == "another-incarnation":
        create(deployment, A, "s-1")

    answer = ask(deployment, op, old, A, "s-1", [[CONNECTION, "c-1"]])

    assert answer == {
        "ok": False,
        "error": "SessionNotLive",
        "message": f"key {key(A, 's-1')!r} incarnation {old.incarnation!r}: the request is "
        f"not the key's live session; nothing was written ({op})",
    }
    assert deployment.metrics == [refused_metric(deployment)]
    assert state_of(deployment, "c-1") == "held"


def test_rule_registrar_owned_of_an_incarnation_not_the_keys_is_none_and_not_refused(
    deployment: Deployment,
) -> None:
    old = create(deployment, A, "s-1")
    ask(deployment, "claim", old, A, "s-1", [[CONNECTION, "c-1"]])
    store, _ = deployment.store()
    store.end("s-1", partition=A)

    assert ask(deployment, "owned", old, A, "s-1", [[CONNECTION, "c-1"]]) == {
        "ok": True,
        "owned": [],
    }
    assert deployment.metrics == []


# --- owned --------------------------------------------------------------------------------------
def test_rule_registrar_owned_lists_only_this_incarnations_held_claims(
    deployment: Deployment,
) -> None:
    a = create(deployment, A, "s-1")
    other = create(deployment, A, "s-2", connection_id="c-other")
    ask(deployment, "claim", a, A, "s-1", [[CONNECTION, "c-held"], [CONNECTION, "c-gone"]])
    ask(deployment, "release", a, A, "s-1", [[CONNECTION, "c-gone"]])  # the item never named it
    assert other.incarnation != a.incarnation

    answer = ask(
        deployment,
        "owned",
        a,
        A,
        "s-1",
        [[CONNECTION, c] for c in ("c-gone", "c-other", "c-held", "c-never")],
    )

    assert answer == {"ok": True, "owned": [[CONNECTION, "c-held"]]}
    assert state_of(deployment, "c-gone") == "released"


# --- claim --------------------------------------------------------------------------------------
def test_rule_registrar_claim_takes_not_after_from_the_item_and_answers_its_claims(
    deployment: Deployment,
) -> None:
    session = create(deployment, A, "s-1")
    deployment.clock.advance(7.5)
    now = Decimal(str(deployment.clock().timestamp()))

    answer = ask(deployment, "claim", session, A, "s-1", [[CONNECTION, "c-1"], ["grant", "g-1"]])

    assert answer == {
        "ok": True,
        "claimed": [
            {"kind": CONNECTION, "id": "c-1", "claimedAt": str(now)},
            {"kind": "grant", "id": "g-1", "claimedAt": str(now)},
        ],
    }
    claim = claim_of(deployment.registrar_ddb, "connection#c-1")
    assert claim is not None
    assert claim["notAfter"] == {"N": str(session.not_after)}
    assert claim["incarnation"] == {"S": session.incarnation}


def test_rule_registrar_claim_for_an_item_without_not_after_ends_a_lifetime_from_now(
    deployment: Deployment,
) -> None:
    session = create(deployment, A, "s-1")
    set_item(deployment, A, "s-1", "REMOVE notAfter")
    deployment.clock.advance(30)

    assert ask(deployment, "claim", session, A, "s-1", [[CONNECTION, "c-1"]])["ok"] is True

    claim = claim_of(deployment.registrar_ddb, "connection#c-1")
    expected = int(deployment.clock().timestamp()) + RuntimeConfig().max_session_lifetime_seconds
    assert claim is not None and claim["notAfter"] == {"N": str(expected)}


def test_rule_registrar_claim_is_all_or_none_and_hides_another_partitions_owner(
    deployment: Deployment,
) -> None:
    create(deployment, B, "s-b", connection_id="b-conn")
    a = create(deployment, A, "s-a")

    answer = ask(
        deployment,
        "claim",
        a,
        A,
        "s-a",
        [[CONNECTION, "c-free"], [CONNECTION, "c-free-2"], [CONNECTION, "b-conn"]],
    )

    assert answer == {
        "ok": False,
        "error": "ResourceOwned",
        "message": "connection 'b-conn' is owned by another session; session 's-a' "
        f"(incarnation {a.incarnation!r}) cannot record it and nothing was written",
        "kind": CONNECTION,
        "id": "b-conn",
        "releasing": False,
        "ownerKey": None,
        "ownerIncarnation": None,
    }
    assert state_of(deployment, "c-free") is None and state_of(deployment, "c-free-2") is None


def test_rule_registrar_claim_refused_within_a_partition_names_the_owner(
    deployment: Deployment,
) -> None:
    owner = create(deployment, A, "s-owner", connection_id="c-1")
    a = create(deployment, A, "s-a")

    answer = ask(deployment, "claim", a, A, "s-a", [[CONNECTION, "c-1"]])

    assert answer["error"] == "ResourceOwned"
    assert answer["ownerKey"] == key(A, "s-owner")
    assert answer["ownerIncarnation"] == owner.incarnation
    assert "s-owner" in answer["message"] and "c-1" in answer["message"]
    assert answer["releasing"] is False


def test_rule_registrar_grant_claim_is_fresh_only_even_for_an_earlier_incarnation(
    deployment: Deployment,
) -> None:
    """``grant`` true claims a new KMS grant: an id an earlier incarnation of the same key
    still holds is refused (a plain claim may take over a predecessor's id; a grant may not)."""
    old = create(deployment, A, "s-1")
    ask(deployment, "claim", old, A, "s-1", [["grant", "g-1"]], grant=True)
    store, _ = deployment.store()
    store.end("s-1", partition=A)
    new = create(deployment, A, "s-1")

    answer = ask(deployment, "claim", new, A, "s-1", [["grant", "g-1"]], grant=True)

    assert answer["ok"] is False and answer["error"] == "ResourceOwned"
    assert answer["ownerIncarnation"] == old.incarnation
    claim = claim_of(deployment.registrar_ddb, "grant#g-1")
    assert claim is not None and claim["incarnation"] == {"S": old.incarnation}


def test_rule_registrar_grant_claim_is_granted_only_for_grant_true(
    deployment: Deployment,
) -> None:
    """``"grant": "true"`` (a string) is no grant claim: the id is claimed as any other, so an
    earlier incarnation's claim being released does not refuse it the way a grant's would."""
    session = create(deployment, A, "s-1")
    calls: list[str] = []
    deployment.registrar_ddb.meta.events.register(
        "provide-client-params.dynamodb.*", lambda model, **_: calls.append(model.name)
    )
    ask(deployment, "claim", session, A, "s-1", [["grant", "g-1"]], grant="true")
    ask(deployment, "claim", session, A, "s-1", [["grant", "g-2"]], grant=True)
    # A grant claim is one TransactWriteItems; any other claim is not.
    assert calls.count("TransactWriteItems") == 1
    assert state_of(deployment, "g-1", "grant") == state_of(deployment, "g-2", "grant") == "held"


def test_rule_registrar_grant_claim_lets_the_same_incarnation_ask_again(
    deployment: Deployment,
) -> None:
    session = create(deployment, A, "s-1")
    ask(deployment, "claim", session, A, "s-1", [["grant", "g-1"]], grant=True)
    again = ask(deployment, "claim", session, A, "s-1", [["grant", "g-1"]], grant=True)
    # The same incarnation asking again holds it already: the condition lets it through.
    assert again["ok"] is True


# --- release ------------------------------------------------------------------------------------
def test_rule_registrar_release_frees_only_ids_the_item_no_longer_names(
    deployment: Deployment,
) -> None:
    session = create(deployment, A, "s-1", connection_id="c-named")
    ids = [[CONNECTION, "c-dropped"], ["grant", "g-named"], ["grant", "g-dropped"]]
    ids += [["custom:DeleteSessionSecret", "arn:one"], ["custom:DeleteSessionSecret", "arn:two"]]
    assert ask(deployment, "claim", session, A, "s-1", ids)["ok"] is True
    set_item(
        deployment,
        A,
        "s-1",
        "SET grantId = :g, secretArns = :s",
        **{":g": {"S": "g-named"}, ":s": {"SS": ["arn:one"]}},
    )

    answer = ask(deployment, "release", session, A, "s-1", [[CONNECTION, "c-named"], *ids])

    assert answer == {
        "ok": True,
        "released": [
            [CONNECTION, "c-dropped"],
            ["grant", "g-dropped"],
            ["custom:DeleteSessionSecret", "arn:two"],
        ],
        "kept": [
            [CONNECTION, "c-named"],
            ["grant", "g-named"],
            ["custom:DeleteSessionSecret", "arn:one"],
        ],
    }
    assert state_of(deployment, "c-named") == "held"
    assert state_of(deployment, "c-dropped") == "released"
    assert state_of(deployment, "g-named", "grant") == "held"
    assert state_of(deployment, "g-dropped", "grant") == "released"
    assert state_of(deployment, "arn:one", "custom:DeleteSessionSecret") == "held"
    assert state_of(deployment, "arn:two", "custom:DeleteSessionSecret") == "released"


def test_rule_registrar_release_reads_a_custom_kind_named_by_a_single_string(
    deployment: Deployment,
) -> None:
    session = create(deployment, A, "s-1")
    ids = [["custom:DeleteSessionSecret", "arn:one"], [CONNECTION, "c-set"]]
    ask(deployment, "claim", session, A, "s-1", ids)
    set_item(
        deployment,
        A,
        "s-1",
        "SET secretArns = :s, connectionIds = :c",
        **{":s": {"S": "arn:one"}, ":c": {"SS": ["c-set"]}},
    )

    answer = ask(deployment, "release", session, A, "s-1", ids)

    assert answer == {"ok": True, "released": [], "kept": ids}


# --- undo ---------------------------------------------------------------------------------------
def test_rule_registrar_undo_takes_back_only_a_young_claim_the_item_does_not_name(
    deployment: Deployment,
) -> None:
    session = create(deployment, A, "s-1", connection_id="c-named")
    ask(deployment, "claim", session, A, "s-1", [[CONNECTION, "c-edge"]])
    deployment.clock.advance(UNDO_WINDOW_SECONDS)  # c-edge exactly at the end of the window
    ask(deployment, "claim", session, A, "s-1", [[CONNECTION, "c-young"]])

    answer = ask(
        deployment,
        "undo",
        session,
        A,
        "s-1",
        [[CONNECTION, "c-named"], [CONNECTION, "c-young"], [CONNECTION, "c-edge"]],
    )

    assert answer == {"ok": True, "undone": [[CONNECTION, "c-young"], [CONNECTION, "c-edge"]]}
    assert state_of(deployment, "c-named") == "held"
    assert state_of(deployment, "c-young") is None and state_of(deployment, "c-edge") is None


def test_rule_registrar_undo_leaves_a_released_claim_and_another_incarnations(
    deployment: Deployment,
) -> None:
    first = create(deployment, A, "s-1")
    ask(deployment, "claim", first, A, "s-1", [[CONNECTION, "c-released"]])
    ask(deployment, "release", first, A, "s-1", [[CONNECTION, "c-released"]])
    other = create(deployment, A, "s-2")
    ask(deployment, "claim", other, A, "s-2", [[CONNECTION, "c-other"]])

    answer = ask(
        deployment, "undo", first, A, "s-1", [[CONNECTION, "c-released"], [CONNECTION, "c-other"]]
    )

    assert answer == {"ok": True, "undone": []}
    assert state_of(deployment, "c-released") == "released"
    assert state_of(deployment, "c-other") == "held"


def test_rule_registrar_undo_after_the_end_needs_the_token_of_the_claim_not_of_the_item(
    deployment: Deployment,
) -> None:
    """With the item gone, the claim's hash of the token decides; with the key live as
    another incarnation too (the old token is then not checked against the item)."""
    old = create(deployment, A, "s-1")
    ask(deployment, "claim", old, A, "s-1", [[CONNECTION, "c-1"], [CONNECTION, "c-2"]])
    store, _ = deployment.store()
    store.end("s-1", partition=A)
    create(deployment, A, "s-1")  # the key live again, as another incarnation

    forged = deployment.invoke(
        {"op": "undo", "key": key(A, "s-1"), "incarnation": old.incarnation}
        | {"token": "f" * 32, "resources": [[CONNECTION, "c-1"]]}
    )
    own = ask(deployment, "undo", old, A, "s-1", [[CONNECTION, "c-1"], [CONNECTION, "c-2"]])

    assert forged == {"ok": True, "undone": []}
    assert own == {"ok": True, "undone": [[CONNECTION, "c-1"], [CONNECTION, "c-2"]]}
    assert deployment.metrics == []


def test_rule_registrar_undo_fails_on_an_error_that_is_not_the_condition(
    deployment: Deployment,
) -> None:
    session = create(deployment, A, "s-1")
    ask(deployment, "claim", session, A, "s-1", [[CONNECTION, "c-1"]])
    deployment.registrar_ddb.delete_table(TableName=OWNERSHIP_TABLE)

    with pytest.raises(Exception, match="ResourceNotFoundException"):
        ask(deployment, "undo", session, A, "s-1", [[CONNECTION, "c-1"]])


# --- BadRequest ---------------------------------------------------------------------------------
GOOD = {"op": "owned", "key": key(A, "s"), "incarnation": "i", "resources": [[CONNECTION, "c"]]}


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ("nope", "event 'nope': expected a JSON object"),
        (
            {**GOOD, "op": "Claim"},
            "op 'Claim': expected one of ['claim', 'release', 'undo', 'owned']",
        ),
        (
            {**GOOD, "key": {"tenant": A}},
            "key {'tenant': 'tenant-a'}: expected String values of exactly ['tenant', 'sessionId']",
        ),
        (
            {**GOOD, "key": {**key(A, "s"), "extra": "x"}},
            "key {'tenant': 'tenant-a', 'sessionId': 's', 'extra': 'x'}: expected String values"
            " of exactly ['tenant', 'sessionId']",
        ),
        (
            {**GOOD, "key": {"tenant": A, SORT: ""}},
            "key {'tenant': 'tenant-a', 'sessionId': ''}: expected String values of exactly "
            "['tenant', 'sessionId']",
        ),
        (
            {**GOOD, "key": {"tenant": A, SORT: 7}},
            "key {'tenant': 'tenant-a', 'sessionId': 7}: expected String values of exactly "
            "['tenant', 'sessionId']",
        ),
        (
            {**GOOD, "key": "s"},
            "key 's': expected String values of exactly ['tenant', 'sessionId']",
        ),
        ({**GOOD, "incarnation": 5}, "incarnation 5: expected the session's incarnation"),
        ({**GOOD, "incarnation": ""}, "incarnation '': expected the session's incarnation"),
        ({**GOOD, "token": ""}, "token '': expected the session's claim token (a String)"),
        ({**GOOD, "token": 7}, "token 7: expected the session's claim token (a String)"),
        (
            {**GOOD, "token": "t" * 65},
            f"token {'t' * 65!r}: expected the session's claim token (a String)",
        ),
        ({**GOOD, "resources": []}, f"resources []: expected 1..{MAX_RESOURCES} [kind, id] pairs"),
        (
            {**GOOD, "resources": "c"},
            f"resources 'c': expected 1..{MAX_RESOURCES} [kind, id] pairs",
        ),
        (
            {**GOOD, "resources": [[CONNECTION, "c"]] * (MAX_RESOURCES + 1)},
            f"resources {[[CONNECTION, 'c']] * (MAX_RESOURCES + 1)!r}: expected "
            f"1..{MAX_RESOURCES} [kind, id] pairs",
        ),
        (
            {**GOOD, "resources": [[CONNECTION, "c", "x"]]},
            f"resource ['connection', 'c', 'x']: expected [kind, id], kind one of {list(KINDS)} or "
            "'custom:<step name>'",
        ),
        (
            {**GOOD, "resources": [CONNECTION]},
            f"resource 'connection': expected [kind, id], kind one of {list(KINDS)} or "
            "'custom:<step name>'",
        ),
        (
            {**GOOD, "resources": [[CONNECTION, ""]]},
            "resource ['connection', '']: resource id '': expected a non-empty string",
        ),
        (
            {**GOOD, "resources": [[CONNECTION, 5]]},
            "resource ['connection', 5]: resource id 5: expected a non-empty string",
        ),
    ],
)
def test_fails_a_registrar_request_naming_the_field_and_what_was_expected(
    deployment: Deployment, event: object, message: str
) -> None:
    answer = deployment.registrar.handle(event)
    assert answer == {"ok": False, "error": "BadRequest", "message": message}
    assert deployment.metrics == []


def test_rule_registrar_request_at_its_limits_is_one(deployment: Deployment) -> None:
    """Exactly `MAX_RESOURCES` ids and a 64-character token are a request; the same id twice
    is asked once."""
    many = [[CONNECTION, f"c-{i}"] for i in range(MAX_RESOURCES)]
    for event in ({**GOOD, "resources": many}, {**GOOD, "token": "t" * 64}, {**GOOD, "token": "t"}):
        assert deployment.registrar.handle(event) == {"ok": True, "owned": []}
    session = create(deployment, A, "s-1")
    twice = ask(deployment, "claim", session, A, "s-1", [[CONNECTION, "c-1"], [CONNECTION, "c-1"]])
    assert [c["id"] for c in twice["claimed"]] == ["c-1"]


def test_fails_a_registrar_without_its_tables(ddb: Any) -> None:
    for config in (
        RuntimeConfig(table_name="", ownership_table_name=OWNERSHIP_TABLE),
        RuntimeConfig(table_name=TABLE, ownership_table_name=""),
    ):
        with pytest.raises(ValueError) as failed:
            Registrar(config, ddb)
        assert str(failed.value) == (
            f"table {config.table_name!r}, ownership table {config.ownership_table_name!r}: the "
            "registrar needs both (SESSION_EXPIRY_TABLE_NAME and "
            "SESSION_EXPIRY_OWNERSHIP_TABLE_NAME, which the construct sets)"
        )


def test_rule_registrar_reads_the_item_and_the_claims_strongly_consistent(
    deployment: Deployment,
) -> None:
    """A claim decided on an eventually consistent read could miss the write that ended the
    session or took the id a moment ago."""
    session = create(deployment, A, "s-1")
    ask(deployment, "claim", session, A, "s-1", [[CONNECTION, "c-1"]])
    reads: list[dict[str, Any]] = []
    deployment.registrar_ddb.meta.events.register(
        "provide-client-params.dynamodb.GetItem", lambda params, **_: reads.append(dict(params))
    )

    assert ask(deployment, "owned", session, A, "s-1", [[CONNECTION, "c-1"]])["owned"]

    assert [(r["TableName"], r["ConsistentRead"]) for r in reads] == [
        (TABLE, True),
        (OWNERSHIP_TABLE, True),
    ]
    assert reads[0]["Key"] == {"tenant": {"S": A}, SORT: {"S": "s-1"}}
    assert reads[1]["Key"] == {"resource": {"S": "connection#c-1"}}


def test_rule_registrar_handler_answers_from_the_environments_configuration(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Lambda entry point builds one `Registrar` from the environment the construct sets
    and keeps it for the next invocation."""
    from session_expiry_runtime import registrar

    for name, value in (
        ("SESSION_EXPIRY_TABLE_NAME", TABLE),
        ("SESSION_EXPIRY_OWNERSHIP_TABLE_NAME", OWNERSHIP_TABLE),
        ("SESSION_EXPIRY_PARTITION_KEY", "tenant"),
        ("SESSION_EXPIRY_SORT_KEY", SORT),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(registrar, "_registrar", None)

    answer = registrar.handler({**GOOD, "op": "nope"}, None)
    built = registrar._registrar
    again = registrar.handler(GOOD | {"key": {"tenant": A}}, None)

    assert answer["error"] == "BadRequest" and answer["message"].startswith("op 'nope'")
    assert again["message"].endswith("expected String values of exactly ['tenant', 'sessionId']")
    assert built is not None and registrar._registrar is built
    assert built.config.ownership_table_name == OWNERSHIP_TABLE
    # And it reads the tables with a DynamoDB client of its own.
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    create_table(ddb, partition_key="tenant", sort_key=SORT)
    assert registrar.handler(GOOD, None) == {"ok": True, "owned": []}


def test_rule_registrar_waits_with_its_own_sleep_for_an_id_being_released(
    deployment: Deployment, ddb: Any
) -> None:
    """An id whose owner's cleanup is releasing it is asked for again after the waits, with
    the sleep the registrar was given; then refused as ``releasing`` (retry soon)."""
    from session_expiry_runtime.store_parts.claims import RELEASING_RETRY_DELAYS

    owner = create(deployment, A, "s-owner", connection_id="c-1")
    ddb.update_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": "connection#c-1"}},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":s": {"S": "releasing"}},
    )
    sleeps: list[float] = []
    registrar = Registrar(
        deployment.config,
        ddb,
        clock=lambda: deployment.clock().timestamp(),
        sleep=sleeps.append,
        emit=deployment.metrics.append,
    )
    a = create(deployment, A, "s-a")

    answer = registrar.handle(
        {"op": "claim", "key": key(A, "s-a"), "incarnation": a.incarnation}
        | {"token": a.claim_token, "resources": [[CONNECTION, "c-1"]]}
    )

    assert answer["error"] == "ResourceOwned" and answer["releasing"] is True
    assert answer["ownerIncarnation"] == owner.incarnation
    assert sleeps == list(RELEASING_RETRY_DELAYS)


def test_rule_registrar_without_emit_prints_the_refusal_as_emf(
    deployment: Deployment, ddb: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    registrar = Registrar(
        deployment.config, ddb, clock=lambda: deployment.clock().timestamp(), sleep=lambda _: None
    )
    a = create(deployment, A, "s-a")
    capsys.readouterr()

    registrar.handle(
        {"op": "claim", "key": key(A, "s-a"), "incarnation": a.incarnation}
        | {"token": "f" * 32, "resources": [[CONNECTION, "c-1"]]}
    )

    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == [refused_metric(deployment)]


def test_fails_a_registrar_request_whose_key_is_not_the_tables_single_key(ddb: Any) -> None:
    registrar = Registrar(
        RuntimeConfig(table_name=TABLE, ownership_table_name=OWNERSHIP_TABLE), ddb
    )
    answer = registrar.handle({**GOOD, "key": key(A, "s")})
    assert answer == {
        "ok": False,
        "error": "BadRequest",
        "message": "key {'tenant': 'tenant-a', 'sessionId': 's'}: expected String values of "
        "exactly ['pk']",
    }


def test_rule_registrar_release_of_a_kind_no_step_declares_frees_it(
    deployment: Deployment,
) -> None:
    """The item cannot name an id of a custom kind the deployment does not declare, so its
    claim is the session's to give up like any other (and the request is answered)."""
    session = create(deployment, A, "s-1")
    ids = [["custom:Undeclared", "x-1"]]
    assert ask(deployment, "claim", session, A, "s-1", ids)["ok"] is True

    assert ask(deployment, "release", session, A, "s-1", ids) == {
        "ok": True,
        "released": ids,
        "kept": [],
    }
    assert state_of(deployment, "x-1", "custom:Undeclared") == "released"


def test_rule_registrar_undo_for_a_live_item_does_not_ask_for_a_token_hash(
    deployment: Deployment,
) -> None:
    """While the key's item is live, the request's token was checked against the item (an
    item without a token shows none): the claim's hash is not asked, so a claim written without
    one (an item from before claim tokens) is undone too."""
    session = create(deployment, A, "s-1")
    set_item(deployment, A, "s-1", "REMOVE claimToken")
    bare = {"key": key(A, "s-1"), "incarnation": session.incarnation}
    resources = {"resources": [[CONNECTION, "c-1"]]}
    assert deployment.invoke({"op": "claim", **bare, **resources})["ok"] is True
    claim = claim_of(deployment.registrar_ddb, "connection#c-1")
    assert claim is not None and "tokenHash" not in claim

    answer = deployment.invoke({"op": "undo", **bare, **resources})

    assert answer == {"ok": True, "undone": [[CONNECTION, "c-1"]]}
    assert state_of(deployment, "c-1") is None


def test_rule_registrar_release_keeps_a_connection_named_only_by_the_single_attribute(
    deployment: Deployment,
) -> None:
    """An item naming its connection in ``connectionId`` alone (written before the set of
    connections, or around the store) still names it: its claim is kept."""
    session = create(deployment, A, "s-1")
    ids = [[CONNECTION, "c-single"]]
    ask(deployment, "claim", session, A, "s-1", ids)
    set_item(
        deployment,
        A,
        "s-1",
        "SET connectionId = :c REMOVE connectionIds",
        **{":c": {"S": "c-single"}},
    )

    assert ask(deployment, "release", session, A, "s-1", ids) == {
        "ok": True,
        "released": [],
        "kept": ids,
    }
    assert state_of(deployment, "c-single") == "held"


def test_rule_registrar_grant_claim_answers_when_it_was_claimed(deployment: Deployment) -> None:
    session = create(deployment, A, "s-1")
    deployment.clock.advance(2.25)
    now = Decimal(str(deployment.clock().timestamp()))

    answer = ask(deployment, "claim", session, A, "s-1", [["grant", "g-1"]], grant=True)

    assert answer == {
        "ok": True,
        "claimed": [{"kind": "grant", "id": "g-1", "claimedAt": str(now)}],
    }
    claim = claim_of(deployment.registrar_ddb, "grant#g-1")
    assert claim is not None and claim["claimedAt"] == {"N": str(now)}


def test_rule_registrar_makes_no_client_of_its_own(
    ddb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every call goes through the client it is given (the handler's, with its retries and
    # Region): its internal SessionStore, used only to read a session item, is handed that
    # client and no registrar transport, rather than building a default DynamoDB or Lambda
    # client (a cold start's cost, and NoRegionError outside Lambda).
    def no_client(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the registrar built a client of its own: {args} {kwargs}")

    monkeypatch.setattr(boto3, "client", no_client)
    # Named a claim registrar function too (a configuration shared with the app's): the
    # registrar writes the ownership records itself and never invokes one.
    config = RuntimeConfig(
        table_name=TABLE,
        ownership_table_name=OWNERSHIP_TABLE,
        claim_registrar_function="claim-registrar",
    )

    registrar = Registrar(config, ddb)

    assert registrar._sessions._ddb is ddb
