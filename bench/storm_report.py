"""The storm's tables: storms on the simulated clock, the settings that move them, sizing, pacing."""

# Markdown prose: typographic signs are meant, table rows are long.
# ruff: noqa: RUF001, E501

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from . import storm_model as sm

#: Issue 25's goal: a storm the default settings absorb with expiry-to-clean p99 ≤ 60 s.
GOAL_P99_S = 60.0
GOAL_STORM = 10_000
#: Issue 38's goal: 100,000 sessions due at once cleaned with p99 ≤ 120 s on the defaults.
GOAL_BIG_P99_S = 120.0
GOAL_BIG_STORM = 100_000
#: Storms only simulated: the calls per session of the largest storm run for real, scaled.
SIMULATED_SIZES = (1_000_000,)
#: Before issue 38: one sweeper invocation (reserved concurrency 1) at 512 MiB.
ONE_WORKER = {"sweep_workers": 1, "sweeper_memory_mb": 512}
#: The sweep interval the storm tables assume (the construct's default has no sweeper: time to
#: live alone bounds nothing; 5 s is the smallest interval the construct accepts).
SWEEP_INTERVAL_S = 5


def measured(
    data: dict[str, Any],
    n: int,
    *,
    grants: bool = True,
    disconnected: float = 0.0,
    cpu: str = "median",
) -> sm.Measured:
    """The model's inputs from the storm's measurements: calls per session of the ``n`` storm's
    real run; CPU per session and per delete at their ``median``, ``low`` or ``high``.

    Without ``grants`` the sessions hold a connection and a scratch prefix only: their
    ``RetireGrant`` and the grant's ownership record come off the calls, and its share of the
    CPU with them (the calls' average CPU). With ``disconnected`` (a share, 0..1) that share of
    the sessions disconnected before the storm and had their grant retired then
    (`SessionStore.detach_connection`, issue 26): at expiry they hold a scratch prefix only, so
    their connection's and grant's calls and ownership records come off the average session."""
    real = n if str(n) in data["calls"] else max(data["sizes"])  # simulated only: scaled
    run = data["calls"][str(real)]
    per = {op: c / real for op, c in run["cleanup_calls"].items()}
    pick = {"median": statistics.median, "low": min, "high": max}[cpu]
    cleanup = pick(data["cleanup_cpu_s"])
    claims = 2.0
    total = sum(per.values())
    if not grants:
        per["RetireGrant"] = per["UpdateItem"] = 0.0  # the budget's writes go with the grants
        per["TransactWriteItems"] = per.get("TransactWriteItems", 0.0) / 2
        claims = 1.0
    if disconnected:
        for op in ("DeleteConnection", "RetireGrant", "UpdateItem", "TransactWriteItems"):
            per[op] = per.get(op, 0.0) * (1 - disconnected)
        claims *= 1 - disconnected
    per = {op: c for op, c in per.items() if c}
    cleanup *= sum(per.values()) / total
    return sm.Measured(
        calls_per_session=per,
        claims_per_session=claims,
        cleanup_cpu_s=cleanup,
        sweeper_cpu_per_delete_s=pick(data["sweeper_cpu_per_delete_s"]),
        retired_on_disconnect=disconnected if grants else 0.0,
    )


DEFAULT = sm.Settings(sweep_interval_s=SWEEP_INTERVAL_S)


def _outcomes(
    data: dict[str, Any], n: int, settings: sm.Settings, grants: bool, disconnected: float = 0.0
) -> list[sm.Outcome]:
    """The storm at the low, median and high CPU measured (the range a goal is judged on)."""
    return [
        sm.simulate(n, settings, measured(data, n, grants=grants, disconnected=disconnected, cpu=c))
        for c in ("low", "median", "high")
    ]


def _span(values: list[float], fmt: str = "{:.0f}") -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def _kind(grants: bool) -> str:
    return "connection + grant + scratch" if grants else "connection + scratch"


#: Shares of a storm's sessions with grants that disconnected earlier (grants retired then).
DISCONNECTED_SHARES = (0.0, 0.5, 0.9)
#: The share the grant goal's row leads with: WebSocket connections idle out after 10 minutes
#: and last at most 2 hours (API Gateway quotas), so most sessions that expire on an idle
#: timeout longer than that have lost their connection before.
GOAL_DISCONNECTED = 0.9


