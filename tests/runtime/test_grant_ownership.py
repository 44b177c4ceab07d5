"""Legacy items (written before ownership records, no ``incarnation``): the cleanup retires a
grant only once KMS shows it is the removed session's own, by its ``Name``.

Items with an incarnation go through their ownership record instead (``test_ownership_*``).
Real records from a moto table, real boto3 ``ListGrants``/``RetireGrant`` against moto's KMS
(which keeps a grant's ``Name``). The one answer moto cannot give — ``InvalidGrantIdException``
for an id KMS does not accept (moto validates no grant id) — is stubbed, and says so.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest
from botocore.exceptions import NoCredentialsError
from ownership_support import OWNERSHIP_TABLE, claim_state
from runtime_faults import answer, json_error
from runtime_support import APP_ROLE, CLEANUP_ROLE, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.decode import parse_record
from session_expiry_runtime.core.ownership import (
    KIND_GRANT,
    STATE_RELEASING,
    VERDICT_OWNED,
    Verdict,
    owner_token,
)
from session_expiry_runtime.owners.claims import Claimant, ClaimBatcher
from session_expiry_runtime.owners.outcomes import StepFailed
from session_expiry_runtime.steps.base import PLAN_RUN, ClaimRef, Plan, Session, StepContext
from session_expiry_runtime.steps.grant import GrantStep

from cdk_session_expiry import _runtime_contract as contract


def record_calls(cleaner: Any) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    cleaner.clients.kms.meta.events.register(
        "provide-client-params.kms",
        lambda model, params, **_: calls.append((model.name, dict(params))),
    )
    return calls


def grants_refused(out: str) -> float:
    total = 0.0
    for line in out.splitlines():
        doc = json.loads(line)
        total += doc.get(contract.METRIC_GRANTS_REFUSED, 0)
    return total


def lines(caplog: pytest.LogCaptureFixture) -> dict[str, dict[str, Any]]:
    return {r.session["keys"]["pk"]: r.session for r in caplog.records if hasattr(r, "session")}


def write_and_delete(sandbox: Sandbox, session_id: str, **attributes: dict[str, str]) -> None:
    sandbox.ddb.put_item(
        TableName="sessions", Item={"pk": {"S": session_id}, "expiresAt": {"N": "1"}, **attributes}
    )
    sandbox.delete(session_id)


def test_fails_to_retire_a_live_sessions_grant_copied_into_another_item(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = sandbox.create_session("s-2", legacy=True)  # live, its grant named for s-2
    sandbox.read_stream()
    # Another writer of the table: item s-1 holding s-2's grant id and token, then deleted.
    write_and_delete(
        sandbox,
        "s-1",
        grantId={"S": victim.grant_id},
        grantToken={"S": victim.grant_token},
    )
    cleaner = sandbox.cleaner()
    calls = record_calls(cleaner)

    response = process_batch(event(*sandbox.removes()), FakeContext(), cleaner)

    assert response == {"batchItemFailures": []}  # refused for good: never retried
    assert victim.grant_id in sandbox.grant_ids()  # the live session keeps its grant
    assert [name for name, _ in calls] == ["ListGrants"]  # never RetireGrant
    line = lines(session_logs)["s-1"]
    assert line["steps"] == {"RetireGrant": "refused"}
    assert "named for session {'pk': 's-2'}" in line["grantRefusal"]
    assert grants_refused(capsys.readouterr().out) == 1
    assert victim.grant_token not in json.dumps(line)


def test_retires_its_own_grant_by_key_and_id_never_by_token(sandbox: Sandbox) -> None:
    session = sandbox.create_session("s-1", legacy=True)
    sandbox.read_stream()
    sandbox.delete("s-1")
    cleaner = sandbox.cleaner()
    calls = record_calls(cleaner)

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }

    assert session.grant_id not in sandbox.grant_ids() and not sandbox.keys_under(session.prefix)
    # A legacy item's connection is never acted on: it ends by API Gateway's own limits.
    assert sandbox.connection_exists(session.connection_id)
    by_key_and_id = {"KeyId": sandbox.key_arn, "GrantId": session.grant_id}
    assert calls == [("ListGrants", by_key_and_id), ("RetireGrant", by_key_and_id)]


def test_fails_to_retire_a_grant_without_a_session_expiry_name(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    # Created outside SessionStore (no Name): nothing ties it to any session.
    grant = sandbox.kms.create_grant(
        KeyId=sandbox.key_arn,
        GranteePrincipal=APP_ROLE,
        RetiringPrincipal=CLEANUP_ROLE,
        Operations=["Decrypt"],
    )
    write_and_delete(sandbox, "s-1", grantId={"S": grant["GrantId"]})

    process_batch(event(*sandbox.removes()), FakeContext(), sandbox.cleaner())

    assert grant["GrantId"] in sandbox.grant_ids()
    assert "has no session-expiry name" in lines(session_logs)["s-1"]["grantRefusal"]
    assert grants_refused(capsys.readouterr().out) == 1


def test_fails_to_retire_a_grant_by_a_token_alone(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = sandbox.create_session("s-2", legacy=True)
    sandbox.read_stream()
    write_and_delete(sandbox, "s-1", grantToken={"S": victim.grant_token})
    cleaner = sandbox.cleaner()
    calls = record_calls(cleaner)

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }

    assert victim.grant_id in sandbox.grant_ids()
    assert calls == []  # a token alone cannot be checked: no call at all
    assert lines(session_logs)["s-1"]["grantRefusal"] == (
        "grantToken without grantId: a grant token cannot be checked against the key's grants "
        "(SessionStore always writes both)"
    )
    assert grants_refused(capsys.readouterr().out) == 1


def test_a_grant_on_another_key_is_never_touched(sandbox: Sandbox) -> None:
    # Named for s-1 itself, but on a key the cleanup was not given.
    other_key = sandbox.kms.create_key(Description="another key")["KeyMetadata"]["Arn"]
    sandbox.key_arn, configured = other_key, sandbox.key_arn
    foreign = sandbox.create_session("s-1", write_item=False, legacy=True)
    sandbox.key_arn = configured
    write_and_delete(sandbox, "s-1", grantId={"S": foreign.grant_id})

    response = process_batch(event(*sandbox.removes()), FakeContext(), sandbox.cleaner())

    assert response == {"batchItemFailures": []}  # not on the configured key: already done
    grants = sandbox.kms.list_grants(KeyId=other_key)["Grants"]
    assert [g["GrantId"] for g in grants] == [foreign.grant_id]


def test_dry_run_says_it_would_refuse_and_would_retire(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = sandbox.create_session("s-2", legacy=True)
    own = sandbox.create_session("s-3", legacy=True)
    sandbox.read_stream()
    write_and_delete(sandbox, "s-1", grantId={"S": victim.grant_id})
    sandbox.delete("s-3")
    cleaner = sandbox.cleaner(dataclasses.replace(sandbox.config, dry_run=True))
    calls = record_calls(cleaner)

    process_batch(event(*sandbox.removes()), FakeContext(), cleaner)

    assert {victim.grant_id, own.grant_id} <= sandbox.grant_ids()
    assert {name for name, _ in calls} == {"ListGrants"}
    logged = lines(session_logs)
    assert logged["s-1"]["steps"]["RetireGrant"] == "refused"
    assert "named for session {'pk': 's-2'}" in logged["s-1"]["grantRefusal"]
    assert logged["s-3"]["steps"]["RetireGrant"] == "dry-run"
    assert logged["s-3"]["grantWouldBeRetired"] is True
    assert grants_refused(capsys.readouterr().out) == 1


def test_a_grant_already_retired_is_done(sandbox: Sandbox) -> None:
    session = sandbox.create_session("s-1", legacy=True)
    sandbox.kms.retire_grant(KeyId=sandbox.key_arn, GrantId=session.grant_id)
    sandbox.read_stream()
    sandbox.delete("s-1")
    cleaner = sandbox.cleaner()
    calls = record_calls(cleaner)

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }
    assert [name for name, _ in calls] == ["ListGrants"]


def test_fails_to_retire_a_grant_id_kms_calls_invalid(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    write_and_delete(sandbox, "s-1", grantId={"S": "not a grant id"})
    cleaner = sandbox.cleaner()
    # Stub: moto accepts any GrantId in ListGrants; KMS answers InvalidGrantIdException.
    answer(cleaner.clients.kms, "ListGrants", lambda _: json_error(400, "InvalidGrantIdException"))

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }
    assert "InvalidGrantIdException" in lines(session_logs)["s-1"]["grantRefusal"]
    assert grants_refused(capsys.readouterr().out) == 1


def test_a_failed_ownership_check_fails_the_record(sandbox: Sandbox) -> None:
    session = sandbox.create_session("s-1", legacy=True)
    sandbox.read_stream()
    sandbox.delete("s-1")
    cleaner = sandbox.cleaner()
    answer(cleaner.clients.kms, "ListGrants", lambda _: json_error(400, "AccessDeniedException"))

    response = process_batch(event(*sandbox.removes()), FakeContext(), cleaner)

    assert len(response["batchItemFailures"]) == 1  # retried: the grant is still there
    assert session.grant_id in sandbox.grant_ids()


def test_list_grants_not_found_is_already_done(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session = sandbox.create_session("s-1", legacy=True)
    sandbox.read_stream()
    sandbox.delete("s-1")
    cleaner = sandbox.cleaner()
    calls = record_calls(cleaner)
    # Stub: moto answers an empty list for a grant id it does not hold; KMS documents
    # NotFoundException for ListGrants too. Either means nothing is left to retire.
    answer(cleaner.clients.kms, "ListGrants", lambda _: json_error(400, "NotFoundException"))

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }
    assert [name for name, _ in calls] == ["ListGrants"]
    assert session.grant_id in sandbox.grant_ids()  # the stub hid it: never retired blind
    assert lines(session_logs)["s-1"]["steps"]["RetireGrant"] == "already-done"


def test_a_grant_retired_between_the_check_and_the_retire_is_done(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session = sandbox.create_session("s-1", legacy=True)
    sandbox.read_stream()
    sandbox.delete("s-1")
    cleaner = sandbox.cleaner()
    # Stub: moto's RetireGrant of a retired grant succeeds; KMS answers NotFoundException.
    answer(cleaner.clients.kms, "RetireGrant", lambda _: json_error(400, "NotFoundException"))

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }
    assert session.grant_id in sandbox.grant_ids()  # moto never saw the stubbed call
    assert lines(session_logs)["s-1"]["steps"]["RetireGrant"] == "already-done"


def test_fails_to_retire_a_grant_named_for_another_incarnation_of_the_same_key(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    # A legacy item of s-1 (incarnation "old") holding the grant of s-1's incarnation "new".
    newer = sandbox.create_grant({"pk": "s-1"}, "new")
    write_and_delete(
        sandbox,
        "s-1",
        grantId={"S": newer["GrantId"]},
        scratchPrefix={"S": "sessions/s-1/old/"},
    )
    cleaner = sandbox.cleaner()
    calls = record_calls(cleaner)

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }

    assert newer["GrantId"] in sandbox.grant_ids()
    assert [name for name, _ in calls] == ["ListGrants"]
    refusal = lines(session_logs)["s-1"]["grantRefusal"]
    assert "incarnation 'new'" in refusal and "not 'old'" in refusal
    assert grants_refused(capsys.readouterr().out) == 1


# --- what the mutation run of steps/grant.py found unpinned (issue 40) -------------------------
def legacy_remove(sandbox: Sandbox, **create: Any) -> tuple[Any, dict[str, Any]]:
    """A legacy session (no incarnation) of s-1, removed: the session and its REMOVE record."""
    session = sandbox.create_session("s-1", legacy=True, object_names=(), **create)
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()
    return session, record


def test_fails_to_retire_a_legacy_grant_of_keys_no_grant_name_can_name(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    session, record = legacy_remove(sandbox)
    record["dynamodb"]["Keys"] = {"pk": {"N": "7"}}  # a Number key: no grant Name holds it
    cleaner = sandbox.cleaner()
    calls = record_calls(cleaner)

    assert process_batch(event(record), FakeContext(), cleaner) == {"batchItemFailures": []}

    assert calls == [] and session.grant_id in sandbox.grant_ids()
    (line,) = [r.session for r in session_logs.records if hasattr(r, "session")]
    assert line["steps"]["RetireGrant"] == "refused"
    assert line["grantRefusal"] == (
        "record Keys {'pk': 7} are not all non-empty Strings: no grant name can name this session"
    )
    assert line["grantId"] == session.grant_id
    assert grants_refused(capsys.readouterr().out) == 1


def test_a_legacy_grant_is_named_for_the_last_segment_of_any_scratch_prefix(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    # A prefix of one segment, ending in a capital X: the incarnation is all of it.
    session, record = legacy_remove(sandbox, prefix="legacyX/")
    cleaner = sandbox.cleaner()
    calls = record_calls(cleaner)

    assert process_batch(event(record), FakeContext(), cleaner) == {"batchItemFailures": []}

    assert [name for name, _ in calls] == ["ListGrants", "RetireGrant"]
    assert session.grant_id not in sandbox.grant_ids()
    line = lines(session_logs)["s-1"]
    assert (line["steps"]["RetireGrant"], line["grantId"]) == ("done", session.grant_id)


def test_a_legacy_grant_with_an_empty_token_is_retired_and_the_token_named_invalid(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session, record = legacy_remove(sandbox, extra={"grantToken": {"S": ""}})

    process_batch(event(record), FakeContext(), sandbox.cleaner())

    assert session.grant_id not in sandbox.grant_ids()
    line = lines(session_logs)["s-1"]
    assert line["steps"]["RetireGrant"] == "done"
    assert "grantToken" in line["invalidAttributes"]


def test_a_legacy_grant_whose_retire_fails_fails_the_record_under_retire_grant(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session, record = legacy_remove(sandbox)
    cleaner = sandbox.cleaner()
    # Stub: moto enforces no key policy.
    answer(cleaner.clients.kms, "RetireGrant", lambda _: json_error(400, "AccessDeniedException"))

    response = process_batch(event(record), FakeContext(), cleaner)

    assert len(response["batchItemFailures"]) == 1
    line = lines(session_logs)["s-1"]
    assert line["failedActions"] == ["RetireGrant"]
    assert line["errors"]["RetireGrant"].startswith("AccessDeniedException")
    assert session.grant_id in sandbox.grant_ids()


def test_a_legacy_grant_whose_name_check_fails_outside_kms_fails_under_retire_grant(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session, record = legacy_remove(sandbox)
    cleaner = sandbox.cleaner()

    def no_credentials(**_: Any) -> None:
        raise NoCredentialsError()

    cleaner.clients.kms.meta.events.register("before-call.kms.ListGrants", no_credentials)

    response = process_batch(event(record), FakeContext(), cleaner)

    assert len(response["batchItemFailures"]) == 1
    line = lines(session_logs)["s-1"]
    assert line["failedActions"] == ["RetireGrant"]
    assert line["errors"]["RetireGrant"] == "NoCredentialsError: Unable to locate credentials"
    assert session.grant_id in sandbox.grant_ids()


def test_a_legacy_grant_whose_name_check_is_refused_by_kms_fails_naming_the_error(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    _, record = legacy_remove(sandbox)
    cleaner = sandbox.cleaner()
    # Stub: moto enforces no key policy.
    answer(
        cleaner.clients.kms, "ListGrants", lambda _: json_error(400, "AccessDeniedException", "no")
    )

    assert len(process_batch(event(record), FakeContext(), cleaner)["batchItemFailures"]) == 1

    line = lines(session_logs)["s-1"]
    assert line["failedActions"] == ["RetireGrant"]
    assert line["errors"]["RetireGrant"] == "AccessDeniedException: no"


def test_a_legacy_grant_with_another_name_is_refused_naming_it(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    grant = sandbox.kms.create_grant(
        KeyId=sandbox.key_arn,
        GranteePrincipal=APP_ROLE,
        RetiringPrincipal=CLEANUP_ROLE,
        Operations=["Decrypt"],
        Name="app-grant",
    )
    write_and_delete(sandbox, "s-1", grantId={"S": grant["GrantId"]})

    process_batch(event(*sandbox.removes()), FakeContext(), sandbox.cleaner())

    assert grant["GrantId"] in sandbox.grant_ids()
    assert lines(session_logs)["s-1"]["grantRefusal"] == (
        f"grant {grant['GrantId']} has no session-expiry name ('app-grant'): it cannot be "
        "proven to be this session's"
    )


@pytest.mark.parametrize(
    ("attributes", "missing", "invalid"),
    [
        ({}, ["grantId", "grantToken"], []),
        ({"grantId": {"S": ""}}, ["grantToken"], ["grantId"]),
    ],
    ids=["no-grant", "empty-grant-id"],
)
def test_an_item_without_a_usable_grant_names_what_is_missing_or_invalid(
    sandbox: Sandbox,
    session_logs: pytest.LogCaptureFixture,
    attributes: dict[str, dict[str, str]],
    missing: list[str],
    invalid: list[str],
) -> None:
    write_and_delete(sandbox, "s-1", **attributes)
    cleaner = sandbox.cleaner(dataclasses.replace(sandbox.config, websocket_endpoint=None))
    calls = record_calls(cleaner)

    process_batch(event(*sandbox.removes()), FakeContext(), cleaner)

    line = lines(session_logs)["s-1"]
    assert calls == [] and "RetireGrant" not in line.get("steps", {})
    assert [a for a in line.get("missingAttributes", []) if a.startswith("grant")] == missing
    assert [a for a in line.get("invalidAttributes", []) if a.startswith("grant")] == invalid


def test_the_log_names_the_grant_id_and_never_its_token(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session, record = legacy_remove(sandbox)

    process_batch(event(record), FakeContext(), sandbox.cleaner())

    line = lines(session_logs)["s-1"]
    assert line["grantId"] == session.grant_id
    assert session.grant_token not in json.dumps(line)


# ``GrantStep``'s hand-over (``_hand_over``): a grant KMS does not find within its consistency
# window is left to the grant sweep; when that cannot be done, the step fails as ``Ownership``.
# ``RetireGrant``'s ``NotFoundException`` is stubbed (moto retires any grant id at once).

YOUNG_GRANT = "g-young"


def young_grant_step(sandbox: Sandbox) -> tuple[GrantStep, Plan, ClaimBatcher]:
    """The step for a grant claimed a minute ago (``releasing``: this run marked it), whose
    ``RetireGrant`` KMS answers ``NotFoundException``; its plan, with the grant owned."""
    sandbox.claim(
        KIND_GRANT, YOUNG_GRANT, "s-1", "inc1", claimed_at=time.time() - 60, state=STATE_RELEASING
    )
    kms = sandbox.cleaner().clients.kms
    answer(kms, "RetireGrant", lambda _: json_error(400, "NotFoundException"))
    step = GrantStep(RuntimeConfig(grant_key_arn=sandbox.key_arn), kms)
    ref = ClaimRef(KIND_GRANT, YOUNG_GRANT)
    plan = Plan(PLAN_RUN, claims=(ref,), ownership={ref: Verdict(VERDICT_OWNED)})
    return step, plan, ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE)


def young_context(batcher: ClaimBatcher, claimant: Claimant | None) -> StepContext:
    session = Session(
        {"incarnation": "inc1"}, {"pk": "s-1"}, "explicit", None, parse_record({}), "0" * 32
    )
    return StepContext(session, claim_batcher=batcher, claimant=claimant)


def test_rule_a_hand_over_without_a_claimant_fails_the_step_as_ownership(
    sandbox: Sandbox,
) -> None:
    """The claim was read, but the context names no claimant (the runner always gives one;
    a custom runner might not): nothing is handed over, the step fails as ``Ownership`` naming
    the grant, and the record stays ``releasing``."""
    step, plan, batcher = young_grant_step(sandbox)

    with pytest.raises(StepFailed) as caught:
        step.run(plan, young_context(batcher, None))

    assert (caught.value.action, caught.value.detail) == (
        "Ownership",
        f"grant {YOUNG_GRANT}: no claim to hand over",
    )
    assert claim_state(sandbox.ddb, KIND_GRANT, YOUNG_GRANT) == STATE_RELEASING


def test_rule_a_hand_over_that_fails_fails_the_step_as_ownership_with_its_error(
    sandbox: Sandbox,
) -> None:
    """The hand-over's ``UpdateItem`` fails (a fault outside botocore): the step fails as
    ``Ownership`` with that error's text, never counted done or refused."""
    step, plan, batcher = young_grant_step(sandbox)

    def broken(**_: Any) -> None:
        raise RuntimeError("the hand-over's write broke")

    sandbox.ddb.meta.events.register("before-call.dynamodb.UpdateItem", broken)

    with pytest.raises(StepFailed) as caught:
        step.run(plan, young_context(batcher, Claimant(owner_token({"pk": "s-1"}), "inc1")))

    assert caught.value.action == "Ownership"
    assert caught.value.detail == "RuntimeError: the hand-over's write broke"
