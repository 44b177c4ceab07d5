"""The moto server process, the fixtures of one throughput run, and their verification.

Fixture of a run (one scenario, one implementation, its own table, bucket and KMS key):

* ``sessions`` expired sessions (plus one, ``w-1``, for an untimed warm-up invocation), each
  with a WebSocket connection (registered in moto's API Gateway Management API backend), a
  KMS grant (``CreateGrant`` naming a retiring principal) and ``objects`` scratch objects
  under its own per-incarnation prefix;
* ``controls`` live sessions whose session ids extend an expired one's (``b-1`` / ``b-1x``),
  so a prefix listed without its trailing ``/`` would reach them; they are never deleted and
  must come through untouched (each holds a few objects: enough to see damage, few enough not
  to slow moto's listing of the bucket).

The expired items are written with ``PutItem`` and removed with ``DeleteItem`` on a table with
a ``NEW_AND_OLD_IMAGES`` stream; the REMOVE records are read back from moto's stream with
``GetRecords`` and converted to the shape Lambda delivers (see :func:`to_lambda_record`).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from session_expiry_runtime import stream_records

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"  # moto's default account
STAGE = "prod"
SCRATCH_ROOT = "sessions/"
RETIRING_PRINCIPAL = f"arn:aws:iam::{ACCOUNT_ID}:role/bench-cleanup-function-role"
GRANTEE_PRINCIPAL = f"arn:aws:iam::{ACCOUNT_ID}:role/bench-session-role"
TTL_LAG_S = 3_600  # the expired sessions' TTL lies this far before their REMOVE

#: Environment of every bench process that talks to moto: fake credentials, no real account.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    "AWS_EC2_METADATA_DISABLED": "true",
}

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "lambda_src"))  # the runtime package, as the Lambda asset has it


def aws_env() -> None:
    """Apply :data:`AWS_ENV` to this process; drop any real profile."""
    os.environ.update(AWS_ENV)
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        os.environ.pop(name, None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoServer:
    """``python -m bench.server`` as a child process; stopped by :meth:`stop` (its own pid)."""

    name = "moto"

    def prepare(self, fx: Fixture) -> None:
        """Nothing to do: a fixture is built in moto and serves one moto run."""

    def verify(self, fx: Fixture) -> Verification:
        return verify(self, fx)

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "w")  # closed in stop()
        self.proc = subprocess.Popen(  # noqa: S603 - our own module, fixed arguments
            [sys.executable, "-m", "bench.server", "--port", str(self.port)],
            cwd=REPO,
            env={**os.environ, **AWS_ENV},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.latency_ms()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start; see {log_path}") from None
                time.sleep(0.1)

    def _call(self, method: str, path: str) -> Any:
        req = urllib.request.Request(self.endpoint + path, method=method)  # noqa: S310
        with urllib.request.urlopen(req, timeout=600) as resp:  # noqa: S310 - localhost
            return json.loads(resp.read())

    def latency_ms(self) -> float:
        return float(self._call("GET", "/_bench/latency")["latency_ms"])

    def set_latency_ms(self, ms: float) -> None:
        self._call("PUT", f"/_bench/latency?ms={ms}")

    def seed_objects(self, bucket: str, prefix: str, count: int) -> None:
        from urllib.parse import quote

        self._call(
            "POST",
            f"/_bench/seed-objects?bucket={quote(bucket)}&prefix={quote(prefix)}&count={count}",
        )

    def connections(self) -> set[str]:
        return set(self._call("GET", "/_bench/connections")["connections"])

    def stats(self) -> dict[str, int]:
        return dict(self._call("GET", "/_bench/stats")["requests"])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


class BenchEndpoint:
    """``python -m bench.endpoint`` (CPU-cheap, stateful) as a child process; :meth:`stop` ends it.

    The throughput runs' target; see :mod:`bench.endpoint` for what it answers and why.
    """

    name = "bench endpoint"

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "w")  # closed in stop()
        self.proc = subprocess.Popen(  # noqa: S603 - our own module, fixed arguments
            [sys.executable, "-m", "bench.endpoint", "--port", str(self.port)],
            cwd=REPO,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                self.set_latency_ms(0)
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"bench endpoint did not start; see {log_path}") from None
                time.sleep(0.05)

    def _call(self, method: str, path: str, doc: Any = None) -> Any:
        data = json.dumps(doc).encode() if doc is not None else None
        req = urllib.request.Request(self.endpoint + path, data=data, method=method)  # noqa: S310
        with urllib.request.urlopen(req, timeout=600) as resp:  # noqa: S310 - localhost
            return json.loads(resp.read())

    def set_latency_ms(self, ms: float) -> None:
        self._call("PUT", f"/_bench/latency?ms={ms}")

    def stats(self) -> dict[str, int]:
        return dict(self._call("GET", "/_bench/stats")["requests"])

    def prepare(self, fx: Fixture) -> None:
        """Forget the last run and hold exactly ``fx``'s connections, grants and objects."""
        self._call("POST", "/_bench/reset")
        sessions = fx.expired + fx.controls
        self._call(
            "POST",
            "/_bench/seed",
            {
                "connections": [s.connection_id for s in sessions],
                "grants": [
                    {"id": s.grant_id, "token": s.grant_token, "name": s.grant_name}
                    for s in sessions
                ],
                "objects": {fx.bucket: {s.scratch_prefix: s.objects for s in sessions}},
            },
        )

    def verify(self, fx: Fixture) -> Verification:
        """What :func:`verify` checks on moto, read from the endpoint's state."""
        counts = self._call(
            "POST",
            "/_bench/count",
            {"bucket": fx.bucket, "prefixes": [s.scratch_prefix for s in fx.expired + fx.controls]},
        )
        connections = set(self._call("GET", "/_bench/connections")["connections"])
        grants = set(self._call("GET", "/_bench/grants")["grants"])
        return _verification(fx, counts.__getitem__, connections, grants)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def clients(endpoint: str) -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    cfg = Config(retries={"mode": "standard"}, max_pool_connections=50)
    kw: dict[str, Any] = {"region_name": REGION, "endpoint_url": endpoint, "config": cfg}
    return {
        "dynamodb": boto3.client("dynamodb", **kw),
        "dynamodbstreams": boto3.client("dynamodbstreams", **kw),
        "s3": boto3.client("s3", **kw),
        "kms": boto3.client("kms", **kw),
        "apigw": boto3.client(
            "apigatewaymanagementapi",
            region_name=REGION,
            endpoint_url=f"{endpoint}/{STAGE}",
            config=cfg,
        ),
    }