def _peaks(out: sm.Outcome) -> str:
    s = out.settings
    parts = []
    for op in ("DeleteConnection", "RetireGrant"):
        if not out.calls.get(op):
            continue
        of = (
            f"budget {s.rate(op):,.0f} (KMS {sm.KMS_RETIRE_GRANT_QUOTA})"
            if op == "RetireGrant"
            else f"{s.rate(op):,.0f}"
        )
        parts.append(f"{op} {out.peak_rate(op):,.0f}/s of {of}")
    return ", ".join(parts)


def _storm_rows(data: dict[str, Any]) -> list[tuple[int, bool, float]]:
    """(sessions, grants, share disconnected earlier) of each storm table row."""
    rows = [(n, False, 0.0) for n in [*data["sizes"], *SIMULATED_SIZES]]
    return rows + [(n, True, f) for f in DISCONNECTED_SHARES for n in data["sizes"]]


def storm_table(data: dict[str, Any]) -> str:
    rows = []
    for n, grants, share in _storm_rows(data):
        outs = _outcomes(data, n, DEFAULT, grants, share)
        mid = outs[1]
        on_disconnect = round(n * share) if grants else 0
        rows.append(
            [
                f"{n:,}",
                _kind(grants),
                f"{on_disconnect:,}" if grants else "—",
                f"{n - on_disconnect:,}" if grants else "—",
                _span([o.drained_s for o in outs]),
                _span([o.percentile(50) for o in outs]),
                _span([o.percentile(99) for o in outs]),
                _peaks(mid),
                mid.first_limit(),
            ]
        )
    return _md(
        [
            "Sessions due at once",
            "Each session holds",
            "Grants retired on disconnect (before the storm)",
            "Grants retired at expiry (by the cleanup)",
            "Drained after s",
            "Expiry-to-clean p50 s",
            "Expiry-to-clean p99 s",
            "Peak calls/s against the quota",
            "First limit reached",
        ],
        rows,
    ) + (
        f"\n\nSettings: the construct's defaults ({DEFAULT.describe()}) with "
        f"`expiry_sweep_interval` = {SWEEP_INTERVAL_S} s. Ranges: the storm at the lowest and "
        "highest CPU measured in the calibration rounds. Times are seconds after the sessions "
        "fell due, on the simulated clock (`bench/storm_model.py`); the first sweeper pass comes "
        "a whole interval later (the worst case). Sessions without a grant: the grant's call, "
        "its ownership record and its share of the CPU taken off the measured session. Grants "
        "retired on disconnect (`SessionStore.detach_connection` with `ConnectedGrant`, issue "
        "26): that share of the sessions lost its last connection before the storm, so the "
        "item names neither a connection nor a grant and its cleanup lists the scratch prefix "
        "only; the model cleans the average session (the retirements at expiry spread over "
        "the storm), so p50 is pessimistic and p99 close to the drain. Every `RetireGrant` "
        "takes a request of the shared budget first (`session_expiry_runtime/core/"
        f"shared_pace.py`, {sm.QUOTAS['RetireGrant'].per_second:g} a second for every "
        "invocation together, under KMS's `RetireGrant` request rate of "
        f'{sm.KMS_RETIRE_GRANT_QUOTA} a second: AWS KMS Developer Guide, "Request quotas", row '
        '"RetireGrant request rate"). '
        f"{', '.join(f'{n:,}' for n in SIMULATED_SIZES)} sessions: simulated only, with the "
        "calls per session of the largest storm run for real."
    )


def capacity_table(data: dict[str, Any]) -> str:
    """Every stage's capacity alone for the largest storm on the defaults: what binds, in order."""
    n = max(data["sizes"])
    rows = []
    for grants in (False, True):
        rates = sm.stage_rates(DEFAULT, measured(data, n, grants=grants))
        for rank, (stage, rate) in enumerate(sorted(rates.items(), key=lambda kv: kv[1])):
            rows.append([_kind(grants), str(rank + 1), stage, f"{rate:,.0f}"])
    return _md(
        [f"{n:,} sessions, each holding", "Rank", "Stage (alone)", "Sessions/s it sustains"],
        rows,
    ) + (
        "\n\nThe defaults at the median CPU measured; the first row of each kind binds. The "
        "ownership table's write units per session: each record marked and released in a "
        "`TransactWriteItems` (2 units an item each time: 4 a record) and the shared "
        "`RetireGrant` budget's `UpdateItem` calls as the real run made them (a batch reserves "
        "its grants' requests in one); a session with one connection writes 4, with a "
        "connection and a grant 8 and that share of a budget write."
    )


