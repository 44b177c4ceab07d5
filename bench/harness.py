"""The moto server process, the fixtures of one throughput run, and their verification.

Fixture of a run (one scenario, one implementation, its own table, bucket and KMS key):

* ``sessions`` expired sessions (plus one, ``w-1``, for an untimed warm-up invocation), each
  written by the real ``SessionStore`` (``create(..., connection_id=...)``, then
  ``create_grant(...)``) into moto: an item with its incarnation and per-incarnation scratch
  prefix, a WebSocket connection (registered in moto's API Gateway Management API backend), a
  KMS grant (``CreateGrant`` naming a retiring principal) and the ownership records of both in
  the ownership table (:mod:`session_expiry_runtime.core.ownership`), plus ``objects`` scratch
  objects under its prefix;
* ``controls`` live sessions whose session ids extend an expired one's (``b-1`` / ``b-1x``),
  so a prefix listed without its trailing ``/`` would reach them; they are never deleted and
  must come through untouched, their ownership records still ``held`` (each holds a few
  objects: enough to see damage, few enough not to slow moto's listing of the bucket).

The expired sessions are created two hours in the past with a one-hour time to live (the
store's clock is set back) and removed with ``DeleteItem`` on a table with a
``NEW_AND_OLD_IMAGES`` stream; the REMOVE records are read back from moto's stream with
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

from session_expiry_runtime.core.ownership import (
    ATTR_RESOURCE,
    ATTR_STATE,
    KIND_CONNECTION,
    KIND_GRANT,
    STATE_HELD,
    STATE_RELEASED,
    resource_key,
)
from session_expiry_runtime.records import stream_records

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

#: The shared ``RetireGrant`` budget (``session_expiry_runtime.core.shared_pace``) set beyond any
#: run's rate: every attempt still takes its request of the budget (the batch's reservation and
#: any ``UpdateItem`` after it are made
#: and counted), but a run against the bench endpoint, which has no quota, is not paced to 10
#: grants a second of wall time. Where the budget binds, the storm's clock applies it
#: (``bench/storm_model.py``) and the pacing table shows it in real time (``bench/storm.py``).
UNPACED_ENV = {"SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET": "1000000"}

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "lambda_src"))  # the runtime package, as the Lambda asset has it


def aws_env() -> None:
    """Apply :data:`AWS_ENV` to this process; drop any real profile."""
    os.environ.update(AWS_ENV)
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        os.environ.pop(name, None)


def in_fresh_process(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` run in a fresh Python interpreter (``multiprocessing``'s ``spawn`` start
    method), its result returned: nothing of this process comes along (its threads, its heap,
    its garbage collector's state), so ``time.process_time`` there counts only what ``fn`` runs,
    as in a function's own execution environment. ``fn`` must be a module-level function (it
    is pickled by name); its exceptions are raised here."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoServer:
    """``python -m bench.server`` as a child process; stopped by :meth:`stop` (its own pid)."""

    name = "moto"

    def prepare(self, fx: Fixture) -> None:
        """Nothing to do: a fixture is built in moto and serves one moto run."""

    def verify(self, fx: Fixture, claims: bool = True) -> Verification:
        return verify(self, fx, claims)

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
        #: request quotas applied after each :meth:`prepare` (``{"RetireGrant": 50}``)
        self.limits: dict[str, float] = {}
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
                "tables": {
                    fx.ownership_table: {"hash": ATTR_RESOURCE, "items": fx.ownership_items},
                    # The session table, its expired sessions gone (the Kinesis source reads
                    # their REMOVEs' items back: session_expiry_runtime.records.kinesis_removals).
                    fx.table: {"hash": "pk", "items": []},
                },
            },
        )
        if self.limits:
            self._call("PUT", "/_bench/limits", self.limits)

    def arrivals(self) -> dict[str, list[float]]:
        """Arrival times (monotonic seconds) of every attempt of each limited operation."""
        return dict(self._call("GET", "/_bench/arrivals")["arrivals"])

    def throttled(self) -> dict[str, int]:
        return dict(self._call("GET", "/_bench/stats")["throttled"])

    def verify(self, fx: Fixture, claims: bool = True) -> Verification:
        """What :func:`verify` checks on moto, read from the endpoint's state."""
        counts = self._call(
            "POST",
            "/_bench/count",
            {"bucket": fx.bucket, "prefixes": [s.scratch_prefix for s in fx.expired + fx.controls]},
        )
        connections = set(self._call("GET", "/_bench/connections")["connections"])
        grants = set(self._call("GET", "/_bench/grants")["grants"])
        resources = [r for s in fx.expired + fx.controls for r in s.resources]
        items = self._call(
            "POST",
            "/_bench/items",
            {"table": fx.ownership_table, "keys": [{ATTR_RESOURCE: {"S": r}} for r in resources]},
        )["items"]
        states = {
            r: item[ATTR_STATE]["S"] for r, item in zip(resources, items, strict=True) if item
        }
        return _verification(fx, counts.__getitem__, connections, grants, states, claims)

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
    #: The grant's ``Name`` as ``SessionStore.create_grant`` writes it (the grant sweep reads it).
    grant_name: str = ""
    incarnation: str = ""

    @property
    def resources(self) -> tuple[str, str]:
        """The ``resource`` keys of its ownership records (connection, grant)."""
        return (
            resource_key(KIND_CONNECTION, self.connection_id),
            resource_key(KIND_GRANT, self.grant_id),
        )


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
    #: The ownership table and its records as the store wrote them (seeded into the endpoint)
    ownership_table: str = ""
    ownership_items: list[dict[str, Any]] = field(default_factory=list)


