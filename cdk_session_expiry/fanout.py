"""Fan-out of cleaned sessions to an EventBridge bus.

A DynamoDB stream supports about two concurrent readers per shard (Amazon DynamoDB Developer
Guide, "DynamoDB Streams and AWS Lambda triggers"), and the cleanup is already one. Services that
must react to ended sessions subscribe to the bus instead: one event per cleaned session, source
``cdk-session-expiry``, detail type ``Session Cleaned`` (detail:
``session_expiry_runtime.sinks.events``).
Events are delivered at least once: deduplicate on ``detail.sequenceNumber``.

Cost: one ``PutEvents`` call per 10 cleaned sessions; EventBridge charges per event put on a
custom bus (64 KB chunks), plus whatever the rules' targets cost.
"""

from __future__ import annotations

from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_

from . import _runtime_contract as contract


def session_cleaned_event_pattern() -> events.EventPattern:
    """The pattern of a rule that matches every ``Session Cleaned`` event of the construct."""
    return events.EventPattern(
        source=[contract.EVENT_SOURCE], detail_type=[contract.EVENT_DETAIL_TYPE]
    )


def configure_event_bus(function: lambda_.Function, bus: events.IEventBus) -> None:
    """Environment and ``events:PutEvents`` on ``bus`` only."""
    function.add_environment(contract.ENV_EVENT_BUS_ARN, bus.event_bus_arn)
    bus.grant_put_events_to(function)