@dataclass(frozen=True)
class Scenario:
    """One throughput case: ``sessions`` REMOVE records of sessions with ``objects`` objects."""

    name: str
    sessions: int
    objects: int
    controls: int = 3


@dataclass
class Session:
    session_id: str
    connection_id: str
    grant_id: str
    grant_token: str
    scratch_prefix: str
    objects: int
    #: The grant's ``Name`` as ``SessionStore.create_grant`` writes it (the cleanup checks it).
    grant_name: str = ""


@dataclass
class Fixture:
    scenario: Scenario
    run_id: str
    table: str
    bucket: str
    key_arn: str
    event: dict[str, Any]
    warmup_event: dict[str, Any]
    expired: list[Session]
    controls: list[Session]
    env: dict[str, str] = field(default_factory=dict)


def _grant_name(session_id: str, prefix: str) -> str:
    """The grant ``Name`` ``SessionStore.create_grant`` gives this session's grant."""
    from session_expiry_runtime.grant_names import grant_name

    name = grant_name({"pk": session_id}, prefix.rstrip("/").rsplit("/", 1)[-1])
    if name is None:
        raise RuntimeError(f"session id {session_id!r}: too long for a grant name")
    return name


def to_lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """Turn a boto3 ``GetRecords`` record into the record Lambda's event source mapping delivers.

    The reshaping is the runtime's own (:mod:`session_expiry_runtime.stream_records`). moto never
    expires items, so the REMOVE came from ``DeleteItem``; the ``userIdentity`` that DynamoDB puts
    on a TTL delete (DynamoDB developer guide, "DynamoDB Streams and Time to Live") is added,
    making the records exactly what a TTL expiry delivers.
    """
    identity = stream_records.TTL_USER_IDENTITY if record["eventName"] == "REMOVE" else None
    return stream_records.to_lambda_record(
        record,
        stream_arn=stream_arn,
        region=record.get("awsRegion", REGION),
        user_identity=identity,
    )