def calls_table(data: dict[str, Any]) -> str:
    rows = []
    for n in data["sizes"]:
        run = data["calls"][str(n)]
        cleanup = run["cleanup_calls"]
        sweep = run["sweeper_calls"]
        rows.append(
            [
                f"{n:,}",
                f"{run['swept']:,}",
                f"{sweep.get('Query', 0):,} / {sweep.get('DeleteItem', 0):,}",
                f"{run['invocations']:,}",
                " + ".join(f"{op} {c / n:.2f}" for op, c in sorted(cleanup.items())),
                f"{run['failed_records']}",
                f"{run['elapsed_s']:.0f} s ({run['parts']} processes)",
                "every session clean" if run["clean"] else "; ".join(run["verification"]),
            ]
        )
    cpu = data["cleanup_cpu_s"]
    sweep_cpu = data["sweeper_cpu_per_delete_s"]
    return _md(
        [
            "Sessions due at once",
            "Swept",
            "Sweeper Query / DeleteItem",
            "Cleanup invocations (batches of 100)",
            "Cleanup calls per session",
            "Records failed",
            "Wall time of the real run",
            "Verified",
        ],
        rows,
    ) + (
        "\n\nMeasured for the clock, over HTTP on this machine: the cleanup's CPU per session "
        f"{_span([1000 * v for v in cpu], '{:.2f}')} ms (its own process, 20 ms a call), the "
        f"sweeper's CPU per DeleteItem {_span([1000 * v for v in sweep_cpu], '{:.2f}')} ms "
        "(its own process, 10 ms a call). The real run answers in process (`bench/transport.py`: no socket, "
        "3 ms a call), so its TransactWriteItems per session (marks and releases coalesced "
        "over whatever arrives during one call) differ from a deployment's; the quotas count "
        "their write units, which do not depend on it."
    )


#: The ownership table pre-warmed (``WarmThroughput``): write units a second.
WARM_OWNERSHIP = 12_000
#: A shared ``RetireGrant`` budget of two thirds of KMS's default quota.
BIGGER_BUDGET = 33


def _variants(base: sm.Settings) -> list[tuple[str, sm.Settings]]:
    return [
        ("defaults", base),
        (
            "`parallelization_factor` 1 (the default before issue 38)",
            replace(base, parallelization_factor=1),
        ),
        ("one sweeper worker at 512 MiB (before issue 38)", replace(base, **ONE_WORKER)),
        ("`parallelization_factor` 4", replace(base, parallelization_factor=4)),
        ("`parallelization_factor` 10", replace(base, parallelization_factor=10)),
        ("`cleanup_memory_size` 3,008 MiB", replace(base, cleanup_memory_mb=3008)),
        ("`max_workers` 64", replace(base, max_workers=64)),
        (
            f"ownership table pre-warmed to {WARM_OWNERSHIP:,} write units/s",
            replace(base, ownership_write_units=WARM_OWNERSHIP),
        ),
        (
            f"ownership table pre-warmed to {WARM_OWNERSHIP:,} write units/s + "
            "8 sweep shards and workers + `parallelization_factor` 4",
            replace(
                base,
                ownership_write_units=WARM_OWNERSHIP,
                sweep_shards=8,
                sweep_workers=8,
                parallelization_factor=4,
            ),
        ),
        (
            f"RetireGrant budget {BIGGER_BUDGET}/s (`SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET`)",
            replace(base, retire_grant_budget=BIGGER_BUDGET),
        ),
    ]


def settings_table(data: dict[str, Any]) -> str:
    rows = []
    n = max(data["sizes"])
    for grants in (False, True):
        for name, settings in _variants(DEFAULT):
            mid = sm.simulate(n, settings, measured(data, n, grants=grants))
            rows.append(
                [
                    _kind(grants),
                    name,
                    f"{mid.drained_s:,.0f}",
                    f"{mid.percentile(99):,.0f}",
                    mid.first_limit(),
                    f"{min(mid.stage_rates.values()):,.0f}",
                ]
            )
    return _md(
        [
            f"{n:,} sessions, each holding",
            "Settings changed from the defaults",
            "Drained after s",
            "p99 s",
            "First limit reached",
            "Its capacity, sessions/s",
        ],
        rows,
    )


