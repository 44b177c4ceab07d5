"""Reconnect storms and the absolute lifetime cap, against the deployed sample app (issue 11).

* **Reconnect storm**: sessions each reconnected several times at once (``attach_connection``
  from concurrent threads, as reconnecting clients would); each attach closes the session's
  earlier connections. A third of the sessions then end, a third expire (TTL-shaped delete), a
  third stay live. After the cleanup, every connection of every ended or expired session must be
  closed, and each live session must keep exactly one open: its last.
* **Absolute cap**: sessions with a short maximum lifetime are heartbeated on a clock moved past
  their not-after time; every heartbeat and read at or after it must be refused, the TTL must
  never pass it, and the sessions are then expired and cleaned like any other.

The sessions join the scenario's plans (``SessionPlan``: their last connection, grant and
scratch objects), so the scenario's own checks (resources gone or intact, archive, events)
cover them too; ``Storm.verify`` adds the per-connection checks.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

#: Sessions of the reconnect storm and reconnects of each (all issued at once).
STORM_SESSIONS = 12
RECONNECTS = 6
#: Sessions of the absolute-cap phase, and their maximum lifetime.
CAPPED_SESSIONS = 4
CAP_SECONDS = 60


class MovableClock:
    """A clock the phase moves by hand (an aware ``datetime``, as ``SessionStore`` expects)."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.now

    def set(self, now: datetime) -> None:
        with self._lock:
            self.now = now


@dataclass
class Storm:
    """What the phase did, for ``verify`` and the report."""

    plans: list[Any] = field(default_factory=list)
    #: session id -> every connection id it had, in attach order (the first from ``create``).
    connections: dict[str, list[str]] = field(default_factory=dict)
    fates: dict[str, str] = field(default_factory=dict)
    open_after_storm: dict[str, int] = field(default_factory=dict)
    capped_refused: int = 0
    capped_served_past_cap: int = 0
    capped_ttl_past_cap: int = 0
    counts: dict[str, Any] = field(default_factory=dict)

    def verify(self, emulator: Any) -> list[str]:
        """Per-connection checks after the cleanup; fills :attr:`counts`, returns mismatches."""
        still_open = emulator.open_connection_ids()
        mismatches: list[str] = []
        closed_per_session: dict[str, int] = {}
        by_cleanup = Counter[str]()
        for session_id, ids in self.connections.items():
            fate = self.fates[session_id]
            open_ids = [c for c in ids if c in still_open]
            closed_per_session[session_id] = len(ids) - len(open_ids)
            if fate == "live":
                if open_ids != [ids[-1]]:
                    mismatches.append(
                        f"RECONNECT live {session_id}: {len(open_ids)} connections open, "
                        "expected exactly its last"
                    )
            elif open_ids:
                mismatches.append(
                    f"LEAKED {len(open_ids)}/{len(ids)} connections of {fate} {session_id} "
                    f"(reconnect storm), e.g. {open_ids[0]}"
                )
            else:
                by_cleanup[fate] += self.open_after_storm.get(session_id, 0)
        if self.capped_served_past_cap:
            mismatches.append(
                f"CAP {self.capped_served_past_cap} heartbeat(s)/read(s) served at or after the "
                "not-after time"
            )
        if self.capped_ttl_past_cap:
            mismatches.append(f"CAP {self.capped_ttl_past_cap} TTL(s) set past the not-after time")
        ended = [s for s, f in self.fates.items() if f in ("end", "expire")]
        self.counts = {
            "sessions": len(self.connections),
            "reconnects_per_session": RECONNECTS,
            "connections": sum(len(ids) for ids in self.connections.values()),
            "closed_per_session": closed_per_session,
            "ended_or_expired": len(ended),
            "ended_or_expired_all_closed": sum(
                1 for s in ended if closed_per_session[s] == len(self.connections[s])
            ),
            "closed_by_the_cleanup": sum(by_cleanup.values()),
            "live_with_one_open": sum(
                1
                for s, f in self.fates.items()
                if f == "live" and closed_per_session[s] == len(self.connections[s]) - 1
            ),
            "live": sum(1 for f in self.fates.values() if f == "live"),
            "capped_sessions": CAPPED_SESSIONS,
            "cap_seconds": CAP_SECONDS,
            "capped_refused": self.capped_refused,
            "served_past_absolute_lifetime": self.capped_served_past_cap,
        }
        return mismatches


