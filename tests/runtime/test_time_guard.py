"""The cleanup's time guard holds (issue 12): the batch returns before the deadline in every case.

Against an injected slow endpoint on localhost (real time, a few seconds per test): the cleanup's
DeleteConnection, RetireGrant and S3 calls all go to a server that either never answers
("hang": the SDK's sized timeouts end each call) or answers a byte every 100 ms forever
("trickle": no read timeout ever fires; the runner's hard stop returns). The records come from a
real moto table and stream; the cleanup clients are built from the environment the deployed
function has (``AWS_ENDPOINT_URL`` pointing at the slow server), sized to a 2 s margin.
"""

from __future__ import annotations

import socketserver
import threading
import time
from dataclasses import replace
from typing import Any

import pytest
from moto import mock_aws
from runtime_support import Sandbox, event
from session_expiry_runtime.cleanup.batch import RETURN_RESERVE_MS, process_batch
from session_expiry_runtime.cleanup.runner import CleanupRunner
from session_expiry_runtime.core.clients import (
    MAX_ATTEMPTS,
    build_clients,
    call_timeouts,
    client_config,
    worst_call_seconds,
)
from session_expiry_runtime.core.config import DEFAULT_TIME_GUARD_MS
from session_expiry_runtime.core.metrics import MetricsRecorder

MARGIN_MS = 2_000
DEADLINE_SECONDS = 4.0


class SlowEndpoint:
    """A localhost HTTP server that reads each request, then hangs or trickles its answer."""

    def __init__(self, mode: str) -> None:
        stop = self.stop = threading.Event()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.recv(65_536)
                if mode == "hang":
                    stop.wait(30)
                    return
                self.request.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not stop.wait(0.1):
                    try:
                        self.request.sendall(b"x")
                    except OSError:
                        return

        self.server = socketserver.ThreadingTCPServer(("localhost", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://localhost:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


class Context:
    """Lambda's context with a real deadline ``seconds`` from now."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.aws_request_id = "time-guard"

    def get_remaining_time_in_millis(self) -> int:
        return int((self.deadline - time.monotonic()) * 1000)


def removed_sessions(count: int) -> tuple[list[dict[str, Any]], Any]:
    """REMOVE records of ``count`` real sessions (moto), and the sandbox's runtime config."""
    with mock_aws():
        sandbox = Sandbox()
        sessions = [sandbox.create_session(f"s-{i}") for i in range(count)]
        sandbox.read_stream()
        for session in sessions:
            sandbox.delete(session.session_id)
        return sandbox.removes(), sandbox.config


@pytest.fixture
def slow_cleanup(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Any:
    def make(mode: str, count: int = 8) -> tuple[CleanupRunner, list[dict[str, Any]]]:
        records, config = removed_sessions(count)
        slow = SlowEndpoint(mode)
        request.addfinalizer(slow.close)
        for name, value in {
            "AWS_ENDPOINT_URL": slow.url,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }.items():
            monkeypatch.setenv(name, value)
        config = replace(
            config, websocket_endpoint=slow.url, time_guard_ms=MARGIN_MS, max_workers=4
        )
        runner = CleanupRunner(config, build_clients(config), MetricsRecorder("SessionExpiry"))
        return runner, records

    return make


@pytest.mark.parametrize("mode", ["hang", "trickle"])
def test_the_batch_returns_before_the_deadline_and_reports_every_record_failed(
    slow_cleanup: Any, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    runner, records = slow_cleanup(mode)
    context = Context(DEADLINE_SECONDS)

    response = process_batch(event(*records), context, runner)

    left_ms = context.get_remaining_time_in_millis()
    assert left_ms > 0, f"{mode}: returned {-left_ms} ms after the deadline"
    # The hard stop keeps RETURN_RESERVE_MS; returning takes a few ms of that.
    assert left_ms >= RETURN_RESERVE_MS / 2, f"{mode}: only {left_ms} ms left"
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert failed == {r["dynamodb"]["SequenceNumber"] for r in records}
    out = capsys.readouterr().out
    assert '"TimeGuard"' in out or "TimeGuard" in out  # unfinished / not started, metered
    print(f"\n{mode}: returned with {left_ms} ms left of a {DEADLINE_SECONDS:g} s invocation")


def test_without_a_deadline_nothing_is_cut_short(slow_cleanup: Any) -> None:
    # No context (a replay): no hard stop; the sized timeouts still end every call.
    runner, records = slow_cleanup("hang", count=1)
    started = time.monotonic()

    response = process_batch(event(*records), None, runner)

    elapsed = time.monotonic() - started
    assert len(response["batchItemFailures"]) == 1
    assert elapsed <= worst_call_seconds(client_config(4, MARGIN_MS)) + 1.0


@pytest.mark.parametrize("margin_ms", [2_000, 5_000, DEFAULT_TIME_GUARD_MS, 60_000])
def test_one_call_with_its_retry_fits_in_ninety_percent_of_the_margin(margin_ms: int) -> None:
    settings = client_config(16, margin_ms)
    assert worst_call_seconds(settings) <= 0.9 * margin_ms / 1000 + 1e-9
    assert settings.retries == {"mode": "standard", "total_max_attempts": MAX_ATTEMPTS}


def test_the_default_timeouts() -> None:
    assert call_timeouts(DEFAULT_TIME_GUARD_MS) == (1.0, 3.0)


def test_fails_a_margin_too_short_for_a_call() -> None:
    with pytest.raises(ValueError, match="time guard 1999 ms: expected at least 2000 ms"):
        client_config(16, 1_999)
