"""Two-Region phase (issue 23): a global table's sessions cleaned once each, in their owner Region.

The emulator serves every Region (moto, ``region_name=``) but does not replicate a global table,
so this phase makes the second Region's replica itself: the deployed session and ownership
tables are copied by schema into the other Region, with a KMS key of its own, and every write
and delete of a session is applied to both replicas, as global tables replicate them. Each
Region's cleanup is the **deployed function's code** (a worker process per Region,
``DeployedFunction.start``) with global-table mode on (``SESSION_EXPIRY_OWNER_REGION_ATTRIBUTE``,
``SESSION_EXPIRY_REGION``); sessions are created by ``SessionStore.from_env`` of each Region's
application environment, which stamps the owner Region. Each Region's stream records pass the
filter ``SessionExpiry(global_table=True)`` synthesizes for it (moto's pattern matcher), and a
TTL delete carries ``userIdentity`` only in the Region that performed it.

Checks: no batch item failure; every session's grant retired in its own Region's key and its
scratch objects deleted; each Region cleaned exactly its own sessions (``SessionsCleaned`` by
``Reason``: ``ttl`` only where its owner performed the TTL delete); no record of the other
Region's sessions reached either function. The sweepers of two Regions racing are covered by
``tests/runtime/test_two_regions.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
from session_expiry_runtime.records import stream_records
from session_expiry_runtime.store import SessionStore

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.testing.pipeline import EmfMetrics
from cdk_session_expiry.testing.poller import pattern_matcher

OWNER_ATTRIBUTE = contract.DEFAULT_OWNER_REGION_ATTRIBUTE
#: (session suffix, Region that deletes it: "own"/"other", by TTL)
DELETES = (("ttl-own", "own", True), ("ttl-other", "other", True), ("end-own", "own", False))
DELETES += (("end-other", "other", False),)


def owner_filter(region: str) -> str:
    """The pattern ``SessionExpiry(global_table=True)`` synthesizes in ``region``."""
    return json.dumps(
        {"eventName": ["REMOVE"], "dynamodb": {"OldImage": {OWNER_ATTRIBUTE: {"S": [region]}}}}
    )


class _Region:
    def __init__(self, emulator: Any, name: str) -> None:
        self.name = name
        env = emulator.aws_env()
        self.session = boto3.session.Session(
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=env.get("AWS_SESSION_TOKEN"),
            region_name=name,
        )
        self.endpoint = emulator.endpoint_url

    def client(self, service: str) -> Any:
        return self.session.client(service, endpoint_url=self.endpoint)


def _copy_table(source: Any, target: Any, name: str) -> str | None:
    """Create ``name`` in ``target``'s Region with the schema it has in ``source``'s."""
    table = source.describe_table(TableName=name)["Table"]
    key_names = {k["AttributeName"] for k in table["KeySchema"]}
    kwargs: dict[str, Any] = {
        "TableName": name,
        "KeySchema": table["KeySchema"],
        # The key attributes only: the replica has no sweep index (this phase does not sweep).
        "AttributeDefinitions": [
            a for a in table["AttributeDefinitions"] if a["AttributeName"] in key_names
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if table.get("StreamSpecification"):
        kwargs["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        }
    created = target.create_table(**kwargs)["TableDescription"]
    return created.get("LatestStreamArn")


def app_env_bus_name(pipeline: Any) -> str | None:
    """The name of the deployed fan-out bus (the last segment of its ARN), if any."""
    arn = pipeline.function.environment.get(contract.ENV_EVENT_BUS_ARN)
    return arn.rsplit("/", 1)[-1] if arn else None


def stream_records_of(streams: Any, stream_arn: str, keys: set[str], pk: str) -> list[Any]:
    """Every record of a DynamoDB stream (``streams``: a ``dynamodbstreams`` client) whose
    partition key ``pk`` is one of ``keys``, from TRIM_HORIZON, shard by shard."""
    out: list[Any] = []
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator)
            records = page.get("Records") or []
            out += [r for r in records if r["dynamodb"]["Keys"].get(pk, {}).get("S") in keys]
            if not records:
                break
            iterator = page.get("NextShardIterator")
    return out


def _registrar(home: bool, region: Any) -> dict[str, Any]:
    """How a Region's store writes ownership records: through the deployed claim registrar in
    the home Region; itself in the other, whose table is the sandbox's copy with no stack (and
    so no registrar) of its own — a real second Region has its own registrar."""
    if home:
        return {"lambda_client": region.client("lambda")}
    return {"claim_registrar": None}


def run(
    *,
    emulator: Any,
    pipeline: Any,
    bucket: str,
    grantee: str,
    app_env: dict[str, str],
    say: Callable[[str], None],
) -> tuple[dict[str, Any], list[str]]:
    """Run the phase; returns its summary and the mismatches."""
    home = emulator.region
    away = "eu-west-1" if home != "eu-west-1" else "us-east-1"
    regions = {home: _Region(emulator, home), away: _Region(emulator, away)}
    table, ownership = pipeline.table_name, app_env[contract.ENV_OWNERSHIP_TABLE_NAME]
    ddb = {name: r.client("dynamodb") for name, r in regions.items()}
    away_stream = _copy_table(ddb[home], ddb[away], table)
    _copy_table(ddb[home], ddb[away], ownership)
    keys = {
        home: app_env[contract.ENV_GRANT_KEY_ARN],
        away: regions[away]
        .client("kms")
        .create_key(Description="replica grants")["KeyMetadata"]["Arn"],
    }
    streams = {home: pipeline.stream_arn, away: str(away_stream)}
    # The fan-out bus is regional too: the other Region's cleanup publishes to its own.
    bus_name = app_env_bus_name(pipeline)
    buses = {home: pipeline.function.environment.get(contract.ENV_EVENT_BUS_ARN, "")}
    if bus_name:
        buses[away] = regions[away].client("events").create_event_bus(Name=bus_name)["EventBusArn"]
    past = lambda: datetime.now(timezone.utc) - timedelta(minutes=2)  # noqa: E731
    stores = {
        name: SessionStore.from_env(
            {
                **app_env,
                contract.ENV_OWNER_REGION_ATTRIBUTE: OWNER_ATTRIBUTE,
                contract.ENV_REGION: name,
                contract.ENV_GRANT_KEY_ARN: keys[name],
            },
            dynamodb_client=ddb[name],
            kms_client=r.client("kms"),
            clock=past,
            **_registrar(name == home, r),
        )
        for name, r in regions.items()
    }
    pk = stores[home].config.partition_key
    s3 = emulator.client("s3")
    sessions: dict[str, tuple[str, str, str]] = {}  # id -> (owner, grant id, prefix)
    performed_ttl: dict[str, set[str]] = {home: set(), away: set()}
    for owner in (home, away):
        other = away if owner == home else home
        for suffix, where, by_ttl in DELETES:
            session_id = f"region-{owner}-{suffix}"
            store = stores[owner]
            store.create(session_id, ttl=timedelta(minutes=1))
            s = store.create_grant(session_id, grantee_principal=grantee, operations=["Decrypt"])
            for name in ("a.txt", "b/c.bin"):
                s3.put_object(Bucket=bucket, Key=f"{s.scratch_prefix}{name}", Body=b"x")
            item = ddb[owner].get_item(TableName=table, Key={pk: {"S": session_id}})["Item"]
            ddb[other].put_item(TableName=table, Item=item)  # replication
            sessions[session_id] = (owner, str(s.grant_id), str(s.scratch_prefix))
            deleter = owner if where == "own" else other
            for region in (deleter, other if deleter == owner else owner):
                ddb[region].delete_item(TableName=table, Key={pk: {"S": session_id}})
            if by_ttl:
                performed_ttl[deleter].add(session_id)
    summary, mismatches = _clean_and_check(
        emulator, pipeline, regions, streams, keys, sessions, performed_ttl, pk, bucket, buses
    )
    say(report_line(summary))
    return summary, mismatches


def _clean_and_check(
    emulator: Any,
    pipeline: Any,
    regions: dict[str, _Region],
    streams: dict[str, str],
    keys: dict[str, str],
    sessions: dict[str, tuple[str, str, str]],
    performed_ttl: dict[str, set[str]],
    pk: str,
    bucket: str,
    buses: dict[str, str],
) -> tuple[dict[str, Any], list[str]]:
    per_region: dict[str, Any] = {}
    mismatches: list[str] = []
    for name, region in regions.items():
        metrics = EmfMetrics()
        errors: list[str] = []

        def log(line: str, _metrics: EmfMetrics = metrics, _errors: list[str] = errors) -> None:
            _metrics.add_log_line(line)
            if '"ERROR"' in line or "Traceback" in line:
                _errors.append(line[:600])

        worker = pipeline.function.start(
            env_overrides={
                contract.ENV_OWNER_REGION_ATTRIBUTE: OWNER_ATTRIBUTE,
                contract.ENV_REGION: name,
                contract.ENV_GRANT_KEY_ARN: keys[name],
                **({contract.ENV_EVENT_BUS_ARN: buses[name]} if buses.get(name) else {}),
                "AWS_REGION": name,
                "AWS_DEFAULT_REGION": name,
                # The flags' AppConfig application is the home Region's stack's; a replica
                # Region's stack would have its own. This phase runs both without flags.
                contract.ENV_FLAGS_APPLICATION: "",
                contract.ENV_FLAGS_ENVIRONMENT: "",
                contract.ENV_FLAGS_PROFILE: "",
            },
            on_log=log,
        )
        try:
            raw = stream_records_of(
                region.client("dynamodbstreams"), streams[name], set(sessions), pk
            )
            shaped = [
                json.loads(
                    json.dumps(
                        stream_records.to_lambda_record(
                            r,
                            stream_arn=streams[name],
                            region=name,
                            user_identity=stream_records.TTL_USER_IDENTITY
                            if r["eventName"] == "REMOVE"
                            and r["dynamodb"]["Keys"][pk]["S"] in performed_ttl[name]
                            else None,
                        )
                    )
                )
                for r in raw
            ]
            matches = pattern_matcher([owner_filter(name)])
            delivered = [r for r in shaped if matches(r)]
            response = worker({"Records": delivered})
        finally:
            worker.close()
        foreign = [r for r in delivered if sessions[r["dynamodb"]["Keys"][pk]["S"]][0] != name]
        per_region[name] = {
            "records": len(shaped),
            "delivered": len(delivered),
            "foreign_delivered": len(foreign),
            "batch_item_failures": len(response["batchItemFailures"]),
            "cleaned_by_reason": metrics.by_dimension(
                contract.METRIC_SESSIONS_CLEANED, contract.DIMENSION_REASON
            ),
            "failures_by_action": metrics.by_dimension(
                contract.METRIC_CLEANUP_FAILURES, contract.DIMENSION_ACTION
            ),
            "errors": errors[:3],
        }
        own = sum(1 for owner, _, _ in sessions.values() if owner == name)
        cleaned = sum(per_region[name]["cleaned_by_reason"].values())
        if cleaned != own or foreign or response["batchItemFailures"]:
            mismatches.append(f"two regions: {name} {per_region[name]}, expected {own} cleaned")
        expected_ttl = len([s for s in performed_ttl[name] if sessions[s][0] == name])
        if per_region[name]["cleaned_by_reason"].get(contract.REASON_TTL, 0) != expected_ttl:
            mismatches.append(f"two regions: {name} ttl reasons, expected {expected_ttl}")
    s3 = emulator.client("s3")
    retired = 0
    for session_id, (owner, grant_id, prefix) in sessions.items():
        kms = regions[owner].client("kms")
        listed = {g["GrantId"] for g in kms.list_grants(KeyId=keys[owner])["Grants"]}
        objects = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount", 0)
        if grant_id in listed or objects:
            mismatches.append(f"two regions: {session_id} not cleaned in {owner}")
        else:
            retired += 1
    summary = {"sessions": len(sessions), "cleaned_and_verified": retired, "regions": per_region}
    return summary, mismatches


def report_line(summary: dict[str, Any]) -> str:
    """One line of the sandbox report."""
    parts = [
        f"{name}: {r['delivered']}/{r['records']} records delivered, "
        f"cleaned {dict(r['cleaned_by_reason'])}, other Region's {r['foreign_delivered']}"
        for name, r in summary["regions"].items()
    ]
    return (
        f"two regions       {summary['sessions']} sessions of a global table (replicated by the "
        f"sandbox), {summary['cleaned_and_verified']} cleaned once in their owner Region; "
        + "; ".join(parts)
    )