def prepare(
    *,
    emulator: Any,
    pipeline: Any,
    app_env: dict[str, str],
    grantee: str,
    bucket: str,
    make_plan: Callable[..., Any],
    say: Callable[[str], None],
    seed: int,
    workers: int,
) -> Storm:
    """Run both phases up to the cleanup (which the scenario runs for every session)."""
    from session_expiry_runtime.core.config import RuntimeConfig
    from session_expiry_runtime.store import SessionStore

    ddb, kms, s3 = emulator.client("dynamodb"), emulator.client("kms"), emulator.client("s3")
    # moto serves the management API at its root (see "What differs from AWS").
    connections = emulator.client("apigatewaymanagementapi")
    real = lambda: datetime.now(timezone.utc)  # noqa: E731
    past = lambda: datetime.now(timezone.utc) - timedelta(minutes=2)  # noqa: E731
    config = RuntimeConfig.from_env(app_env)

    def store(clock: Callable[[], datetime], cfg: Any = config) -> Any:
        return SessionStore(
            dynamodb_client=ddb,
            kms_client=kms,
            connections_client=connections,
            lambda_client=emulator.client("lambda"),  # the claim registrar's Invoke
            clock=clock,
            config=cfg,
        )

    storm = Storm()
    rng = random.Random(seed)  # noqa: S311 - a reproducible plan, not a secret
    fates = ["end", "expire", "live"] * (STORM_SESSIONS // 3)
    rng.shuffle(fates)

    def open_session(session_id: str, fate: str, st: Any) -> Any:
        first = f"{session_id}-c0"
        emulator.open_connection(first)
        st.create(
            session_id, ttl=timedelta(minutes=1 if fate == "expire" else 60), connection_id=first
        )
        session = st.create_grant(session_id, grantee_principal=grantee, operations=["Decrypt"])
        plan = make_plan(
            session_id=session_id, fate=fate, connection_id=first, object_names=["a.txt", "b c.bin"]
        )
        plan.prefix, plan.grant_id = session.scratch_prefix or "", session.grant_id or ""
        plan.keys = [plan.prefix + name for name in plan.object_names]
        for key in plan.keys:
            s3.put_object(Bucket=bucket, Key=key, Body=b"scratch")
        storm.connections[session_id] = [first]
        storm.fates[session_id] = fate
        return plan

    sessions = [(f"r-{i}", fate) for i, fate in enumerate(fates, start=1)]
    stores = {fate: store(past if fate == "expire" else real) for fate in ("end", "expire", "live")}
    plans = {sid: open_session(sid, fate, stores[fate]) for sid, fate in sessions}

    attaches = []
    for sid, fate in sessions:
        for n in range(1, RECONNECTS + 1):
            cid = f"{sid}-c{n}"
            emulator.open_connection(cid)
            storm.connections[sid].append(cid)
            attaches.append((sid, fate, cid))
    rng.shuffle(attaches)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda a: stores[a[1]].attach_connection(a[0], a[2]), attaches))
    still_open = emulator.open_connection_ids()
    for sid, fate in sessions:
        item = stores[fate].get(sid, consistent=True)
        open_ids = [c for c in storm.connections[sid] if c in still_open]
        storm.open_after_storm[sid] = len(open_ids)
        last = item.connection_id if item is not None else ""
        plans[sid].connection_id = last  # the one the cleanup (or nobody, if live) closes
        # attach order under concurrency is the write order, not the list order
        storm.connections[sid] = [c for c in storm.connections[sid] if c != last] + [last]
    say(
        f"reconnect storm: {len(sessions)} sessions x {RECONNECTS} concurrent reconnects "
        f"({len(attaches)} attach_connection calls); open afterwards per session: "
        f"{sorted(Counter(storm.open_after_storm.values()).items())}"
    )
    for sid, fate in sessions:
        if fate == "end":
            stores["live"].end(sid)
        elif fate == "expire":
            pipeline.ttl_delete({config.partition_key: {"S": sid}})
    storm.plans = list(plans.values())
    storm.plans += _capped(storm, store, config, make_plan, emulator, grantee, pipeline, say)
    return storm


