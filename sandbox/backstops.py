"""The sandbox's issue-12 phase: what happens when the stream path fails (runs after the checks
of the other phases, on sessions of its own).

1. **A grant orphaned by a stream outage, retired by the grant sweep.** Session ``outage-1``
   (connection, KMS grant named by ``SessionStore.create_grant``, scratch objects) ends while
   the cleanup's event source mapping is disabled; the outage lasts 25 simulated hours, so when
   the mapping is enabled again its REMOVE record is older than the mapping's maximum record
   age and goes to the on-failure queue unprocessed (``RecordAgeExceeded``); the outage also
   outlasted the stream's 24 hours, so that message cannot be replayed and is dropped. The
   deployed grant sweep (its own code asset and environment) then retires the orphaned grant
   (``OrphanGrantsRetired`` 1) — but only on its run after the stream path's own bound: its
   first run holds the grants of ended sessions *pending* (their ownership records are not
   released and the stream path may still be retrying them; no orphan alarm) and notes when it
   saw them gone; the sandbox then moves that note back by the bound (simulated time, as the
   outage's hours are) and runs it again. It keeps every live session's grant, and a grant
   created seconds ago for a session still being created (the grace period). The connection and the
   scratch objects have their own backstops, which moto does not run: API Gateway's 2-hour
   connection limit and the S3 lifecycle rule are applied by hand.
   The outage session also used an AgentCore code interpreter session, left running by the
   lost REMOVE: the deployed tool-session sweep holds it pending on its first run, and stops it
   as an orphan (``OrphanToolSessionsStopped``) on its run after the stream path's bound; the
   live sessions' tool sessions are kept, and a session of a code interpreter the construct was
   not given is never listed or stopped (issue 36).
2. **A replay run over a queue holding a malformed message.** Session ``replay-2``'s
   DeleteConnection is refused (injected) until its batch reaches the on-failure queue; a
   malformed message (a shard id botocore refuses) is put beside it; ``python -m
   session_expiry_runtime.replay`` from the code asset replays the good one (deleted), reports
   the malformed one ``invalid`` (kept), exits 1, and writes exactly one JSON line per message.

What differs from AWS here: moto's ListGrants has no ``CreationDate``; while the sweep runs,
moto's grants answer one — the outage grant 25 h old, the fresh grant its real age, every other
grant 1 h old (the sweep "runs an hour later") — so the grace period and the live-session check
both apply. The outage's 25 hours are the pipeline poller's clock moved ahead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.testing.agentcore import CODE_INTERPRETER
from cdk_session_expiry.testing.emulator import Fault

from . import beyond_ttl

OUTAGE = timedelta(hours=25)
#: The outage session's code interpreter session, and one on a tool the construct was not given.
OUTAGE_TOOL_SESSION = "outageTool1"
FOREIGN_TOOL, FOREIGN_TOOL_SESSION = "theirTool-Zz98Yy76Xx", "theirs1"
MALFORMED = {
    "DDBStreamBatchInfo": {
        "shardId": "shard-1",  # botocore requires at least 28 characters
        "startSequenceNumber": "100000000000000000001",
        "endSequenceNumber": "100000000000000000001",
        "streamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/x",
    }
}


@contextmanager
def poller_clock_ahead(pipeline: Any, seconds: float) -> Iterator[None]:
    """The pipeline's own poller (its position in the stream) sees ``seconds`` more."""
    poller = pipeline._poller
    saved = poller._clock
    poller._clock = lambda: time.time() + seconds
    try:
        yield
    finally:
        poller._clock = saved


@contextmanager
def grant_creation_dates(age_of: Callable[[str], float]) -> Iterator[None]:
    """moto's grants answer a ``CreationDate`` (epoch seconds), ``age_of(grant_id)`` old."""
    from moto.kms.models import Grant

    original = Grant.to_json

    def to_json(self: Any) -> dict[str, Any]:
        document = original(self)
        document["CreationDate"] = time.time() - age_of(self.id)
        return document

    Grant.to_json = to_json  # type: ignore[method-assign]
    try:
        yield
    finally:
        Grant.to_json = original  # type: ignore[method-assign]


