"""Any exception from user code fails only its record (issue 21, part A, point 1).

Through the real handler entry point (``session_expiry_runtime.handler.handler``), a batch of
three real sessions (moto) with a custom step staged as the construct stages it (a module on
``sys.path``): the step raises a ``BaseException`` that is no ``Exception`` — ``SystemExit``
(a library calling ``sys.exit()``), ``KeyboardInterrupt``, ``asyncio.CancelledError``,
``GeneratorExit`` — for one session. Before the fix each escaped every ``except Exception`` and
the whole batch with it: no partial batch response, no metrics.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime.cleanup import batch
from session_expiry_runtime.cleanup.batch import process_batch
from session_expiry_runtime.cleanup.runner import CleanupRunner
from session_expiry_runtime.handler import handler

MODULE = "raising_user_step"
STEP = "RaiseOnDemand"
USER_CODE = """
import asyncio
import sys

CALLS = []

def clean(old_image, reason):
    CALLS.append(old_image["pk"])
    kind = old_image.get("raiseKind")
    if kind == "SystemExit":
        sys.exit(3)
    if kind == "KeyboardInterrupt":
        raise KeyboardInterrupt
    if kind == "CancelledError":
        raise asyncio.CancelledError("cancelled by the user's code")
    if kind == "GeneratorExit":
        raise GeneratorExit
    return None
"""
KINDS = {
    "SystemExit": "SystemExit: 3",
    "KeyboardInterrupt": "KeyboardInterrupt",
    "CancelledError": "CancelledError: cancelled by the user's code",
    "GeneratorExit": "GeneratorExit",
}


@pytest.fixture
def user_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The user's module beside the runtime (on ``sys.path``), named in the function's settings."""
    (tmp_path / f"{MODULE}.py").write_text(textwrap.dedent(USER_CODE))
    monkeypatch.syspath_prepend(str(tmp_path))
    steps = [{"name": STEP, "handler": f"{MODULE}.clean"}]
    monkeypatch.setenv("SESSION_EXPIRY_CUSTOM_STEPS", json.dumps(steps))
    yield lambda: sys.modules[MODULE]
    sys.modules.pop(MODULE, None)


def _three_sessions(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, kind: str) -> Any:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    raising = sandbox.create_session("s-raise", extra={"raiseKind": {"S": kind}})
    others = [sandbox.create_session(f"s-ok-{i}") for i in range(2)]
    sandbox.read_stream()
    for session in (raising, *others):
        sandbox.delete(session.session_id)
    records = sandbox.removes()
    sequence = {r["dynamodb"]["Keys"]["pk"]["S"]: r["dynamodb"]["SequenceNumber"] for r in records}
    return raising, others, records, sequence