def _capped(
    storm: Storm,
    store: Callable[..., Any],
    config: Any,
    make_plan: Callable[..., Any],
    emulator: Any,
    grantee: str,
    pipeline: Any,
    say: Callable[[str], None],
) -> list[Any]:
    """Heartbeats on a clock moved to the cap: before it capped, at and after it refused."""
    from session_expiry_runtime.store import SessionGoneError

    start = datetime.now(timezone.utc) - timedelta(seconds=3 * CAP_SECONDS)
    clock = MovableClock(start)
    st = store(clock, replace(config, max_session_lifetime_seconds=CAP_SECONDS))
    plans = []
    for i in range(1, CAPPED_SESSIONS + 1):
        sid = f"cap-{i}"
        emulator.open_connection(f"{sid}-c0")
        session = st.create(sid, ttl=timedelta(hours=1), connection_id=f"{sid}-c0")
        session = st.create_grant(sid, grantee_principal=grantee, operations=["Decrypt"])
        plan = make_plan(session_id=sid, fate="expire", connection_id=f"{sid}-c0", object_names=[])
        plan.prefix, plan.grant_id = session.scratch_prefix or "", session.grant_id or ""
        plans.append(plan)  # the scenario checks its connection, grant and archive like others
    not_after = {plan.session_id: int(st.get(plan.session_id).not_after) for plan in plans}
    for offset in (-1, 0, 1, CAP_SECONDS):  # relative to each session's recorded not-after time
        for plan in plans:
            clock.set(datetime.fromtimestamp(not_after[plan.session_id] + offset, tz=timezone.utc))
            try:
                touched = st.touch(plan.session_id, ttl=timedelta(hours=1))
            except SessionGoneError:
                storm.capped_refused += 1
                served = st.get(plan.session_id, consistent=True) is not None
                storm.capped_served_past_cap += int(served)
                continue
            past_cap = offset >= 0
            storm.capped_served_past_cap += int(past_cap)
            if touched.not_after is None or touched.expires_at > touched.not_after:
                storm.capped_ttl_past_cap += 1
    for plan in plans:
        pipeline.ttl_delete({config.partition_key: {"S": plan.session_id}})
    say(
        f"absolute cap: {CAPPED_SESSIONS} sessions with a {CAP_SECONDS} s lifetime heartbeated 1 s "
        f"before, at, 1 s after and {CAP_SECONDS} s after their not-after time: "
        f"{storm.capped_refused} refused, "
        f"{storm.capped_served_past_cap} served past the cap"
    )
    return plans


def report_lines(counts: dict[str, Any]) -> list[str]:
    """The report's lines for the two phases."""
    if not counts:
        return []
    closed = counts["closed_per_session"]
    per_session = ", ".join(f"{s}={n}" for s, n in sorted(closed.items()))
    return [
        f"reconnects        {counts['sessions']} sessions x {counts['reconnects_per_session']} "
        f"concurrent reconnects ({counts['connections']} connections); ended/expired with every "
        f"connection closed {counts['ended_or_expired_all_closed']}/{counts['ended_or_expired']}"
        f" ({counts['closed_by_the_cleanup']} closed by the cleanup); live with exactly one open "
        f"{counts['live_with_one_open']}/{counts['live']}",
        f"                  connections closed per session: {per_session}",
        f"absolute cap      {counts['capped_sessions']} sessions, {counts['cap_seconds']} s "
        f"lifetime: {counts['capped_refused']} heartbeats at/after the cap refused, "
        f"{counts['served_past_absolute_lifetime']} sessions past their absolute lifetime served",
    ]
