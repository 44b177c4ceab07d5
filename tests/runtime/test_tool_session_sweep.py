"""The tool-session sweep stops AgentCore code interpreter and browser sessions no live session
owns, once they are past the stream path's bound, and nothing else.

Real boto3 calls against the local emulator: DynamoDB (the session and ownership tables, moto)
and AgentCore's ``List…Sessions``/``Stop…Session`` (the emulator's own, `testing.agentcore`;
moto has no AgentCore data plane). One failure is injected with a botocore ``before-call``
handler (the emulator's faults match a path, and every Stop of a tool shares one).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from botocore.exceptions import ClientError
from ownership_support import OWNERSHIP_TABLE, create_ownership_table, put_claim, raw_claim
from runtime_support import TABLE
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.ownership import (
    ATTR_GONE_SINCE,
    KIND_BROWSER,
    KIND_CODE_INTERPRETER,
    STATE_RELEASED,
)
from session_expiry_runtime.sweeps import tool_session_listing, tool_session_sweeper
from session_expiry_runtime.sweeps.tool_session_sweeper import (
    SweepSettings,
    ToolSessionSweeper,
    ToolSessionSweepFailed,
)

from cdk_session_expiry.testing import LocalEmulator
from cdk_session_expiry.testing.agentcore import (
    BROWSER,
    CODE_INTERPRETER,
    MODEL_VOCABULARY,
    REFERENCE_VOCABULARY,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
OLD = NOW - timedelta(hours=2)  # past the 15-minute grace
PENDING = 7 * 3600
INTERPRETER = "coder-Ab12Cd34Ef"
BROWSER_ID = "web-Q1w2E3r4T5"
OTHER_INTERPRETER = "theirs-Zz99Yy88Xx"  # a tool the construct was not given


@pytest.fixture(scope="module")
def emulator() -> Iterator[LocalEmulator]:
    with LocalEmulator() as emu:
        yield emu


@pytest.fixture
def ddb(emulator: LocalEmulator) -> Any:
    emulator.reset()
    client = emulator.client("dynamodb")
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    create_ownership_table(client)
    return client


def sweeper(emulator: LocalEmulator, now: datetime = NOW, **config: Any) -> ToolSessionSweeper:
    settings = {
        "table_name": TABLE,
        "ownership_table_name": OWNERSHIP_TABLE,
        "code_interpreter_id": INTERPRETER,
        "browser_id": BROWSER_ID,
        **config,
    }
    return ToolSessionSweeper(
        RuntimeConfig(**settings),
        agentcore_client=emulator.client("bedrock-agentcore"),
        dynamodb_client=emulator.client("dynamodb"),
        metrics=MetricsRecorder("Test"),
        settings=SweepSettings(pending_seconds=PENDING, requests_per_second=1000),
        clock=lambda: now,
    )


def started(
    emulator: LocalEmulator,
    ddb: Any,
    session_id: str,
    *,
    tool: str = INTERPRETER,
    owner: str | None = "s-1",
    created_at: datetime = OLD,
    live: bool = False,
    expires_in: int = 3600,
    **claim: Any,
) -> None:
    """A running tool session recorded by ``owner`` (its claim, and its item while ``live``)."""
    kind, emulated = (
        (KIND_BROWSER, BROWSER) if tool == BROWSER_ID else (KIND_CODE_INTERPRETER, CODE_INTERPRETER)
    )
    emulator.start_agent_session(emulated, tool, session_id, created_at=created_at)
    if owner is None:
        return
    put_claim(ddb, kind, session_id, key={"pk": owner}, incarnation="inc1", **claim)
    if live:
        ids = "browserSessionIds" if kind == KIND_BROWSER else "codeInterpreterSessionIds"
        ddb.put_item(
            TableName=TABLE,
            Item={
                "pk": {"S": owner},
                "incarnation": {"S": "inc1"},
                "expiresAt": {"N": str(int(NOW.timestamp()) + expires_in)},
                ids: {"SS": [session_id]},
            },
        )


def gone_since(ddb: Any, session_id: str, seconds_ago: int) -> None:
    ddb.update_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": f"codeInterpreter#{session_id}"}},
        UpdateExpression="SET goneSince = :g",
        ExpressionAttributeValues={":g": {"N": str(int(NOW.timestamp()) - seconds_ago)}},
    )


def running(emulator: LocalEmulator) -> set[str]:
    return {session for _, session in emulator.agentcore.running()}


def stops(emulator: LocalEmulator) -> list[str]:
    return [call.session_id for call in emulator.agentcore.calls]


def test_an_orphan_is_pending_first_then_stopped_after_the_bound(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "orphan1")  # its session item is gone: the REMOVE was lost

    first = sweeper(emulator).sweep()
    assert first.kept_pending == 1 and first.orphans_stopped == 0
    assert "orphan1" in running(emulator)
    record = raw_claim(ddb, KIND_CODE_INTERPRETER, "orphan1")
    assert record is not None and record[ATTR_GONE_SINCE] == {"N": str(int(NOW.timestamp()))}

    within = sweeper(emulator, NOW + timedelta(seconds=PENDING - 60)).sweep()
    assert within.kept_pending == 1 and "orphan1" in running(emulator)

    past = sweeper(emulator, NOW + timedelta(seconds=PENDING + 1))
    report = past.sweep()
    assert report.orphans_stopped == 1 and report.failures == 0
    assert "orphan1" not in running(emulator)
    assert past.metrics.snapshot()["OrphanToolSessionsStopped"] == 1
    released = raw_claim(ddb, KIND_CODE_INTERPRETER, "orphan1")
    assert released is not None and released["state"] == {"S": STATE_RELEASED}


def test_a_live_sessions_tool_session_is_kept_and_its_old_sighting_removed(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "mine1", live=True)
    gone_since(ddb, "mine1", PENDING + 60)  # an earlier run saw it off its session

    report = sweeper(emulator).sweep()

    assert report.kept_live == 1 and report.orphans_stopped == 0
    assert stops(emulator) == [] and "mine1" in running(emulator)
    record = raw_claim(ddb, KIND_CODE_INTERPRETER, "mine1")
    assert record is not None and ATTR_GONE_SINCE not in record


def test_a_session_within_the_grace_period_is_kept_without_a_read(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "young1", created_at=NOW - timedelta(minutes=5))
    gone_since(ddb, "young1", PENDING + 60)

    report = sweeper(emulator).sweep()

    assert report.kept_recent == 1 and report.checked == 1
    assert stops(emulator) == [] and "young1" in running(emulator)


def test_an_expired_sessions_tool_session_is_stopped_early_not_as_an_orphan(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "late1", live=True, expires_in=-60)  # TTL passed, not yet deleted

    swept = sweeper(emulator)
    report = swept.sweep()

    assert report.expired_stopped == 1 and report.orphans_stopped == 0
    assert stops(emulator) == ["late1"]
    assert swept.metrics.snapshot()["ExpiredSessionToolSessionsStopped"] == 1
    assert swept.metrics.snapshot()["OrphanToolSessionsStopped"] == 0


def test_a_session_without_an_ownership_record_is_never_stopped(
    emulator: LocalEmulator, ddb: Any
) -> None:
    # Another application's session on the same tool, or one the store never recorded.
    started(emulator, ddb, "unrecorded1", owner=None)

    report = sweeper(emulator).sweep()

    assert report.not_ours == 1 and stops(emulator) == []


def test_a_released_record_makes_no_call(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "done1", state=STATE_RELEASED)

    report = sweeper(emulator).sweep()

    assert report.kept_released == 1 and stops(emulator) == []


def test_pages_are_followed(
    emulator: LocalEmulator, ddb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tool_session_listing, "LIST_SESSIONS_LIMIT", 2)
    orphans = [f"orphan{n}" for n in range(5)]
    for session_id in orphans:
        started(emulator, ddb, session_id, owner=f"s-{session_id}")
        gone_since(ddb, session_id, PENDING + 60)

    report = sweeper(emulator, browser_id=None).sweep()

    assert report.orphans_stopped == 5 and sorted(stops(emulator)) == orphans
    # READY: pages of 2, 2 and 1 session; ACTIVE: refused (the emulator speaks the model's).
    assert [status for _, _, status in emulator.agentcore.list_calls] == [
        "READY",
        "READY",
        "READY",
        "ACTIVE",
    ]
    assert report.pages == 3 and report.listed == 5


@pytest.mark.parametrize("vocabulary", [MODEL_VOCABULARY, REFERENCE_VOCABULARY])
def test_both_status_vocabularies_find_the_orphan_and_skip_ended_sessions(
    emulator: LocalEmulator, ddb: Any, vocabulary: tuple[str, str]
) -> None:
    started(emulator, ddb, "orphan1")
    gone_since(ddb, "orphan1", PENDING + 60)
    started(emulator, ddb, "ended1", owner="s-2")
    gone_since(ddb, "ended1", PENDING + 60)
    emulator.client("bedrock-agentcore").stop_code_interpreter_session(
        codeInterpreterIdentifier=INTERPRETER, sessionId="ended1"
    )
    emulator.agentcore.calls.clear()
    emulator.agentcore.vocabulary = vocabulary

    report = sweeper(emulator, browser_id=None).sweep()

    assert report.orphans_stopped == 1 and report.failures == 0
    assert stops(emulator) == ["orphan1"]  # the ended one is neither listed running nor stopped


def test_a_summary_with_an_ended_status_of_either_vocabulary_is_never_stopped() -> None:
    tool = tool_session_listing.tools_of(RuntimeConfig(code_interpreter_id=INTERPRETER))[0]
    for status in ("TERMINATED", "STOPPED", "STOPPING"):
        summary = {"codeInterpreterIdentifier": INTERPRETER, "sessionId": "x", "status": status}
        assert not tool_session_listing._is_running(summary, tool)
    for status in ("READY", "ACTIVE"):
        summary = {"codeInterpreterIdentifier": INTERPRETER, "sessionId": "x", "status": status}
        assert tool_session_listing._is_running(summary, tool)


def test_a_session_of_a_tool_the_construct_was_not_given_is_never_listed_or_stopped(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "theirs1", tool=OTHER_INTERPRETER)
    gone_since(ddb, "theirs1", PENDING + 60)  # even a record that would make it an orphan
    started(emulator, ddb, "web1", tool=BROWSER_ID, owner="s-web", live=True)

    report = sweeper(emulator).sweep()

    assert {target for _, target, _ in emulator.agentcore.list_calls} == {INTERPRETER, BROWSER_ID}
    assert stops(emulator) == [] and "theirs1" in running(emulator)
    assert report.tools == 2 and report.kept_live == 1


def test_a_failed_stop_fails_only_its_session_and_the_handler_raises(
    emulator: LocalEmulator,
    ddb: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for session_id in ("orphanA", "orphanB", "orphanC"):
        started(emulator, ddb, session_id, owner=f"s-{session_id}")
        gone_since(ddb, session_id, PENDING + 60)
    swept = sweeper(emulator, browser_id=None)

    def refuse_b(params: dict[str, Any], **_: Any) -> None:
        if params.get("sessionId") == "orphanB":
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "injected"}},
                "StopCodeInterpreterSession",
            )

    events = swept._agentcore.meta.events
    events.register("before-parameter-build.bedrock-agentcore.StopCodeInterpreterSession", refuse_b)
    try:
        monkeypatch.setattr(tool_session_sweeper, "_sweeper", swept)
        with pytest.raises(ToolSessionSweepFailed, match="1 call"):
            tool_session_sweeper.handler({}, None)
    finally:
        events.unregister(
            "before-parameter-build.bedrock-agentcore.StopCodeInterpreterSession", refuse_b
        )

    assert running(emulator) == {"orphanB"}
    written = json.loads(capsys.readouterr().out.strip().splitlines()[-1])  # the flushed EMF
    assert written["OrphanToolSessionsStopped"] == 2 and written["ToolSessionSweepFailures"] == 1
    record = raw_claim(ddb, KIND_CODE_INTERPRETER, "orphanB")
    assert record is not None and record["state"] != {"S": STATE_RELEASED}


def test_a_dry_run_stops_and_writes_nothing(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "orphan1")
    gone_since(ddb, "orphan1", PENDING + 60)
    started(emulator, ddb, "fresh1", owner="s-3")

    swept = sweeper(emulator, dry_run=True)
    report = swept.sweep()

    assert report.would_stop == 1 and report.kept_pending == 1 and stops(emulator) == []
    fresh = raw_claim(ddb, KIND_CODE_INTERPRETER, "fresh1")
    assert fresh is not None and ATTR_GONE_SINCE not in fresh
    assert swept.metrics.snapshot()["ToolSessionsWouldBeStopped"] == 1


def test_the_time_guard_ends_the_run_incomplete(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "orphan1")
    swept = sweeper(emulator)

    report = swept.sweep(out_of_time=lambda: True)

    assert report.incomplete and report.checked == 0
    assert swept.metrics.snapshot()["ToolSessionSweepIncomplete"] == 1


def test_fails_a_sweep_setting_that_is_not_a_positive_whole_number() -> None:
    env = {"SESSION_EXPIRY_TOOL_SESSION_SWEEP_PENDING_SECONDS": "soon"}
    expected = "SESSION_EXPIRY_TOOL_SESSION_SWEEP_PENDING_SECONDS='soon': expected a positive"
    with pytest.raises(ValueError, match=expected):
        SweepSettings.from_env(env)


def test_fails_without_an_ownership_table() -> None:
    with pytest.raises(ValueError, match="SESSION_EXPIRY_OWNERSHIP_TABLE_NAME is not set"):
        ToolSessionSweeper(
            RuntimeConfig(table_name=TABLE, code_interpreter_id=INTERPRETER),
            agentcore_client=None,
            dynamodb_client=None,
            metrics=MetricsRecorder("Test"),
        )


def test_two_runs_in_one_process_write_only_their_own_metrics(
    emulator: LocalEmulator, ddb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 39 (threads of one execution environment): the held run stops the orphan and has
    # counted it when it is held, before it writes its metrics; the other run, start to end
    # meanwhile, finds none left. Before, one process-wide recorder: the other run wrote the
    # held run's OrphanToolSessionsStopped (alarmed) as its own.
    from test_concurrent_sweeps_and_drains import (
        HELD,
        by_thread,
        held_until,
        run_held_then_other,
    )

    started(emulator, ddb, "orphan1", owner="s-orphan1")
    gone_since(ddb, "orphan1", PENDING + 60)
    monkeypatch.setattr(tool_session_sweeper, "_sweeper", sweeper(emulator, browser_id=None))
    stdout = by_thread(monkeypatch)
    released = threading.Event()
    reached = held_until(monkeypatch, ToolSessionSweeper, "sweep", released)

    held, other = run_held_then_other(
        lambda: tool_session_sweeper.handler({}, None),
        lambda: tool_session_sweeper.handler({}, None),
        reached,
        released,
    )

    assert (held["orphans_stopped"], other["orphans_stopped"]) == (1, 0)
    assert stdout.emf(HELD)["OrphanToolSessionsStopped"] == 1
    assert stdout.emf(threading.current_thread().name)["OrphanToolSessionsStopped"] == 0