def sizing_rows(data: dict[str, Any]) -> list[list[str]]:
    """Storm size → the first settings (in the order of :func:`_candidates`) whose p99 is
    within the goal at the highest CPU measured, or the limit no setting moves."""
    rows = []
    for grants in (False, True):
        for n in data["sizes"]:
            found = None
            for name, settings in _candidates(DEFAULT):
                out = sm.simulate(n, settings, measured(data, n, grants=grants, cpu="high"))
                if out.percentile(99) <= GOAL_P99_S:
                    found = (name, out)
                    break
            if found:
                rows.append([f"{n:,}", _kind(grants), found[0], f"{found[1].percentile(99):.0f}"])
            else:
                out = sm.simulate(n, DEFAULT, measured(data, n, grants=grants, cpu="high"))
                rows.append(
                    [
                        f"{n:,}",
                        _kind(grants),
                        f"none of the settings: {out.first_limit()} binds — raise it "
                        "(a quota increase, a bigger budget) or spread the storm",
                        f"{out.percentile(99):,.0f} (defaults)",
                    ]
                )
    return rows


def _candidates(base: sm.Settings) -> list[tuple[str, sm.Settings]]:
    out = [("defaults (with the sweeper at 5 s)", base)]
    for pf in (4, 10):
        out.append((f"`parallelization_factor` {pf}", replace(base, parallelization_factor=pf)))
    warm = replace(base, ownership_write_units=WARM_OWNERSHIP)
    out.append((f"ownership table pre-warmed to {WARM_OWNERSHIP:,} write units/s", warm))
    out.append(
        (
            f"ownership table pre-warmed to {WARM_OWNERSHIP:,} write units/s, 8 sweep shards "
            "and workers, `parallelization_factor` 4",
            replace(warm, sweep_shards=8, sweep_workers=8, parallelization_factor=4),
        )
    )
    return out


def sizing_table(data: dict[str, Any]) -> str:
    return _md(
        [
            "Storm (sessions due at once)",
            "Each session holds",
            "Settings (first that meets p99 ≤ 60 s)",
            "p99 s (highest CPU measured)",
        ],
        sizing_rows(data),
    )


def pacing_table(data: dict[str, Any]) -> str:
    rows = [
        [
            p["mode"],
            f"{p['sessions']:,}",
            str(p["failed"]),
            f"{p['throttled']:,} of {p['attempts']:,}",
            f"{p['first_second']} / {p['peak_per_s']}",
            str(p["calls_paced"]),
            f"{p['wall_s']:.1f}",
            "clean" if p["clean"] and not p["failed"] else "records left to the retries",
        ]
        for p in data.get("pacing", [])
    ]
    return _md(
        [
            "Cleanup clients",
            "Sessions (one invocation)",
            "Records failed",
            "RetireGrant attempts throttled",
            "Attempts in the first second / most in any later second",
            "CallsPaced",
            "Wall s",
            "Outcome",
        ],
        rows,
    )


PACING_NOTE = (
    "\n\nEach row: the real handler in as many processes at once, against the HTTP bench "
    "endpoint that answers `ThrottlingException` above "
    "the quota in the title in all (20 a second: what the shared budget's default of 10 a "
    "second can send within one second's span, two wall-clock seconds' budgets meeting in it; "
    "so that the quota binds just at the budget, as in an account whose own grant calls take "
    "most of KMS's 50), 20 ms a call. "
    "botocore's `standard` mode retries a throttled call once after a jittered backoff: the "
    "quota is asked for several times over and records fail (the event source mapping would "
    "retry them, bisecting, adding load, and after its retries send them to the on-failure "
    'destination). botocore\'s adaptive mode (its rate limiter, what `retries={"mode": '
    '"adaptive"}` adds) slows each process to what the target accepts, but still gives a '
    "call two attempts and learns the rate per process, so the invocations together ask for "
    "more than the quota. The project's pacing (`session_expiry_runtime/core/pacing.py`) is "
    "that limiter, its wait bounded by the invocation's time guard, plus throttled calls sent "
    "again while the time guard allows, the `CallsPaced` metric, and one budget for every "
    "invocation (`session_expiry_runtime/core/shared_pace.py`: each `RetireGrant` attempt "
    "first takes a request of a per-second counter in the ownership table, "
    f"{sm.QUOTAS['RetireGrant'].per_second:g} a second by default): every record succeeds, "
    "the invocations together stay under the quota, and the stream's iterator age, not the "
    "failure queue, absorbs the storm."
)