def to_lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """Turn a boto3 ``GetRecords`` record into the record Lambda's event source mapping delivers.

    The reshaping is the runtime's own (:mod:`session_expiry_runtime.records.stream_records`). moto
    never
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


OWNERSHIP_TABLE_SUFFIX = "-ownership"


def _store(c: dict[str, Any], table: str, key_arn: str, at: int) -> Any:
    """The real ``SessionStore`` on moto, its clock fixed at epoch second ``at``."""
    import datetime as dt

    from session_expiry_runtime.core.config import RuntimeConfig
    from session_expiry_runtime.store import SessionStore

    config = RuntimeConfig(
        table_name=table,
        ownership_table_name=table + OWNERSHIP_TABLE_SUFFIX,
        grant_key_arn=key_arn,
        retiring_principal=RETIRING_PRINCIPAL,
        scratch_root=SCRATCH_ROOT,
    )
    now = dt.datetime.fromtimestamp(at, tz=dt.timezone.utc)
    return SessionStore(
        config=config, dynamodb_client=c["dynamodb"], kms_client=c["kms"], clock=lambda: now
    )


def _tables(c: dict[str, Any], table: str) -> str:
    """The session table (stream ``NEW_AND_OLD_IMAGES``) and its ownership table, as the
    construct creates them; the stream ARN."""
    c["dynamodb"].create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    c["dynamodb"].create_table(
        TableName=table + OWNERSHIP_TABLE_SUFFIX,
        AttributeDefinitions=[{"AttributeName": ATTR_RESOURCE, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": ATTR_RESOURCE, "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return str(c["dynamodb"].describe_table(TableName=table)["Table"]["LatestStreamArn"])


def build_fixture(server: MotoServer, scenario: Scenario, impl: str) -> Fixture:
    """Create the resources, sessions and REMOVE event of one run (latency off while it runs).

    Every session is written by the real ``SessionStore`` (item, connection, grant, ownership
    records); the expired ones with the store's clock two hours back and a one-hour time to
    live, so their TTL lies :data:`TTL_LAG_S` before their REMOVE.
    """
    from datetime import timedelta

    server.set_latency_ms(0)
    c = clients(server.endpoint)
    run_id = re.sub(r"[^a-z0-9]+", "-", f"{scenario.name}-{impl}".lower()).strip("-")[:50]
    table = bucket = f"bench-{run_id}"
    stream_arn = _tables(c, table)
    c["s3"].create_bucket(Bucket=bucket)
    key_arn = c["kms"].create_key(Description=f"bench {run_id}")["KeyMetadata"]["Arn"]
    now = int(time.time())
    past = _store(c, table, key_arn, now - 2 * TTL_LAG_S)
    present = _store(c, table, key_arn, now)

    def new_session(session_id: str, objects: int, store: Any) -> Session:
        connection_id = f"conn-{session_id}="
        c["apigw"].get_connection(ConnectionId=connection_id)  # moto registers it on first sight
        store.create(session_id, ttl=timedelta(seconds=TTL_LAG_S), connection_id=connection_id)
        made = store.create_grant(
            session_id, grantee_principal=GRANTEE_PRINCIPAL, operations=["Decrypt", "Encrypt"]
        )
        if objects:
            server.seed_objects(bucket, made.scratch_prefix, objects)
        from session_expiry_runtime.core.grant_names import grant_name

        return Session(
            session_id,
            connection_id,
            made.grant_id,
            made.grant_token,
            made.scratch_prefix,
            objects,
            grant_name({"pk": session_id}, made.incarnation) or "",
            made.incarnation,
        )

    # One more expired session, "w-1", whose REMOVE is the warm-up invocation's only record.
    names = [f"b-{i}" for i in range(1, scenario.sessions + 1)] + ["w-1"]
    expired = [new_session(n, scenario.objects, past) for n in names]
    controls = [new_session(f"b-{i}x", 5, present) for i in range(1, scenario.controls + 1)]
    for s in expired:  # as time to live does: a plain delete of the item
        c["dynamodb"].delete_item(TableName=table, Key={"pk": {"S": s.session_id}})
    removes = _removes(c, stream_arn)
    if len(removes) != scenario.sessions + 1:
        raise RuntimeError(
            f"{run_id}: expected {scenario.sessions + 1} REMOVE records, got {len(removes)}"
        )
    warmup = [r for r in removes if r["dynamodb"]["Keys"]["pk"]["S"] == "w-1"]
    measured = [r for r in removes if r["dynamodb"]["Keys"]["pk"]["S"] != "w-1"]
    claims = c["dynamodb"].get_paginator("scan").paginate(TableName=table + OWNERSHIP_TABLE_SUFFIX)
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
        ownership_table=table + OWNERSHIP_TABLE_SUFFIX,
        ownership_items=[item for page in claims for item in page["Items"]],
    )


def _removes(c: dict[str, Any], stream_arn: str) -> list[dict[str, Any]]:
    """The REMOVE records of the table's stream, as Lambda delivers them (the event source
    mapping's filter ``{"eventName": ["REMOVE"]}`` passes only these)."""
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
    return [to_lambda_record(r, stream_arn) for r in records if r["eventName"] == "REMOVE"]


