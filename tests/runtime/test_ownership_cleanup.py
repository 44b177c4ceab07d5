"""Acted on only if owned by this incarnation: the cleanup's ownership check, end to end.

Real stream records from moto tables, the real handler (``session_expiry_runtime.handler``)
or ``process_batch``, real boto3 calls against moto for DynamoDB (both tables), KMS and the
API Gateway Management API. Ownership records are seeded in exactly the format
``session_expiry_runtime.core.ownership`` defines (``ownership_support``). Stubbed, and said where:
the ``bedrock-agentcore`` operations (moto implements none: botocore's ``Stubber``, which fails
any call it was not told to expect) and KMS's ``NotFoundException`` (moto never answers it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from botocore.exceptions import NoCredentialsError
from botocore.stub import Stubber
from ownership_support import calls_of, claim_state, emf_totals, put_claim, raw_claim
from runtime_faults import answer, json_error, times
from runtime_support import TABLE, FakeContext, Sandbox, event
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.core.config import DEFAULT_GRANT_CONSISTENCY_SECONDS, RuntimeConfig
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.ownership import (
    KIND_AGENT_RUNTIME,
    KIND_BROWSER,
    KIND_CODE_INTERPRETER,
    KIND_CONNECTION,
    KIND_GRANT,
    STATE_RELEASED,
    STATE_RELEASING,
)
from session_expiry_runtime.steps.grant import GrantStep
from session_expiry_runtime.sweeps.grant_sweeper import GrantSweeper
from test_grant_sweeper import FakeTime, GrantClock

RUNTIME_ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/coder-Ab12Cd34Ef"
INTERPRETER_ID = "coder_interpreter-Ab12Cd34Ef"
BROWSER_ID = "coder_browser-Ab12Cd34Ef"
AGENT_ENV = {
    "SESSION_EXPIRY_AGENT_RUNTIME_ARN": RUNTIME_ARN,
    "SESSION_EXPIRY_CODE_INTERPRETER_ID": INTERPRETER_ID,
    "SESSION_EXPIRY_BROWSER_ID": BROWSER_ID,
}
#: Step, the single-id attribute and the ownership kind of each AgentCore session kind.
AGENT_STEPS = {
    KIND_AGENT_RUNTIME: ("StopRuntimeSession", "agentRuntimeSessionId"),
    KIND_CODE_INTERPRETER: ("StopCodeInterpreterSession", "codeInterpreterSessionId"),
    KIND_BROWSER: ("StopBrowserSession", "browserSessionId"),
}


def lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if hasattr(r, "session")]


def agent_cleaner(sandbox: Sandbox) -> SessionCleaner:
    return sandbox.cleaner(
        RuntimeConfig.from_env({**sandbox.env(), **AGENT_ENV})  # the handler's configuration
    )


def expect_stop(stub: Stubber, kind: str, session_id: str) -> None:
    """Queue the one AgentCore answer a stop of ``session_id`` gets."""
    if kind == KIND_AGENT_RUNTIME:
        stub.add_response(
            "stop_runtime_session",
            {"runtimeSessionId": session_id, "statusCode": 200},
            {"runtimeSessionId": session_id, "agentRuntimeArn": RUNTIME_ARN},
        )
        return
    tool, identifier = (
        ("code_interpreter", INTERPRETER_ID)
        if kind == KIND_CODE_INTERPRETER
        else ("browser", BROWSER_ID)
    )
    parameter = (
        "codeInterpreterIdentifier" if kind == KIND_CODE_INTERPRETER else "browserIdentifier"
    )
    stub.add_response(
        f"stop_{tool}_session",
        {parameter: identifier, "sessionId": session_id, "lastUpdatedAt": 0},
        {parameter: identifier, "sessionId": session_id},
    )


# --- a forged record: tenant A names tenant B's resources --------------------------------------
TENANT_B = {"tenantId": "tenant-b", "sessionId": "s-b"}
TENANT_A = {"tenantId": "tenant-a", "sessionId": "s-evil"}
B_RUNTIME = "rs-tenant-b-" + "0123456789abcdef" * 2


def tenant_b_session(sandbox: Sandbox) -> dict[str, Any]:
    """Tenant B's live session: its connection, AgentCore sessions and grant, each claimed."""
    ids = {
        KIND_CONNECTION: "b-conn=",
        KIND_AGENT_RUNTIME: B_RUNTIME,
        KIND_CODE_INTERPRETER: "ciB01",
        KIND_BROWSER: "brB01",
    }
    sandbox.open_connection(ids[KIND_CONNECTION])
    grant = sandbox.create_grant(TENANT_B, "incB")
    ids[KIND_GRANT] = grant["GrantId"]
    now = int(time.time())
    sandbox.ddb.put_item(
        TableName=TABLE,
        Item={
            **{name: {"S": value} for name, value in TENANT_B.items()},
            "incarnation": {"S": "incB"},
            "expiresAt": {"N": str(now + 3600)},
            "connectionId": {"S": ids[KIND_CONNECTION]},
            "agentRuntimeSessionId": {"S": B_RUNTIME},
            "codeInterpreterSessionId": {"S": "ciB01"},
            "browserSessionId": {"S": "brB01"},
            "grantId": {"S": grant["GrantId"]},
            "grantToken": {"S": grant["GrantToken"]},
        },
    )
    for kind, resource_id in ids.items():
        put_claim(
            sandbox.ddb, kind, resource_id, key=TENANT_B, incarnation="incB", claimed_at=now - 600
        )
    return {"ids": ids, "token": grant["GrantToken"]}


