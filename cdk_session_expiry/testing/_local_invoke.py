"""Lambda ``Invoke`` of the construct's claim registrar, answered by its deployed code.

moto (5.2.x) runs an invoked function in a Docker container, and this emulator runs without
Docker. ``SessionStore`` invokes the claim registrar synchronously (``RequestResponse``) for
every write that records an id, so the emulator answers that one call itself: the function's
code asset, as deployed, in a local worker process
([`LocalLambda`][cdk_session_expiry.testing.LocalLambda], warm
between calls, one per function). Only functions whose handler is the registrar's are answered
this way (``FunctionError`` ``Unhandled`` and the error document when the handler raises, as
Lambda answers); any other ``Invoke`` goes to moto as before. Not modelled: asynchronous
invocation, qualifiers and aliases, payload limits, concurrency limits.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

from cdk_session_expiry import _runtime_contract as contract

_INVOKE = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations$")
#: The handlers this module answers ``Invoke`` for.
LOCAL_HANDLERS = frozenset({contract.CLAIM_REGISTRAR_HANDLER})


class LocalInvokes:
    """The warm workers of one emulator, by function ARN (see the module docstring)."""

    def __init__(self) -> None:
        self._workers: dict[str, Any] = {}
        self._lock = threading.Lock()
        #: Every answered request's function name, in order (tests read it).
        self.answered: list[str] = []

    def answer(
        self, emulator: Any, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes] | None:
        """The answer to a registrar ``Invoke``; ``None`` for any other request."""
        match = _INVOKE.match(str(environ.get("PATH_INFO", "")))
        if match is None or environ.get("REQUEST_METHOD") != "POST":
            return None
        worker = self._worker(emulator, _unquote(match["name"]))
        if worker is None:
            return None
        length = int(environ.get("CONTENT_LENGTH") or 0)
        event = json.loads(environ["wsgi.input"].read(length) or b"{}")
        from .deployment import FunctionError

        headers = [("Content-Type", "application/json"), ("X-Amz-Executed-Version", "$LATEST")]
        try:
            body = json.dumps(worker.invoke(event)).encode("utf-8")
        except FunctionError as exc:
            body = json.dumps({"errorType": exc.args[0], "errorMessage": exc.args[1]}).encode()
            headers.append(("X-Amz-Function-Error", "Unhandled"))
        self.answered.append(worker.function.name)
        headers.append(("Content-Length", str(len(body))))
        start_response("200 OK", headers)
        return [body]

    def _worker(self, emulator: Any, name: str) -> Any:
        from botocore.exceptions import ClientError

        from .deployment import DeployedFunction

        with self._lock:
            for worker in self._workers.values():
                if name in (worker.function.name, worker.function.arn):
                    return worker
            try:
                function = DeployedFunction.read(emulator, name)
            except ClientError:
                return None
            if function.handler not in LOCAL_HANDLERS:
                return None
            worker = function.start()
            self._workers[function.arn] = worker
            return worker

    def close(self) -> None:
        """Stop every worker (the emulator stops or resets)."""
        with self._lock:
            workers, self._workers = list(self._workers.values()), {}
        for worker in workers:
            worker.close()


def _unquote(name: str) -> str:
    from urllib.parse import unquote

    return unquote(name)