def _emf(out: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in out.splitlines() if x.startswith('{"_aws"')]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_base_exception_from_a_custom_step_fails_only_its_record(
    kind: str,
    sandbox: Sandbox,
    user_step: Any,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    session_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    raising, others, records, sequence = _three_sessions(sandbox, monkeypatch, kind)

    response = handler(event(*records), FakeContext())

    assert response == {"batchItemFailures": [{"itemIdentifier": sequence["s-raise"]}]}
    assert sorted(user_step().CALLS) == ["s-ok-0", "s-ok-1", "s-raise"]
    assert all(sandbox.is_clean(s) for s in others)
    # The raising record's built-in steps ran side by side and acted; only its record fails.
    assert sandbox.keys_under(raising.prefix) == []
    lines = {
        r.session["keys"]["pk"]: r.session for r in session_logs.records if hasattr(r, "session")
    }
    assert lines["s-raise"]["outcome"] == "failed"
    assert lines["s-raise"]["errors"] == {STEP: KINDS[kind]}
    assert {lines[s.session_id]["outcome"] for s in others} == {"cleaned"}
    emf = _emf(capsys.readouterr().out)  # flushed: the metrics of all three records
    assert [d["CleanupFailures"] for d in emf if d.get("Action") == STEP] == [1]
    assert [d["SessionsCleaned"] for d in emf if d.get("Reason") == "explicit"] == [2]


def test_an_exception_a_step_pool_future_holds_is_its_records_failure(
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    session_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An exception raised on the step pool outside the step's own attempt (as the pool's call
    slots could) is held by the future: it fails that step's record, not the batch."""
    sessions = [sandbox.create_session(f"s-{i}") for i in range(3)]
    sandbox.read_stream()
    for session in sessions:
        sandbox.delete(session.session_id)
    records = sandbox.removes()
    cleaner = sandbox.cleaner()
    attempt = CleanupRunner._attempt

    def escaping(self: CleanupRunner, step: Any, plan: Any, ctx: Any) -> Any:
        if ctx.session.keys["pk"] == "s-1" and step.name == "RetireGrant":
            raise SystemExit("escaped the attempt")
        return attempt(self, step, plan, ctx)

    monkeypatch.setattr(CleanupRunner, "_attempt", escaping)

    response = process_batch(event(*records), FakeContext(), cleaner)

    failed = next(r for r in records if r["dynamodb"]["Keys"]["pk"]["S"] == "s-1")
    assert response == {
        "batchItemFailures": [{"itemIdentifier": failed["dynamodb"]["SequenceNumber"]}]
    }
    assert sandbox.is_clean(sessions[0]) and sandbox.is_clean(sessions[2])
    line = next(
        r.session
        for r in session_logs.records
        if getattr(r, "session", {}).get("keys") == {"pk": "s-1"}
    )
    assert line["errors"] == {"RetireGrant": "SystemExit: escaped the attempt"}
    assert line["steps"]["DeleteScratch"] == "done"
    emf = _emf(capsys.readouterr().out)
    assert [d["CleanupFailures"] for d in emf if d.get("Action") == "RetireGrant"] == [1]


def test_an_interrupt_of_the_invocations_own_thread_propagates_after_the_metrics_are_flushed(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in a local replay: the signal's ``KeyboardInterrupt`` lands on the thread that
    waits for the records, outside any step. It is not caught (the run stops), and the metrics
    recorded so far are still written."""
    session = sandbox.create_session("s-1")
    sandbox.read_stream()
    sandbox.delete(session.session_id)
    cleaner = sandbox.cleaner()
    cleaner.metrics.count("SomethingRecorded")
    written: list[str] = []
    monkeypatch.setattr(cleaner.metrics, "flush", lambda write=None: written.append("flushed"))

    def interrupted(*_: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(batch, "_wait_until_done_or_hard_stop", interrupted)

    with pytest.raises(KeyboardInterrupt):
        process_batch(event(*sandbox.removes()), FakeContext(), cleaner)
    assert written == ["flushed"]


def test_an_after_success_step_that_raises_fails_the_records_it_was_given(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, session_logs: pytest.LogCaptureFixture
) -> None:
    """The fan-out never raises by contract; if it did, its records are redelivered (failed
    under its name) and the batch still answers a partial batch response."""
    from session_expiry_runtime.steps.base import BatchStep

    class Exploding(BatchStep):
        name = "PublishEvent"

        @classmethod
        def build(cls, config: Any, clients: Any) -> Exploding:
            return cls()

        def after_success(self, results: Any, metrics: Any) -> None:
            raise RuntimeError("event bus unreachable")

    sessions = [sandbox.create_session(f"s-{i}") for i in range(2)]
    sandbox.read_stream()
    for session in sessions:
        sandbox.delete(session.session_id)
    records = sandbox.removes()
    cleaner = sandbox.cleaner()
    cleaner.after_success_steps = [Exploding()]

    response = process_batch(event(*records), FakeContext(), cleaner)

    assert sorted(f["itemIdentifier"] for f in response["batchItemFailures"]) == sorted(
        r["dynamodb"]["SequenceNumber"] for r in records
    )
    logged = [r.session for r in session_logs.records if hasattr(r, "session")]
    assert [line["errors"] for line in logged] == [
        {"PublishEvent": "RuntimeError: event bus unreachable"}
    ] * 2
