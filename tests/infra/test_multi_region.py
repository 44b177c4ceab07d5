"""Global tables (issue 23): one stack per Region, the filter passes only the Region's own sessions.

The app is the one ``docs/multi-region.md`` shows: a ``TableV2`` with a replica in the primary
Region's stack, and in the replica Region's stack the replica imported with its own stream ARN.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk.assertions import Template

from cdk_session_expiry import CleanupEventFilter, SessionExpiry
from cdk_session_expiry import _runtime_contract as contract

ACCOUNT = "111111111111"
PRIMARY, REPLICA = "us-east-1", "eu-west-1"
REPLICA_STREAM = (
    f"arn:aws:dynamodb:{REPLICA}:{ACCOUNT}:table/sessions/stream/2026-01-01T00:00:00.000"
)


def _stack(app: App, name: str, region: str) -> Stack:
    return Stack(app, name, env=Environment(account=ACCOUNT, region=region))


def global_table(stack: Stack, *, replicas: bool = True) -> dynamodb.TableV2:
    return dynamodb.TableV2(
        stack,
        "Table",
        table_name="sessions",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        time_to_live_attribute="expiresAt",
        dynamo_stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        replicas=[dynamodb.ReplicaTableProps(region=REPLICA)] if replicas else None,
        global_secondary_indexes=[
            dynamodb.GlobalSecondaryIndexPropsV2(
                index_name="expirySweep",
                partition_key=dynamodb.Attribute(
                    name="expiryShard", type=dynamodb.AttributeType.STRING
                ),
                sort_key=dynamodb.Attribute(name="expiresAt", type=dynamodb.AttributeType.NUMBER),
                projection_type=dynamodb.ProjectionType.KEYS_ONLY,
            )
        ],
    )


def mapping_props(stack: Stack) -> dict[str, Any]:
    (mapping,) = (
        Template.from_stack(stack).find_resources("AWS::Lambda::EventSourceMapping").values()
    )
    return dict(mapping["Properties"])


def patterns(stack: Stack) -> list[dict[str, Any]]:
    return [json.loads(f["Pattern"]) for f in mapping_props(stack)["FilterCriteria"]["Filters"]]


def cleanup_env(stack: Stack, construct: SessionExpiry) -> dict[str, Any]:
    fn = Template.from_stack(stack).to_json()["Resources"][
        stack.get_logical_id(construct.cleanup_function.node.default_child)
    ]
    return dict(fn["Properties"]["Environment"]["Variables"])


@pytest.fixture(scope="module")
def two_regions() -> tuple[Stack, SessionExpiry, Stack, SessionExpiry]:
    app = App()
    primary = _stack(app, "Primary", PRIMARY)
    table = global_table(primary)
    home = SessionExpiry(
        primary, "Sessions", table=table, expiry_sweep_interval=Duration.minutes(1)
    )
    replica_stack = _stack(app, "Replica", REPLICA)
    replica = dynamodb.TableV2.from_table_attributes(
        replica_stack, "Table", table_name="sessions", table_stream_arn=REPLICA_STREAM
    )
    away = SessionExpiry(replica_stack, "Sessions", table=replica, global_table=True)
    return primary, home, replica_stack, away


def owner_pattern(region: str) -> dict[str, Any]:
    return {
        "eventName": ["REMOVE"],
        "dynamodb": {"OldImage": {"ownerRegion": {"S": [region]}}},
    }


def test_each_region_filters_exactly_its_own_sessions(
    two_regions: tuple[Stack, SessionExpiry, Stack, SessionExpiry],
) -> None:
    primary, home, replica_stack, away = two_regions
    assert home.global_table is True  # derived from the TableV2's replicas
    assert away.global_table is True
    assert patterns(primary) == [owner_pattern(PRIMARY)]
    assert patterns(replica_stack) == [owner_pattern(REPLICA)]
    assert mapping_props(replica_stack)["EventSourceArn"] == REPLICA_STREAM


def test_the_runtime_is_told_the_owner_attribute_and_its_region(
    two_regions: tuple[Stack, SessionExpiry, Stack, SessionExpiry],
) -> None:
    primary, home, replica_stack, away = two_regions
    for stack, construct, region in ((primary, home, PRIMARY), (replica_stack, away, REPLICA)):
        env = cleanup_env(stack, construct)
        assert env[contract.ENV_OWNER_REGION_ATTRIBUTE] == "ownerRegion"
        assert env[contract.ENV_REGION] == region
    assert home.session_environment()[contract.ENV_OWNER_REGION_ATTRIBUTE] == "ownerRegion"
    assert home.session_environment()[contract.ENV_REGION] == PRIMARY


def test_a_one_region_table_has_no_owner_filter() -> None:
    stack = _stack(App(), "One", PRIMARY)
    construct = SessionExpiry(stack, "Sessions", table=global_table(stack, replicas=False))
    assert construct.global_table is False
    assert patterns(stack) == [{"eventName": ["REMOVE"]}]
    assert contract.ENV_OWNER_REGION_ATTRIBUTE not in cleanup_env(stack, construct)


def test_an_environment_agnostic_stack_filters_on_its_deploy_region() -> None:
    app = App()
    stack = Stack(app, "Agnostic")
    replica = dynamodb.TableV2.from_table_attributes(
        stack, "Table", table_name="sessions", table_stream_arn=REPLICA_STREAM
    )
    SessionExpiry(stack, "Sessions", table=replica, global_table=True)
    (pattern,) = mapping_props(stack)["FilterCriteria"]["Filters"]
    assert pattern["Pattern"] == {
        "Fn::Join": [
            "",
            [
                '{"eventName":["REMOVE"],"dynamodb":{"OldImage":{"ownerRegion":{"S":["',
                {"Ref": "AWS::Region"},
                '"]}}}}',
            ],
        ]
    }


def test_fails_global_table_on_the_constructs_own_table() -> None:
    stack = _stack(App(), "Own", PRIMARY)
    with pytest.raises(ValueError, match=r"global_table=True: the construct's own table has no"):
        SessionExpiry(stack, "Sessions", global_table=True)


def test_fails_global_table_on_a_table_without_replicas() -> None:
    stack = _stack(App(), "NoReplicas", PRIMARY)
    table = global_table(stack, replicas=False)
    with pytest.raises(ValueError, match=r"global_table=True: table NoReplicas/Table has no"):
        SessionExpiry(stack, "Sessions", table=table, global_table=True)


def test_fails_global_table_with_ttl_deletes_only() -> None:
    stack = _stack(App(), "TtlOnly", PRIMARY)
    with pytest.raises(ValueError, match=r"TTL_DELETES_ONLY with a global table"):
        SessionExpiry(
            stack,
            "Sessions",
            table=global_table(stack),
            event_filter=CleanupEventFilter.TTL_DELETES_ONLY,
        )


def test_fails_the_wildcard_stream_of_table_v2_replica() -> None:
    app = App()
    table = global_table(_stack(app, "Primary", PRIMARY))
    replica_stack = _stack(app, "Replica", REPLICA)
    with pytest.raises(ValueError, match=r"is a wildcard \(TableV2.replica\(\)"):
        SessionExpiry(replica_stack, "Sessions", table=table.replica(REPLICA), global_table=True)
