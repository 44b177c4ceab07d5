"""``DeleteConnection``'s rules that mutation testing found unpinned (issue 40,
``make mutation MUTATION_ARGS="steps/connection.py"``): the plan's log field and invalid
attribute names, and the action a failed close is metered under.

Plans are pure. The close runs a real boto3 API Gateway Management API client under moto; the
one answer moto does not give (``ForbiddenException``) is raised from a ``before-call`` hook.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.decode import parse_record
from session_expiry_runtime.core.ownership import KIND_CONNECTION, VERDICT_OWNED, Verdict
from session_expiry_runtime.owners.outcomes import StepFailed
from session_expiry_runtime.steps.base import PLAN_RUN, ClaimRef, Plan, Session, StepContext
from session_expiry_runtime.steps.connection import ConnectionStep

ENDPOINT = "https://abc123.execute-api.us-east-1.amazonaws.com/live"


def _session(image: dict[str, Any]) -> Session:
    return Session(image, {"pk": "s-1"}, "explicit", None, parse_record({}), "0" * 32)


@pytest.fixture
def apigateway() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client(
            "apigatewaymanagementapi", region_name="us-east-1", endpoint_url=ENDPOINT
        )


def test_rule_the_plan_logs_every_connection_id_and_names_the_invalid_attribute(
    apigateway: Any,
) -> None:
    step = ConnectionStep(RuntimeConfig(), apigateway)

    plan = step.plan(_session({"connectionId": "c-1", "connectionIds": {"c-2", ""}}))

    assert plan.status == PLAN_RUN
    assert plan.log == {"connectionIds": ["c-1", "c-2"]}
    assert plan.invalid == ("connectionIds",)
    assert plan.claims == (ClaimRef(KIND_CONNECTION, "c-1"), ClaimRef(KIND_CONNECTION, "c-2"))


def test_rule_a_close_that_fails_is_metered_under_delete_connection(apigateway: Any) -> None:
    """``ForbiddenException`` (stubbed: moto answers every DeleteConnection) fails the step
    under its own action, naming the connection."""

    def forbid(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "ForbiddenException", "Message": "no"}}, "DeleteConnection"
        )

    apigateway.meta.events.register("before-call.apigatewaymanagementapi.DeleteConnection", forbid)
    step = ConnectionStep(RuntimeConfig(), apigateway)
    ref = ClaimRef(KIND_CONNECTION, "c-1")
    plan = Plan(PLAN_RUN, claims=(ref,), ownership={ref: Verdict(VERDICT_OWNED)})
    session = _session({"connectionId": "c-1"})

    with pytest.raises(StepFailed) as caught:
        step.run(plan, StepContext(session))

    assert caught.value.action == "DeleteConnection"
    assert "c-1: " in caught.value.detail and "ForbiddenException" in caught.value.detail


def test_rule_the_step_declares_the_attributes_it_reads(apigateway: Any) -> None:
    """The step contract's ``attributes`` (the old image's attributes a step reads): both
    connection attributes, under the names configured."""
    config = RuntimeConfig(connection_id_attribute="conn", connection_ids_attribute="conns")
    step = ConnectionStep(config, apigateway)

    assert step.attributes == ("conn", "conns")
    plan = step.plan(_session({"conn": "c-1", "conns": {"c-2"}}))
    assert plan.claims == (ClaimRef(KIND_CONNECTION, "c-1"), ClaimRef(KIND_CONNECTION, "c-2"))