@pytest.mark.parametrize("forged_not_after", [None, "1", "0"])
def test_a_tenant_naming_another_tenants_resources_makes_the_cleanup_touch_none_of_them(
    forged_not_after: str | None,
    aws: None,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    session_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sandbox = Sandbox(tenant_partition=True)
    for name, value in {**sandbox.env(), **AGENT_ENV}.items():
        monkeypatch.setenv(name, value)
    b = tenant_b_session(sandbox)
    ids = b["ids"]
    claims_before = {kind: raw_claim(sandbox.ddb, kind, rid) for kind, rid in ids.items()}
    # A writer confined to tenant A's partition writes B's ids into an item of its own (plus a
    # connection id nobody claimed), then deletes it.
    forged = {
        **{name: {"S": value} for name, value in TENANT_A.items()},
        "incarnation": {"S": "incA"},
        "expiresAt": {"N": str(int(time.time()) + 3600)},
        "connectionId": {"S": ids[KIND_CONNECTION]},
        "connectionIds": {"SS": [ids[KIND_CONNECTION], "never-claimed="]},
        "agentRuntimeSessionId": {"S": B_RUNTIME},
        "codeInterpreterSessionIds": {"SS": ["ciB01"]},
        "browserSessionId": {"S": "brB01"},
        "grantId": {"S": ids[KIND_GRANT]},
        "grantToken": {"S": b["token"]},
    }
    if forged_not_after is not None:
        # The forger also says its session ended at the epoch's start: every claim of B's was
        # "taken after the absolute end", which once made the refusals Superseded (no alarm).
        forged["notAfter"] = {"N": forged_not_after}
    sandbox.ddb.put_item(TableName=TABLE, Item=forged)
    sandbox.read_stream()
    sandbox.ddb.delete_item(
        TableName=TABLE, Key={name: {"S": value} for name, value in TENANT_A.items()}
    )
    (record,) = sandbox.removes()
    cleaner = handler_module.get_cleaner()
    calls = {
        name: calls_of(getattr(cleaner.clients, name))
        for name in ("apigateway", "kms", "agentcore")
    }
    capsys.readouterr()

    # Stubber with nothing queued: any AgentCore call would raise and fail the record.
    with Stubber(cleaner.clients.agentcore):
        response = handler_module.handler(event(record), FakeContext())

    assert response == {"batchItemFailures": []}  # refused for good, never retried
    assert calls == {"apigateway": [], "kms": [], "agentcore": []}  # nothing of B was called
    assert sandbox.connection_exists(ids[KIND_CONNECTION])
    listed = sandbox.kms.list_grants(KeyId=sandbox.key_arn, GrantId=ids[KIND_GRANT])["Grants"]
    assert [g["GrantId"] for g in listed] == [ids[KIND_GRANT]]  # B's grant stays usable
    assert {kind: raw_claim(sandbox.ddb, kind, rid) for kind, rid in ids.items()} == claims_before
    (line,) = lines(session_logs)
    assert line.levelno == logging.WARNING
    session = line.session  # type: ignore[attr-defined]
    assert session["outcome"] == "cleaned"
    assert session["ownership"] == {
        "DeleteConnection": {ids[KIND_CONNECTION]: "NotOwned", "never-claimed=": "Unclaimed"},
        "RetireGrant": {ids[KIND_GRANT]: "NotOwned"},
        "StopRuntimeSession": {B_RUNTIME: "NotOwned"},
        "StopCodeInterpreterSession": {"ciB01": "NotOwned"},
        "StopBrowserSession": {"brB01": "NotOwned"},
    }
    assert set(session["steps"].values()) == {"refused"}
    metrics = emf_totals(capsys.readouterr().out)
    assert metrics["ResourcesRefused|Refusal=NotOwned"] == 5
    assert metrics["ResourcesRefused|Refusal=Unclaimed"] == 1
    assert "GrantsRefused" not in metrics  # the grant's refusal is an ownership refusal


# --- reuse after expiry: the same ids, a new incarnation of the same key -----------------------
REUSED = {
    KIND_CONNECTION: "reused-conn=",
    KIND_AGENT_RUNTIME: "rs-user-42-" + "0123456789abcdef" * 2,
    KIND_CODE_INTERPRETER: "ci42",
    KIND_BROWSER: "br42",
}
ATTRIBUTE = {KIND_CONNECTION: "connectionId", **{k: v[1] for k, v in AGENT_STEPS.items()}}
STEP = {KIND_CONNECTION: "DeleteConnection", **{k: v[0] for k, v in AGENT_STEPS.items()}}


def incarnation_item(incarnation: str, kind: str, resource_id: str, expires: int) -> dict[str, Any]:
    return {
        "pk": {"S": "user-42"},
        "incarnation": {"S": incarnation},
        "expiresAt": {"N": str(expires)},
        ATTRIBUTE[kind]: {"S": resource_id},
    }


def new_incarnation_claims(sandbox: Sandbox, kind: str, resource_id: str) -> None:
    """What ``create("user-42", ...)`` does again after expiry: claim the same id (its old
    claim names this key, so the store may take it) and put the new item."""
    if kind == KIND_CONNECTION:
        sandbox.open_connection(resource_id)  # the new incarnation's connection is open
    sandbox.claim(kind, resource_id, "user-42", "inc-new", claimed_at=time.time())
    sandbox.ddb.put_item(
        TableName=TABLE,
        Item=incarnation_item("inc-new", kind, resource_id, int(time.time()) + 3600),
    )


def run(
    sandbox: Sandbox,
    record: dict[str, Any],
    kind: str,
    logs: pytest.LogCaptureFixture,
    *,
    expect_act: bool,
) -> logging.LogRecord:
    """One delivery of ``record``; the AgentCore Stubber expects a stop only when
    ``expect_act``. Returns the record's log line."""
    cleaner = agent_cleaner(sandbox)
    with Stubber(cleaner.clients.agentcore) as stub:
        if expect_act and kind != KIND_CONNECTION:
            expect_stop(stub, kind, REUSED[kind])
        assert process_batch(event(record), FakeContext(), cleaner) == {"batchItemFailures": []}
        stub.assert_no_pending_responses()
    return lines(logs)[-1]


@pytest.mark.parametrize("kind", list(REUSED))
@pytest.mark.parametrize("order", ["remove-first", "claim-first"])
def test_the_old_incarnations_cleanup_never_touches_what_its_successor_claimed(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, kind: str, order: str
) -> None:
    resource_id = REUSED[kind]
    if kind == KIND_CONNECTION:
        sandbox.open_connection(resource_id)
    expired = int(time.time()) - 60
    sandbox.ddb.put_item(
        TableName=TABLE, Item=incarnation_item("inc-old", kind, resource_id, expired)
    )
    sandbox.claim(kind, resource_id, "user-42", "inc-old")
    sandbox.read_stream()
    sandbox.delete("user-42")  # create() removes the expired item: its REMOVE is on the stream
    (old_remove,) = sandbox.removes()

    if order == "remove-first":  # the old incarnation's REMOVE first: acted on, released
        first = run(sandbox, old_remove, kind, session_logs, expect_act=True)
        assert first.session["steps"][STEP[kind]] == "done"  # type: ignore[attr-defined]
        assert claim_state(sandbox.ddb, kind, resource_id) == STATE_RELEASED
        if kind == KIND_CONNECTION:
            assert not sandbox.connection_exists(resource_id)
    new_incarnation_claims(sandbox, kind, resource_id)
    new_claim = raw_claim(sandbox.ddb, kind, resource_id)

    # The old REMOVE after the successor claimed the id (first, or redelivered): no call.
    line = run(sandbox, old_remove, kind, session_logs, expect_act=False)

    logged = line.session  # type: ignore[attr-defined]
    assert logged["steps"][STEP[kind]] == "not-owned"
    assert logged["ownership"] == {STEP[kind]: {resource_id: "Superseded"}}
    assert logged["outcome"] == "cleaned"
    assert line.levelno == logging.INFO  # Superseded is not alarmed
    assert raw_claim(sandbox.ddb, kind, resource_id) == new_claim  # the successor's, untouched
    if kind == KIND_CONNECTION:
        assert sandbox.connection_exists(resource_id)


@pytest.mark.parametrize("order", ["remove-first", "claim-first"])
def test_the_old_incarnations_grant_is_retired_and_the_successors_kept(
    sandbox: Sandbox, order: str
) -> None:
    old = sandbox.create_grant({"pk": "user-42"}, "inc-old")["GrantId"]
    sandbox.ddb.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": "user-42"},
            "incarnation": {"S": "inc-old"},
            "expiresAt": {"N": str(int(time.time()) - 60)},
            "grantId": {"S": old},
        },
    )
    sandbox.claim(KIND_GRANT, old, "user-42", "inc-old")
    sandbox.read_stream()
    sandbox.delete("user-42")
    (old_remove,) = sandbox.removes()

    def successor() -> str:
        new = sandbox.create_grant({"pk": "user-42"}, "inc-new")["GrantId"]
        sandbox.claim(KIND_GRANT, new, "user-42", "inc-new", claimed_at=time.time())
        return new

    new = successor() if order == "claim-first" else None
    assert process_batch(event(old_remove), FakeContext(), sandbox.cleaner()) == {
        "batchItemFailures": []
    }
    new = new or successor()
    cleaner = sandbox.cleaner()
    calls = calls_of(cleaner.clients.kms)
    assert process_batch(event(old_remove), FakeContext(), cleaner) == {  # redelivered
        "batchItemFailures": []
    }

    assert calls == []  # released by the first run: no second RetireGrant
    assert old not in sandbox.grant_ids() and new in sandbox.grant_ids()
    assert claim_state(sandbox.ddb, KIND_GRANT, old) == STATE_RELEASED
    assert claim_state(sandbox.ddb, KIND_GRANT, new) == "held"