class Backstops:
    """The phase's state: the emulator, the deployed pipeline and the application's store."""

    def __init__(self, *, emulator: Any, pipeline: Any, store: Any, bucket: str, grantee: str):
        self.emulator, self.pipeline, self.store = emulator, pipeline, store
        self.bucket, self.grantee = bucket, grantee
        self.kms, self.s3 = emulator.client("kms"), emulator.client("s3")
        self.key_arn = pipeline.function.environment[contract.ENV_GRANT_KEY_ARN]
        self.mismatches: list[str] = []

    def session(self, session_id: str) -> Any:
        connection_id = f"{session_id}-conn="
        self.store.create(session_id, ttl=timedelta(hours=1), connection_id=connection_id)
        self.emulator.open_connection(connection_id)
        session = self.store.create_grant(
            session_id, grantee_principal=self.grantee, operations=["Decrypt"]
        )
        for name in ("a.txt", "b/c.bin"):
            self.s3.put_object(Bucket=self.bucket, Key=session.scratch_prefix + name, Body=b"x")
        return session

    def grant_ids(self) -> set[str]:
        pages = self.kms.get_paginator("list_grants").paginate(KeyId=self.key_arn)
        return {g["GrantId"] for page in pages for g in page["Grants"]}

    def clean(self, session: Any) -> bool:
        objects = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=session.scratch_prefix)
        return (
            session.connection_id not in self.emulator.open_connection_ids()
            and session.grant_id not in self.grant_ids()
            and not objects.get("Contents")
        )

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.mismatches.append(f"backstops: {what}")


def _drop_visible(emulator: Any, url: str | None) -> None:
    """Receive and delete every visible message (PurgeQueue is limited to one a minute)."""
    sqs = emulator.client("sqs")
    while url:
        messages = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=30
        ).get("Messages")
        if not messages:
            return
        for message in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def _outage(b: Backstops, say: Callable[[str], None]) -> Any:
    lam, pipeline = b.emulator.client("lambda"), b.pipeline
    victim = b.session("outage-1")
    interpreter = pipeline.function.environment.get(contract.ENV_CODE_INTERPRETER_ID)
    if interpreter is not None:
        started = datetime.now(timezone.utc) - OUTAGE
        b.emulator.start_agent_session(
            CODE_INTERPRETER, interpreter, OUTAGE_TOOL_SESSION, created_at=started
        )
        b.store.attach_agent_session(
            victim.session_id, code_interpreter_session_id=OUTAGE_TOOL_SESSION
        )
    lam.update_event_source_mapping(UUID=pipeline.mapping.uuid, Enabled=False)
    pipeline.refresh()
    b.store.end(victim.session_id)
    before = pipeline.run_cleanup().records_sent_to_on_failure  # disabled: nothing delivered
    lam.update_event_source_mapping(UUID=pipeline.mapping.uuid, Enabled=True)
    pipeline.refresh()
    with poller_clock_ahead(pipeline, OUTAGE.total_seconds()):
        sent = pipeline.run_cleanup().records_sent_to_on_failure - before
    messages = pipeline.on_failure_messages()
    orphaned = victim.grant_id in b.grant_ids()
    conditions = [m["requestContext"]["condition"] for m in messages]
    say(
        f"stream outage: mapping disabled while {victim.session_id} ended, enabled "
        f"{OUTAGE.total_seconds() / 3600:g} h later (simulated) -> {sent} record past the "
        f"maximum record age to the on-failure queue ({conditions}), dropped (the stream's 24 h "
        f"are over); its grant is {'still there' if orphaned else 'gone'}"
    )
    b.check(sent == 1 and conditions == ["RecordAgeExceeded"], f"outage sent {sent} {conditions}")
    b.check(orphaned, "the outage grant was retired before the sweep")
    _drop_visible(b.emulator, pipeline.on_failure_queue_url())
    return victim


