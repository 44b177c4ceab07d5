"""Review of issue 21 (attacker): user code raising what the isolation did not foresee.

Through the real handler (``session_expiry_runtime.handler.handler``), a batch of three real
sessions (moto) with a custom step staged as the construct stages it (a module on
``sys.path``). The step raises, for one session, an exception whose own ``__str__`` raises —
an exception object is user code too: formatting it is running it.
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
from session_expiry_runtime.handler import handler

MODULE = "review21_user_step"
STEP = "Review21Step"
USER_CODE = """
class Unprintable(BaseException):
    '''A BaseException subclass whose message cannot be formatted: str() raises it again.'''

    def __str__(self):
        raise Unprintable()


class BadMessage(Exception):
    def __str__(self):
        raise ValueError("no message for you")


class Custom(BaseException):
    pass


class Noisy(Exception):
    def __del__(self):
        raise RuntimeError("from __del__")


def clean(old_image, reason):
    kind = old_image.get("raiseKind")
    if kind == "Unprintable":
        raise Unprintable()
    if kind == "BadMessage":
        raise BadMessage()
    if kind == "Custom":
        raise Custom("custom base exception")
    if kind == "Noisy":
        raise Noisy("noisy")
    return None
"""


@pytest.fixture
def user_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    (tmp_path / f"{MODULE}.py").write_text(textwrap.dedent(USER_CODE))
    monkeypatch.syspath_prepend(str(tmp_path))
    steps = [{"name": STEP, "handler": f"{MODULE}.clean"}]
    monkeypatch.setenv("SESSION_EXPIRY_CUSTOM_STEPS", json.dumps(steps))
    yield
    sys.modules.pop(MODULE, None)


def _emf(out: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in out.splitlines() if x.startswith('{"_aws"')]


# Noisy's __del__ raises on purpose; Python reports it as "Exception ignored in" (pytest's
# PytestUnraisableExceptionWarning), which is the point of the case, not a defect of the run.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("kind", ["Unprintable", "BadMessage", "Custom", "Noisy"])
def test_an_exception_that_cannot_be_formatted_fails_only_its_record(
    kind: str,
    sandbox: Sandbox,
    user_step: None,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    session_logs: pytest.LogCaptureFixture,
) -> None:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    raising = sandbox.create_session("s-raise", extra={"raiseKind": {"S": kind}})
    others = [sandbox.create_session(f"s-ok-{i}") for i in range(2)]
    sandbox.read_stream()
    for session in (raising, *others):
        sandbox.delete(session.session_id)
    records = sandbox.removes()
    sequence = {r["dynamodb"]["Keys"]["pk"]["S"]: r["dynamodb"]["SequenceNumber"] for r in records}

    response = handler(event(*records), FakeContext())

    assert response == {"batchItemFailures": [{"itemIdentifier": sequence["s-raise"]}]}
    assert all(sandbox.is_clean(s) for s in others)
    lines = {
        r.session["keys"]["pk"]: r.session for r in session_logs.records if hasattr(r, "session")
    }
    assert lines["s-raise"]["outcome"] == "failed"
    assert lines["s-raise"]["errors"][STEP].startswith(kind)
    emf = _emf(capsys.readouterr().out)
    assert [d["SessionsCleaned"] for d in emf if d.get("Reason") == "explicit"] == [2]


HANGING_CODE = """
import threading

RELEASE = threading.Event()

def clean(old_image, reason):
    if old_image.get("raiseKind") == "Hang":
        RELEASE.wait(60)  # a step that never returns within the invocation
    return None
"""


def test_a_step_that_hangs_past_the_time_guard_fails_its_record_and_not_the_next_invocation(
    tmp_path: Path,
    sandbox: Sandbox,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Real time, a few seconds: a 4 s invocation with a 2 s guard (``test_time_guard``). The
    hung record fails (``TimeGuard``), the other two of its batch are cleaned and counted; a warm
    second invocation, while the step still hangs on its abandoned thread, cleans its own
    sessions within its own time."""
    from session_expiry_runtime import handler as handler_module
    from test_time_guard import DEADLINE_SECONDS, MARGIN_MS, Context

    (tmp_path / "review21_hanging.py").write_text(textwrap.dedent(HANGING_CODE))
    monkeypatch.syspath_prepend(str(tmp_path))
    steps = [{"name": "Hangs", "handler": "review21_hanging.clean"}]
    for name, value in {
        **sandbox.env(),
        "SESSION_EXPIRY_CUSTOM_STEPS": json.dumps(steps),
        "SESSION_EXPIRY_TIME_GUARD_MS": str(MARGIN_MS),
    }.items():
        monkeypatch.setenv(name, value)
    hung = sandbox.create_session("s-hang", extra={"raiseKind": {"S": "Hang"}})
    first = [hung, *(sandbox.create_session(f"s-ok-{i}") for i in range(2))]
    sandbox.read_stream()
    for session in first:
        sandbox.delete(session.session_id)
    first_records = sandbox.removes()
    second = [sandbox.create_session(f"s-warm-{i}") for i in range(3)]
    sandbox.read_stream()
    for session in second:
        sandbox.delete(session.session_id)
    second_records = sandbox.removes()
    try:
        response = handler_module.handler(event(*first_records), Context(DEADLINE_SECONDS))
        warm = handler_module.handler(event(*second_records), Context(DEADLINE_SECONDS))
    finally:
        sys.modules["review21_hanging"].RELEASE.set()
        sys.modules.pop("review21_hanging", None)

    hung_sequence = next(
        r["dynamodb"]["SequenceNumber"]
        for r in first_records
        if r["dynamodb"]["Keys"]["pk"]["S"] == "s-hang"
    )
    assert response == {"batchItemFailures": [{"itemIdentifier": hung_sequence}]}
    assert all(sandbox.is_clean(s) for s in first[1:])
    assert warm == {"batchItemFailures": []}
    assert all(sandbox.is_clean(s) for s in second)
    emf = _emf(capsys.readouterr().out)
    assert [d["SessionsCleaned"] for d in emf if d.get("Reason") == "explicit"] == [2, 3]
    assert [d["CleanupFailures"] for d in emf if d.get("Action") == "TimeGuard"] == [1]