# --- legacy items (written before ownership records) --------------------------------------------
def test_a_legacy_items_connection_and_agent_sessions_are_left_its_grant_goes_by_name(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = {attribute: {"S": REUSED[kind]} for kind, (_, attribute) in AGENT_STEPS.items()}
    session = sandbox.create_session("s-old", extra=extra, legacy=True)
    sandbox.read_stream()
    sandbox.delete("s-old")
    cleaner = agent_cleaner(sandbox)
    kms_calls = calls_of(cleaner.clients.kms)
    ownership_calls = calls_of(cleaner.clients.ownership)
    capsys.readouterr()

    with Stubber(cleaner.clients.agentcore):  # nothing queued: no AgentCore call may be made
        assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
            "batchItemFailures": []
        }

    assert sandbox.connection_exists(session.connection_id)  # ends by API Gateway's limits
    assert session.grant_id not in sandbox.grant_ids()  # the Name check proved it the session's
    assert [name for name, _ in kms_calls] == ["ListGrants", "RetireGrant"]
    # A legacy item's ids are read (another key's record would make them NotOwned), never marked.
    assert [name for name, _ in ownership_calls] == ["BatchGetItem"]
    assert not sandbox.keys_under(session.prefix)
    (line,) = lines(session_logs)
    assert line.levelno == logging.INFO
    logged = line.session  # type: ignore[attr-defined]
    assert logged["outcome"] == "cleaned"
    assert logged["ownership"]["DeleteConnection"] == {session.connection_id: "Legacy"}
    assert logged["steps"]["RetireGrant"] == "done"
    assert emf_totals(capsys.readouterr().out)["ResourcesRefused|Refusal=Legacy"] == 4