def build_fixture(server: MotoServer, scenario: Scenario, impl: str) -> Fixture:
    """Create the resources, sessions and REMOVE event of one run (latency off while it runs)."""
    from session_expiry_runtime.prefixes import build_scratch_prefix

    server.set_latency_ms(0)
    c = clients(server.endpoint)
    run_id = re.sub(r"[^a-z0-9]+", "-", f"{scenario.name}-{impl}".lower()).strip("-")[:50]
    table = f"bench-{run_id}"
    bucket = f"bench-{run_id}"
    c["dynamodb"].create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    stream_arn = c["dynamodb"].describe_table(TableName=table)["Table"]["LatestStreamArn"]
    c["s3"].create_bucket(Bucket=bucket)
    key_arn = c["kms"].create_key(Description=f"bench {run_id}")["KeyMetadata"]["Arn"]

    def new_session(session_id: str, objects: int) -> Session:
        connection_id = f"conn-{session_id}="
        c["apigw"].get_connection(ConnectionId=connection_id)  # moto registers it on first sight
        prefix = build_scratch_prefix(SCRATCH_ROOT, session_id)
        name = _grant_name(session_id, prefix)
        grant = c["kms"].create_grant(
            KeyId=key_arn,
            GranteePrincipal=GRANTEE_PRINCIPAL,
            RetiringPrincipal=RETIRING_PRINCIPAL,
            Operations=["Decrypt", "Encrypt"],
            Name=name,
        )
        if objects:
            server.seed_objects(bucket, prefix, objects)
        return Session(
            session_id, connection_id, grant["GrantId"], grant["GrantToken"], prefix, objects, name
        )

    # One more expired session, "w-1", whose REMOVE is the warm-up invocation's only record.
    expired = [new_session(f"b-{i}", scenario.objects) for i in range(1, scenario.sessions + 1)]
    expired.append(new_session("w-1", scenario.objects))
    controls = [new_session(f"b-{i}x", 5) for i in range(1, scenario.controls + 1)]
    now = int(time.time())
    for s in expired + controls:
        live = s in controls
        c["dynamodb"].put_item(
            TableName=table,
            Item={
                "pk": {"S": s.session_id},
                "expiresAt": {"N": str(now + 3_600 if live else now - TTL_LAG_S)},
                "connectionId": {"S": s.connection_id},
                "grantId": {"S": s.grant_id},
                "grantToken": {"S": s.grant_token},
                "scratchPrefix": {"S": s.scratch_prefix},
                "tenantId": {"S": "t-bench"},
            },
        )
    for s in expired:
        c["dynamodb"].delete_item(TableName=table, Key={"pk": {"S": s.session_id}})

    streams = c["dynamodbstreams"]
    shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    records: list[dict[str, Any]] = []
    for shard in shards:
        it = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while it:
            page = streams.get_records(ShardIterator=it, Limit=1000)
            if not page["Records"]:
                break
            records.extend(page["Records"])
            it = page.get("NextShardIterator")
    # The event source mapping's filter ({"eventName": ["REMOVE"]}) passes only these.
    removes = [to_lambda_record(r, stream_arn) for r in records if r["eventName"] == "REMOVE"]
    if len(removes) != scenario.sessions + 1:
        raise RuntimeError(
            f"{run_id}: expected {scenario.sessions + 1} REMOVE records, got {len(removes)}"
        )
    warmup = [r for r in removes if r["dynamodb"]["Keys"]["pk"]["S"] == "w-1"]
    measured = [r for r in removes if r["dynamodb"]["Keys"]["pk"]["S"] != "w-1"]
    return Fixture(
        scenario=scenario,
        run_id=run_id,
        table=table,
        bucket=bucket,
        key_arn=key_arn,
        event={"Records": measured},
        warmup_event={"Records": warmup},
        expired=expired,
        controls=controls,
    )


@dataclass
class Verification:
    sessions: int
    objects_left: int
    sessions_with_objects_left: int
    connections_left: int
    grants_left: int
    controls_damaged: int

    @property
    def clean(self) -> bool:
        return not (
            self.objects_left or self.connections_left or self.grants_left or self.controls_damaged
        )

    def summary(self) -> str:
        if self.clean:
            return f"all {self.sessions} clean, controls intact"
        return (
            f"LEAKED: {self.sessions_with_objects_left} sessions with {self.objects_left} objects, "
            f"{self.connections_left} connections, {self.grants_left} grants; "
            f"{self.controls_damaged} controls damaged"
        )


