"""The sandbox scenario: sessions through their whole life against the deployed sample app.

1. Start the emulator (moto's server in this process) and ``cdk bootstrap`` + ``cdk deploy``
   the sample app into it with the CDK CLI.
2. Read the pipeline back from the emulator (table, stream, event source mapping, cleanup
   function and its code asset, expiry sweeper function and its schedule rule, archive bucket
   and event bus from the function's settings) and the session runtime's deployed environment
   (from a route handler: ``grant_session_access`` gave it the sweeper's shard settings). Add a
   consumer's rule on the event bus that delivers ``Session Cleaned`` events to an SQS queue.
3. Create sessions through the session runtime (``SessionStore.from_env``), each with a
   WebSocket connection, a KMS grant whose retiring principal is the cleanup role, and scratch
   objects (some sessions with more than 1,000 objects, some with awkward key names).
4. Expire some (TTL-shaped deletes), end some (``SessionStore.end``), leave some live, and
   reuse some expired session ids for a new incarnation before the cleanup runs; run the
   cleanup: the deployed function's code, fed from the deployed stream with the deployed
   mapping's settings.
5. Expiry sweeper (``sandbox.beyond_ttl``): sessions whose last heartbeat puts their expiry
   in one of three simulated intervals of the deployed schedule; the deployed sweeper function
   runs at each simulated scheduled time, then the cleanup. A session given a heartbeat just
   before its sweep must survive. Reports the expiry-to-clean bound against the interval.
6. Failure replay: one session's DeleteConnection is refused (fault injected in the emulator)
   until its batch reaches the on-failure queue; then the fault ends and
   ``python -m session_expiry_runtime.replay`` (from the code asset) cleans it and deletes the
   message.
7. Kill switch: the mapping is disabled (``UpdateEventSourceMapping``): nothing is delivered;
   enabled again: delivery resumes where it stopped. Dry run: ``SESSION_EXPIRY_DRY_RUN=true``
   on the deployed function: records are consumed, nothing changes.
8. Real time (``sandbox.realtime``): the deployed sweeper given the construct's settings for
   a 5 s interval, the mapping's poller on its own thread, sessions whose TTLs are spread over
   two minutes: expiry-to-clean p50/p99/max per session on the wall clock, against the goal
   (p99 <= 10 s; reported, not failed) and interval + processing. ``--no-realtime`` skips it.
9. AgentCore (``sandbox.agent_sessions``): the sample app is deployed with AgentCore
   targets from context; some ended and some live sessions get AgentCore session ids
   (``attach_agent_session``) that the emulator registers as running. Each ended session's
   runtime, code interpreter and browser sessions must be stopped (an already ended browser
   session answers ResourceNotFoundException: done), and no live session's touched.
10. Verify against the emulator: every cleaned session's connection, grant and scratch objects
   are gone, it has exactly one archive object and one event; every live (and dry-run)
   session's resources are intact and have neither. Print a report; exit 1 on any mismatch.
11. Backstops (``sandbox.backstops``, after those checks, on sessions of its own): a grant
    orphaned by a simulated stream outage is retired by the deployed grant sweep, and its code
    interpreter session stopped by the deployed tool-session sweep; a replay run
    over a queue holding a malformed message replays the good one and keeps the other.
12. Forgery (``sandbox.forgery``): an item written by another writer names a live session's
    grant and scratch prefix and ends; the deployed cleanup refuses both (``GrantsRefused``,
    ``ScratchPrefixesRefused``) and the live session's grant and objects stay.
13. Ownership (``sandbox.ownership``): a tenant asks the store for another tenant's
    connection and AgentCore ids (refused at write) and ends forged items naming all of that
    tenant's resources (refused by the cleanup: 0 foreign resources touched); a reuse-after-
    expiry storm re-creates ids with the same connection and runtime session ids, before and
    after the old incarnation's cleanup: old incarnations cleaned, new ones untouched.
14. Two Regions (``sandbox.two_regions``): a global table's replicas in two Regions, each
    Region's deployed cleanup code in global-table mode cleans exactly its own sessions.
15. Kinesis source (``sandbox.kinesis_phase``, last): the deployed cleanup code fed by a
    Kinesis change stream with duplicated, reordered REMOVEs 30 hours old: each cleaned once.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from . import reconnects

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Key names that trip naive cleanups: spaces, ``+``, ``%``, Unicode, control characters.
AWKWARD_NAMES = (
    "with space.txt",
    "plus+sign",
    "100%",
    "%2F-encoded",
    "ünïcødé/☃ snow",
    "tab\there",
    "ctrl\x01char",
    "unit\x1fsep",
)
BIG_OBJECT_COUNT = 1_050  # more than one ListObjectsV2 page and one DeleteObjects request


@dataclass
class SessionPlan:
    session_id: str
    #: "expire" (TTL service) | "end" | "live" | "sweep" (expiry sweeper) | "race" (heartbeat
    #: just before its sweep: stays live) | "replay" (its batch fails, then is replayed) |
    #: "paused" (ended while the kill switch is pulled) | "dry" (ended during the dry run)
    fate: str
    connection_id: str
    object_names: list[str]
    reuse: bool = False  # expire, then create a new live incarnation with the same id
    prefix: str = ""
    grant_id: str = ""
    keys: list[str] = field(default_factory=list)
    # the new incarnation, for reused ids
    new_connection_id: str = ""
    new_prefix: str = ""
    new_grant_id: str = ""
    new_keys: list[str] = field(default_factory=list)
    #: Simulated expiry (seconds) of "sweep"/"race" sessions.
    sim_expiry: float = 0.0


#: Fates whose resources must be gone at the end; every other fate's must be intact.
GONE_FATES = frozenset({"expire", "end", "sweep", "replay", "paused"})
#: Fates whose session item must still be in the table at the end.
IN_TABLE_FATES = frozenset({"live", "race"})
#: The sample app's three route handlers have session access with different environments
#: ($connect alone creates grants, for SESSION_GRANTEE_ROLE_ARN): the sandbox acts as $connect.
APP_FUNCTION = "ConnectHandler"


def tenant_of(session_id: str) -> str | None:
    """The tenant of a planned session: two tenants and no tenant, by a stable hash, so the
    archive's per-tenant counts (issue 24) have more than one tenant."""
    return ("acme", "globex", None)[zlib.crc32(session_id.encode()) % 3]


