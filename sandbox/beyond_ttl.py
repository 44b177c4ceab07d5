"""The sandbox's issue-6 phases: expiry sweeper, archive, fan-out, kill switch, dry run, replay.

Each phase drives the deployed sample app in the emulator and returns what it measured; the
scenario (``sandbox.scenario``) verifies the resources of every session at the end.

Time: the sweeper runs on an EventBridge schedule (``rate(5 minutes)`` in the sample), which
moto creates but never fires. The phase simulates that schedule instead of waiting for it:
simulated time ``t`` runs sweeps at ``t = interval, 2 * interval, ...``; each swept session has
a simulated expiry in one of those intervals. Before sweep ``j`` the sessions whose simulated
expiry falls in interval ``j`` get their last heartbeat (``SessionStore.touch``) with a real
expiry one or two seconds ahead; once that has passed, the deployed sweeper function is invoked
with a scheduled event, then the cleanup runs. So the deployed sweeper (real clock) deletes
exactly the sessions a sweep at simulated ``j * interval`` would, and a session's simulated
expiry-to-clean time is ``j * interval - expiry + processing``, processing being the measured
wall time from the sweep's start to the end of the cleanup invocation that handled its record.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

#: Sweeps simulated (intervals over which the swept sessions' expiries are spread).
SWEEPS = 3
#: Event pattern of the consumer rule the sandbox adds to the bus (as another service would).
SESSION_CLEANED_PATTERN = {"source": ["cdk-session-expiry"], "detail-type": ["Session Cleaned"]}
CONSUMER_NAME = "sandbox-session-cleaned-consumer"


@dataclass
class SweepMeasurement:
    interval_seconds: int
    schedule: str
    swept: int = 0
    skipped: int = 0
    runs: list[dict[str, Any]] = field(default_factory=list)
    #: Simulated expiry-to-clean seconds per swept session.
    expiry_to_clean: dict[str, float] = field(default_factory=dict)
    processing_seconds: list[float] = field(default_factory=list)
    race_survived: int = 0
    race_total: int = 0

    @property
    def max_seconds(self) -> float:
        return max(self.expiry_to_clean.values(), default=0.0)

    @property
    def p95_seconds(self) -> float:
        values = sorted(self.expiry_to_clean.values())
        if not values:
            return 0.0
        return values[min(len(values) - 1, math.ceil(0.95 * len(values)) - 1)]

    @property
    def max_processing(self) -> float:
        return max(self.processing_seconds, default=0.0)

    @property
    def within_bound(self) -> bool:
        return self.max_seconds <= self.interval_seconds + self.max_processing + 1e-6

    def as_dict(self) -> dict[str, Any]:
        return {
            "schedule": self.schedule,
            "interval_seconds": self.interval_seconds,
            "runs": self.runs,
            "swept": self.swept,
            "skipped": self.skipped,
            "expiry_to_clean_max_seconds": round(self.max_seconds, 1),
            "expiry_to_clean_p95_seconds": round(self.p95_seconds, 1),
            "processing_max_seconds": round(self.max_processing, 2),
            "within_bound": self.within_bound,
            "heartbeat_race_survived": self.race_survived,
            "heartbeat_race_total": self.race_total,
        }


class InvocationClock:
    """Wall time at which each stream record's last invocation finished (monotonic)."""

    def __init__(self) -> None:
        self.finished: dict[str, float] = {}
        self.count = 0

    def __call__(self, invocation: Any) -> None:
        self.count += 1
        now = time.monotonic()
        for seq in invocation.sequence_numbers:
            self.finished[seq] = now