def _orphans(b: Backstops) -> set[str]:
    """The grants the sweep should retire, found independently: named by the store, with the
    cleanup role as retiring principal, and no item of that key holding that grant id."""
    from session_expiry_runtime.core.grant_names import parse_grant_name

    ddb, config = b.emulator.client("dynamodb"), b.store.config
    found: set[str] = set()
    for page in b.kms.get_paginator("list_grants").paginate(KeyId=b.key_arn):
        for grant in page["Grants"]:
            owner = parse_grant_name(grant.get("Name"))
            if owner is None or grant.get("RetiringPrincipal") != b.pipeline.function.role_arn:
                continue
            key = {name: {"S": value} for name, value in owner.key.items()}
            item = ddb.get_item(TableName=b.store.table_name, Key=key, ConsistentRead=True)
            held = (item.get("Item") or {}).get(config.grant_id_attribute, {}).get("S")
            if held != grant["GrantId"]:
                found.add(grant["GrantId"])
    return found


def _grant_sweep(
    b: Backstops, victim: Any, dry_grants: set[str], say: Callable[[str], None]
) -> dict[str, Any]:
    key_name = b.store.config.partition_key
    from session_expiry_runtime.core.grant_names import grant_name

    fresh = b.kms.create_grant(
        KeyId=b.key_arn,
        GranteePrincipal=b.grantee,
        RetiringPrincipal=b.pipeline.function.role_arn,
        Operations=["Decrypt"],
        Name=grant_name({key_name: "creating-3"}, "inc0"),
    )["GrantId"]
    ages = {victim.grant_id: OUTAGE.total_seconds(), fresh: 5.0}
    expected = _orphans(b) - {fresh}
    function = b.pipeline.function_with_handler(contract.GRANT_SWEEPER_HANDLER)
    schedule = b.pipeline.schedule_of(function)
    sweep = b.pipeline.local_function(contract.GRANT_SWEEPER_HANDLER)
    with grant_creation_dates(lambda grant_id: ages.get(grant_id, 3600.0)):
        first = sweep(schedule.scheduled_event())
        held = expected & b.grant_ids()
        _gone_for_longer_than_the_stream_path(b, function, expected)
        result = sweep(schedule.scheduled_event())
    alive = b.grant_ids()
    say(
        f"grant sweep, first run: {first['kept_pending']} grants of ended sessions held pending "
        f"on the stream path (not orphans: no alarm), {first['orphans_retired']} retired; "
        f"{len(held)}/{len(expected)} expected orphans still there; the next run comes after "
        "the pending bound (simulated)"
    )
    b.check(
        first["orphans_retired"] == 0 and first["kept_pending"] >= len(expected),
        f"first sweep retired or missed pending grants: {first}",
    )
    left_by_dry_run = len(expected & dry_grants)
    say(
        f"grant sweep ({schedule.expression}, deployed function as the cleanup role): "
        f"{result['listed']} grants listed, {result['orphans_retired']} orphans retired (the "
        f"outage session's, {left_by_dry_run} of the dry-run sessions — a dry run consumes its "
        f"records, so nothing else retires those — and "
        f"{len(expected) - 1 - left_by_dry_run} other), {result['kept_live']} of live sessions "
        f"kept, {result['kept_recent']} created seconds ago kept; outage grant "
        f"{'retired' if victim.grant_id not in alive else 'STILL THERE'}"
    )
    b.check(victim.grant_id in expected, "the outage grant was not an orphan")
    b.check(result["orphans_retired"] == len(expected), f"retired {result}, expected {expected}")
    b.check(not expected & alive, f"orphans survived the sweep: {sorted(expected & alive)}")
    b.check(fresh in alive and result["kept_recent"] >= 1, "the fresh grant was not kept")
    b.check(result["failures"] == 0, f"grant sweep failures {result['failures']}")
    # The connection's and the scratch data's own backstops, which moto does not run.
    b.emulator.client("apigatewaymanagementapi").delete_connection(
        ConnectionId=victim.connection_id
    )
    for obj in b.s3.list_objects_v2(Bucket=b.bucket, Prefix=victim.scratch_prefix)["Contents"]:
        b.s3.delete_object(Bucket=b.bucket, Key=obj["Key"])
    b.check(b.clean(victim), "outage session not clean after its backstops")
    b.kms.retire_grant(KeyId=b.key_arn, GrantId=fresh)  # that session's create "finishes"
    return {
        "result": result,
        "schedule": schedule.expression,
        "expected_orphans": len(expected),
        "left_by_dry_run": left_by_dry_run,
    }


