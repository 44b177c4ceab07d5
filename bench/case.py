"""One throughput run in a fresh process: ``python -m bench.case SPEC.json RESULT.json``.

The spec names the module whose ``handler`` runs (``session_expiry_runtime.handler`` or
``bench.naive``), the event file and the environment. The process applies the
environment, counts every AWS API call through botocore's ``before-call``/``after-call``
events on every client created in it (whatever session creates it), imports the module,
invokes the handler once untimed on the warm-up event (one other session), then
``handler(event, context)`` once, and writes the wall time, the calls, the in-flight
concurrency seen and ``ru_maxrss`` (what Lambda reports as "Max Memory Used") to RESULT.json.
Its stdout and stderr (the handler's logs and metrics) go wherever the caller sends them.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import resource
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any


class LambdaJsonFormatter(logging.Formatter):
    """Roughly what the Lambda runtime writes with the JSON log format: one JSON object per
    record, extra fields included, so log volume costs what it costs in Lambda."""

    _STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message"}

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "timestamp": self.formatTime(record),
            "level": record.levelname,
            "message": record.getMessage(),
            "logger": record.name,
        }
        doc.update({k: v for k, v in vars(record).items() if k not in self._STANDARD})
        return json.dumps(doc, default=str)


class CallRecorder:
    """Counts API calls (``before-call``) and HTTP attempts (``before-send``) on every client."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()
        #: attempts that failed, by "<Operation>: <HTTP status or exception>" (why retries ran)
        self.failed_attempts: Counter[str] = Counter()
        self.spans: list[tuple[float, float]] = []
        #: every call: (operation, label, start, end), perf_counter seconds (`bench.round_trips`)
        self.timeline: list[tuple[str, str, float, float]] = []
        #: the wall-clock seconds (epoch) in which a RetireGrant call started: the shared
        #: budget's floor of writes (`shared_pace`: a request is spent in its own second)
        self.grant_seconds: set[int] = set()
        #: per thread, the calls not yet answered: [operation, label, start]
        self._open: dict[int, list[list[Any]]] = {}
        self._labels = threading.local()
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.attempts.clear()
            self.failed_attempts.clear()
            self.spans.clear()
            self.timeline.clear()
            self.grant_seconds.clear()
            self._open.clear()

    def install(self) -> None:
        import botocore.session

        original = botocore.session.Session.create_client
        recorder = self

        def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(self, *args, **kwargs)
            client.meta.events.register("provide-client-params", recorder._label)
            client.meta.events.register("before-call", recorder._before_call)
            client.meta.events.register("after-call", recorder._after_call)
            client.meta.events.register("before-send", recorder._before_send)
            client.meta.events.register("response-received", recorder._response_received)
            return client

        botocore.session.Session.create_client = create_client

    def _label(self, params: Any = None, **_: Any) -> None:
        """An ownership ``TransactWriteItems``: ``mark`` or ``release`` (its ``:state``) and
        its action count; other calls: no label."""
        label = ""
        items = (params or {}).get("TransactItems") if isinstance(params, dict) else None
        if items:
            values = next(iter(items[0].values())).get("ExpressionAttributeValues") or {}
            state = (values.get(":state") or {}).get("S")
            kind = {"releasing": "mark", "released": "release"}.get(str(state), "write")
            label = f"{kind} x{len(items)}"
        self._labels.value = label

    def _before_call(self, model: Any, **_: Any) -> None:
        label = getattr(self._labels, "value", "")
        self._labels.value = ""
        with self._lock:
            self.calls[model.name] += 1
            if model.name == "RetireGrant":
                self.grant_seconds.add(int(time.time()))
            self._open.setdefault(threading.get_ident(), []).append(
                [model.name, label, time.perf_counter()]
            )

    def _after_call(self, **_: Any) -> None:
        end = time.perf_counter()
        with self._lock:
            stack = self._open.get(threading.get_ident())
            if not stack:
                return
            name, label, start = stack.pop()
            self.spans.append((start, end))
            self.timeline.append((name, label, start, end))
            if stack:
                # A call made inside another's hooks (the shared pace budget's UpdateItem
                # before a RetireGrant): the outer call's own round trip starts after it.
                stack[-1][2] = end

    def _before_send(self, event_name: str, **_: Any) -> None:
        with self._lock:  # event_name: before-send.<service>.<Operation>
            self.attempts[event_name.rsplit(".", 1)[-1]] += 1

    def _response_received(
        self, event_name: str, response_dict: Any = None, exception: Any = None, **_: Any
    ) -> None:
        op = event_name.rsplit(".", 1)[-1]
        status = (response_dict or {}).get("status_code")
        if exception is not None:
            what = type(exception).__name__
        elif status is not None and status >= 400:
            what = f"HTTP {status}"
        else:
            return
        with self._lock:
            self.failed_attempts[f"{op}: {what}"] += 1

    def concurrency(self, wall_start: float, wall_end: float) -> dict[str, float]:
        """Mean and maximum number of API calls in flight during the invocation."""
        events = sorted([(s, 1) for s, _ in self.spans] + [(e, -1) for _, e in self.spans])
        level = peak = 0
        for _, delta in events:
            level += delta
            peak = max(peak, level)
        busy = sum(e - s for s, e in self.spans)
        wall = max(wall_end - wall_start, 1e-9)
        return {"mean_in_flight": busy / wall, "max_in_flight": float(peak)}