def assign_sim_expiries(plans: Sequence[Any], interval: int, seed: int) -> None:
    """Spread simulated expiries over ``(0, SWEEPS * interval]``, every interval non-empty."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible plan, not a secret
    for i, plan in enumerate(plans):
        window = i % SWEEPS  # every window gets sessions
        plan.sim_expiry = window * interval + rng.uniform(1.0, float(interval))


def window_of(sim_expiry: float, interval: int) -> int:
    return max(1, math.ceil(sim_expiry / interval))


def _expire_before_the_sweep(
    store: Any,
    due: Sequence[Any],
    race: Sequence[Any],
    swept: list[Any],
    racing: list[Any],
    say: Callable[[str], None],
) -> int:
    """Give ``due`` sessions (then each ``race`` session) a last heartbeat whose expiry falls
    before the sweep, and each ``race`` session a heartbeat right after it (it must win); return
    the latest real expiry set (epoch seconds).

    Margins come from the machine, not from constants: each expiry is at least
    :data:`MIN_MARGIN_SECONDS` and ten times the slowest ``touch`` measured so far after the
    call that sets it, so a loaded machine gets longer margins instead of a heartbeat that
    arrives after its session expired. A race session's two touches are back to back. If its
    heartbeat still finds the session gone (the machine stalled for longer than the margin), the
    session is moved to ``swept`` (it expired: the sweep must delete it, fail closed) and a report
    line says so — never a traceback.
    """
    from session_expiry_runtime.store import SessionGoneError

    slowest = 0.0

    def touch(plan: Any, **kwargs: Any) -> None:
        nonlocal slowest
        started = time.monotonic()
        store.touch(plan.session_id, **kwargs)
        slowest = max(slowest, time.monotonic() - started)

    def expiry() -> int:
        return int(time.time() + max(MIN_MARGIN_SECONDS, 10 * slowest)) + 1

    latest = 0
    for plan in due:
        latest = max(latest, expiry())
        touch(plan, expires_at=latest)
    for plan in race:
        latest = max(latest, expiry())
        touch(plan, expires_at=latest)
        try:
            touch(plan, ttl=timedelta(hours=1))  # a heartbeat just before the sweep: it must win
        except SessionGoneError:
            racing.remove(plan)
            plan.fate = "sweep"
            swept.append(plan)
            say(
                f"  heartbeat of {plan.session_id} came after its expiry (machine stalled for "
                f"more than the {latest - time.time():.1f} s margin): expected swept instead"
            )
    return latest


#: The least margin between a heartbeat that sets a session's expiry and that expiry.
MIN_MARGIN_SECONDS = 2.0


def run_sweeps(
    *,
    pipeline: Any,
    store: Any,
    swept: list[Any],
    racing: list[Any],
    schedule: Any,
    sweeper: Callable[[dict[str, Any], Any], Any],
    say: Callable[[str], None],
) -> tuple[SweepMeasurement, InvocationClock, list[float]]:
    """Simulate :data:`SWEEPS` scheduled sweeps; return the measurement, the invocation clock
    and each sweep's start (monotonic)."""
    interval = schedule.interval_seconds
    measurement = SweepMeasurement(interval_seconds=interval, schedule=schedule.expression)
    clock = InvocationClock()
    starts: list[float] = []
    for j in range(1, SWEEPS + 1):
        due = [p for p in swept if window_of(p.sim_expiry, interval) == j]
        race = [p for p in racing if window_of(p.sim_expiry, interval) == j]
        real_expiry = _expire_before_the_sweep(store, due, race, swept, racing, say)
        while time.time() < real_expiry + 0.05:
            time.sleep(0.05)
        started = time.monotonic()
        starts.append(started)
        result = sweeper(schedule.scheduled_event(), None)
        report = pipeline.run_cleanup(on_invocation=clock)
        finished = time.monotonic()
        measurement.processing_seconds.append(finished - started)
        measurement.swept += int(result.get("swept", 0))
        measurement.skipped += int(result.get("skipped", 0))
        run = {
            "simulated_time": j * interval,
            "due": len(due),
            "heartbeat_race": len(race),
            "swept": result.get("swept"),
            "skipped": result.get("skipped"),
            "failed": result.get("failed"),
            "complete": result.get("complete"),
            "processing_seconds": round(finished - started, 2),
        }
        measurement.runs.append(run)
        say(
            f"  sweep {j} at simulated t={j * interval}s: {len(due)} due, {len(race)} heartbeat "
            f"just before -> swept {result.get('swept')}, skipped {result.get('skipped')}; "
            f"cleanup {len(report.invocations)} invocations so far; "
            f"{finished - started:.2f}s processing"
        )
    measurement.race_total = len(racing)
    return measurement, clock, starts


def finish_sweep_measurement(
    measurement: SweepMeasurement,
    swept: Sequence[Any],
    clock: InvocationClock,
    starts: Sequence[float],
    archive_sequence: dict[str, str],
) -> list[str]:
    """Per-session expiry-to-clean times from the invocation clock; returns mismatches."""
    mismatches = []
    interval = measurement.interval_seconds
    for plan in swept:
        j = window_of(plan.sim_expiry, interval)
        seq = archive_sequence.get(plan.session_id)
        finished = clock.finished.get(seq or "")
        if finished is None:
            mismatches.append(f"swept session {plan.session_id}: no cleanup invocation found")
            continue
        processing = finished - starts[j - 1]
        measurement.expiry_to_clean[plan.session_id] = j * interval - plan.sim_expiry + processing
    if not measurement.within_bound:
        mismatches.append(
            f"expiry-to-clean {measurement.max_seconds:.1f}s exceeds interval "
            f"{interval}s + processing {measurement.max_processing:.2f}s"
        )
    return mismatches