def _gone_for_longer_than_the_stream_path(b: Backstops, function: Any, grants: set[str]) -> None:
    """Move the ``goneSince`` the first sweep wrote on these grants' ownership records back by
    the stream path's bound (``SESSION_EXPIRY_GRANT_SWEEP_PENDING_SECONDS``, deployed on the
    grant sweep): the simulated time until the next run, as the outage's 25 hours are."""
    from session_expiry_runtime.core.ownership import ATTR_GONE_SINCE, KIND_GRANT, resource_key

    env = function.environment
    pending = int(env[contract.ENV_GRANT_SWEEP_PENDING_SECONDS])
    table = env[contract.ENV_OWNERSHIP_TABLE_NAME]
    ddb = b.emulator.client("dynamodb")
    for grant_id in sorted(grants):
        ddb.update_item(
            TableName=table,
            Key={"resource": {"S": resource_key(KIND_GRANT, grant_id)}},
            UpdateExpression="SET #gone = #gone - :bound",
            ConditionExpression="attribute_exists(#gone)",
            ExpressionAttributeNames={"#gone": ATTR_GONE_SINCE},
            ExpressionAttributeValues={":bound": {"N": str(pending + 60)}},
        )


def _tool_session_sweep(b: Backstops, say: Callable[[str], None]) -> dict[str, Any]:
    """The deployed tool-session sweep: the outage session's code interpreter session pending,
    then stopped as an orphan after the stream path's bound; a foreign tool's never listed."""
    from session_expiry_runtime.core.ownership import (
        ATTR_GONE_SINCE,
        KIND_CODE_INTERPRETER,
        resource_key,
    )

    function = b.pipeline.function_with_handler(contract.TOOL_SESSION_SWEEPER_HANDLER)
    env = function.environment
    b.emulator.start_agent_session(CODE_INTERPRETER, FOREIGN_TOOL, FOREIGN_TOOL_SESSION)
    b.emulator.agentcore.list_calls.clear()
    first = b.pipeline.run_tool_session_sweep()
    pending = int(env[contract.ENV_TOOL_SESSION_SWEEP_PENDING_SECONDS])
    b.emulator.client("dynamodb").update_item(
        TableName=env[contract.ENV_OWNERSHIP_TABLE_NAME],
        Key={"resource": {"S": resource_key(KIND_CODE_INTERPRETER, OUTAGE_TOOL_SESSION)}},
        UpdateExpression="SET #gone = #gone - :bound",
        ConditionExpression="attribute_exists(#gone)",
        ExpressionAttributeNames={"#gone": ATTR_GONE_SINCE},
        ExpressionAttributeValues={":bound": {"N": str(pending + 60)}},
    )
    result = b.pipeline.run_tool_session_sweep()
    running = {session for _, session in b.emulator.agentcore.running(CODE_INTERPRETER)}
    listed = {target for _, target, _ in b.emulator.agentcore.list_calls}
    say(
        f"tool-session sweep: first run {first['kept_pending']} pending, "
        f"{first['orphans_stopped']} stopped; after the bound (simulated) "
        f"{result['orphans_stopped']} orphan stopped (the outage session's code interpreter "
        f"session: {'stopped' if OUTAGE_TOOL_SESSION not in running else 'STILL RUNNING'}), "
        f"{result['kept_live']} of live sessions kept, tools listed {sorted(listed)}"
    )
    b.check(first["orphans_stopped"] == 0 and first["kept_pending"] >= 1, f"first {first}")
    b.check(result["orphans_stopped"] == 1 and OUTAGE_TOOL_SESSION not in running, f"{result}")
    b.check(result["failures"] == 0 and not result["incomplete"], f"tool sweep {result}")
    b.check(
        FOREIGN_TOOL not in listed and FOREIGN_TOOL_SESSION in running,
        f"a foreign tool was listed or stopped: {sorted(listed)}",
    )
    return {"first": first, "result": result}


