"""Expiry-to-clean in real time with a 5 s sweeper (issue 15), and the sweeper's time guard.

* ``run``: deploys the sample app into a fresh emulator with the real CDK CLI and runs the
  sandbox's real-time phase (:mod:`sandbox.realtime`): the sweeper with the construct's 5 s
  settings, the event source mapping's poller on its own thread, sessions whose TTLs are
  spread over two minutes; expiry-to-clean p50/p99/max per session on the wall clock.
* ``time_guard``: the deployed sweeper's settings for a sub-minute interval (3.5 s margin)
  against a localhost endpoint that never answers: how much of the deadline is left when the
  run returns (the margin kept), for a run of ``budget_s`` seconds.

``python -m bench.expiry_latency`` runs both and prints the figures.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socketserver
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from .harness import REPO

#: The run's budget in the time-guard measurement: long enough for a few calls to time out.
TIME_GUARD_BUDGET_S = 8.0


@contextlib.contextmanager
def _local_aws_env() -> Iterator[None]:
    """Fake credentials and a Region for the emulator, never a real account; restored after."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    for name in saved:
        del os.environ[name]
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        }
    )
    try:
        yield
    finally:
        for name in [n for n in os.environ if n.startswith("AWS_")]:
            del os.environ[name]
        os.environ.update(saved)


def run(log: Any = sys.stderr) -> dict[str, Any]:
    """Deploy the sample app and measure; returns the figures (see :func:`table`)."""
    from cdk_session_expiry.testing import LocalEmulator, LocalPipeline
    from sandbox import realtime

    def say(message: str) -> None:
        print(f"  {message}", file=log, flush=True)

    with _local_aws_env(), LocalEmulator() as emulator:
        pipeline = LocalPipeline.deploy(REPO, emulator=emulator)
        try:
            measurement, _ = realtime.measure(pipeline, say=say)
        finally:
            pipeline.close()
    return {
        "realtime": measurement.as_dict(),
        "line": measurement.summary_line(),
        "mismatches": measurement.mismatches,
        "time_guard": time_guard(),
    }


class _SilentEndpoint:
    """localhost HTTP endpoint that reads each request and never answers (until closed)."""

    def __init__(self) -> None:
        stop = self.stop = threading.Event()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.recv(65_536)
                stop.wait(60)

        self.server = socketserver.ThreadingTCPServer(("localhost", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://localhost:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


class _Context:
    def __init__(self, budget_s: float) -> None:
        self.deadline = time.monotonic() + budget_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def _time_guard_log() -> logging.Logger:
    """The measured sweeper's log: its one line per pass, which says ``incomplete`` and
    ``queryFailures=4`` (every shard's query timed out against the silent endpoint, as meant),
    labelled as this measurement's expected outcome instead of passing for a failure of the
    bench (before, it reached stderr through Python's last-resort handler, unlabelled)."""
    logger = logging.getLogger("bench.expiry_latency.time_guard")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            logging.Formatter(
                "bench time_guard, expected (the endpoint never answers): %(message)s"
            )
        )
        logger.addHandler(handler)
        logger.propagate = False
    return logger


def time_guard(budget_s: float = TIME_GUARD_BUDGET_S) -> dict[str, Any]:
    """The sub-minute sweeper's time guard against an endpoint that never answers."""
    import boto3
    from session_expiry_runtime.core.config import RuntimeConfig
    from session_expiry_runtime.core.metrics import MetricsRecorder
    from session_expiry_runtime.sweeps.sweeper import (
        ExpirySweeper,
        sweep_run,
        sweeper_client_config,
        worst_call_seconds,
    )

    from cdk_session_expiry import sweeper as infra

    margin_ms = infra.SUB_MINUTE_TIME_GUARD_MS
    settings = sweeper_client_config(margin_ms, 16)
    endpoint = _SilentEndpoint()
    try:
        client = boto3.client(
            "dynamodb",
            region_name="us-east-1",
            endpoint_url=endpoint.url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - a local endpoint
            config=settings,
        )
        config = RuntimeConfig(
            table_name="sessions",
            sweep_shard_attribute="expiryShard",
            sweep_interval_seconds=5,
            time_guard_ms=margin_ms,
        )
        sweeper = ExpirySweeper(config, client, MetricsRecorder("bench"), logger=_time_guard_log())
        context = _Context(budget_s)
        started = time.monotonic()
        run = sweep_run(sweeper, context)
        returned_s = time.monotonic() - started
        left_ms = context.get_remaining_time_in_millis()
    finally:
        endpoint.close()
    return {
        "budget_s": budget_s,
        "margin_ms": margin_ms,
        "connect_timeout_s": settings.connect_timeout,
        "read_timeout_s": settings.read_timeout,
        "worst_call_s": round(worst_call_seconds(settings), 3),
        "returned_after_s": round(returned_s, 3),
        "ms_left_before_deadline": left_ms,
        "passes": len(run.passes),
        "query_failures": run.total("query_failures"),
        "held": left_ms > 0,
    }


def table(figures: dict[str, Any]) -> str:
    """Markdown table of :func:`run`'s figures."""
    rt, tg = figures["realtime"], figures["time_guard"]
    rows = [
        ("sessions measured", f"{rt['sessions_measured']} (of {rt['sessions_swept']} swept)"),
        ("expiry-to-clean p50", f"{rt['expiry_to_clean_p50_seconds']} s"),
        ("expiry-to-clean p99", f"{rt['expiry_to_clean_p99_seconds']} s"),
        ("expiry-to-clean max", f"{rt['expiry_to_clean_max_seconds']} s"),
        ("wait for the pass, max", f"{rt['wait_for_pass_max_seconds']} s"),
        (
            "processing after the pass (p50 / max)",
            f"{rt['processing_p50_seconds']} s / {rt['processing_max_seconds']} s",
        ),
        (
            "bound: interval + processing",
            f"{rt['interval_seconds']} s + {rt['processing_max_seconds']} s: "
            + ("held" if rt["within_bound"] else "EXCEEDED"),
        ),
        (
            f"goal p99 <= {rt['goal_p99_seconds']:g} s",
            "met" if rt["goal_met"] else "not met",
        ),
        (
            "heartbeat just before the TTL",
            f"{rt['heartbeat_race_survived']}/{rt['heartbeat_race']} sessions survived",
        ),
        (
            "time guard vs an endpoint that never answers",
            f"{tg['budget_s']:g} s run, {tg['margin_ms']} ms margin: returned after "
            f"{tg['returned_after_s']} s, {tg['ms_left_before_deadline']} ms before the deadline"
            f" (worst call {tg['worst_call_s']} s)",
        ),
    ]
    lines = ["| measure | value |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(lines)


def main() -> int:
    figures = run()
    print(table(figures))
    print(figures["line"])
    return 1 if figures["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