@dataclass
class Verification:
    sessions: int
    objects_left: int
    sessions_with_objects_left: int
    connections_left: int
    grants_left: int
    controls_damaged: int
    #: ownership records of the removed sessions' connections and grants not ``released``
    claims_not_released: int = 0

    @property
    def clean(self) -> bool:
        return not (
            self.objects_left
            or self.connections_left
            or self.grants_left
            or self.controls_damaged
            or self.claims_not_released
        )

    def summary(self) -> str:
        if self.clean:
            return f"all {self.sessions} clean (ownership records released), controls intact"
        return (
            f"LEAKED: {self.sessions_with_objects_left} sessions with {self.objects_left} objects, "
            f"{self.connections_left} connections, {self.grants_left} grants, "
            f"{self.claims_not_released} ownership records not released; "
            f"{self.controls_damaged} controls damaged"
        )


def verify(server: MotoServer, fx: Fixture, claims: bool = True) -> Verification:
    """After a run: every expired session's objects, connection and grant gone, and (with
    ``claims``) its ownership records released; controls intact, their records held."""
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
    scan = c["dynamodb"].get_paginator("scan").paginate(TableName=fx.ownership_table)
    # Only claims have a state: the shared pace budget's counters live in the same table.
    states = {
        item[ATTR_RESOURCE]["S"]: item[ATTR_STATE]["S"]
        for page in scan
        for item in page["Items"]
        if ATTR_STATE in item
    }
    return _verification(fx, count, server.connections(), grants, states, claims)