def _replay(b: Backstops, say: Callable[[str], None]) -> dict[str, Any]:
    pipeline = b.pipeline
    victim = b.session("replay-2")
    fault = b.emulator.inject_fault(
        Fault(
            method="DELETE",
            path=f"/@connections/{victim.connection_id}",
            status=403,
            code="ForbiddenException",
            message="injected: refused until the fault ends",
        )
    )
    b.store.end(victim.session_id)
    pipeline.run_cleanup()
    b.emulator.clear_fault(fault)
    url = pipeline.on_failure_queue_url()
    b.emulator.client("sqs").send_message(QueueUrl=url, MessageBody=json.dumps(MALFORMED))
    done = pipeline.run_module("session_expiry_runtime.recovery.replay", "--queue-url", url)
    for line in done.stderr.splitlines():
        pipeline.metrics.add_log_line(line)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    statuses = sorted((o["status"], o["deleted"]) for o in lines)
    left = beyond_ttl.queue_depth(b.emulator, url)
    say(
        f"replay over a queue holding a malformed message: exit {done.returncode}, "
        f"{len(lines)} JSON lines {statuses}; queue holds {left} (the malformed one)"
    )
    b.check(
        statuses == [("invalid", False), ("replayed", True)] and done.returncode == 1,
        f"replay: exit {done.returncode}, {statuses}",
    )
    b.check(left == 1 and b.clean(victim), f"replay: queue {left}, clean {b.clean(victim)}")
    return {"exit": done.returncode, "statuses": statuses, "queue_left": left}


def run(
    *,
    emulator: Any,
    pipeline: Any,
    store: Any,
    bucket: str,
    grantee: str,
    dry_grants: set[str],
    say: Callable[[str], None],
) -> tuple[dict[str, Any], list[str]]:
    """Run both demonstrations; returns the summary and the mismatches. ``dry_grants``: the
    grants of the dry-run phase's sessions (ended, their records consumed, nothing cleaned)."""
    b = Backstops(emulator=emulator, pipeline=pipeline, store=store, bucket=bucket, grantee=grantee)
    victim = _outage(b, say)
    sweep = _grant_sweep(b, victim, dry_grants, say)
    tools = _tool_session_sweep(b, say)
    replay = _replay(b, say)
    return {"grant_sweep": sweep, "tool_session_sweep": tools, "replay": replay}, b.mismatches


def report_line(summary: dict[str, Any]) -> str:
    """One line of the sandbox report."""
    sweep, replay = summary["grant_sweep"]["result"], summary["replay"]
    return (
        f"backstops         grant sweep after a stream outage: {sweep['orphans_retired']} orphans "
        f"retired (the outage's + {summary['grant_sweep']['left_by_dry_run']} dry-run), "
        f"{sweep['kept_live']} live kept, {sweep['kept_recent']} fresh kept; tool-session sweep: "
        f"{summary['tool_session_sweep']['result']['orphans_stopped']} orphan stopped; replay "
        f"with a malformed message: exit {replay['exit']}, {replay['statuses']}"
    )
