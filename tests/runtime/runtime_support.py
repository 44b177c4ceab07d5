"""Helpers for the cleanup runtime tests: moto resources, real stream records, Lambda shapes.

Stream records always come from real writes and deletes on a moto table whose stream has view
type NEW_AND_OLD_IMAGES, read back with ``dynamodbstreams`` GetShardIterator/GetRecords, and
reshaped into what the Lambda event source mapping delivers. The differences (checked against
the example event in the Lambda Developer Guide, "Using AWS Lambda with Amazon DynamoDB"):

* boto3 parses ``ApproximateCreationDateTime`` into a ``datetime``; Lambda delivers epoch seconds
  as a JSON number.
* boto3 hands ``B``/``BS`` values over as ``bytes``; Lambda delivers base64 text.
* Lambda adds ``eventSourceARN`` and uses ``eventVersion`` "1.1".
* moto never deletes items by TTL, so a TTL delete is an explicit DeleteItem whose record then
  gets the ``userIdentity`` AWS documents for TTL deletes
  (``{"type": "Service", "principalId": "dynamodb.amazonaws.com"}``).

Sessions are written as ``SessionStore`` writes them with ownership records: an ``incarnation``
attribute (the scratch prefix's last segment) and a claim for the connection and the grant in
the ownership table (:mod:`ownership_support`); ``legacy=True`` writes an item of before
ownership records (no incarnation, no claims).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import boto3
from moto.apigatewaymanagementapi.models import apigatewaymanagementapi_backends
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, build_clients
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.grant_names import grant_name
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.ownership import KIND_CONNECTION, KIND_GRANT
from session_expiry_runtime.records import stream_records

try:  # imported as ``runtime_support`` (tests/runtime on the path) ...
    from ownership_support import (
        DEFAULT_LIFETIME_SECONDS,
        DEFERRED_WORK_TABLE,
        OWNERSHIP_TABLE,
        create_deferred_work_table,
        create_ownership_table,
        put_claim,
    )
except ModuleNotFoundError:  # ... or as ``runtime.runtime_support`` (tests/store)
    from runtime.ownership_support import (
        DEFAULT_LIFETIME_SECONDS,
        DEFERRED_WORK_TABLE,
        OWNERSHIP_TABLE,
        create_deferred_work_table,
        create_ownership_table,
        put_claim,
    )
from session_expiry_runtime.core.prefixes import build_scratch_prefix

REGION = "us-east-1"
PARTITION = "aws"
TABLE = "sessions"
BUCKET = "scratch-bucket"
ENDPOINT = "https://abc123defg.execute-api.us-east-1.amazonaws.com/prod"
CLEANUP_ROLE = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/session-cleanup"
APP_ROLE = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/session-app"
TTL_IDENTITY = stream_records.TTL_USER_IDENTITY

#: One boto3 session for every test client: each new session reloads botocore's service models,
#: which costs more than the moto calls of a whole test.
SESSION = boto3.session.Session(region_name=REGION)


@contextmanager
def aws_calls() -> Iterator[list[str]]:
    """The name of every AWS call made by any client of :data:`SESSION` inside the block (the
    replay CLI creates its own clients from it): a refusal "before any call" leaves it empty."""
    calls: list[str] = []

    def record(model: Any, **_: Any) -> None:
        calls.append(model.name)

    SESSION.events.register("before-call", record)
    try:
        yield calls
    finally:
        SESSION.events.unregister("before-call", record)


class FakeContext:
    """The part of the Lambda context object the handler uses."""

    def __init__(self, remaining_ms: int = 300_000) -> None:
        self.remaining_ms = remaining_ms
        self.aws_request_id = "test-request"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def to_lambda_record(
    record: dict[str, Any], stream_arn: str, *, ttl_delete: bool = False
) -> dict[str, Any]:
    """Reshape a ``dynamodbstreams`` GetRecords record into a Lambda event record.

    moto never expires items by TTL: ``ttl_delete`` gives the REMOVE record of a DeleteItem the
    ``userIdentity`` that AWS documents for TTL deletes.
    """
    shaped = stream_records.to_lambda_record(
        record,
        stream_arn=stream_arn,
        user_identity=stream_records.TTL_USER_IDENTITY if ttl_delete else None,
    )
    # Lambda hands the function parsed JSON: prove the shape survives a JSON round trip.
    return json.loads(json.dumps(shaped))


def event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


@dataclass
class Session:
    session_id: str
    connection_id: str
    grant_id: str
    grant_token: str
    prefix: str
    keys: list[str]
    tenant: str | None = None
    item: dict[str, Any] = field(default_factory=dict)
    #: ``None`` for a legacy item (written before ownership records)
    incarnation: str | None = None


#: The schema the README recommends for untrusted tenant writers: the tenant is the partition.
TENANT_SCHEMA = {
    "partition_key": "tenantId",
    "sort_key": "sessionId",
    "tenant_attribute": "tenantId",
}


class Sandbox:
    """moto resources of one test: table + stream, scratch bucket, KMS key, WebSocket endpoint,
    ownership table.

    Args:
        tenant_partition: key the table by ``tenantId`` (partition) and ``sessionId`` (sort)
            (:data:`TENANT_SCHEMA`) instead of ``pk``; :meth:`create_session` and
            :meth:`delete` then do not apply (write items with explicit keys).
    """

    def __init__(
        self, *, tenant_scoped: bool = False, max_workers: int = 4, tenant_partition: bool = False
    ) -> None:
        self.ddb = SESSION.client("dynamodb")
        self.streams = SESSION.client("dynamodbstreams")
        self.s3 = SESSION.client("s3")
        self.kms = SESSION.client("kms")
        self.apigw = SESSION.client("apigatewaymanagementapi", endpoint_url=ENDPOINT)
        schema = TENANT_SCHEMA if tenant_partition else {"partition_key": "pk"}
        keys = [(schema["partition_key"], "HASH")]
        if tenant_partition:
            keys.append((schema["sort_key"], "RANGE"))
        table = self.ddb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": name, "KeyType": kind} for name, kind in keys],
            AttributeDefinitions=[
                {"AttributeName": name, "AttributeType": "S"} for name, _ in keys
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        self.stream_arn = table["TableDescription"]["LatestStreamArn"]
        self.s3.create_bucket(Bucket=BUCKET)
        create_ownership_table(self.ddb)
        create_deferred_work_table(self.ddb)
        self.key_arn = self.kms.create_key(Description="session grants")["KeyMetadata"]["Arn"]
        self.config = RuntimeConfig(
            table_name=TABLE,
            ownership_table_name=OWNERSHIP_TABLE,
            deferred_work_table_name=DEFERRED_WORK_TABLE,
            websocket_endpoint=ENDPOINT,
            grant_key_arn=self.key_arn,
            scratch_bucket=BUCKET,
            tenant_scoped_scratch=tenant_scoped,
            retiring_principal=CLEANUP_ROLE,
            max_workers=max_workers,
            **schema,
        )
        self._read_after: str | None = None

    # --- environment for the real handler -------------------------------------------------
    def env(self) -> dict[str, str]:
        c = self.config
        env = {
            "SESSION_EXPIRY_TABLE_NAME": TABLE,
            "SESSION_EXPIRY_WEBSOCKET_ENDPOINT": ENDPOINT,
            "SESSION_EXPIRY_GRANT_KEY_ARN": self.key_arn,
            "SESSION_EXPIRY_SCRATCH_BUCKET": BUCKET,
            "SESSION_EXPIRY_RETIRING_PRINCIPAL": CLEANUP_ROLE,
            "SESSION_EXPIRY_MAX_WORKERS": str(c.max_workers),
            "SESSION_EXPIRY_OWNERSHIP_TABLE_NAME": OWNERSHIP_TABLE,
        }
        if c.tenant_scoped_scratch:
            env["SESSION_EXPIRY_TENANT_SCOPED_SCRATCH"] = "true"
        if c.sort_key:
            env["SESSION_EXPIRY_PARTITION_KEY"] = c.partition_key
            env["SESSION_EXPIRY_SORT_KEY"] = c.sort_key
            env["SESSION_EXPIRY_TENANT_ATTRIBUTE"] = c.tenant_attribute
        return env

    def cleaner(self, config: RuntimeConfig | None = None) -> SessionCleaner:
        config = config or self.config
        return SessionCleaner(
            config, build_clients(config, SESSION), MetricsRecorder(config.metrics_namespace)
        )

    # --- sessions -------------------------------------------------------------------------
    def open_connection(self, connection_id: str) -> None:
        # moto's management API keeps connections in a defaultdict: PostToConnection creates one.
        self.apigw.post_to_connection(ConnectionId=connection_id, Data=b"hello")

    def connection_exists(self, connection_id: str) -> bool:
        backend = apigatewaymanagementapi_backends[DEFAULT_ACCOUNT_ID][REGION]
        # moto keys connections by the id as it appears in the URL path (percent-encoded).
        return quote(connection_id, safe="-_.~") in backend.connections

    def grant_ids(self) -> set[str]:
        grants: set[str] = set()
        for page in self.kms.get_paginator("list_grants").paginate(KeyId=self.key_arn):
            grants.update(g["GrantId"] for g in page["Grants"])
        return grants

    def create_grant(self, key: dict[str, str], incarnation: str) -> dict[str, Any]:
        """A grant as ``SessionStore.create_grant`` makes it: retiring principal the cleanup
        role, ``Name`` naming the session's key and incarnation (none when no name can)."""
        name = grant_name(key, incarnation) if incarnation else None
        return self.kms.create_grant(  # type: ignore[no-any-return]
            KeyId=self.key_arn,
            GranteePrincipal=APP_ROLE,
            RetiringPrincipal=CLEANUP_ROLE,
            Operations=["Encrypt", "Decrypt", "GenerateDataKey"],
            **({"Name": name} if name else {}),
        )

    def put_objects(self, keys: list[str]) -> None:
        if len(keys) <= 20:
            for key in keys:
                self.s3.put_object(Bucket=BUCKET, Key=key, Body=b"scratch")
            return
        # Bulk set-up straight into moto's backend (thousands of PutObject calls would dominate
        # the suite's time); listing and deleting still go through boto3.
        backend = s3_backends[DEFAULT_ACCOUNT_ID][PARTITION]
        for key in keys:
            backend.put_object(BUCKET, key, b"scratch")

    def keys_under(self, prefix: str) -> list[str]:
        keys: list[str] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
            keys.extend(o["Key"] for o in page.get("Contents", []))
        return keys

    def create_session(
        self,
        session_id: str,
        *,
        expires_at: Any = None,
        object_names: tuple[str, ...] = ("a.txt", "b/c.bin"),
        tenant: str | None = None,
        prefix: str | None = None,
        extra: dict[str, Any] | None = None,
        write_item: bool = True,
        legacy: bool = False,
    ) -> Session:
        """Create a connection, a grant (retiring principal: the cleanup role), scratch objects
        under a fresh incarnation prefix, the session item that names them and, unless
        ``legacy``, its ``incarnation`` and the claims of the connection and the grant."""
        # API Gateway connection ids are unique per connection, like "L0SM9cOFvHcCIhw=".
        connection_id = f"{session_id}-{uuid.uuid4().hex[:8]}="
        self.open_connection(connection_id)
        if prefix is None:
            prefix = build_scratch_prefix(
                "sessions/",
                session_id,
                tenant_id=tenant,
                tenant_scoped=self.config.tenant_scoped_scratch,
            )
        incarnation = prefix.rstrip("/").rsplit("/", 1)[-1]
        grant = self.create_grant({"pk": session_id}, incarnation)
        keys = [prefix + name for name in object_names]
        self.put_objects(keys)
        expires = int(time.time()) + 3600 if expires_at is None else expires_at
        item: dict[str, Any] = {
            "pk": {"S": session_id},
            "expiresAt": expires if isinstance(expires, dict) else {"N": str(expires)},
            "connectionId": {"S": connection_id},
            "grantId": {"S": grant["GrantId"]},
            "grantToken": {"S": grant["GrantToken"]},
            "scratchPrefix": {"S": prefix},
        }
        if tenant is not None:
            item["tenantId"] = {"S": tenant}
        if not legacy:
            item["incarnation"] = {"S": incarnation}
            # As SessionStore.create writes it: created now, the default 8-hour lifetime.
            item["notAfter"] = {"N": str(int(time.time()) + DEFAULT_LIFETIME_SECONDS)}
            for kind, resource_id in (
                (KIND_CONNECTION, connection_id),
                (KIND_GRANT, grant["GrantId"]),
            ):
                self.claim(kind, resource_id, session_id, incarnation)
        item.update(extra or {})
        if write_item:
            self.ddb.put_item(TableName=TABLE, Item=item)
        return Session(
            session_id,
            connection_id,
            grant["GrantId"],
            grant["GrantToken"],
            prefix,
            keys,
            tenant,
            item,
            None if legacy else incarnation,
        )

    def claim(
        self, kind: str, resource_id: str, session_id: str, incarnation: str, **fields: Any
    ) -> None:
        """Seed the ownership record of ``resource_id`` for session ``session_id`` (key
        ``{"pk": session_id}``) in ``incarnation``, as ``SessionStore`` writes it."""
        put_claim(
            self.ddb,
            kind,
            resource_id,
            key={"pk": session_id},
            incarnation=incarnation,
            **fields,
        )

    def delete(self, session_id: str) -> None:
        self.ddb.delete_item(TableName=TABLE, Key={"pk": {"S": session_id}})

    def is_clean(self, session: Session) -> bool:
        return (
            not self.connection_exists(session.connection_id)
            and session.grant_id not in self.grant_ids()
            and not self.keys_under(session.prefix)
        )

    def is_intact(self, session: Session) -> bool:
        return (
            self.connection_exists(session.connection_id)
            and session.grant_id in self.grant_ids()
            and sorted(self.keys_under(session.prefix)) == sorted(session.keys)
        )

    # --- the stream -----------------------------------------------------------------------
    def read_stream(self) -> list[dict[str, Any]]:
        """Every record written since the last call, in shard order (boto3 shape)."""
        shards = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"
        ]
        records: list[dict[str, Any]] = []
        for shard in shards:
            if self._read_after is None:
                iterator = self.streams.get_shard_iterator(
                    StreamArn=self.stream_arn,
                    ShardId=shard["ShardId"],
                    ShardIteratorType="TRIM_HORIZON",
                )["ShardIterator"]
            else:
                iterator = self.streams.get_shard_iterator(
                    StreamArn=self.stream_arn,
                    ShardId=shard["ShardId"],
                    ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                    SequenceNumber=self._read_after,
                )["ShardIterator"]
            while iterator:
                page = self.streams.get_records(ShardIterator=iterator, Limit=1000)
                records.extend(page["Records"])
                if not page["Records"]:
                    break
                iterator = page.get("NextShardIterator")
        if records:
            self._read_after = records[-1]["dynamodb"]["SequenceNumber"]
        return records

    def lambda_records(
        self, *, ttl_deletes: set[str] | frozenset[str] = frozenset()
    ) -> list[dict[str, Any]]:
        """New stream records in Lambda's shape; REMOVEs of ``ttl_deletes`` ids get the TTL
        ``userIdentity``."""
        shaped = []
        session_key = self.config.sort_key or self.config.partition_key
        for record in self.read_stream():
            pk = record["dynamodb"]["Keys"][session_key].get("S")
            ttl = record["eventName"] == "REMOVE" and pk in ttl_deletes
            shaped.append(to_lambda_record(record, self.stream_arn, ttl_delete=ttl))
        return shaped

    def removes(
        self, *, ttl_deletes: set[str] | frozenset[str] = frozenset()
    ) -> list[dict[str, Any]]:
        return [
            r for r in self.lambda_records(ttl_deletes=ttl_deletes) if r["eventName"] == "REMOVE"
        ]