def verify(server: MotoServer, fx: Fixture) -> Verification:
    """After a run: every expired session's objects, connection and grant gone; controls intact."""
    server.set_latency_ms(0)
    c = clients(server.endpoint)

    def count(prefix: str) -> int:
        n = 0
        pages = c["s3"].get_paginator("list_objects_v2").paginate(Bucket=fx.bucket, Prefix=prefix)
        for page in pages:
            n += page.get("KeyCount", 0)
        return n

    grants: set[str] = set()
    for page in c["kms"].get_paginator("list_grants").paginate(KeyId=fx.key_arn):
        grants.update(g["GrantId"] for g in page["Grants"])
    return _verification(fx, count, server.connections(), grants)


def _verification(
    fx: Fixture, count: Callable[[str], int], connections: set[str], grants: set[str]
) -> Verification:
    left = [count(s.scratch_prefix) for s in fx.expired]
    damaged = sum(
        1
        for s in fx.controls
        if count(s.scratch_prefix) != s.objects
        or s.connection_id not in connections
        or s.grant_id not in grants
    )
    return Verification(
        sessions=len(fx.expired),
        objects_left=sum(left),
        sessions_with_objects_left=sum(1 for n in left if n),
        connections_left=sum(1 for s in fx.expired if s.connection_id in connections),
        grants_left=sum(1 for s in fx.expired if s.grant_id in grants),
        controls_damaged=damaged,
    )


def synthetic_fixture(scenario: Scenario) -> Fixture:
    """A fixture for the bench endpoint alone, without moto: the REMOVE records are built in
    ``GetRecords``' shape and reshaped by the runtime's own ``stream_records`` (as
    :func:`build_fixture` does with moto's), so a batch of thousands of sessions costs no
    emulator time. Used by the scale runs; grant ids and tokens are random, as KMS's are opaque.
    """
    import datetime as dt
    import secrets

    from session_expiry_runtime.prefixes import build_scratch_prefix

    run_id = re.sub(r"[^a-z0-9]+", "-", f"scale-{scenario.name}".lower()).strip("-")[:50]
    table = bucket = f"bench-{run_id}"
    stream_arn = (
        f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{table}/stream/2026-11-30T00:00:00.000"
    )
    key_arn = f"arn:aws:kms:{REGION}:{ACCOUNT_ID}:key/{secrets.token_hex(16)}"
    now = int(time.time())

    def new_session(session_id: str, objects: int) -> Session:
        prefix = build_scratch_prefix(SCRATCH_ROOT, session_id)
        return Session(
            session_id,
            f"conn-{session_id}=",
            secrets.token_hex(32),
            secrets.token_urlsafe(96),
            prefix,
            objects,
            _grant_name(session_id, prefix),
        )

    def remove(s: Session, seq: int) -> dict[str, Any]:
        old = {
            "pk": {"S": s.session_id},
            "expiresAt": {"N": str(now - TTL_LAG_S)},
            "connectionId": {"S": s.connection_id},
            "grantId": {"S": s.grant_id},
            "grantToken": {"S": s.grant_token},
            "scratchPrefix": {"S": s.scratch_prefix},
            "tenantId": {"S": "t-bench"},
        }
        api_record = {
            "eventID": secrets.token_hex(16),
            "eventName": "REMOVE",
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": REGION,
            "dynamodb": {
                "ApproximateCreationDateTime": dt.datetime.fromtimestamp(now, dt.timezone.utc),
                "Keys": {"pk": {"S": s.session_id}},
                "OldImage": old,
                "SequenceNumber": f"{10**20 + seq}",
                "SizeBytes": 512,
                "StreamViewType": "NEW_AND_OLD_IMAGES",
            },
        }
        return to_lambda_record(api_record, stream_arn)

    expired = [new_session(f"b-{i}", scenario.objects) for i in range(1, scenario.sessions + 1)]
    warm = new_session("w-1", scenario.objects)
    controls = [new_session(f"b-{i}x", 5) for i in range(1, scenario.controls + 1)]
    return Fixture(
        scenario=scenario,
        run_id=run_id,
        table=table,
        bucket=bucket,
        key_arn=key_arn,
        event={"Records": [remove(s, i) for i, s in enumerate(expired)]},
        warmup_event={"Records": [remove(warm, len(expired))]},
        expired=[*expired, warm],
        controls=controls,
    )
