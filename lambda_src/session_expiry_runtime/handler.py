"""Lambda entry point of the cleanup function: ``session_expiry_runtime.handler.handler``.

The event source mapping delivers batches of DynamoDB stream records (or, with the Kinesis change
source, Kinesis records carrying them, reshaped by `kinesis_records`); the handler returns a
partial batch response (the mapping must have ``ReportBatchItemFailures``). Configuration is
read and checked once per execution environment, and the boto3 clients and the step objects are
shared by every invocation and worker thread; nothing else outlives an invocation (the step
pool, the ownership check and the steps' shared batchers are made per invocation:
`invocation`). A bad configuration raises on every invocation (function errors, so the
errors alarm fires) rather than skipping cleanups.

With feature flags (`feature_flags`, the construct's ``feature_flags``), each invocation
first reads the flags (cached per execution environment) and applies them (`levers`); the
drain schedule's event (``{"sessionExpiryDrain": true}``) runs the deferred work instead of a
batch (`levers.drain`).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from .core.gc_settings import collection_paused, tune_for_cleanup

# The execution environment's start: no cyclic collection while boto3 and the handler's modules
# are imported (`gc_settings.collection_paused`).
with collection_paused():
    import boto3

    from .cleanup.cleaner import SessionCleaner, build_clients, client_config, process_batch
    from .cleanup.levers import drain, run_batch
    from .core.config import RuntimeConfig, validate_cleanup_config
    from .core.metrics import MetricsRecorder
    from .core.pacing import ClientPacer, start_invocation
    from .core.pacing import install as install_pacing
    from .core.shared_pace import retire_grant_budget
    from .records.kinesis_records import to_stream_event
    from .switches.deferred import is_drain_event
    from .switches.feature_flags import FlagReader, Flags, FlagSource

_cleaner: SessionCleaner | None = None
_pacer: ClientPacer | None = None
_flags: FlagReader | None = None
_lock = threading.Lock()


def get_cleaner() -> SessionCleaner:
    """The process-wide `SessionCleaner`, built from the environment on first use.

    On first use it also paces the clients under their targets' quotas
    (`pacing`) and tunes the process's garbage collector for the
    cleanup (`tune_for_cleanup`; no collection while
    the clients are built: `collection_paused`).

    Raises:
        ValueError: a ``SESSION_EXPIRY_*`` variable is invalid (see
            `validate_cleanup_config`).
    """
    global _cleaner, _pacer, _flags
    with _lock:
        if _cleaner is None:
            with collection_paused():  # the clients' service models: see gc_settings
                config = validate_cleanup_config(RuntimeConfig.from_env())
                source = FlagSource.from_env(os.environ)
                clients = build_clients(config)
                metrics = MetricsRecorder(
                    config.metrics_namespace, tenant_dimension=config.metrics_tenant_dimension
                )
                budget = retire_grant_budget(config, clients, metrics)
                _pacer = install_pacing(
                    clients, metrics, config.time_guard_ms, retire_grant_budget=budget
                )
                _cleaner = SessionCleaner(config, clients, metrics, retire_grant_budget=budget)
                _flags = _flag_reader(source, _cleaner)
            tune_for_cleanup()  # after the long-lived objects exist: see gc_settings
        return _cleaner


def _flag_reader(source: FlagSource | None, cleaner: SessionCleaner) -> FlagReader | None:
    """The process's flag reader, or ``None`` without flags.

    Raises:
        ValueError: flags are configured but the deferred-work table (where deferred work
            goes) is not.
    """
    if source is None:
        return None
    if cleaner.deferrals is None:
        raise ValueError(
            "feature flags are configured but SESSION_EXPIRY_DEFERRED_WORK_TABLE_NAME is not: "
            "a step switched off would have nowhere to keep its work (the construct sets it "
            "with feature_flags: redeploy)"
        )
    settings = client_config(cleaner.config.max_workers, cleaner.config.time_guard_ms)
    client = boto3.session.Session().client("appconfigdata", config=settings)
    return FlagReader(client, source, default_dry_run=cleaner.config.dry_run)


def current_flags(cleaner: SessionCleaner) -> Flags | None:
    """The flags in force for this invocation, or ``None`` without flags."""
    return None if _flags is None else _flags.current(cleaner.metrics)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Clean up after every removed session in ``event`` (a DynamoDB stream batch, or a Kinesis
    batch of the Kinesis change source: `kinesis_records`); return the partial batch
    response. The drain schedule's event runs the deferred work instead (`levers.drain`:
    its report)."""
    # This invocation's own metrics: another one running meanwhile in this process (threads
    # of one execution environment) never flushes them, nor they its.
    cleaner = get_cleaner().for_invocation()
    # Paced calls wait till this invocation's time guard and count in its metrics.
    start_invocation(_pacer, context, cleaner.config.time_guard_ms, cleaner.metrics)
    flags = current_flags(cleaner)
    if is_drain_event(event):
        return drain(cleaner, flags or Flags(dry_run=cleaner.config.dry_run), context)
    if flags is None:
        return process_batch(to_stream_event(event), context, cleaner)
    return run_batch(to_stream_event(event), context, cleaner, flags)