def _verification(
    fx: Fixture,
    count: Callable[[str], int],
    connections: set[str],
    grants: set[str],
    states: dict[str, str],
    claims: bool = True,
) -> Verification:
    """``states``: each ownership record's ``state`` by its ``resource`` key. Without
    ``claims`` the records are not judged (the naive baseline makes no ownership call)."""
    left = [count(s.scratch_prefix) for s in fx.expired]
    damaged = sum(
        1
        for s in fx.controls
        if count(s.scratch_prefix) != s.objects
        or s.connection_id not in connections
        or s.grant_id not in grants
        or any(states.get(r) != STATE_HELD for r in s.resources)
    )
    return Verification(
        sessions=len(fx.expired),
        objects_left=sum(left),
        sessions_with_objects_left=sum(1 for n in left if n),
        connections_left=sum(1 for s in fx.expired if s.connection_id in connections),
        grants_left=sum(1 for s in fx.expired if s.grant_id in grants),
        controls_damaged=damaged,
        claims_not_released=sum(
            1 for s in fx.expired for r in s.resources if states.get(r) != STATE_RELEASED
        )
        if claims
        else 0,
    )


def synthetic_fixture(scenario: Scenario) -> Fixture:
    """A fixture for the bench endpoint alone, without moto: the sessions and their ownership
    records in the exact format ``SessionStore`` writes (:mod:`bench.sessions`, proven equal by
    ``tests/test_bench_sessions.py``), and REMOVE records built in ``GetRecords``' shape and
    reshaped by the runtime's own ``stream_records`` (as :func:`build_fixture` does with moto's),
    so a batch of thousands of sessions costs no emulator time. Used by the scale runs; grant
    ids and tokens are random, as KMS's are opaque.
    """
    import datetime as dt
    import secrets

    from session_expiry_runtime.core.config import RuntimeConfig

    from . import sessions

    run_id = re.sub(r"[^a-z0-9]+", "-", f"scale-{scenario.name}".lower()).strip("-")[:50]
    table = bucket = f"bench-{run_id}"
    config = RuntimeConfig(table_name=table, ownership_table_name=table + OWNERSHIP_TABLE_SUFFIX)
    stream_arn = (
        f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{table}/stream/2026-11-30T00:00:00.000"
    )
    key_arn = f"arn:aws:kms:{REGION}:{ACCOUNT_ID}:key/{secrets.token_hex(16)}"
    now = int(time.time())
    claims: list[dict[str, Any]] = []

    def new_session(session_id: str, objects: int, live: bool) -> tuple[Session, dict[str, Any]]:
        created = now if live else now - 2 * TTL_LAG_S
        spec = sessions.SessionSpec(
            session_id,
            secrets.token_hex(16),
            created_at=created,
            expires_at=created + TTL_LAG_S,
            connection_id=f"conn-{session_id}=",
            grant_id=secrets.token_hex(32),
            grant_token=secrets.token_urlsafe(96),
        )
        claims.extend(sessions.claim_items(config, spec))
        session = Session(
            session_id,
            str(spec.connection_id),
            str(spec.grant_id),
            str(spec.grant_token),
            spec.scratch_prefix(config),
            objects,
            spec.grant_name(config) or "",
            spec.incarnation,
        )
        return session, sessions.session_item(config, spec)

    def remove(old: dict[str, Any], seq: int) -> dict[str, Any]:
        api_record = {
            "eventID": secrets.token_hex(16),
            "eventName": "REMOVE",
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": REGION,
            "dynamodb": {
                "ApproximateCreationDateTime": dt.datetime.fromtimestamp(now, dt.timezone.utc),
                "Keys": {"pk": old["pk"]},
                "OldImage": old,
                "SequenceNumber": f"{10**20 + seq}",
                "SizeBytes": 512,
                "StreamViewType": "NEW_AND_OLD_IMAGES",
            },
        }
        return to_lambda_record(api_record, stream_arn)

    built = [
        new_session(f"b-{i}", scenario.objects, False) for i in range(1, scenario.sessions + 1)
    ]
    warm, warm_item = new_session("w-1", scenario.objects, False)
    controls = [new_session(f"b-{i}x", 5, True)[0] for i in range(1, scenario.controls + 1)]
    return Fixture(
        scenario=scenario,
        run_id=run_id,
        table=table,
        bucket=bucket,
        key_arn=key_arn,
        event={"Records": [remove(item, i) for i, (_, item) in enumerate(built)]},
        warmup_event={"Records": [remove(warm_item, len(built))]},
        expired=[*(s for s, _ in built), warm],
        controls=controls,
        ownership_table=str(config.ownership_table_name),
        ownership_items=claims,
    )
