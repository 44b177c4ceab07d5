"""The tool-session sweep's rules that `make mutation` found unpinned (issue 40), each named for
the rule: the exact ends of the grace period and of the pending bound, a session item's
``notAfter``, the ownership record's owner and incarnation in every write, the sweep's
settings and clients, its log lines and metrics.

Real boto3 calls against the local emulator (DynamoDB in moto, AgentCore in the emulator), as
`test_tool_session_sweep`; a failure is injected with a botocore ``before-call`` handler.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError
from ownership_support import OWNERSHIP_TABLE, calls_of, put_claim, raw_claim
from runtime_support import TABLE
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.ownership import (
    ATTR_GONE_SINCE,
    KIND_CODE_INTERPRETER,
    STATE_RELEASED,
    Claim,
    owner_token,
)
from session_expiry_runtime.sweeps import tool_session_sweeper
from session_expiry_runtime.sweeps.tool_session_sweeper import (
    SweepSettings,
    ToolSessionSweeper,
    ToolSessionSweepFailed,
    ToolSweepReport,
)
from test_tool_session_sweep import (
    BROWSER_ID,
    INTERPRETER,
    NOW,
    OLD,
    PENDING,
    ddb,
    emulator,
    gone_since,
    running,
    started,
    stops,
    sweeper,
)

from cdk_session_expiry.testing import LocalEmulator

__all__ = ["ddb", "emulator"]  # the fixtures, shared with test_tool_session_sweep.py

GRACE = 900
NOW_S = int(NOW.timestamp())


def record(ddb: Any, session_id: str) -> dict[str, Any]:
    item = raw_claim(ddb, KIND_CODE_INTERPRETER, session_id)
    assert item is not None
    return item


def key_of(session_id: str) -> dict[str, Any]:
    return {"resource": {"S": f"codeInterpreter#{session_id}"}}


# --- settings, clients, construction -------------------------------------------------------


def test_rule_settings_default_when_unset_and_each_variable_sets_its_own_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert SweepSettings.from_env({}) == SweepSettings(900, 7 * 3600, 5)
    prefix = "SESSION_EXPIRY_TOOL_SESSION_SWEEP_"
    only_last = {f"{prefix}REQUESTS_PER_SECOND": "7"}  # the first two unset: still read
    assert SweepSettings.from_env(only_last) == SweepSettings(900, 7 * 3600, 7)
    every = {f"{prefix}GRACE_SECONDS": "60", f"{prefix}PENDING_SECONDS": "1", **only_last}
    assert SweepSettings.from_env(every) == SweepSettings(60, 1, 7)
    monkeypatch.setenv(f"{prefix}GRACE_SECONDS", "61")  # no mapping: the environment
    assert SweepSettings.from_env().grace_seconds == 61


@pytest.mark.parametrize("raw", ["0", "-1", "1.5", ""])
def test_fails_a_sweep_setting_of_zero_or_not_a_whole_number(raw: str) -> None:
    name = "SESSION_EXPIRY_TOOL_SESSION_SWEEP_GRACE_SECONDS"
    with pytest.raises(ValueError) as raised:
        SweepSettings.from_env({name: raw})
    assert str(raised.value) == f"{name}={raw!r}: expected a positive whole number"


def test_fails_without_a_session_table() -> None:
    with pytest.raises(ValueError) as raised:
        ToolSessionSweeper(
            RuntimeConfig(ownership_table_name=OWNERSHIP_TABLE, code_interpreter_id=INTERPRETER),
            agentcore_client=None,
            dynamodb_client=None,
            metrics=MetricsRecorder("Test"),
        )
    assert str(raised.value) == (
        "SESSION_EXPIRY_TABLE_NAME is not set: the tool-session sweep needs it"
    )


def test_rule_default_settings_and_pace() -> None:
    swept = ToolSessionSweeper(
        RuntimeConfig(table_name=TABLE, ownership_table_name=OWNERSHIP_TABLE),
        agentcore_client=None,
        dynamodb_client=None,
        metrics=MetricsRecorder("Test"),
    )
    assert swept.settings == SweepSettings()
    assert swept.pacer.per_second == 5 and swept.tools == []
    before = datetime.now(tool_session_sweeper.timezone.utc)
    now = swept._clock()
    assert now.tzinfo is not None and before <= now


def test_rule_clients_have_bounded_timeouts_and_retries() -> None:
    config = tool_session_sweeper.client_config()
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}
    assert (config.connect_timeout, config.read_timeout) == (3, 5)


def test_rule_the_process_sweeper_is_built_once_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SESSION_EXPIRY_TABLE_NAME", TABLE)
    monkeypatch.setenv("SESSION_EXPIRY_OWNERSHIP_TABLE_NAME", OWNERSHIP_TABLE)
    monkeypatch.setenv("SESSION_EXPIRY_METRICS_NAMESPACE", "Swept")
    monkeypatch.setenv("SESSION_EXPIRY_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND", "3")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(tool_session_sweeper, "_sweeper", None)

    built = tool_session_sweeper.get_tool_session_sweeper()

    assert tool_session_sweeper.get_tool_session_sweeper() is built
    assert built.config.table_name == TABLE and built.metrics.namespace == "Swept"
    assert built.settings.requests_per_second == 3
    for client, service in ((built._agentcore, "bedrock-agentcore"), (built._ddb, "dynamodb")):
        assert client.meta.service_model.service_name == service
        assert client.meta.config.read_timeout == 5
        assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 3}


def test_rule_an_invocation_has_its_own_metrics_and_shares_the_rest(
    emulator: LocalEmulator,
) -> None:
    swept = sweeper(emulator)
    swept.metrics.count("Earlier", 1)
    one = swept.for_invocation()
    assert one.metrics is not swept.metrics and one.metrics.snapshot() == {}
    assert one.metrics.namespace == "Test"
    assert one.config is swept.config and one.pacer is swept.pacer


def test_rule_report_as_dict() -> None:
    assert ToolSweepReport(tools=2, failures=1).as_dict()["failures"] == 1


# --- judging --------------------------------------------------------------------------------


def test_rule_grace_ends_exactly_at_its_length(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "edge1", created_at=NOW - timedelta(seconds=GRACE))
    started(emulator, ddb, "young1", owner="s-2", created_at=NOW - timedelta(seconds=GRACE - 1))

    report = sweeper(emulator, browser_id=None).sweep()

    assert (report.kept_recent, report.kept_pending) == (1, 1)
    assert ATTR_GONE_SINCE in record(ddb, "edge1")
    assert ATTR_GONE_SINCE not in record(ddb, "young1")


def test_rule_a_session_without_created_at_is_recent(emulator: LocalEmulator) -> None:
    verdict = sweeper(emulator).judge(
        sweeper(emulator).tools[0], "nodate", None, NOW
    )  # no read at all: no table is needed
    assert verdict.verdict == "recent" and verdict.claim is None


def test_rule_both_reads_are_strongly_consistent(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "mine1", live=True)
    swept = sweeper(emulator, browser_id=None)
    calls = calls_of(swept._ddb)

    assert swept.sweep().kept_live == 1

    reads = [params for name, params in calls if name == "GetItem"]
    assert [(p["TableName"], p["ConsistentRead"]) for p in reads] == [
        (OWNERSHIP_TABLE, True),
        (TABLE, True),
    ]
    assert reads[1]["Key"] == {"pk": {"S": "s-1"}}


def test_rule_an_owner_of_other_key_names_is_not_ours(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "sorted1", owner=None)
    put_claim(ddb, KIND_CODE_INTERPRETER, "sorted1", key={"pk": "s-1", "sk": "a"}, incarnation="i")
    started(emulator, ddb, "garbled1", owner=None)
    item = put_claim(ddb, KIND_CODE_INTERPRETER, "garbled1", key={"pk": "s-1"}, incarnation="i")
    ddb.put_item(TableName=OWNERSHIP_TABLE, Item={**item, "owner": {"S": "not-a-token!"}})

    report = sweeper(emulator, browser_id=None).sweep()

    assert report.not_ours == 2 and stops(emulator) == []
    assert ATTR_GONE_SINCE not in record(ddb, "sorted1")


def test_rule_an_owner_with_the_tables_sort_key_is_ours(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "sorted1", owner=None)
    put_claim(ddb, KIND_CODE_INTERPRETER, "sorted1", key={"pk": "s-1", "sk": "a"}, incarnation="i")

    ddb.create_table(
        TableName="sorted",
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )

    report = sweeper(emulator, browser_id=None, table_name="sorted", sort_key="sk").sweep()

    assert report.kept_pending == 1 and report.not_ours == 0


@pytest.mark.parametrize(
    ("not_after", "verdict"),
    [({"N": str(NOW_S)}, "expired"), ({"S": "soon"}, "expired"), ({"N": str(NOW_S + 1)}, "live")],
)
def test_rule_a_session_item_past_or_at_its_not_after_is_expired(
    emulator: LocalEmulator, ddb: Any, not_after: dict[str, str], verdict: str
) -> None:
    started(emulator, ddb, "late1", live=True)
    ddb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "s-1"}},
        UpdateExpression="SET notAfter = :n",
        ExpressionAttributeValues={":n": not_after},
    )
    swept = sweeper(emulator, browser_id=None)

    assert swept.judge(swept.tools[0], "late1", OLD, NOW).verdict == verdict


def test_rule_a_session_item_naming_another_tool_session_is_gone(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "mine1")
    ddb.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": "s-1"},
            "expiresAt": {"N": str(NOW_S + 3600)},
            "codeInterpreterSessionIds": {"SS": ["another"]},
        },
    )

    assert sweeper(emulator, browser_id=None).sweep().kept_pending == 1
    assert record(ddb, "mine1")[ATTR_GONE_SINCE] == {"N": str(NOW_S)}


def test_rule_the_pending_bound_ends_exactly_at_its_length(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "edge1")
    gone_since(ddb, "edge1", PENDING)
    started(emulator, ddb, "within1", owner="s-2")
    gone_since(ddb, "within1", PENDING - 1)

    report = sweeper(emulator, browser_id=None).sweep()

    assert (report.orphans_stopped, report.kept_pending) == (1, 1)
    assert stops(emulator) == ["edge1"]


def test_rule_an_earlier_sighting_is_kept_by_a_later_first_sighting(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "orphan1")
    swept = sweeper(emulator)
    swept._mark_gone(key_of("orphan1"), NOW - timedelta(hours=1))
    swept._mark_gone(key_of("orphan1"), NOW)  # if_not_exists: the first one stands
    assert record(ddb, "orphan1")[ATTR_GONE_SINCE] == {"N": str(NOW_S - 3600)}


def test_rule_a_sighting_is_never_written_without_a_record(
    emulator: LocalEmulator, ddb: Any
) -> None:
    sweeper(emulator)._mark_gone(key_of("nobody"), NOW)  # the condition fails: quietly
    assert raw_claim(ddb, KIND_CODE_INTERPRETER, "nobody") is None


def test_rule_a_sighting_is_removed_only_while_it_is_the_one_read(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "mine1")
    gone_since(ddb, "mine1", 60)
    swept = sweeper(emulator)
    swept._unmark_gone(key_of("mine1"), Decimal(NOW_S - 120))  # another run's since
    assert record(ddb, "mine1")[ATTR_GONE_SINCE] == {"N": str(NOW_S - 60)}
    swept._unmark_gone(key_of("mine1"), Decimal(NOW_S - 60))
    assert ATTR_GONE_SINCE not in record(ddb, "mine1")


def test_rule_an_expired_owners_sighting_is_removed_but_not_in_a_dry_run(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "late1", live=True, expires_in=-60)
    gone_since(ddb, "late1", 60)
    dry = sweeper(emulator, dry_run=True)
    assert dry.judge(dry.tools[0], "late1", OLD, NOW).verdict == "expired"
    assert ATTR_GONE_SINCE in record(ddb, "late1")

    swept = sweeper(emulator)
    assert swept.judge(swept.tools[0], "late1", OLD, NOW).verdict == "expired"
    assert ATTR_GONE_SINCE not in record(ddb, "late1")


def test_rule_a_failed_sighting_write_fails_the_session(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "orphan1")
    swept = sweeper(emulator)
    with pytest.raises(ClientError):
        swept._mark_gone(key_of("orphan1") | {"extra": {"S": "x"}}, NOW)  # not the table's key
    with pytest.raises(ClientError):
        swept._unmark_gone(key_of("orphan1") | {"extra": {"S": "x"}}, Decimal(1))


# --- acting ---------------------------------------------------------------------------------


def claim_of(ddb: Any, session_id: str) -> Claim:
    claim = Claim.from_item(record(ddb, session_id))
    assert claim is not None
    return claim


@pytest.mark.parametrize("field", ["owner", "incarnation"])
def test_rule_a_release_needs_the_same_owner_and_incarnation(
    emulator: LocalEmulator, ddb: Any, field: str
) -> None:
    started(emulator, ddb, "orphan1")
    claim = claim_of(ddb, "orphan1")
    other = owner_token({"pk": "s-9"}) if field == "owner" else "inc9"
    moved = Claim(**{**claim.__dict__, field: other})

    sweeper(emulator)._release(moved, NOW)  # taken over since: left alone, quietly

    assert record(ddb, "orphan1")["state"] != {"S": STATE_RELEASED}
    sweeper(emulator)._release(claim, NOW + timedelta(seconds=5))
    after = record(ddb, "orphan1")
    assert after["state"] == {"S": STATE_RELEASED}
    assert after["stateSince"] == {"N": str(NOW_S + 5)}


def test_rule_a_release_that_fails_otherwise_raises(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "orphan1")
    claim = claim_of(ddb, "orphan1")
    swept = sweeper(emulator, ownership_table_name="no-such-table")
    with pytest.raises(ClientError):
        swept._release(claim, NOW)


def test_rule_stopping_an_ended_session_is_success_and_another_failure_raises(
    emulator: LocalEmulator, ddb: Any
) -> None:
    swept = sweeper(emulator)
    tool = swept.tools[0]
    swept.stop(tool, "never-started")  # ResourceNotFoundException: already ended

    def throttle(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "ThrottlingException"}}, "StopCodeInterpreterSession")

    event = "before-parameter-build.bedrock-agentcore.StopCodeInterpreterSession"
    swept._agentcore.meta.events.register(event, throttle)
    try:
        with pytest.raises(ClientError, match="ThrottlingException"):
            swept.stop(tool, "never-started")
    finally:
        swept._agentcore.meta.events.unregister(event, throttle)


def test_rule_stop_names_the_tool_and_the_session(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "web1", tool=BROWSER_ID, owner=None)
    swept = sweeper(emulator)
    swept.stop(swept.tools[1], "web1")
    assert "web1" not in running(emulator)


def test_rule_a_failed_read_fails_only_its_session_and_is_logged(
    emulator: LocalEmulator, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    started(emulator, ddb, "orphan1")
    gone_since(ddb, "orphan1", PENDING + 60)
    started(emulator, ddb, "orphan2", owner="s-2")
    gone_since(ddb, "orphan2", PENDING + 60)
    swept = sweeper(emulator, browser_id=None)

    def refuse_first(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key") == key_of("orphan1"):
            raise ClientError({"Error": {"Code": "InternalServerError"}}, "GetItem")

    event = "before-parameter-build.dynamodb.GetItem"
    swept._ddb.meta.events.register(event, refuse_first)
    try:
        with caplog.at_level(logging.INFO, logger=swept.logger.name):
            report = swept.sweep()
    finally:
        swept._ddb.meta.events.unregister(event, refuse_first)

    assert (report.failures, report.orphans_stopped, report.checked) == (1, 1, 2)
    assert swept.metrics.snapshot()["ToolSessionSweepFailures"] == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == [
        f"codeInterpreter session orphan1 of {INTERPRETER}: An error occurred "
        "(InternalServerError) when calling the GetItem operation: Unknown"
    ]


def test_rule_a_stopped_session_is_logged_with_its_verdict(
    emulator: LocalEmulator, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    started(emulator, ddb, "orphan1")
    gone_since(ddb, "orphan1", PENDING + 60)
    started(emulator, ddb, "late1", owner="s-2", live=True, expires_in=-60)

    for dry_run, done in ((True, "would be stopped (dry run)"), (False, "stopped")):
        caplog.clear()
        swept = sweeper(emulator, browser_id=None, dry_run=dry_run)
        with caplog.at_level(logging.INFO, logger=swept.logger.name):
            report = swept.sweep()
        counts = (report.would_stop, report.orphans_stopped, report.expired_stopped)
        assert counts == ((2, 0, 0) if dry_run else (0, 1, 1))
        warned = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert [r.getMessage() for r in warned] == [
            f"codeInterpreter session orphan1 of {INTERPRETER}: owner gone: orphan, {done}",
            f"codeInterpreter session late1 of {INTERPRETER}: owner expired, {done}",
        ]
        assert [r.toolSessionSweep for r in warned] == [  # type: ignore[attr-defined]
            {"sessionId": "orphan1", "verdict": "gone"},
            {"sessionId": "late1", "verdict": "expired"},
        ]


def test_rule_the_run_is_logged_and_counted(
    emulator: LocalEmulator, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    started(emulator, ddb, "mine1", live=True)
    swept = sweeper(emulator, browser_id=None)
    with caplog.at_level(logging.INFO, logger=swept.logger.name):
        report = swept.sweep()

    (line,) = [r for r in caplog.records if r.levelno == logging.INFO]
    assert line.getMessage() == f"tool-session sweep {report.as_dict()}"
    assert line.toolSessionSweep == report.as_dict()  # type: ignore[attr-defined]
    assert swept.metrics.snapshot() == {
        "OrphanToolSessionsStopped": 0,
        "ExpiredSessionToolSessionsStopped": 0,
        "ToolSessionSweepIncomplete": 0,
        "ToolSessionsChecked": 1,
    }


def test_rule_a_failed_listing_ends_the_run_before_the_next_tool(
    emulator: LocalEmulator, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    started(emulator, ddb, "web1", tool=BROWSER_ID, owner="s-web", live=True)
    swept = sweeper(emulator)

    def refuse(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "AccessDeniedException"}}, "ListCodeInterpreterSessions"
        )

    event = "before-parameter-build.bedrock-agentcore.ListCodeInterpreterSessions"
    swept._agentcore.meta.events.register(event, refuse)
    try:
        with caplog.at_level(logging.INFO, logger=swept.logger.name):
            report = swept.sweep()
    finally:
        swept._agentcore.meta.events.unregister(event, refuse)

    assert report.incomplete and report.failures == 1 and report.checked == 0
    assert [target for _, target, _ in emulator.agentcore.list_calls] == []
    (error,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert error.startswith(f"list_code_interpreter_sessions of {INTERPRETER} failed: ")


def test_rule_pages_and_sessions_add_up_over_tools(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "mine1", live=True)
    started(emulator, ddb, "web1", tool=BROWSER_ID, owner="s-web", live=True)
    started(emulator, ddb, "web2", tool=BROWSER_ID, owner="s-web2", live=True)

    report = sweeper(emulator).sweep()

    assert (report.tools, report.listed, report.checked, report.kept_live) == (2, 3, 3, 3)
    assert report.pages == len(emulator.agentcore.list_calls) - 2  # the refused ACTIVE filters


def test_rule_the_time_guard_stops_between_sessions(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "mine1", live=True)
    started(emulator, ddb, "mine2", owner="s-2", live=True)
    asked = iter([False, True])

    report = sweeper(emulator, browser_id=None).sweep(out_of_time=lambda: next(asked))

    assert report.incomplete and report.checked == 1


@pytest.mark.parametrize(("remaining", "out"), [(9_999, True), (10_000, False)])
def test_rule_out_of_time_below_the_margin(remaining: int, out: bool) -> None:
    context = SimpleNamespace(get_remaining_time_in_millis=lambda: remaining)
    assert tool_session_sweeper._out_of_time(context, 10_000)() is out
    assert tool_session_sweeper._out_of_time(None, 10_000)() is False


def test_rule_seconds_of_a_number_attribute_only() -> None:
    seconds = tool_session_sweeper._seconds
    assert seconds({"N": "12.5"}) == Decimal("12.5")
    assert seconds({"N": "soon"}) is None and seconds({"S": "12"}) is None
    assert seconds({"N": 12}) is None and seconds(None) is None


def test_rule_the_handler_returns_the_report_and_raises_when_incomplete(
    emulator: LocalEmulator, ddb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    started(emulator, ddb, "mine1", live=True)
    monkeypatch.setattr(tool_session_sweeper, "_sweeper", sweeper(emulator, browser_id=None))
    assert tool_session_sweeper.handler({}, None)["kept_live"] == 1

    out = SimpleNamespace(get_remaining_time_in_millis=lambda: 1)
    with pytest.raises(ToolSessionSweepFailed) as raised:
        tool_session_sweeper.handler({}, out)
    assert str(raised.value) == "0 call(s) failed; incomplete: True"


def test_rule_the_session_item_key_comes_from_the_owner(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "mine1", owner="s-7", live=True)
    swept = sweeper(emulator, browser_id=None)
    assert swept._owner_verdict(swept.tools[0], "mine1", {"pk": "s-7"}, NOW) == "live"
    assert swept._owner_verdict(swept.tools[0], "mine1", {"pk": "s-8"}, NOW) == "gone"


def test_rule_a_tool_session_named_as_the_latest_id_is_held(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "mine1")
    ddb.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": "s-1"},
            "expiresAt": {"N": str(NOW_S + 3600)},
            "codeInterpreterSessionId": {"S": "mine1"},
        },
    )
    swept = sweeper(emulator, browser_id=None)
    assert swept.judge(swept.tools[0], "mine1", OLD, NOW).verdict == "live"


def test_rule_every_expired_owners_tool_session_is_counted(
    emulator: LocalEmulator, ddb: Any
) -> None:
    started(emulator, ddb, "late1", live=True, expires_in=-60)
    started(emulator, ddb, "late2", owner="s-2", live=True, expires_in=-60)

    report = sweeper(emulator, browser_id=None).sweep()

    assert (report.expired_stopped, report.orphans_stopped) == (2, 0)
    assert sorted(stops(emulator)) == ["late1", "late2"]
    for session_id in ("late1", "late2"):  # released: a REMOVE arriving later makes no call
        assert record(ddb, session_id)["state"] == {"S": STATE_RELEASED}


def test_rule_a_released_verdict_carries_its_record(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "done1", state=STATE_RELEASED)
    swept = sweeper(emulator)

    judged = swept.judge(swept.tools[0], "done1", OLD, NOW)

    assert judged.verdict == "released" and judged.claim == claim_of(ddb, "done1")


def test_rule_every_failed_session_is_counted(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "orphan1")
    started(emulator, ddb, "orphan2", owner="s-2")
    swept = sweeper(emulator, browser_id=None)

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "InternalServerError"}}, "GetItem")

    event = "before-parameter-build.dynamodb.GetItem"
    swept._ddb.meta.events.register(event, refuse)
    try:
        report = swept.sweep()
    finally:
        swept._ddb.meta.events.unregister(event, refuse)

    assert (report.failures, report.checked) == (2, 2)
    assert swept.metrics.snapshot()["ToolSessionSweepFailures"] == 2


def test_rule_the_metrics_carry_the_reports_counts(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "orphan1")
    gone_since(ddb, "orphan1", PENDING + 60)
    started(emulator, ddb, "orphan2", owner="s-2")
    gone_since(ddb, "orphan2", PENDING + 60)
    started(emulator, ddb, "mine1", owner="s-3", live=True)
    swept = sweeper(emulator, browser_id=None, dry_run=True)

    report = swept.sweep()

    assert (report.checked, report.would_stop) == (3, 2)
    assert swept.metrics.snapshot() == {
        "OrphanToolSessionsStopped": 0,
        "ExpiredSessionToolSessionsStopped": 0,
        "ToolSessionSweepIncomplete": 0,
        "ToolSessionsChecked": 3,
        "ToolSessionsWouldBeStopped": 2,
    }


def test_rule_a_failed_listing_is_counted_beside_the_failed_sessions_and_logged(
    emulator: LocalEmulator, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    started(emulator, ddb, "orphan1")
    started(emulator, ddb, "orphan2", owner="s-2")
    swept = sweeper(emulator)

    def refuse_read(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "InternalServerError"}}, "GetItem")

    def refuse_list(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDeniedException"}}, "ListBrowserSessions")

    events = (
        ("before-parameter-build.dynamodb.GetItem", refuse_read, swept._ddb),
        (
            "before-parameter-build.bedrock-agentcore.ListBrowserSessions",
            refuse_list,
            swept._agentcore,
        ),
    )
    for event, handler, client in events:
        client.meta.events.register(event, handler)
    try:
        with caplog.at_level(logging.INFO, logger=swept.logger.name):
            report = swept.sweep()
    finally:
        for event, handler, client in events:
            client.meta.events.unregister(event, handler)

    assert (report.failures, report.checked, report.incomplete) == (3, 2, True)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors[-1] == (
        f"list_browser_sessions of {BROWSER_ID} failed: An error occurred "
        "(AccessDeniedException) when calling the ListBrowserSessions operation: Unknown"
    )


def test_rule_the_sweepers_own_settings_and_pace_are_kept(emulator: LocalEmulator) -> None:
    swept = sweeper(emulator)
    assert swept.settings == SweepSettings(pending_seconds=PENDING, requests_per_second=1000)
    assert swept.pacer.per_second == 1000


def test_rule_every_list_call_is_paced(emulator: LocalEmulator, ddb: Any) -> None:
    started(emulator, ddb, "mine1", live=True)
    swept = sweeper(emulator, browser_id=None)
    waits: list[None] = []
    swept.pacer = SimpleNamespace(wait=lambda: waits.append(None))  # type: ignore[assignment]

    assert swept.sweep().kept_live == 1

    assert len(waits) == len(emulator.agentcore.list_calls) > 0