class Progress:
    def __init__(self, quiet: bool = False) -> None:
        self.start = time.monotonic()
        self.quiet = quiet
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        if not self.quiet:
            with self._lock:
                print(f"[{time.monotonic() - self.start:6.1f}s] {message}", flush=True)


def plan_sessions(count: int, seed: int) -> list[SessionPlan]:
    """Fates 40 % expire / 30 % end / 30 % live; 4 big sessions; awkward names spread out."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible plan, not a secret
    fates = ["expire"] * (count * 4 // 10) + ["end"] * (count * 3 // 10)
    fates += ["live"] * (count - len(fates))
    rng.shuffle(fates)
    plans = [
        SessionPlan(
            session_id=f"s-{i}",
            fate=fate,
            connection_id=f"conn-{i}-{seed}",
            object_names=[f"part-{n}.bin" for n in range(3)],
        )
        for i, fate in enumerate(fates, start=1)
    ]
    by_fate: dict[str, list[SessionPlan]] = {
        f: [p for p in plans if p.fate == f] for f in ("expire", "end", "live")
    }
    for fate, how_many in (("expire", 2), ("end", 1), ("live", 1)):
        for plan in by_fate[fate][:how_many]:
            plan.object_names = [f"chunk {n:05d}.dat" for n in range(BIG_OBJECT_COUNT)]
    for fate in ("expire", "end", "live"):
        for plan in by_fate[fate][how_many_big(fate) : how_many_big(fate) + 3]:
            plan.object_names = [*plan.object_names, *AWKWARD_NAMES]
    for plan in by_fate["expire"][-max(1, count // 40) :]:
        plan.reuse = True
    return plans


def plan_extra_sessions(count: int, seed: int, *, start: int) -> list[SessionPlan]:
    """Sessions of the issue-6 phases: swept by the expiry sweeper (a sixth of ``count``), two
    heartbeat races, one replayed after a failure, five ended under the kill switch and five
    during the dry run. A few carry awkward key names."""
    fates = ["sweep"] * max(12, count // 6) + ["race"] * 2 + ["replay"] + ["paused"] * 5
    fates += ["dry"] * 5
    plans = [
        SessionPlan(
            session_id=f"s-{i}",
            fate=fate,
            connection_id=f"conn-{i}-{seed}",
            object_names=[f"part-{n}.bin" for n in range(3)],
        )
        for i, fate in enumerate(fates, start=start)
    ]
    for plan in plans[:: max(1, len(plans) // 4)]:
        plan.object_names = [*plan.object_names, *AWKWARD_NAMES[:4]]
    return plans


def how_many_big(fate: str) -> int:
    return {"expire": 2, "end": 1, "live": 1}[fate]


def _fmt(counter: Iterable[tuple[str, float]]) -> str:
    items = [f"{k}={int(v)}" for k, v in sorted(counter)]
    return ", ".join(items) if items else "none"


def run(args: argparse.Namespace) -> int:
    from cdk_session_expiry import _runtime_contract as contract
    from cdk_session_expiry.testing import Fault, LocalEmulator, LocalPipeline

    from . import (
        agent_data,
        agent_sessions,
        archive_query,
        backstops,
        beyond_ttl,
        connected_grants,
        feature_flags,
        forgery,
        kinesis_phase,
        ownership,
        two_regions,
    )

    say = Progress(args.quiet)
    emulator = LocalEmulator(verbose_errors=args.verbose_errors).start()
    pipeline: LocalPipeline | None = None
    try:
        say(f"emulator (moto {_moto_version()}) on {emulator.endpoint_url}")
        say(f"cdk bootstrap + cdk deploy of {args.app_dir} (the real CDK CLI) ...")
        pipeline = LocalPipeline.deploy(
            args.app_dir,
            emulator=emulator,
            stack=args.stack,
            context={**agent_sessions.deploy_context(emulator), **agent_data.deploy_context()},
        )
        m = pipeline.mapping
        say(f"deployed stack {pipeline.stack.name}: table {pipeline.table_name}")
        say(
            f"  event source mapping (read back): filters={list(m.filter_patterns)} "
            f"batch={m.batch_size} bisect={m.bisect_batch_on_function_error} "
            f"retries={m.maximum_retry_attempts} maxAge={m.maximum_record_age_seconds}s "
            f"reportBatchItemFailures={m.report_batch_item_failures} enabled={m.enabled}"
        )
        say(f"  on-failure destination: {m.on_failure_destination}")
        say(
            "  not created by moto's CloudFormation (ignored locally): "
            + (", ".join(pipeline.unmodelled_resource_types) or "none")
        )
        say(
            f"  cleanup function: {pipeline.function.name} handler={pipeline.function.handler} "
            f"code asset {pipeline.function.configuration.get('CodeSha256')}"
        )
        cleanup_env = pipeline.function.environment
        archive_bucket = cleanup_env.get(contract.ENV_ARCHIVE_BUCKET)
        archive_prefix = cleanup_env.get(contract.ENV_ARCHIVE_PREFIX, "archive/")
        bus_arn = cleanup_env.get(contract.ENV_EVENT_BUS_ARN)
        sweeper_fn = pipeline.function_with_handler(contract.SWEEPER_HANDLER)
        schedule = pipeline.schedule_of(sweeper_fn)
        say(
            f"  expiry sweeper: {sweeper_fn.name} handler={sweeper_fn.handler}, EventBridge rule "
            f"{schedule.expression} ({'ENABLED' if schedule.enabled else 'DISABLED'}; read back, "
            "never fired by moto: the sandbox runs the schedule)"
        )
        say(f"  archive: s3://{archive_bucket}/{archive_prefix}  fan-out bus: {bus_arn}")
        health = beyond_ttl.ttl_health_alarm(pipeline.stack.template)
        health_alarm = (
            beyond_ttl.alarm_in_emulator(emulator, pipeline.stack, health[0]) if health else None
        )
        say(f"  TTL health alarm: {_health_alarm_text(health, health_alarm)}")
        if health and health_alarm is None:
            raise SystemExit(
                f"the deployed template's TTL health alarm {health[0]} is not in the emulator's "
                "CloudWatch (describe_alarms): the deploy did not create it"
            )
        if not (archive_bucket and bus_arn):
            raise SystemExit("the deployed cleanup function has no archive bucket or event bus")
        consumer_url = beyond_ttl.add_consumer(emulator, bus_arn)
        say(f"  consumer rule on the bus -> SQS {consumer_url.rsplit('/', 1)[-1]} (added locally)")

        env = pipeline.session_environment(APP_FUNCTION)
        for name in (
            contract.ENV_SCRATCH_BUCKET,
            contract.ENV_GRANT_KEY_ARN,
            contract.ENV_RETIRING_PRINCIPAL,
            contract.ENV_SWEEP_SHARD_ATTRIBUTE,
        ):
            if not env.get(name):
                raise SystemExit(f"the deployed session environment lacks {name}: {env}")
        bucket = env[contract.ENV_SCRATCH_BUCKET]
        key_arn = env[contract.ENV_GRANT_KEY_ARN]
        cleanup_role = pipeline.function.role_arn
        grantee = env.get("SESSION_GRANTEE_ROLE_ARN") or cleanup_role
        if env[contract.ENV_RETIRING_PRINCIPAL] != cleanup_role:
            say(
                f"MISMATCH retiring principal {env[contract.ENV_RETIRING_PRINCIPAL]} is not the "
                f"cleanup role {cleanup_role}"
            )

        from session_expiry_runtime.core.config import RuntimeConfig
        from session_expiry_runtime.store import SessionStore

        ddb, kms, s3 = emulator.client("dynamodb"), emulator.client("kms"), emulator.client("s3")
        app_env = pipeline.application_env(APP_FUNCTION)
        real_clock = lambda: datetime.now(timezone.utc)  # noqa: E731
        # Sessions that will have expired by the time the TTL sweep runs were "created two
        # minutes ago" with a one-minute lifetime: live for their own calls, expired now.
        past_clock = lambda: datetime.now(timezone.utc) - timedelta(minutes=2)  # noqa: E731
        lam = emulator.client("lambda")  # the claim registrar's Invoke
        store = SessionStore.from_env(
            app_env, dynamodb_client=ddb, kms_client=kms, lambda_client=lam, clock=real_clock
        )
        past_store = SessionStore.from_env(
            app_env, dynamodb_client=ddb, kms_client=kms, lambda_client=lam, clock=past_clock
        )

        plans = plan_sessions(args.sessions, args.seed)
        extra = plan_extra_sessions(args.sessions, args.seed, start=len(plans) + 1)
        all_plans = plans + extra
        total_objects = sum(len(p.object_names) for p in all_plans)
        say(
            f"creating {len(all_plans)} sessions ({total_objects} scratch objects) through "
            "SessionStore.from_env(application env): connection + KMS grant + scratch objects "
            "each ..."
        )

        def put_objects(prefix: str, names: list[str]) -> list[str]:
            keys = [prefix + name for name in names]
            for key in keys:
                s3.put_object(Bucket=bucket, Key=key, Body=b"scratch")
            return keys

        def create(plan: SessionPlan) -> None:
            st = past_store if plan.fate == "expire" else store
            ttl = timedelta(minutes=1) if plan.fate == "expire" else timedelta(hours=1)
            session = st.create(
                plan.session_id,
                ttl=ttl,
                connection_id=plan.connection_id,
                tenant_id=tenant_of(plan.session_id),
            )
            emulator.open_connection(plan.connection_id)
            session = st.create_grant(
                plan.session_id,
                grantee_principal=grantee,
                operations=["Decrypt", "GenerateDataKey"],
            )
            plan.prefix = session.scratch_prefix or ""
            plan.grant_id = session.grant_id or ""
            plan.keys = put_objects(plan.prefix, plan.object_names)

        _parallel(all_plans, create, say, "sessions created", args.workers)
        agent_plan = agent_sessions.attach(
            emulator,
            store,
            cleanup_env,
            ended=[p.session_id for p in plans if p.fate == "end"],
            live=[p.session_id for p in plans if p.fate == "live"],
        )
        memory_plan = agent_data.attach(  # AgentCore Memory data (issue 24)
            emulator,
            store,
            cleanup_env,
            ended=[p.session_id for p in plans if p.fate == "end"],
            live=[p.session_id for p in plans if p.fate == "live"],
        )

        # --- 1. TTL deletes, explicit ends, reused ids ----------------------------------------
        say(
            "expiring: one TTL sweep (deletes every item whose TTL has passed, REMOVE records "
            "carry the TTL service's userIdentity) ..."
        )
        expired_seqs = pipeline.expire_due()
        expected_expired = sum(1 for p in plans if p.fate == "expire")
        say(f"  {len(expired_seqs)} items deleted by TTL (expected {expected_expired})")
        ended = [p for p in plans if p.fate == "end"]
        for plan in ended:
            store.end(plan.session_id)
        say(f"ended {len(ended)} sessions explicitly (SessionStore.end)")

        reused = [p for p in plans if p.reuse]

        def recreate(plan: SessionPlan) -> None:
            plan.new_connection_id = plan.connection_id + "-again"
            session = store.create(
                plan.session_id, ttl=timedelta(hours=1), connection_id=plan.new_connection_id
            )
            emulator.open_connection(plan.new_connection_id)
            session = store.create_grant(
                plan.session_id, grantee_principal=grantee, operations=["Decrypt"]
            )
            plan.new_prefix = session.scratch_prefix or ""
            plan.new_grant_id = session.grant_id or ""
            plan.new_keys = put_objects(plan.new_prefix, ["new-incarnation.txt", "with space"])

        _parallel(
            reused,
            recreate,
            say,
            "expired session ids reused (new incarnation, before the old one's cleanup ran)",
            args.workers,
        )

        storm = reconnects.prepare(  # reconnect storms and the absolute cap (issue 11)
            emulator=emulator,
            pipeline=pipeline,
            app_env=app_env,
            grantee=grantee,
            bucket=bucket,
            make_plan=SessionPlan,
            say=say,
            seed=args.seed,
            workers=args.workers,
        )
        all_plans += storm.plans
        say("running the cleanup: deployed code, deployed stream, deployed mapping settings ...")
        invocations = 0
        delivered = 0

        def on_invocation(inv: Any) -> None:
            nonlocal invocations, delivered
            invocations += 1
            delivered += len(inv.sequence_numbers)
            if not args.quiet:
                say(
                    f"  invocation {invocations}: {len(inv.sequence_numbers)} records "
                    f"(retry {inv.retry}) -> {inv.outcome}"
                    + (f" [{inv.detail}]" if inv.detail else "")
                )

        started = time.monotonic()
        report = pipeline.run_cleanup(on_invocation=on_invocation)
        cleanup_seconds = time.monotonic() - started
        phase_mismatches: list[str] = []

        # --- 2. expiry sweeper on a simulated schedule ---------------------------------------
        swept_plans = [p for p in extra if p.fate == "sweep"]
        racing = [p for p in extra if p.fate == "race"]
        interval = schedule.interval_seconds
        beyond_ttl.assign_sim_expiries(swept_plans + racing, interval, args.seed)
        say(
            f"expiry sweeper: {len(swept_plans)} sessions expire over {beyond_ttl.SWEEPS} "
            f"simulated intervals of {interval}s ({schedule.expression}); {len(racing)} get a "
            "heartbeat just before their sweep; the deployed sweeper runs at each scheduled time"
        )
        sweeper_local = pipeline.local_function(contract.SWEEPER_HANDLER)
        sweep, sweep_clock, sweep_starts = beyond_ttl.run_sweeps(
            pipeline=pipeline,
            store=store,
            swept=swept_plans,
            racing=racing,
            schedule=schedule,
            sweeper=sweeper_local,
            say=say,
        )
        if sweep.swept != len(swept_plans):
            phase_mismatches.append(f"sweeper swept {sweep.swept}, expected {len(swept_plans)}")

        # --- 3. failure replay ----------------------------------------------------------------
        (victim,) = [p for p in extra if p.fate == "replay"]
        fault = emulator.inject_fault(
            Fault(
                method="DELETE",
                path=f"/@connections/{victim.connection_id}",
                status=403,
                code="ForbiddenException",
                message="injected: DeleteConnection refused until the fault ends",
            )
        )
        store.end(victim.session_id)
        before = report.records_sent_to_on_failure
        report = pipeline.run_cleanup(on_invocation=on_invocation)
        sent = report.records_sent_to_on_failure - before
        failure_messages = pipeline.on_failure_messages()
        say(
            f"failure replay: DeleteConnection of {victim.session_id} refused (injected "
            f"ForbiddenException, {emulator.faults_hit.get(fault, 0)} calls) -> {sent} record "
            f"to the on-failure queue ({len(failure_messages)} message: "
            f"{[msg['requestContext']['condition'] for msg in failure_messages]})"
        )
        if sent != 1 or len(failure_messages) != 1:
            phase_mismatches.append(
                f"replay: expected 1 record in 1 on-failure message, got {sent} in "
                f"{len(failure_messages)}"
            )
        emulator.clear_fault(fault)
        outcomes, replay_output = beyond_ttl.replay_from_queue(pipeline)
        queue_left = beyond_ttl.queue_depth(emulator, pipeline.on_failure_queue_url() or "")
        say(
            "  fault ended; python -m session_expiry_runtime.replay --queue-url (from the code "
            f"asset, the function's settings): {[(o['status'], o['records']) for o in outcomes]}"
            f", message deleted={[o['deleted'] for o in outcomes]}, queue now {queue_left}"
        )
        replayed_ok = (
            len(outcomes) == 1
            and outcomes[0]["status"] == "replayed"
            and outcomes[0]["deleted"]
            and queue_left == 0
        )
        if not replayed_ok:
            phase_mismatches.append(f"replay: {outcomes} ({replay_output}); queue {queue_left}")

        # --- 4. kill switch: mapping disabled, records wait; enabled, they resume -----------
        lam = emulator.client("lambda")
        paused = [p for p in extra if p.fate == "paused"]
        lam.update_event_source_mapping(UUID=pipeline.mapping.uuid, Enabled=False)
        pipeline.refresh()
        for plan in paused:
            store.end(plan.session_id)
        calls_before = len(report.invocations)
        report = pipeline.run_cleanup(on_invocation=on_invocation)
        while_disabled = len(report.invocations) - calls_before
        still_open = sum(1 for p in paused if p.connection_id in emulator.open_connection_ids())
        say(
            f"kill switch: mapping Enabled=False (read back: enabled={pipeline.mapping.enabled});"
            f" {len(paused)} sessions ended -> {while_disabled} invocations, "
            f"{still_open}/{len(paused)} connections still open"
        )
        lam.update_event_source_mapping(UUID=pipeline.mapping.uuid, Enabled=True)
        pipeline.refresh()
        report = pipeline.run_cleanup(on_invocation=on_invocation)
        resumed = len(report.invocations) - calls_before
        say(
            f"  Enabled=True (read back: enabled={pipeline.mapping.enabled}) -> resumed at the "
            f"kept position: {resumed} invocations"
        )
        if while_disabled or still_open != len(paused) or not resumed:
            phase_mismatches.append(
                f"kill switch: {while_disabled} invocations while disabled, {still_open} "
                f"connections open, {resumed} invocations after enabling"
            )

        # --- 5. dry run: records consumed, nothing changed -----------------------------------
        dry = [p for p in extra if p.fate == "dry"]
        variables = dict(pipeline.function.environment)
        lam.update_function_configuration(
            FunctionName=pipeline.function.name,
            Environment={"Variables": {**variables, contract.ENV_DRY_RUN: "true"}},
        )
        pipeline.refresh()
        would_before = pipeline.metrics.total(contract.METRIC_SESSIONS_WOULD_BE_CLEANED)
        archived_before = len(beyond_ttl.list_archive(s3, archive_bucket, archive_prefix))
        for plan in dry:
            store.end(plan.session_id)
        calls_before = len(report.invocations)
        report = pipeline.run_cleanup(on_invocation=on_invocation)
        would = pipeline.metrics.total(contract.METRIC_SESSIONS_WOULD_BE_CLEANED) - would_before
        archived_during = (
            len(beyond_ttl.list_archive(s3, archive_bucket, archive_prefix)) - archived_before
        )
        say(
            f"dry run: {contract.ENV_DRY_RUN}=true on the deployed function; {len(dry)} sessions "
            f"ended -> {len(report.invocations) - calls_before} invocations, "
            f"SessionsWouldBeCleaned {int(would)}, archive objects written {archived_during} "
            "(resources checked below: all intact)"
        )
        lam.update_function_configuration(
            FunctionName=pipeline.function.name, Environment={"Variables": variables}
        )
        pipeline.refresh()
        if int(would) != len(dry) or archived_during:
            phase_mismatches.append(
                f"dry run: SessionsWouldBeCleaned {would}, expected {len(dry)}; "
                f"{archived_during} archive objects written"
            )

        # --- 6. real time: a 5 s sweeper, the poller on its own thread (sandbox.realtime) ----
        live = None
        if not args.no_realtime:
            from . import realtime

            live, live_plans = realtime.measure(pipeline, say=say, on_invocation=on_invocation)
            all_plans += live_plans
            phase_mismatches += live.mismatches
            say(live.summary_line())

        # --- 7. AgentCore sessions stopped with their sessions (sandbox.agent_sessions) -----
        agents = agent_sessions.check(
            emulator,
            agent_plan,
            pipeline.metrics.by_dimension(
                contract.METRIC_CLEANUP_FAILURES, contract.DIMENSION_ACTION
            ),
            say,
        )
        phase_mismatches += agents.mismatches
        memory = agent_data.check(
            emulator,
            memory_plan,
            pipeline.metrics.by_dimension(
                contract.METRIC_CLEANUP_FAILURES, contract.DIMENSION_ACTION
            ),
            say,
        )
        phase_mismatches += memory.mismatches

        # --- verification ----------------------------------------------------------------------
        say("verifying against the emulator ...")
        # The phases after the verification delete objects of their own sessions: the metric is
        # compared with the verified count as it stands now.
        objects_deleted_by_then = pipeline.metrics.total(contract.METRIC_OBJECTS_DELETED)
        verification = verify(
            emulator,
            pipeline,
            all_plans,
            bucket=bucket,
            key_arn=key_arn,
            cleanup_role=cleanup_role,
            table_name=pipeline.table_name,
        )
        config = RuntimeConfig.from_env(cleanup_env)
        cleaned = {p.session_id: p for p in all_plans if p.fate in GONE_FATES}
        kept = {p.session_id: p for p in all_plans if p.fate not in GONE_FATES or p.reuse}
        archive_counts, archive_mismatches, archive_sequences = beyond_ttl.check_archive(
            s3=s3,
            bucket=archive_bucket,
            prefix=archive_prefix,
            config=config,
            cleaned=cleaned,
            kept=kept,
            sample=8,
            seed=args.seed,
        )
        sweep_mismatches = beyond_ttl.finish_sweep_measurement(
            sweep, swept_plans, sweep_clock, sweep_starts, archive_sequences
        )
        sweep.race_survived = sum(
            1
            for p in racing
            if p.connection_id in emulator.open_connection_ids()
            and not any(m.endswith(f" {p.session_id}") for m in verification["mismatches"])
        )
        events = beyond_ttl.drain_events(emulator, consumer_url)
        event_counts, event_mismatches = beyond_ttl.check_events(
            events, cleaned, config.partition_key
        )

        metrics = pipeline.metrics
        mismatches = (
            verification["mismatches"]
            + phase_mismatches
            + archive_mismatches
            + sweep_mismatches
            + event_mismatches
            + storm.verify(emulator)
        )
        # --- the archive queried with the named queries' SQL (issue 24), before the phases
        # below add records of their own ---------------------------------------------------
        say("querying the archive: the deployed named queries' SQL, run by DuckDB ...")
        queried = archive_query.phase(
            emulator=emulator,
            pipeline=pipeline,
            bucket=archive_bucket,
            prefix=archive_prefix,
            excluded_session_ids=[p.session_id for p in dry],
            reused_session_id=reused[0].session_id if reused else None,
            tenant_attribute=config.tenant_attribute,
            say=say,
        )
        mismatches += queried.mismatches

        # --- 8. backstops (issue 12), on sessions of their own, after the checks above --------
        on_failure_sent = report.records_sent_to_on_failure
        # What every phase below is given (each phase's ``run`` takes these keywords).
        phase: dict[str, Any] = {
            "emulator": emulator,
            "pipeline": pipeline,
            "store": store,
            "bucket": bucket,
            "grantee": grantee,
            "say": say,
        }
        backstop_summary, backstop_mismatches = backstops.run(
            **phase, dry_grants={p.grant_id for p in dry}
        )
        mismatches += backstop_mismatches
        # --- 9. forgery: another writer's item names a live session's grant and prefix -------
        forgery_summary, forgery_mismatches = forgery.run(**phase)
        mismatches += forgery_mismatches
        # --- 10. ownership: a tenant forging against another; a reuse-after-expiry storm ----
        ownership_summary, ownership_mismatches = ownership.run(**phase, past_store=past_store)
        mismatches += ownership_mismatches
        # --- 11. grants on disconnect: a grant lives only while a client is connected -------
        grants_summary, grants_mismatches = connected_grants.run(
            emulator=emulator, pipeline=pipeline, say=say
        )
        mismatches += grants_mismatches
        # --- 12. feature flags: a step off and on again, enabled off and on, nothing lost ---
        flags_summary, flags_mismatches = feature_flags.run(**phase)
        mismatches += flags_mismatches
        # --- 13. two Regions of a global table, each cleaning its own sessions (issue 23) ---
        regions_summary, regions_mismatches = two_regions.run(
            emulator=emulator,
            pipeline=pipeline,
            bucket=bucket,
            grantee=grantee,
            app_env=app_env,
            say=say,
        )
        mismatches += regions_mismatches
        # --- 14. the Kinesis change source, 30 hours late (issue 23); last: see the module ---
        kinesis_summary, kinesis_mismatches = kinesis_phase.run(**phase)
        mismatches += kinesis_mismatches
        summary = {
            "sessions": {
                "expired": expected_expired,
                "ended": len(ended),
                "live": sum(1 for p in plans if p.fate == "live"),
                "reused_after_expiry": len(reused),
                "swept": len(swept_plans),
                "heartbeat_race": len(racing),
                "replayed": 1,
                "paused_by_kill_switch": len(paused),
                "dry_run": len(dry),
            },
            "ttl_deletes": len(expired_seqs),
            "stream": {
                "records_read": report.records_read,
                "filtered_out": report.records_filtered_out,
                "invocations": len(report.invocations),
                "records_delivered": delivered,
                "function_errors": report.function_errors,
                "partial_batch_failures": report.partial_failures,
                "bisections": report.bisections,
                "retries": report.retries,
            },
            "cleaned_by_reason": metrics.by_dimension(
                contract.METRIC_SESSIONS_CLEANED, contract.DIMENSION_REASON
            ),
            "failures_by_action": metrics.by_dimension(
                contract.METRIC_CLEANUP_FAILURES, contract.DIMENSION_ACTION
            ),
            "records_skipped_by_cause": metrics.by_dimension(
                contract.METRIC_RECORDS_SKIPPED, contract.DIMENSION_CAUSE
            ),
            "objects_deleted_metric": metrics.total(contract.METRIC_OBJECTS_DELETED),
            "objects_deleted_metric_at_verification": objects_deleted_by_then,
            **verification["counts"],
            "sweeper": sweep.as_dict(),
            "realtime": live.as_dict() if live else None,
            "realtime_line": live.summary_line() if live else "not run (--no-realtime)",
            "archive": archive_counts,
            "events": event_counts,
            "replay": {"outcomes": outcomes, "queue_messages_left": queue_left},
            "agent_sessions": agents.as_dict(),
            "agent_sessions_line": agents.summary_line(),
            "agent_data": memory.as_dict(),
            "archive_queried": queried.as_dict(),
            "kill_switch": {"invocations_while_disabled": while_disabled, "resumed": resumed},
            "dry_run": {"would_be_cleaned": int(would), "archive_objects_written": archived_during},
            "ttl_health_alarm": {
                "logical_id": health[0],
                "window_seconds": health[1],
                "in_emulator": health_alarm,
            }
            if health
            else None,
            "records_sent_to_on_failure": on_failure_sent,
            "backstops": backstop_summary,
            "forgery": forgery_summary,
            "ownership": ownership_summary,
            "connected_grants": grants_summary,
            "feature_flags": flags_summary,
            "two_regions": regions_summary,
            "kinesis": kinesis_summary,
            "records_sent_to_on_failure_expected": 1,
            "emulator_internal_errors": len(emulator.internal_errors),
            "on_failure_queue_messages": queue_left,
            "cleanup_seconds": round(cleanup_seconds, 1),
            "total_seconds": round(time.monotonic() - say.start, 1),
            "reconnects": storm.counts,
            "mismatches": mismatches,
        }
        summary["status"] = operator_status(emulator, pipeline.stack.name)
        print_report(summary)
        if args.report_json:
            Path(args.report_json).write_text(
                json.dumps(summary, indent=2, default=str), encoding="utf-8"
            )
        figures = args.figures or (
            str(Path(args.report_json).with_suffix(".png")) if args.report_json else None
        )
        if figures:
            from sandbox.figures import draw_report

            say(f"figures: {draw_report(summary, Path(figures))}")
        failed = bool(mismatches) or on_failure_sent != 1
        if len(expired_seqs) != expected_expired:
            failed = True
        return 1 if failed else 0
    finally:
        if pipeline is not None:
            pipeline.close()
        emulator.stop()


class _EmulatorSession:
    """What ``session_expiry_runtime.ops.status.collect`` needs of a boto3 session, bound to the
    emulator: ``client(service, **kwargs)``."""

    def __init__(self, emulator: Any) -> None:
        self.emulator = emulator

    def client(self, service: str, **kwargs: Any) -> Any:
        return self.emulator.client(service, **kwargs)


def operator_status(emulator: Any, stack: str) -> dict[str, Any]:
    """What ``session-expiry status --stack STACK --json`` answers for the deployed stack at the
    end of the run (``{"error": ...}`` when it cannot read it: the report says so, the run's
    result does not depend on it)."""
    from session_expiry_runtime.ops import status

    try:
        return status.collect(_EmulatorSession(emulator), stack)
    except Exception as exc:  # the view is informative: never fail the report over it
        return {"error": f"{type(exc).__name__}: {exc}"}


def _status_lines(view: dict[str, Any] | None) -> list[str]:
    """The report's last lines: the status command's human view of the deployed stack."""
    if not view:
        return []
    command = f"session-expiry status --stack {view.get('stack', 'STACK')}"
    lines = ["-" * 72, f"STATUS            {command} (the deployed stack, at the end)"]
    if "error" in view:
        return [*lines, f"  could not be read: {view['error']}"]
    from session_expiry_runtime.ops import status

    expected = (
        "  (expected: the failure queue keeps the malformed message of the backstops phase's "
        "replay run, which replay keeps for an operator; the status command flags it)"
    )
    queue = view.get("failureQueue") or {}
    note = [expected] if queue.get("messages") else []
    return [*lines, *("  " + line for line in status.render(view).splitlines()), *note]


def _parallel(
    items: list[SessionPlan],
    fn: Callable[[SessionPlan], None],
    say: Progress,
    label: str,
    workers: int,
) -> None:
    done = 0
    step = max(1, len(items) // 5) if len(items) >= 20 else max(1, len(items))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(fn, item) for item in items]
        for future in as_completed(futures):
            future.result()
            done += 1
            if done % step == 0 or done == len(items):
                say(f"  {done}/{len(items)} {label}")


def _list_all_keys(s3: Any, bucket: str) -> set[str]:
    keys: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys.update(o["Key"] for o in page.get("Contents", []))
    return keys


def _list_grants(kms: Any, key_arn: str) -> dict[str, dict[str, Any]]:
    grants: dict[str, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {"KeyId": key_arn}
    while True:
        page = kms.list_grants(**kwargs)
        for grant in page.get("Grants", []):
            grants[grant["GrantId"]] = grant
        if not page.get("Truncated") or not page.get("NextMarker"):
            return grants
        kwargs["Marker"] = page["NextMarker"]


def verify(
    emulator: Any,
    pipeline: Any,
    plans: list[SessionPlan],
    *,
    bucket: str,
    key_arn: str,
    cleanup_role: str,
    table_name: str,
) -> dict[str, Any]:
    """Compare the emulator's state with what every session's fate requires."""
    s3, kms, ddb = emulator.client("s3"), emulator.client("kms"), emulator.client("dynamodb")
    keys = _list_all_keys(s3, bucket)
    grants = _list_grants(kms, key_arn)
    connections = emulator.open_connection_ids()
    items = set()
    key_name = pipeline.session_environment(APP_FUNCTION).get("SESSION_EXPIRY_PARTITION_KEY", "pk")
    for page in ddb.get_paginator("scan").paginate(TableName=table_name):
        items.update(item[key_name]["S"] for item in page.get("Items", []))
    mismatches: list[str] = []
    counts = Counter[str]()

    def gone(plan: SessionPlan, connection_id: str, grant_id: str, session_keys: list[str]) -> None:
        if connection_id in connections:
            mismatches.append(f"LEAKED connection {connection_id} of {plan.fate} {plan.session_id}")
        else:
            counts["connections_closed"] += 1
        if grant_id in grants:
            mismatches.append(f"LEAKED grant {grant_id} of {plan.fate} {plan.session_id}")
        else:
            counts["grants_retired"] += 1
        left = [k for k in session_keys if k in keys]
        if left:
            mismatches.append(
                f"LEAKED {len(left)}/{len(session_keys)} objects of {plan.fate} "
                f"{plan.session_id}, e.g. {left[0]!r}"
            )
        counts["objects_deleted"] += len(session_keys) - len(left)

    def intact(
        plan: SessionPlan,
        connection_id: str,
        grant_id: str,
        session_keys: list[str],
        *,
        in_table: bool = True,
    ) -> None:
        if connection_id not in connections:
            mismatches.append(
                f"WRONGLY DELETED connection {connection_id} of live {plan.session_id}"
            )
        grant = grants.get(grant_id)
        if grant is None:
            mismatches.append(f"WRONGLY RETIRED grant {grant_id} of live {plan.session_id}")
        elif grant.get("RetiringPrincipal") != cleanup_role:
            mismatches.append(
                f"grant {grant_id} of {plan.session_id} names retiring principal "
                f"{grant.get('RetiringPrincipal')}, not the cleanup role"
            )
        missing = [k for k in session_keys if k not in keys]
        if missing:
            mismatches.append(
                f"WRONGLY DELETED {len(missing)}/{len(session_keys)} objects of "
                f"live {plan.session_id}, e.g. {missing[0]!r}"
            )
        if in_table and plan.session_id not in items:
            mismatches.append(f"live session {plan.session_id} is missing from the table")
        counts["live_objects_intact"] += len(session_keys) - len(missing)

    for plan in plans:
        if plan.fate in GONE_FATES:
            gone(plan, plan.connection_id, plan.grant_id, plan.keys)
            if plan.reuse:
                intact(plan, plan.new_connection_id, plan.new_grant_id, plan.new_keys)
            elif plan.session_id in items:
                mismatches.append(f"{plan.fate} session {plan.session_id} is still in the table")
        else:
            in_table = plan.fate in IN_TABLE_FATES
            intact(plan, plan.connection_id, plan.grant_id, plan.keys, in_table=in_table)
            if not in_table and plan.session_id in items:
                mismatches.append(f"{plan.fate} session {plan.session_id} is still in the table")
    leaked = sum(1 for m in mismatches if m.startswith("LEAKED"))
    wrong = sum(1 for m in mismatches if m.startswith("WRONGLY"))
    return {
        "counts": {**counts, "leaked": leaked, "wrongly_deleted": wrong},
        "mismatches": mismatches,
    }


def _health_alarm_text(health: tuple[str, int] | None, in_emulator: dict[str, str] | None) -> str:
    """The TTL health alarm as the template has it and as the emulator's CloudWatch read it back."""
    if not health:
        return "none in the deployed template"
    where = (
        f"created in the emulator as {in_emulator['name']}, state {in_emulator['state']}"
        if in_emulator
        else "NOT in the emulator's CloudWatch"
    )
    return (
        f"{health[0]}, window {health[1]}s ({where}; never evaluated: moto evaluates no alarms "
        "and publishes no TimeToLiveDeletedItemCount)"
    )