# --- archive ----------------------------------------------------------------------------------


@dataclass
class ArchiveObject:
    key: str
    session_id: str
    sequence_number: str


def list_archive(s3: Any, bucket: str, prefix: str) -> list[ArchiveObject]:
    """Every archived object, with the session id and sequence number its key names."""
    from urllib.parse import unquote

    found = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            parts = obj["Key"][len(prefix) :].split("/")
            if len(parts) != 4 or not parts[3].endswith(".json"):
                found.append(ArchiveObject(obj["Key"], "", ""))
                continue
            found.append(
                ArchiveObject(obj["Key"], unquote(parts[2]), unquote(parts[3][: -len(".json")]))
            )
    return found


def check_archive(
    *,
    s3: Any,
    bucket: str,
    prefix: str,
    config: Any,
    cleaned: dict[str, Any],
    kept: dict[str, Any],
    sample: int,
    seed: int,
) -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """Exactly one object per cleaned session, none for kept ones; a few round-trip.

    ``cleaned``/``kept`` map session id to its plan (the incarnation that was cleaned / kept).
    Returns (counts, mismatches, {session id: sequence number of its archived record}).
    """
    from session_expiry_runtime.core.decode import decode_image
    from session_expiry_runtime.sinks.archive import archive_key

    objects = list_archive(s3, bucket, prefix)
    by_session: dict[str, list[ArchiveObject]] = {}
    for obj in objects:
        by_session.setdefault(obj.session_id, []).append(obj)
    mismatches: list[str] = []
    for session_id in cleaned:
        got = by_session.get(session_id, [])
        if len(got) != 1:
            mismatches.append(f"ARCHIVE {session_id}: {len(got)} objects, expected exactly 1")
    for session_id in kept:
        if session_id not in cleaned and by_session.get(session_id):
            mismatches.append(f"ARCHIVE {session_id} is live but has {by_session[session_id]}")
    strays = [o.key for o in objects if o.session_id not in cleaned]
    if strays:
        mismatches.append(f"ARCHIVE objects of no cleaned session, e.g. {strays[:2]}")

    rng = random.Random(seed)  # noqa: S311
    checked_ids = sorted(cleaned)
    picks = rng.sample(checked_ids, min(sample, len(checked_ids)))
    round_trips = 0
    for session_id in picks:
        objs = by_session.get(session_id) or []
        if len(objs) != 1:
            continue
        body = json.loads(s3.get_object(Bucket=bucket, Key=objs[0].key)["Body"].read())
        plan = cleaned[session_id]
        # The archived record (format 2): images and keys as JSON text fields.
        image = decode_image(json.loads(body["dynamodb_old_image"]))
        expected = {
            config.partition_key: session_id,
            config.connection_id_attribute: plan.connection_id,
            config.grant_id_attribute: plan.grant_id,
            config.scratch_prefix_attribute: plan.prefix,
        }
        wrong = {k: (image.get(k), v) for k, v in expected.items() if image.get(k) != v}
        recomputed = archive_key(
            config,
            keys=json.loads(body["session_key"]),
            tenant=body["tenant"],
            sequence_number=body["sequence_number"],
            approximate_creation_time=body["removed_at"],
        )
        if wrong:
            mismatches.append(f"ARCHIVE {session_id}: old image differs {wrong}")
        elif recomputed != objs[0].key:
            mismatches.append(f"ARCHIVE {session_id}: key {objs[0].key} != {recomputed}")
        else:
            round_trips += 1
    counts = {
        "objects": len(objects),
        "sessions_with_one_object": sum(1 for s in cleaned if len(by_session.get(s, [])) == 1),
        "cleaned_sessions": len(cleaned),
        "kept_sessions_without_object": sum(
            1 for s in kept if s not in cleaned and not by_session.get(s)
        ),
        "kept_sessions": len([s for s in kept if s not in cleaned]),
        "round_trips_checked": round_trips,
        "round_trips_sampled": len(picks),
    }
    sequences = {s: objs[0].sequence_number for s, objs in by_session.items() if len(objs) == 1}
    return counts, mismatches, sequences


# --- fan-out ----------------------------------------------------------------------------------


