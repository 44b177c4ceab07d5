"""Lambda entry point of the cleanup function: ``session_expiry_runtime.handler.handler``.

The event source mapping delivers batches of DynamoDB stream records (or, with the Kinesis change
source, Kinesis records carrying them, reshaped by :mod:`.kinesis_records`); the handler returns a
partial batch response (the mapping must have ``ReportBatchItemFailures``). Configuration is
read and checked once per execution environment, and the boto3 clients and the step objects are
shared by every invocation and worker thread; nothing else outlives an invocation (the step
pool, the ownership check and the steps' shared batchers are made per invocation:
:mod:`.invocation`). A bad configuration raises on every invocation (function errors, so the
errors alarm fires) rather than skipping cleanups.
"""

from __future__ import annotations

import threading
from typing import Any

from .cleaner import SessionCleaner, build_clients, process_batch
from .config import RuntimeConfig, validate_cleanup_config
from .gc_settings import tune_for_cleanup
from .kinesis_records import to_stream_event
from .metrics import MetricsRecorder
from .pacing import ClientPacer, start_invocation
from .pacing import install as install_pacing

_cleaner: SessionCleaner | None = None
_pacer: ClientPacer | None = None
_lock = threading.Lock()


def get_cleaner() -> SessionCleaner:
    """The process-wide :class:`SessionCleaner`, built from the environment on first use.

    On first use it also paces the clients under their targets' quotas
    (:mod:`~session_expiry_runtime.pacing`) and tunes the process's garbage collector for the
    cleanup (:func:`~session_expiry_runtime.gc_settings.tune_for_cleanup`).

    Raises:
        ValueError: a ``SESSION_EXPIRY_*`` variable is invalid (see
            :func:`~session_expiry_runtime.config.validate_cleanup_config`).
    """
    global _cleaner, _pacer
    with _lock:
        if _cleaner is None:
            config = validate_cleanup_config(RuntimeConfig.from_env())
            clients = build_clients(config)
            metrics = MetricsRecorder(
                config.metrics_namespace, tenant_dimension=config.metrics_tenant_dimension
            )
            _pacer = install_pacing(clients, metrics, config.time_guard_ms)
            _cleaner = SessionCleaner(config, clients, metrics)
            tune_for_cleanup()  # after the long-lived objects exist: see gc_settings
        return _cleaner


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Clean up after every removed session in ``event`` (a DynamoDB stream batch, or a Kinesis
    batch of the Kinesis change source: :mod:`.kinesis_records`); return the partial batch
    response."""
    cleaner = get_cleaner()
    start_invocation(_pacer, context, cleaner.config.time_guard_ms)  # paced calls wait till then
    return process_batch(to_stream_event(event), context, cleaner)
