"""Worker process that hosts one deployed Lambda handler (like the Lambda runtime does).

Run as ``python _lambda_worker.py TASK_ROOT HANDLER``. Requests arrive on stdin, one JSON
object a line: ``{"event": ..., "timeout_ms": ..., "function_arn": ..., "request_id": ...,
"call_first": [name, ...]}`` (``call_first``: functions of the handler's module called without
arguments just before the handler, optional). Responses leave on the file descriptor that was
stdout at start, one JSON object a line: ``{"response": ...}`` or ``{"errorType": ...,
"errorMessage": ..., "stackTrace": [...]}``. A line ``{"call": name}`` calls that function of the
handler's module at once, even while an invocation runs (read on its own thread; nothing is
answered), e.g. the expiry sweeper's ``stop_after_pass``.
Everything the handler prints (logs, EMF metrics) goes to stderr, as Lambda sends it to logs.
This file imports nothing from the project so the handler sees only its own code asset.
"""

from __future__ import annotations

import importlib
import json
import os
import queue
import sys
import threading
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO


class _Context:
    def __init__(self, request: dict[str, Any]) -> None:
        arn = request.get("function_arn", "arn:aws:lambda:us-east-1:123456789012:function:local")
        self.invoked_function_arn = arn
        self.function_name = arn.rsplit(":", 1)[-1]
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        self.aws_request_id = request.get("request_id", "local")
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + int(request.get("timeout_ms", 3000)) / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def main() -> None:
    task_root, handler_path = sys.argv[1], sys.argv[2]
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # the handler's prints go to stderr, i.e. the function's log
    sys.stdout = sys.stderr
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p not in ("", here)]
    sys.path.insert(0, task_root)
    module_name, _, function_name = handler_path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
        handler = getattr(module, function_name)
        origin = Path(getattr(module, "__file__", "") or "").resolve()
        if Path(task_root).resolve() not in origin.parents:
            raise ImportError(
                f"{module_name} was imported from {origin}, not from the code asset in {task_root}"
            )
        protocol.write(json.dumps({"ready": True}) + "\n")
    except Exception as err:  # init error: report it, like Runtime.ImportModuleError
        protocol.write(
            json.dumps(
                {
                    "errorType": "Runtime.ImportModuleError",
                    "errorMessage": f"{type(err).__name__}: {err}",
                    "stackTrace": traceback.format_exc().splitlines(),
                }
            )
            + "\n"
        )
        return
    requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threading.Thread(target=_read, args=(sys.stdin, module, requests), daemon=True).start()
    while (request := requests.get()) is not None:
        try:
            for name in request.get("call_first") or []:
                getattr(module, name)()
            response = handler(request["event"], _Context(request))
            out = {"response": response}
            text = json.dumps(out)
        except Exception as err:
            text = json.dumps(
                {
                    "errorType": type(err).__name__,
                    "errorMessage": str(err),
                    "stackTrace": traceback.format_exc().splitlines(),
                }
            )
        protocol.write(text + "\n")
        sys.stderr.flush()


def _read(stream: TextIO, module: ModuleType, requests: queue.Queue[dict[str, Any] | None]) -> None:
    """Hand requests to the main thread; make ``{"call": name}`` calls at once."""
    for line in stream:
        message = json.loads(line)
        if "call" in message:
            hook = getattr(module, str(message["call"]), None)
            if callable(hook):
                hook()
            continue
        requests.put(message)
    requests.put(None)


if __name__ == "__main__":
    main()