def add_consumer(emulator: Any, bus_arn: str) -> str:
    """A consumer's rule on the bus, delivering ``Session Cleaned`` events to a new SQS queue
    (the sample app has no consumer: another service would own this). Returns the queue URL."""
    sqs, events = emulator.client("sqs"), emulator.client("events")
    url = sqs.create_queue(QueueName=CONSUMER_NAME)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    bus_name = bus_arn.rsplit("/", 1)[-1]
    events.put_rule(
        Name=CONSUMER_NAME, EventBusName=bus_name, EventPattern=json.dumps(SESSION_CLEANED_PATTERN)
    )
    events.put_targets(
        Rule=CONSUMER_NAME, EventBusName=bus_name, Targets=[{"Id": "consumer", "Arn": arn}]
    )
    return str(url)


def drain_events(emulator: Any, url: str) -> list[dict[str, Any]]:
    """Every event the consumer queue received (consumed)."""
    sqs = emulator.client("sqs")
    events: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60)
        messages = got.get("Messages", [])
        if not messages:
            return events
        for message in messages:
            events.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def check_events(
    events: Sequence[dict[str, Any]], cleaned: dict[str, Any], partition_key: str
) -> tuple[dict[str, Any], list[str]]:
    """One event per cleaned session (deduplicated on ``detail.sequenceNumber``)."""
    # Delivery is at least once: a record redelivered after another record of its batch failed
    # publishes its event again, with the same sequence number (docs/construct.md, "Fan-out").
    per_session = Counter(
        session
        for session, _ in {
            (
                str((e.get("detail") or {}).get("sessionKey", {}).get(partition_key)),
                (e.get("detail") or {}).get("sequenceNumber"),
            )
            for e in events
        }
    )
    unique = {(e.get("detail") or {}).get("sequenceNumber") for e in events}
    mismatches = [
        f"EVENTS {s}: {per_session.get(s, 0)} events, expected 1"
        for s in cleaned
        if per_session.get(s, 0) != 1
    ]
    strays = [s for s in per_session if s not in cleaned]
    if strays:
        mismatches.append(f"EVENTS for sessions that were not cleaned: {strays[:3]}")
    reasons = Counter(str((e.get("detail") or {}).get("reason")) for e in events)
    return {
        "received": len(events),
        "unique_sequence_numbers": len(unique),
        "cleaned_sessions": len(cleaned),
        "by_reason": dict(reasons),
    }, mismatches


# --- failure replay ---------------------------------------------------------------------------


def replay_from_queue(pipeline: Any) -> tuple[list[dict[str, Any]], str]:
    """Run ``python -m session_expiry_runtime.replay --queue-url ...`` from the deployed code
    asset with the cleanup function's settings; return its outcome lines and its output."""
    url = pipeline.on_failure_queue_url()
    done = pipeline.run_module("session_expiry_runtime.recovery.replay", "--queue-url", url)
    for line in (done.stdout + "\n" + done.stderr).splitlines():
        pipeline.metrics.add_log_line(line)  # the replay's own EMF metrics (SessionsCleaned)
    outcomes = []
    for line in done.stdout.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and "status" in doc and "source" in doc:
            outcomes.append(doc)
    return outcomes, f"exit {done.returncode}; {done.stderr.strip()[-400:]}"


def queue_depth(emulator: Any, url: str) -> int:
    attrs = emulator.client("sqs").get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(
        attrs["ApproximateNumberOfMessagesNotVisible"]
    )


# --- alarms: the deployed template's, read back from the emulator (created, never evaluated) ---


def template_alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        lid: r.get("Properties", {})
        for lid, r in template.get("Resources", {}).items()
        if r.get("Type") == "AWS::CloudWatch::Alarm"
    }


def ttl_health_alarm(template: dict[str, Any]) -> tuple[str, int] | None:
    """(logical id, window seconds) of the TTL health alarm in the deployed template."""
    for lid, props in template_alarms(template).items():
        if "TtlHealthAlarm" in lid:
            periods = {
                q["MetricStat"]["Period"] for q in props.get("Metrics", []) if "MetricStat" in q
            }
            return lid, max(periods) if periods else 0
    return None


def alarm_in_emulator(emulator: Any, stack: Any, logical_id: str) -> dict[str, str] | None:
    """The alarm the deploy created for ``logical_id``, read back from the emulator's CloudWatch:
    its name and state. The testing plugin teaches moto's CloudFormation
    ``AWS::CloudWatch::Alarm``; moto evaluates no alarm, so the state stays the one it was
    created with. ``None`` when the stack or CloudWatch has no such alarm."""
    name = stack.physical_ids("AWS::CloudWatch::Alarm").get(logical_id)
    if not name:
        return None
    found = emulator.client("cloudwatch").describe_alarms(AlarmNames=[name])
    alarms = found.get("MetricAlarms", []) + found.get("CompositeAlarms", [])
    return {"name": name, "state": str(alarms[0]["StateValue"])} if alarms else None