def _replay_line(replay: dict[str, Any]) -> str:
    outcomes = replay["outcomes"]
    if not outcomes:
        return "no message replayed"
    parts = [
        f"{o['status']} {o['records']} record(s), message "
        + ("deleted" if o["deleted"] else "kept")
        for o in outcomes
    ]
    return "; ".join(parts) + f"; queue holds {replay['queue_messages_left']}"


def print_report(s: dict[str, Any]) -> None:
    from . import (
        agent_data,
        archive_query,
        backstops,
        connected_grants,
        feature_flags,
        forgery,
        kinesis_phase,
        ownership,
        two_regions,
    )

    st, ss, sw = s["stream"], s["sessions"], s["sweeper"]
    ar, ev = s["archive"], s["events"]
    lines = [
        "",
        "=" * 72,
        "SANDBOX REPORT",
        "=" * 72,
        f"sessions          expired {s['sessions']['expired']} | ended {s['sessions']['ended']}"
        f" | live {s['sessions']['live']} | expired ids reused "
        f"{s['sessions']['reused_after_expiry']}",
        f"                  swept {ss['swept']} | heartbeat race {ss['heartbeat_race']} | "
        f"replayed {ss['replayed']} | ended under kill switch {ss['paused_by_kill_switch']} | "
        f"ended in dry run {ss['dry_run']}",
        f"TTL deletes       {s['ttl_deletes']}",
        f"stream            {st['records_read']} records read, {st['filtered_out']} filtered out,"
        f" {st['records_delivered']} delivered in {st['invocations']} invocations",
        f"                  function errors {st['function_errors']}, partial batch failures "
        f"{st['partial_batch_failures']}, bisections {st['bisections']}, retries {st['retries']}",
        f"cleaned by reason {_fmt(s['cleaned_by_reason'].items())}   (EMF metrics of the function "
        "and the replay CLI)",
        f"failures          {_fmt(s['failures_by_action'].items())}",
        f"records skipped   {_fmt(s['records_skipped_by_cause'].items())}",
        f"objects deleted   {s.get('objects_deleted', 0)} verified gone; ObjectsDeleted metric "
        f"{int(s['objects_deleted_metric_at_verification'])} by the verification, "
        f"{int(s['objects_deleted_metric'])} over the whole run (the later phases' sessions too)",
        f"connections closed {s.get('connections_closed', 0)} verified",
        f"grants retired    {s.get('grants_retired', 0)} verified",
        f"live objects      {s.get('live_objects_intact', 0)} intact",
        f"expiry sweeper    {sw['schedule']} (deployed rule), {len(sw['runs'])} simulated runs:"
        f" {sw['swept']} swept, {sw['skipped']} skipped",
        f"                  expiry-to-clean max {sw['expiry_to_clean_max_seconds']}s, p95 "
        f"{sw['expiry_to_clean_p95_seconds']}s (simulated) <= interval "
        f"{sw['interval_seconds']}s + processing {sw['processing_max_seconds']}s: "
        + ("OK" if sw["within_bound"] else "EXCEEDED"),
        f"                  heartbeat just before the sweep: {sw['heartbeat_race_survived']}/"
        f"{sw['heartbeat_race_total']} sessions survived",
        f"real time         {s['realtime_line']}",
        f"archive           {ar['objects']} objects; {ar['sessions_with_one_object']}/"
        f"{ar['cleaned_sessions']} cleaned sessions have exactly one; "
        f"{ar['kept_sessions_without_object']}/{ar['kept_sessions']} live/dry-run have none; "
        f"{ar['round_trips_checked']}/{ar['round_trips_sampled']} round-trips exact",
        f"fan-out events    {ev['received']} received via a rule -> SQS "
        f"({ev['unique_sequence_numbers']} unique) for {ev['cleaned_sessions']} cleaned "
        f"sessions; by reason {_fmt(ev['by_reason'].items())}",
        f"failure replay    {_replay_line(s['replay'])}",
        s["agent_sessions_line"],
        agent_data.report_line(s.get("agent_data")),
        archive_query.report_line(s.get("archive_queried")),
        f"kill switch       {s['kill_switch']['invocations_while_disabled']} invocations while "
        f"disabled, {s['kill_switch']['resumed']} after re-enabling (position kept)",
        f"dry run           {s['dry_run']['would_be_cleaned']} would be cleaned, "
        f"{s['dry_run']['archive_objects_written']} archived, resources intact (verified)",
        "TTL health alarm  "
        + (
            _health_alarm_text(
                (s["ttl_health_alarm"]["logical_id"], s["ttl_health_alarm"]["window_seconds"]),
                s["ttl_health_alarm"]["in_emulator"],
            )
            if s["ttl_health_alarm"]
            else "none"
        ),
        f"on-failure queue  {s['records_sent_to_on_failure']} records sent (expected "
        f"{s['records_sent_to_on_failure_expected']}, the injected failure); "
        f"{s['on_failure_queue_messages']} messages left after replay",
        backstops.report_line(s["backstops"]),
        forgery.report_line(s["forgery"]),
        ownership.report_line(s["ownership"]),
        connected_grants.report_line(s["connected_grants"]),
        feature_flags.report_line(s["feature_flags"]),
        two_regions.report_line(s["two_regions"]),
        kinesis_phase.report_line(s["kinesis"]),
        f"emulator errors   {s['emulator_internal_errors']} HTTP 500s from moto (retried by the "
        "SDK; moto is not thread-safe everywhere)",
        *reconnects.report_lines(s.get("reconnects") or {}),
        f"leaked            {s['leaked']}",
        f"wrongly deleted   {s['wrongly_deleted']}",
        f"time              cleanup {s['cleanup_seconds']}s, total {s['total_seconds']}s",
    ]
    for mismatch in s["mismatches"][:50]:
        lines.append(f"  ! {mismatch}")
    if len(s["mismatches"]) > 50:
        lines.append(f"  ! ... and {len(s['mismatches']) - 50} more")
    ok = not s["mismatches"] and (
        s["records_sent_to_on_failure"] == s["records_sent_to_on_failure_expected"]
    )
    lines.append("RESULT            " + ("OK" if ok else "MISMATCH"))
    lines += _status_lines(s.get("status"))
    print("\n".join(lines), flush=True)


