"""Review of issue 21 (on-call operator): the kill switch and the runbooks' first commands, as
written in docs/operating.md, against moto and the real CLIs / real sweeper."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import moto.awslambda.models as lambda_models
import pytest
from runtime_support import SESSION, Sandbox
from session_expiry_runtime.ops import kill_switch
from test_grant_sweeper import Grants
from test_kinesis_source import KinesisSource
from test_pause_watch import make_mapping


def _status(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    status = kill_switch.main(list(argv), session=SESSION)
    captured = capsys.readouterr()
    return status, (json.loads(captured.out) if captured.out else {}), captured.err


def test_a_second_disable_does_not_move_the_pause_deadline_later(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator pulls the switch, and an hour later a colleague pulls it again. The second
    ``disable`` still updates the mapping (the circuit breaker reads the moved ``LastModified``
    as an operator's decision), but before, it printed ``streamRetentionDeadline`` from the new
    ``LastModified``: an hour later than the stream's real clock, an hour that does not exist.
    Now its deadlines count from the earlier pause, and stderr says the alarm counts late."""
    mapping = make_mapping(sandbox.stream_arn, MaximumRecordAgeInSeconds=6 * 3600)
    _, first, _ = _status(capsys, "disable", "--uuid", mapping["UUID"])
    real = lambda_models.utcnow
    monkeypatch.setattr(lambda_models, "utcnow", lambda: real() + timedelta(hours=1))

    status, second, err = _status(capsys, "disable", "--uuid", mapping["UUID"])

    assert status == kill_switch.EXIT_DONE and second["state"] == "Disabled"
    assert second["streamRetentionDeadline"] == first["streamRetentionDeadline"]
    assert f"leave the stream at {first['streamRetentionDeadline']}" in err
    assert second["alreadyPausedSince"] == first["pausedSince"]
    assert "the paused-cleanup alarm and a later status count from then" in err


def test_kill_switch_status_by_function_finds_a_kinesis_change_source_mapping(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """The paused-cleanup runbook's first command, ``kill_switch status --function CLEANUP_FN``,
    for a deployment with ``change_source=ChangeSource.kinesis()`` (its mapping reads the
    Kinesis stream). Before: exit 2, "has 0 DynamoDB stream event source mappings"."""
    source = KinesisSource()
    mapping = make_mapping(source.arn)

    status, line, err = _status(capsys, "status", "--function", "cleanup")

    assert status == kill_switch.EXIT_DONE, err
    assert line["uuid"] == mapping["UUID"] and line["stream"] == source.arn


@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_fails_a_wait_that_is_not_a_positive_number_of_seconds(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """``--wait nan`` never ended: ``clock() >= nan`` is never true."""
    mapping = make_mapping(sandbox.stream_arn)
    with pytest.raises(SystemExit) as exited:
        kill_switch.main(["disable", "--uuid", mapping["UUID"], "--wait", value], session=SESSION)
    assert exited.value.code == kill_switch.EXIT_COULD_NOT_RUN
    assert f"--wait: {value!r}: expected" in capsys.readouterr().err
    assert SESSION.client("lambda").get_event_source_mapping(UUID=mapping["UUID"])["State"] == (
        "Enabled"
    )


def test_the_orphan_grants_runbook_filter_finds_the_retired_orphan(
    sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/operating.md#alarm-orphan-grants: ``aws logs tail ... --filter-pattern orphan``.
    CloudWatch Logs term patterns are case sensitive; the line naming the retired grant said
    "session gone, grant retired" — no ``orphan`` — so the first command showed at best the
    runs' summaries (``orphans_retired``), never which grant of which session."""
    grants = Grants(sandbox)
    orphan = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=orphan)
    sandbox.delete("s-1")
    caplog.set_level("INFO", logger="session_expiry_runtime")

    assert grants.sweeper().sweep().orphans_retired == 1

    matching = [r.getMessage() for r in caplog.records if re.search(r"\borphan\b", r.getMessage())]
    assert len(matching) == 1 and orphan in matching[0] and "s-1" in matching[0]