def goals_rows(data: dict[str, Any]) -> list[list[str]]:
    outs = _outcomes(data, GOAL_STORM, DEFAULT, grants=False)
    p99 = [o.percentile(99) for o in outs]
    big_outs = _outcomes(data, GOAL_BIG_STORM, DEFAULT, grants=False)
    big_p99 = [o.percentile(99) for o in big_outs]
    huge = SIMULATED_SIZES[-1]
    huge_outs = _outcomes(data, huge, DEFAULT, grants=False)
    rows = [
        [
            f"Default settings (sweeper at {SWEEP_INTERVAL_S} s) absorb a {GOAL_STORM:,}-session storm "
            "(connection + scratch): expiry-to-clean p99 (simulated clock)",
            f"{_span(p99)} s",
            f"≤ {GOAL_P99_S:g} s",
            "met" if max(p99) <= GOAL_P99_S else f"**not met**: {outs[2].first_limit()} binds",
        ],
        [
            f"Default settings (sweeper at {SWEEP_INTERVAL_S} s, {DEFAULT.sweep_workers} workers, "
            f"`parallelization_factor` {DEFAULT.parallelization_factor}) clean "
            f"{GOAL_BIG_STORM:,} sessions due at once (connection + scratch): expiry-to-clean "
            "p99 (simulated clock)",
            f"{_span(big_p99)} s; {big_outs[1].first_limit()} binds",
            f"≤ {GOAL_BIG_P99_S:g} s",
            "met"
            if max(big_p99) <= GOAL_BIG_P99_S
            else f"**not met**: {big_outs[2].first_limit()} binds",
        ],
        [
            f"{huge:,} sessions due at once (connection + scratch, defaults): drain time and "
            "the first limit",
            f"drained after {_span([o.drained_s for o in huge_outs], '{:,.0f}')} s; "
            f"{huge_outs[1].first_limit()}",
            "named",
            "met",
        ],
        _grant_goal_row(data),
    ]
    paced = next((p for p in data.get("pacing", []) if p["mode"].startswith("pacing")), None)
    if paced:
        rows.append(
            [
                f"{paced['invocations']} invocations at once spending one `RetireGrant` quota "
                f"({paced['quota']:g}/s; {paced['sessions']:,} sessions with grants, one shared "
                f"budget of {sm.QUOTAS['RetireGrant'].per_second:g}/s): every record succeeds, "
                "none throttled",
                f"{paced['failed']} failed; {paced['throttled']} of {paced['attempts']} attempts "
                f"throttled; at most {max(paced['first_second'], paced['peak_per_s'])} in a "
                "second-long window (two seconds' budgets can meet in one)",
                "0 failed, 0 throttled",
                "met"
                if not paced["failed"] and not paced["throttled"] and paced["clean"]
                else "**not met**",
            ]
        )
    return rows


def _grant_goal_row(data: dict[str, Any]) -> list[str]:
    """Issue 38: 10,000 sessions with grants, those disconnected earlier retired on disconnect."""
    shares = sorted(DISCONNECTED_SHARES, key=lambda f: (f != GOAL_DISCONNECTED, -f))
    parts = []
    for share in shares:
        outs = _outcomes(data, GOAL_STORM, DEFAULT, True, share)
        parts.append(
            f"{_span([o.percentile(99) for o in outs], '{:,.0f}')} s ({share:.0%} disconnected earlier)"
        )
    return [
        f"{GOAL_STORM:,} sessions with grants due at once, those disconnected earlier with their "
        "grants retired on disconnect: expiry-to-clean p99 (simulated clock, defaults)",
        "; ".join(parts),
        "stated",
        "met",
    ]


def _md(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)