class FakeContext:
    """The parts of the Lambda context object a handler reads."""

    def __init__(self, timeout_s: float, memory_mb: int) -> None:
        self._deadline = time.monotonic() + timeout_s
        self.function_name = "bench-cleanup"
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = memory_mb
        self.invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench-cleanup"
        self.aws_request_id = "bench-request"
        self.log_group_name = "/aws/lambda/bench-cleanup"
        self.log_stream_name = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _profiled(fn: Any, event: Any, context: Any, path: str) -> Any:
    """``fn(event, context)`` under cProfile in this thread and every thread it starts, timed
    by each thread's own CPU clock (``time.thread_time``: waiting for the network counts
    nothing); the merged statistics go to ``path`` (``python -m pstats path``)."""
    import cProfile
    import pstats

    profilers = [cProfile.Profile(time.thread_time)]

    def start_in_thread(*_: Any) -> None:
        profiler = cProfile.Profile(time.thread_time)
        profilers.append(profiler)
        profiler.enable()  # replaces this hook for the rest of the thread

    threading.setprofile(start_in_thread)
    try:
        response = profilers[0].runcall(fn, event, context)
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    stats = pstats.Stats(profilers[0])
    for profiler in profilers[1:]:
        stats.add(profiler)
    stats.dump_stats(path)
    return response


def run(spec: dict[str, Any]) -> dict[str, Any]:
    os.environ.update(spec["env"])
    # Lambda's JSON log format: the application log level defaults to INFO.
    stream = logging.StreamHandler(sys.stdout)
    stream.setFormatter(LambdaJsonFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[stream])
    for noisy in ("botocore", "boto3", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    sys.path.insert(0, spec["lambda_src"])
    sys.path.insert(0, spec["repo"])
    event = json.loads(Path(spec["event_path"]).read_text())
    recorder = CallRecorder()
    recorder.install()
    rss_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    # "package.module" (its ``handler``) or "package.module:function"
    module_name, _, function = spec["module"].partition(":")
    module = importlib.import_module(module_name)
    if function:
        module = type("Entry", (), {"handler": staticmethod(getattr(module, function))})
    t_import = time.perf_counter() - t0
    rss_imported = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Warm-up: one invocation with one other session, untimed, uncounted. Both implementations
    # then run warm, as every invocation but an execution environment's first does: clients
    # created, endpoint rules loaded, credentials resolved. Cold start is measured on its own.
    first = time.perf_counter()
    warmup = json.loads(Path(spec["warmup_path"]).read_text())
    module.handler(warmup, FakeContext(60, spec["memory_mb"]))
    t_warmup = time.perf_counter() - first
    recorder.reset()
    context = FakeContext(spec["timeout_s"], spec["memory_mb"])
    wall_start = time.perf_counter()
    cpu_start = time.process_time()
    usage_start = resource.getrusage(resource.RUSAGE_SELF)
    if spec.get("profile_path"):
        response = _profiled(module.handler, event, context, spec["profile_path"])
    else:
        response = module.handler(event, context)
    cpu = time.process_time() - cpu_start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    wall_end = time.perf_counter()
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    failures = (response or {}).get("batchItemFailures", [])
    return {
        "impl": spec["impl"],
        "records": len(event["Records"]),
        "wall_s": wall_end - wall_start,
        "cpu_s": cpu,
        # user and kernel CPU apart: the kernel's share is mostly threads handing over the GIL
        # and the sockets' system calls
        "cpu_user_s": usage.ru_utime - usage_start.ru_utime,
        "cpu_sys_s": usage.ru_stime - usage_start.ru_stime,
        "context_switches": (usage.ru_nvcsw + usage.ru_nivcsw)
        - (usage_start.ru_nvcsw + usage_start.ru_nivcsw),
        "import_s": t_import,
        "warmup_s": t_warmup,
        "failures": len(failures),
        "bad_identifiers": sum(1 for f in failures if not f.get("itemIdentifier")),
        "calls": dict(recorder.calls),
        "retire_grant_seconds": len(recorder.grant_seconds),
        "attempts": dict(recorder.attempts),
        "failed_attempts": dict(recorder.failed_attempts),
        **recorder.concurrency(wall_start, wall_end),
        "rss_start_mb": rss_start / 1024,
        "rss_imported_mb": rss_imported / 1024,
        "rss_peak_mb": rss_peak / 1024,
        # each call of the measured invocation, from its start (bench.round_trips)
        "timeline": [
            (op, label, s - wall_start, e - wall_start) for op, label, s, e in recorder.timeline
        ]
        if spec.get("timeline")
        else None,
    }


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    result = run(spec)
    Path(sys.argv[2]).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