# --- KMS eventual consistency: "not found yet" is not "retired" ---------------------------------
def test_a_young_grant_kms_does_not_find_is_handed_over_and_the_grant_sweep_retires_it(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real grant KMS does not show yet: the record is not failed (a failed record holds its
    shard's later ones, docs/security.md, "DynamoDB stream (delay)"); refused and alarmed
    (``GrantsRefused``), its claim handed over; the next grant sweep retires it at once, no
    pending bound."""
    session = sandbox.create_session("s-1", object_names=())
    sandbox.claim(
        KIND_GRANT, session.grant_id, "s-1", str(session.incarnation), claimed_at=time.time()
    )
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()
    cleaner = sandbox.cleaner()
    # Stub: KMS answers NotFoundException for a grant it does not show yet (eventual
    # consistency); moto shows every grant at once. The first answer only.
    answer(cleaner.clients.kms, "RetireGrant", times(1, json_error(400, "NotFoundException")))

    assert process_batch(event(record), FakeContext(), cleaner) == {"batchItemFailures": []}

    line = lines(session_logs)[-1].session  # type: ignore[attr-defined]
    assert line["steps"]["RetireGrant"] == "refused"
    assert "handed over to the grant sweep" in line["grantRefusal"]
    assert emf_totals(capsys.readouterr().out)["GrantsRefused"] == 1
    assert session.grant_id in sandbox.grant_ids()
    claim = raw_claim(sandbox.ddb, KIND_GRANT, session.grant_id)
    assert claim["state"]["S"] == STATE_RELEASING and "handedOverAt" in claim

    # The grant sweep: the session is gone and the stream path gave the grant up: retired now.
    report = grant_sweep(sandbox).sweep()
    assert report.kept_pending == 0 and report.orphans_retired == 1
    assert session.grant_id not in sandbox.grant_ids()
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == STATE_RELEASED


def test_an_unreleased_grant_not_handed_over_stays_pending_for_the_sweep(
    sandbox: Sandbox,
) -> None:
    """Without the hand-over (a record still failing for another reason) the sweep keeps the
    pending bound: the stream path may still retire it."""
    session = sandbox.create_session("s-1", object_names=())
    sandbox.claim(
        KIND_GRANT, session.grant_id, "s-1", str(session.incarnation), state=STATE_RELEASING
    )
    sandbox.delete("s-1")

    report = grant_sweep(sandbox).sweep()

    assert report.kept_pending == 1 and report.orphans_retired == 0
    assert session.grant_id in sandbox.grant_ids()


def test_an_old_grant_kms_does_not_find_is_already_done(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session = sandbox.create_session("s-1", object_names=())  # claimed an hour ago
    sandbox.read_stream()
    sandbox.delete("s-1")
    cleaner = sandbox.cleaner()
    # Stub: KMS answers NotFoundException for a grant retired before (moto would retire it).
    answer(cleaner.clients.kms, "RetireGrant", lambda _: json_error(400, "NotFoundException"))

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }

    assert lines(session_logs)[-1].session["steps"]["RetireGrant"] == "already-done"  # type: ignore[attr-defined]
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == STATE_RELEASED


def grant_sweep(sandbox: Sandbox) -> GrantSweeper:
    """The grant sweep of the sandbox's key, every grant created an hour ago (past the grace)."""
    clock = GrantClock(sandbox.kms)  # moto's ListGrants has no CreationDate
    for grant_id in sandbox.grant_ids():
        clock.created[grant_id] = datetime.now(timezone.utc) - timedelta(hours=1)
    return GrantSweeper(
        sandbox.config,
        kms_client=sandbox.kms,
        dynamodb_client=sandbox.ddb,
        metrics=MetricsRecorder("SessionExpiry"),
        pacer=FakeTime().pacer(),
    )


# --- redelivery after success ---------------------------------------------------------------
def test_a_redelivered_record_makes_no_second_call_for_released_resources(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session = sandbox.create_session("s-1")
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()
    assert process_batch(event(record), FakeContext(), sandbox.cleaner()) == {
        "batchItemFailures": []
    }
    assert sandbox.is_clean(session)
    again = sandbox.cleaner()
    calls = {name: calls_of(getattr(again.clients, name)) for name in ("apigateway", "kms")}

    assert process_batch(event(record), FakeContext(), again) == {"batchItemFailures": []}

    assert calls == {"apigateway": [], "kms": []}
    steps = lines(session_logs)[-1].session["steps"]  # type: ignore[attr-defined]
    assert steps["DeleteConnection"] == steps["RetireGrant"] == "already-done"


def test_a_step_acts_on_its_owned_ids_and_refuses_the_others(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    # s-1 recorded its own connection and (forged) s-2's, which s-2 claimed before.
    victim = "s2-conn="
    sandbox.open_connection(victim)
    sandbox.claim(KIND_CONNECTION, victim, "s-2", "inc2", claimed_at=time.time() - 600)
    own = sandbox.create_session("s-1", object_names=(), extra={"connectionIds": {"SS": [victim]}})
    sandbox.read_stream()
    sandbox.delete("s-1")
    capsys.readouterr()

    assert process_batch(event(*sandbox.removes()), FakeContext(), sandbox.cleaner()) == {
        "batchItemFailures": []
    }

    assert not sandbox.connection_exists(own.connection_id)
    assert sandbox.connection_exists(victim)
    (line,) = lines(session_logs)
    assert line.levelno == logging.WARNING
    logged = line.session  # type: ignore[attr-defined]
    assert logged["steps"]["DeleteConnection"] == "done"
    assert logged["ownership"] == {"DeleteConnection": {victim: "NotOwned"}}
    assert claim_state(sandbox.ddb, KIND_CONNECTION, own.connection_id) == STATE_RELEASED
    assert claim_state(sandbox.ddb, KIND_CONNECTION, victim) == "held"
    assert emf_totals(capsys.readouterr().out)["ResourcesRefused|Refusal=NotOwned"] == 1


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("AccessDeniedException", "AccessDeniedException: no"),
        ("connection", "NoCredentialsError: Unable to locate credentials"),
    ],
)
def test_an_owned_grant_whose_retire_fails_fails_the_record_naming_the_error(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, fault: str, error: str
) -> None:
    session = sandbox.create_session("s-1", object_names=())
    sandbox.read_stream()
    sandbox.delete("s-1")
    cleaner = sandbox.cleaner()
    if fault == "connection":  # a botocore error that is no answer of KMS

        def no_credentials(**_: Any) -> None:
            raise NoCredentialsError()

        cleaner.clients.kms.meta.events.register("before-call.kms.RetireGrant", no_credentials)
    else:  # Stub: moto enforces no key policy.
        answer(cleaner.clients.kms, "RetireGrant", lambda _: json_error(400, fault, "no"))

    response = process_batch(event(*sandbox.removes()), FakeContext(), cleaner)

    assert len(response["batchItemFailures"]) == 1
    line = lines(session_logs)[-1].session  # type: ignore[attr-defined]
    assert line["failedActions"] == ["RetireGrant"]
    assert line["errors"]["RetireGrant"] == error
    assert session.grant_id in sandbox.grant_ids()
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == STATE_RELEASING


# --- the owned grant's outcomes, at the edges (survivors of the mutation run, issue 40) ---------
CLAIMED_AT = 1_900_000_000


def owned_grant_removed(sandbox: Sandbox, now: float) -> tuple[Any, dict[str, Any], Any]:
    """s-1 with a grant claimed at :data:`CLAIMED_AT`, removed; a cleaner whose grant step
    reads ``now`` as the time."""
    session = sandbox.create_session("s-1", object_names=())
    sandbox.claim(
        KIND_GRANT, session.grant_id, "s-1", str(session.incarnation), claimed_at=CLAIMED_AT
    )
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()
    cleaner = sandbox.cleaner()
    (grant_step,) = [s for s in cleaner.session_steps if isinstance(s, GrantStep)]
    grant_step.clock = lambda: now
    return session, record, cleaner


def test_an_owned_grant_retired_now_is_done_and_released(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session, record, cleaner = owned_grant_removed(sandbox, time.time())

    assert process_batch(event(record), FakeContext(), cleaner) == {"batchItemFailures": []}

    line = lines(session_logs)[-1].session  # type: ignore[attr-defined]
    assert (line["steps"]["RetireGrant"], line["grantId"]) == ("done", session.grant_id)
    assert session.grant_id not in sandbox.grant_ids()
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == STATE_RELEASED


@pytest.mark.parametrize(
    ("age", "outcome"),
    [
        (DEFAULT_GRANT_CONSISTENCY_SECONDS - 1, "refused"),
        (DEFAULT_GRANT_CONSISTENCY_SECONDS, "already-done"),
    ],
)
def test_kms_consistency_window_ends_at_exactly_five_minutes(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, age: int, outcome: str
) -> None:
    session, record, cleaner = owned_grant_removed(sandbox, CLAIMED_AT + age)
    # Stub: KMS does not find the grant (moto would retire it).
    answer(cleaner.clients.kms, "RetireGrant", lambda _: json_error(400, "NotFoundException"))

    process_batch(event(record), FakeContext(), cleaner)

    line = lines(session_logs)[-1].session  # type: ignore[attr-defined]
    assert line["steps"]["RetireGrant"] == outcome
    if outcome == "refused":
        assert line["grantRefusal"] == (
            f"grant {session.grant_id}: NotFoundException {age} s after it was claimed: an id "
            "no grant has, or a grant KMS does not show yet (up to 300 s after CreateGrant, "
            "eventual consistency); not retried, so it holds no other record: handed over to "
            "the grant sweep, which retires it once KMS lists it"
        )


def test_an_owned_grant_not_found_whose_record_is_gone_is_already_done(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    """Between the mark and the look-up the record was deleted (its time to live): no age to
    weigh, and a grant KMS does not find is retired before."""
    _, record, cleaner = owned_grant_removed(sandbox, CLAIMED_AT + 1)
    answer(cleaner.clients.kms, "RetireGrant", lambda _: json_error(400, "NotFoundException"))

    def no_record(request: Any) -> tuple[int, dict[str, str], bytes]:
        asked = json.loads(request.body)["RequestItems"]
        body = json.dumps({"Responses": {table: [] for table in asked}}).encode()
        return 200, {"content-type": "application/x-amz-json-1.0"}, body

    answer(cleaner.clients.ownership, "BatchGetItem", no_record)

    assert process_batch(event(record), FakeContext(), cleaner) == {"batchItemFailures": []}

    assert lines(session_logs)[-1].session["steps"]["RetireGrant"] == "already-done"  # type: ignore[attr-defined]


def test_no_grant_step_without_a_kms_client(sandbox: Sandbox) -> None:
    clients = sandbox.cleaner().clients
    assert GrantStep.build(sandbox.config, dataclasses.replace(clients, kms=None)) is None
    assert isinstance(GrantStep.build(sandbox.config, clients), GrantStep)


def test_an_owned_grant_with_an_empty_token_is_retired_and_the_token_named_invalid(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session = sandbox.create_session("s-1", object_names=(), extra={"grantToken": {"S": ""}})
    sandbox.read_stream()
    sandbox.delete("s-1")

    process_batch(event(*sandbox.removes()), FakeContext(), sandbox.cleaner())

    line = lines(session_logs)[-1].session  # type: ignore[attr-defined]
    assert line["steps"]["RetireGrant"] == "done"
    assert "grantToken" in line["invalidAttributes"]
    assert session.grant_id not in sandbox.grant_ids()
