"""The project's handler with its clients' throttling behaviour swapped (bench only).

``session_expiry_runtime.handler`` paces its clients (:mod:`session_expiry_runtime.core.pacing`). To
show in one run what that is worth against a target answering throttles above its quota, the
pacing table runs the same handler three ways, each in its own process (``bench/case.py``
imports the module named by the run and calls its ``handler``):

* ``bench.retry_modes:standard_handler`` — botocore's ``standard`` retry mode alone (two
  attempts, jittered backoff), as the clients are built
  (:mod:`session_expiry_runtime.core.clients`);
* ``bench.retry_modes:adaptive_handler`` — plus botocore's adaptive rate limiter, exactly what
  ``retries={"mode": "adaptive"}`` adds (``botocore.retries.adaptive.register_retry_handler``);
* ``bench.retry_modes:paced_handler`` — the project's handler, with its pacing.
"""

from __future__ import annotations

import threading
from typing import Any

from botocore.retries import adaptive as botocore_adaptive
from session_expiry_runtime import handler as cleanup
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, build_clients, process_batch
from session_expiry_runtime.core.config import RuntimeConfig, validate_cleanup_config
from session_expiry_runtime.core.metrics import MetricsRecorder

_lock = threading.Lock()
_cleaners: dict[str, SessionCleaner] = {}


def _cleaner(mode: str) -> SessionCleaner:
    with _lock:
        if mode not in _cleaners:
            config = validate_cleanup_config(RuntimeConfig.from_env())
            clients = build_clients(config)
            if mode == "adaptive":
                for name in ("apigateway", "kms", "s3", "ownership"):
                    client = getattr(clients, name)
                    if client is not None:
                        botocore_adaptive.register_retry_handler(client)
            _cleaners[mode] = SessionCleaner(
                config, clients, MetricsRecorder(config.metrics_namespace)
            )
        return _cleaners[mode]


def standard_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The handler with botocore's ``standard`` retry mode alone (no pacing)."""
    return process_batch(event, context, _cleaner("standard"))


def adaptive_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The handler with botocore's ``adaptive`` retry mode (no bound, no throttle retries)."""
    return process_batch(event, context, _cleaner("adaptive"))


def paced_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The project's handler: its pacing (:mod:`session_expiry_runtime.core.pacing`)."""
    return cleanup.handler(event, context)
