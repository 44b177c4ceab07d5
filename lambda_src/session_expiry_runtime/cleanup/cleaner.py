"""Clean up after removed sessions — the public names, kept where callers import them.

The cleanup is a set of **cleanup steps** (`steps`; the contract is in
`steps.base`) driven by one **runner** (`runner`). This module keeps the names the
handler, the replay tool, the tests and the benchmarks import:

* `SessionCleaner` — one record at a time (``clean``, ``account``, ``not_started``,
  ``duplicate``), with ``config``, ``clients``, ``metrics`` and ``logger``; it is the runner.
* `process_batch` — a whole batch and its partial batch response; `batch_response`.
* `build_clients`, `client_config`, `CleanupClients` — the boto3 clients
  (`clients`).
* `RecordResult`, `StepFailed`, ``OUTCOME_*``, ``STEP_*`` (`outcomes`).

Built-in steps, each run only when its target is configured and the old image names it, in
this order: ``Archive`` (a gate: first, and nothing else runs if it fails), then side by side
``DeleteConnection`` (``GoneException`` is success), ``RetireGrant`` (by key ARN + grant id;
``NotFoundException`` is success once KMS's consistency window has passed; items written before
ownership records: once ``ListGrants`` shows the grant is named for the record's ``Keys`` and
incarnation, else refused) and ``DeleteScratch`` (only an accepted prefix;
ListObjectsV2 + DeleteObjects ≤ 1,000 keys shared by the sessions cleaned side by side, each
``Errors`` entry failing only the record that owns its key), the AgentCore steps
``StopRuntimeSession``, ``StopCodeInterpreterSession`` and ``StopBrowserSession``
(``ResourceNotFoundException`` is success) and the user-defined steps of
``SESSION_EXPIRY_CUSTOM_STEPS`` (`steps.custom`), then the fan-out ``PublishEvent`` once
per batch for the cleaned records. The connection, AgentCore and grant steps act only on the
ids whose ownership record names the record's ``Keys`` and incarnation (`claims`, checked
by the runner for every step).

Dry run (``SESSION_EXPIRY_DRY_RUN=true``, the construct's ``cleanup_dry_run``): every record is
classified, logged (outcome ``dry-run``, each step ``dry-run``, ``objectsWouldBeDeleted`` from a
ListObjectsV2 of the prefix, ``grantWouldBeRetired`` from the grant's ownership record or, for
items written before ownership records, its ListGrants) and counted (``SessionsWouldBeCleaned``
by ``Reason``); no DeleteConnection, RetireGrant, DeleteObjects, archive write, event or
ownership record write is made (the records are only read). The records are consumed all the
same: the stream position moves on.

Throttling, 5xx and connection errors are retried by botocore's ``standard`` retry mode first;
what still fails marks the record failed, so the event source mapping retries it (all steps are
idempotent) and, after its bounded retries, sends it to the on-failure destination.
"""

from __future__ import annotations

from ..core.clients import (
    CONNECT_TIMEOUT_SECONDS,
    MAX_ATTEMPTS,
    READ_TIMEOUT_SECONDS,
    CleanupClients,
    build_clients,
    client_config,
)
from ..owners.outcomes import (
    OUTCOME_CLEANED,
    OUTCOME_DRY_RUN,
    OUTCOME_FAILED,
    OUTCOME_SKIPPED,
    STEP_ALREADY_DONE,
    STEP_DONE,
    STEP_DRY_RUN,
    STEP_FAILED,
    STEP_REFUSED,
    RecordResult,
    StepFailed,
)
from ..steps.scratch import DELETE_OBJECTS_MAX_KEYS
from .batch import batch_response, process_batch
from .runner import LOGGER, CleanupRunner

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "DELETE_OBJECTS_MAX_KEYS",
    "LOGGER",
    "MAX_ATTEMPTS",
    "OUTCOME_CLEANED",
    "OUTCOME_DRY_RUN",
    "OUTCOME_FAILED",
    "OUTCOME_SKIPPED",
    "READ_TIMEOUT_SECONDS",
    "STEP_ALREADY_DONE",
    "STEP_DONE",
    "STEP_DRY_RUN",
    "STEP_FAILED",
    "STEP_REFUSED",
    "CleanupClients",
    "CleanupRunner",
    "RecordResult",
    "SessionCleaner",
    "StepFailed",
    "batch_response",
    "build_clients",
    "client_config",
    "process_batch",
]


class SessionCleaner(CleanupRunner):
    """Cleans up after one removed session per call; safe to share between threads.

    The runner (`CleanupRunner`) under its public name.

    Args:
        config: the runtime configuration (attribute names, targets, scratch layout).
        clients: boto3 clients of the configured targets (see `build_clients`).
        metrics: where counts go; flushed by `process_batch`.
        logger: where the one structured line per record goes.
        steps: the steps to run; default: the built-ins whose targets are configured.
        retire_grant_budget: the ``RetireGrant`` budget every invocation shares
            (`shared_pace.SharedBudget`); default none.
    """