def _moto_version() -> str:
    import moto

    return str(moto.__version__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--app-dir",
        type=Path,
        default=REPO_ROOT,
        help="directory of the CDK app (its cdk.json); default: the repository",
    )
    parser.add_argument("--stack", default=None, help="stack to deploy (default: all)")
    parser.add_argument("--sessions", type=int, default=300, help="sessions to create (300)")
    parser.add_argument("--seed", type=int, default=5, help="random seed of the fates (5)")
    parser.add_argument("--workers", type=int, default=6, help="threads creating sessions (6)")
    parser.add_argument("--report-json", default=None, help="also write the report here")
    parser.add_argument(
        "--figures",
        default=None,
        help="also draw the dashboard's figures from this run as a PNG here "
        "(default: beside --report-json, with .png)",
    )
    parser.add_argument("--quiet", action="store_true", help="only the final report")
    parser.add_argument(
        "--no-realtime",
        action="store_true",
        help="skip the real-time phase (a 5 s sweeper measured on the wall clock, ~2.5 min)",
    )
    parser.add_argument(
        "--verbose-errors",
        action="store_true",
        help="print moto's tracebacks of requests it answered with HTTP 500",
    )
    args = parser.parse_args(argv)
    if args.sessions < 20:
        parser.error("--sessions: at least 20, so every kind of session is present")
    return args


def main(argv: list[str] | None = None) -> int:
    for name, value in {
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "NODE_NO_WARNINGS": "1",
        "JSII_DEPRECATED": "quiet",
    }.items():
        os.environ.setdefault(name, value)
    # Never reach a real account, whatever the caller's shell holds.
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        del os.environ[name]
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        }
    )
    args = parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
