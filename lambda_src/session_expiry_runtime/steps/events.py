"""``PublishEvent``: the fan-out, one EventBridge event per cleaned session (after-success phase).

Batch-level: the runner calls it once per batch with the results whose steps all succeeded; it
puts their events 10 per ``PutEvents`` (`session_expiry_runtime.sinks.events` builds and sends
them) and turns a record whose entry failed into a failed record (action ``PublishEvent``), so
the event source mapping redelivers it: delivery is at least once. Skipped in a dry run
(subscribers would act on sessions that were not cleaned).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.clients import CleanupClients
from ..core.config import ACTION_PUBLISH_EVENT, METRIC_EVENTS_PUBLISHED, RuntimeConfig
from ..core.metrics import MetricsRecorder
from ..owners.outcomes import RecordResult
from ..sinks import events
from .base import BatchStep


class EventsStep(BatchStep):
    name = ACTION_PUBLISH_EVENT

    def __init__(self, client: Any, bus_arn: str | None) -> None:
        self.client = client
        self.bus_arn = bus_arn

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> EventsStep | None:
        return cls(clients.events, config.event_bus_arn) if clients.events is not None else None

    def after_success(self, results: Sequence[RecordResult], metrics: MetricsRecorder) -> None:
        published = events.publish_session_events(self.client, self.bus_arn, results)
        if published:
            metrics.count(METRIC_EVENTS_PUBLISHED, published)
