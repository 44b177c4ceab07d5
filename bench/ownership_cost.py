# ruff: noqa: RUF001
"""What recording and checking ownership costs a session, beside its minimum (issue 35).

``python -m bench.ownership_cost`` (also a section of ``python -m bench``). Counted, not
modelled: every AWS call the real code makes against moto (`harness.MotoServer`, no latency
injected), through botocore's ``provide-client-params``/``before-call``/``after-call`` events
on each client (`CallLog`).

* **Recording** — `SessionStore.create` with the claim registrar, as a deployed application
  function runs it: a conditional ``PutItem`` of the item, then one synchronous ``Invoke``
  (``RequestResponse``) of the registrar through the store's own transport
  (``registrar_client.lambda_invoke``). moto cannot run the function (no container runtime
  here), so that ``Invoke`` is answered in process by the real `Registrar.handle` (a
  ``before-call`` hook, as botocore's ``Stubber`` answers a call), on the registrar's own
  DynamoDB client, its calls counted apart: a strongly consistent ``GetItem`` of the item and a
  conditional ``PutItem`` per id. Beside it the minimum, the same ``create`` with no ownership
  table (one ``PutItem``), and the trusted writer's (the store writing the claims itself, as
  the registrar does: one ``TransactWriteItems`` of the item and the claims).
* **Checking** — the cleanup's ownership check on the real handler's batch (`throughput.run_case`
  on a `harness.build_fixture` batch: every session holds a connection and a grant, two ids):
  its ``TransactWriteItems`` (marks, then releases) per session, alone and in a batch of 100;
  the minimum is none (a cleanup that trusts the record: `bench.naive`).

Latency: the same calls' wall time against moto on this machine (moto builds each answer in
Python; its latency is not AWS's), and a model of AWS from `AWS_LATENCY` (each figure's source
or the assumption it is). Cost per million sessions: each call priced by
`cdk_session_expiry.cost.CALL_PRICES`, plus the registrar's duration at its memory.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from . import harness, throughput

#: Sessions created per variant (their latencies give the ranges).
CREATES = 40
#: Ids recorded at create in the "N ids" rows: a connection and the three AgentCore sessions.
MANY_IDS = 4
REGISTRAR_FUNCTION = "bench-claim-registrar"
#: The registrar's memory (the construct's `REGISTRAR_MEMORY_SIZE`), MiB.
REGISTRAR_MEMORY_MB = 256

DYNAMODB_DOC = (
    'Amazon DynamoDB Developer Guide, "What is Amazon DynamoDB?": "single-digit millisecond '
    'performance at any scale" (no figure per operation, no latency SLA)'
)
#: Modelled AWS latency per call, ms, and where the figure comes from.
AWS_LATENCY: dict[str, tuple[float, str]] = {
    "dynamodb:PutItem": (10.0, f"≤ 10 ms: {DYNAMODB_DOC}; the upper end taken"),
    "dynamodb:GetItem": (10.0, "≤ 10 ms, as PutItem (a strongly consistent read: same claim)"),
    "dynamodb:TransactWriteItems": (
        20.0,
        'assumption: twice a write — the Developer Guide ("Amazon DynamoDB Transactions", '
        "capacity) says a transaction performs two underlying writes of every item (prepare "
        "and commit); AWS publishes no transaction latency",
    ),
    "lambda:Invoke": (
        15.0,
        "assumption: a warm synchronous Invoke's own round trip beyond the function's duration "
        "(AWS publishes no figure and no SLA for it; a cold start adds the registrar's init, "
        "a few hundred ms — this bench's cold start section measures the same code's import "
        "and clients)",
    ),
}


#: Makes a boto3 client for a service name.
MakeClient = Callable[[str], Any]


class CallLog:
    """Every call of the clients it is attached to: (side, "service:Operation", kind, ms).

    ``kind`` says what the call asked for: conditional, strongly consistent, its action count."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, float]] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    def attach(self, client: Any, side: str) -> Any:
        events = client.meta.events
        events.register("provide-client-params", self._params)
        events.register("before-call", lambda model, **_: self._start(side, model))
        events.register("after-call", lambda **_: self._end())
        return client

    def _params(self, params: Any = None, **_: Any) -> None:
        kinds = []
        if isinstance(params, dict):
            if params.get("ConditionExpression"):
                kinds.append("conditional")
            if params.get("ConsistentRead"):
                kinds.append("strongly consistent")
            if params.get("TransactItems"):
                kinds.append(f"{len(params['TransactItems'])} actions")
            if params.get("InvocationType"):
                kinds.append(str(params["InvocationType"]))
        self._local.kind = ", ".join(kinds)

    def _start(self, side: str, model: Any) -> None:
        service = model.service_model.endpoint_prefix
        kind = getattr(self._local, "kind", "")
        self._stack().append((side, f"{service}:{model.name}", kind, time.perf_counter()))

    def _stack(self) -> list[tuple[str, str, str, float]]:
        """This thread's calls not yet answered (the registrar's calls run inside the
        application's ``Invoke``)."""
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack  # type: ignore[no-any-return]

    def _end(self) -> None:
        side, name, kind, t0 = self._stack().pop()
        ms = (time.perf_counter() - t0) * 1000
        with self._lock:
            self.calls.append((side, name, kind, ms))

    def take(self) -> list[tuple[str, str, str, float]]:
        with self._lock:
            calls, self.calls = self.calls, []
        return calls


def answer_invoke_in_process(lambda_client: Any, registrar: Any, log: CallLog) -> None:
    """Answer ``lambda_client``'s ``Invoke`` with ``registrar.handle`` (module docstring); the
    call is logged from here (a ``before-call`` answer stops the later ``before-call``
    handlers), its ``after-call`` closes it as any call's."""

    def invoke(params: Any, model: Any, **_: Any) -> tuple[Any, dict[str, Any]]:
        log._start("application", model)
        body = params["body"]
        request = json.loads(body if isinstance(body, (bytes, str)) else body.read())
        payload = json.dumps(registrar.handle(request)).encode()
        from botocore.response import StreamingBody

        parsed = {
            "StatusCode": 200,
            "Payload": StreamingBody(io.BytesIO(payload), len(payload)),
            "ResponseMetadata": {"HTTPStatusCode": 200},
        }
        return SimpleNamespace(status_code=200, headers={}), parsed

    lambda_client.meta.events.register("before-call.lambda.Invoke", invoke)


@dataclass
class Variant:
    name: str
    #: per create: [(side, call, kind)], the first create's (all are alike)
    calls: list[tuple[str, str, str]]
    #: per create: wall ms of the whole create, and of the registrar's part
    wall_ms: list[float]
    #: per create: the registrar's own time, ms (its Invoke's wall time less its calls')
    own_ms: list[float]


def _deployment(make_client: MakeClient, table: str, registrar: bool, ownership: bool) -> Any:
    """A `SessionStore` (its clients attached to a `CallLog`), as an application function
    gets it: with the registrar, with the ownership table written directly, or with no
    ownership table."""
    from session_expiry_runtime.core.config import RuntimeConfig
    from session_expiry_runtime.registrar import Registrar
    from session_expiry_runtime.store import SessionStore

    config = RuntimeConfig(
        table_name=table,
        ownership_table_name=table + harness.OWNERSHIP_TABLE_SUFFIX if ownership else None,
        scratch_root=harness.SCRATCH_ROOT,
        claim_registrar_function=REGISTRAR_FUNCTION if registrar else None,
    )
    log = CallLog()
    app_ddb = log.attach(make_client("dynamodb"), "application")
    lambda_client = None
    if registrar:
        lambda_client = log.attach(make_client("lambda"), "application")
        registrar_ddb = log.attach(make_client("dynamodb"), "registrar")
        answer_invoke_in_process(
            lambda_client, Registrar(config, registrar_ddb, emit=lambda _: None), log
        )
    store = SessionStore(config=config, dynamodb_client=app_ddb, lambda_client=lambda_client)
    return store, log


#: The three ways `SessionStore.create` is measured: (name, through the registrar, with an
#: ownership table).
VARIANTS = (
    ("create with the claim registrar", True, True),
    ("minimum: create with no ownership table", False, False),
    ("create by a trusted writer (claims written by the store itself)", False, True),
)


def measure_creates(make_client: MakeClient, ids: int, creates: int = CREATES) -> list[Variant]:
    """``creates`` sessions of each of `VARIANTS`, ``ids`` ids each (a connection first), on
    the clients ``make_client(service)`` makes."""
    variants = []
    for name, registrar, ownership in VARIANTS:
        table = f"bench-own-{len(variants)}-{ids}-{int(time.time() * 1000) % 10**9}"
        harness._tables({"dynamodb": make_client("dynamodb")}, table)
        store, log = _deployment(make_client, table, registrar, ownership)
        calls: list[tuple[str, str, str]] = []
        wall: list[float] = []
        own: list[float] = []
        for n in range(creates + 1):
            t0 = time.perf_counter()
            store.create(f"s-{n}", **_ids(n, ids))
            ms = (time.perf_counter() - t0) * 1000
            made = log.take()
            if n == 0:
                continue  # the first call of each client loads its model: not a latency
            if not calls:
                calls = [(side, call, kind) for side, call, kind, _ in made]
            wall.append(ms)
            invoke = sum(m for _, call, _, m in made if call == "lambda:Invoke")
            inside = sum(m for side, _, _, m in made if side == "registrar")
            own.append(max(0.0, invoke - inside))
        variants.append(Variant(name, calls, wall, own))
    return variants


def moto_clients(endpoint: str) -> MakeClient:
    """Clients of the moto server at ``endpoint``."""
    import boto3

    return lambda service: boto3.client(service, region_name=harness.REGION, endpoint_url=endpoint)


def _ids(n: int, ids: int) -> dict[str, str]:
    names = ["connection_id", "runtime_session_id", "code_interpreter_session_id"]
    names += ["browser_session_id"]
    # as AgentCore's API takes them: a runtime session 33-256 characters, a tool session
    # 1-40 letters and digits
    values = [f"conn-{n}=", f"runtime-{n:08d}-{'0' * 32}", f"ci{n:08d}", f"br{n:08d}"]
    return dict(zip(names[:ids], values[:ids], strict=True))


#: The handler's settings on moto here: the shared ``RetireGrant`` budget lifted (it paces
#: grants at 10 a second, which is not what is counted), and a time guard of 30 s (12 s a read; the
#: warm-up invocation has 60 s), not the default 10 s, whose call
#: timeouts (`session_expiry_runtime.core.clients.call_timeouts`: 3 s a read at the default
#: 10 s) a 100-action ``TransactWriteItems`` queued behind another in moto's one lock can
#: outlast on a loaded machine.
MOTO_ENV = {
    "SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET": "100000",
    "SESSION_EXPIRY_TIME_GUARD_MS": "30000",
}


def measure_checks(log: Any = sys.stderr) -> dict[int, dict[str, Any]]:
    """The real handler's ownership calls per session, one session alone and 100 in a batch."""
    out: dict[int, dict[str, Any]] = {}
    defaults = {"environment": {"SESSION_EXPIRY_MAX_WORKERS": "4"}, "timeout_s": 300}
    with tempfile.TemporaryDirectory(prefix="bench-ownership-") as tmp:
        moto = harness.MotoServer(Path(tmp) / "moto.log")
        try:
            for sessions in (1, 100):
                fx = harness.build_fixture(
                    moto, harness.Scenario("own", sessions, 0), f"c{sessions}"
                )
                r = throughput.run_case(
                    moto,
                    fx,
                    "handler",
                    module="session_expiry_runtime.handler",
                    env_overrides=MOTO_ENV,
                    latency_ms=0,
                    defaults=defaults,
                    workdir=Path(tmp),
                    timeline=True,
                )
                twi = [c for c in r.case["timeline"] if c[0] == "TransactWriteItems"]
                out[sessions] = {
                    "sessions": sessions,
                    "ids_per_session": 2,
                    "calls": len(twi) / sessions,
                    "actions": sum(int(c[1].split("x")[-1]) for c in twi) / sessions,
                    "ms": [(c[3] - c[2]) * 1000 for c in twi],
                    "clean": r.verification.clean and not r.case["failures"],
                }
                print(
                    f"  ownership check, {sessions} session(s): {out[sessions]['calls']:.2f} "
                    "TransactWriteItems a session",
                    file=log,
                    flush=True,
                )
        finally:
            moto.stop()
    return out


def usd(call: str, count: float = 1, items: int = 1) -> float:
    """``count`` calls of ``call`` ("service:Operation") priced by ``CALL_PRICES``;
    ``items``: the actions of a ``TransactWriteItems`` (priced per item)."""
    from cdk_session_expiry import cost

    price, units, _ = cost.CALL_PRICES[call]
    return count * units * items * cost.PRICES[price].usd


def lambda_duration_usd(ms: float, memory_mb: float) -> float:
    """Lambda's duration charge for ``ms`` (billed per 1 ms, rounded up) at ``memory_mb``."""
    from cdk_session_expiry import cost

    return math.ceil(ms) / 1000 * memory_mb / 1024 * cost.PRICES["lambda_gb_second"].usd


def modelled_ms(calls: list[tuple[str, str, str]], own_ms: float) -> float:
    """AWS latency of one create from its calls (each in turn: the registrar's calls run
    inside the application's ``Invoke``) and the registrar's own time ``own_ms``."""
    return sum(AWS_LATENCY[call][0] for _, call, _ in calls) + (
        own_ms if any(call == "lambda:Invoke" for _, call, _ in calls) else 0
    )


def registrar_ms_model(calls: list[tuple[str, str, str]], own_ms: float) -> float:
    """The registrar's billed duration: its own calls in turn, plus its own time."""
    return sum(AWS_LATENCY[call][0] for side, call, _ in calls if side == "registrar") + own_ms


def create_usd(v: dict[str, Any]) -> float:
    """$ per session of a create variant: its calls, plus the registrar's duration."""
    total = 0.0
    for _, call, kind in v["calls"]:
        items = int(kind.split(" actions")[0]) if kind.endswith("actions") else 1
        total += usd(call, items=items)
    if v["registrar"]:
        total += lambda_duration_usd(v["registrar_billed_ms"], REGISTRAR_MEMORY_MB)
    return total


def _summary(variant: Variant) -> dict[str, Any]:
    """One variant's counts, local latencies and its AWS model and price per session."""
    registrar = any(call == "lambda:Invoke" for _, call, _ in variant.calls)
    own = statistics.median(variant.own_ms) if registrar else 0.0
    v: dict[str, Any] = {
        "name": variant.name,
        "calls": variant.calls,
        "wall_ms": variant.wall_ms,
        "registrar": registrar,
        "own_ms": own,
        "modelled_ms": modelled_ms(variant.calls, own),
        "registrar_billed_ms": registrar_ms_model(variant.calls, own) if registrar else 0.0,
    }
    v["usd"] = create_usd(v)
    return v


def run(log: Any = sys.stderr, creates: int = CREATES) -> dict[str, Any]:
    """Every measurement of the module docstring; the load average around them."""
    harness.aws_env()
    out: dict[str, Any] = {"load_before": os.getloadavg(), "creates": {}, "creates_n": creates}
    with tempfile.TemporaryDirectory(prefix="bench-ownership-create-") as tmp:
        moto = harness.MotoServer(Path(tmp) / "moto.log")
        try:
            for ids in (1, MANY_IDS):
                made = measure_creates(moto_clients(moto.endpoint), ids, creates)
                out["creates"][str(ids)] = [_summary(v) for v in made]
                print(f"  create with {ids} id(s): measured", file=log, flush=True)
        finally:
            moto.stop()
    out["checks"] = {str(k): v for k, v in measure_checks(log).items()}
    out["load_after"] = os.getloadavg()
    return out


def _span(values: list[float], fmt: str = "{:.1f}") -> str:
    lo, hi = min(values), max(values)
    return (
        fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"
    )


def _calls_text(calls: list[tuple[str, str, str]]) -> str:
    counted = Counter((side, call, kind) for side, call, kind in calls)
    return "; ".join(
        f"{side}: {n} × {call.split(':')[1]}" + (f" ({kind})" if kind else "")
        for (side, call, kind), n in counted.items()
    )


def create_table(data: dict[str, Any]) -> str:
    """Recording: each create variant's calls, latency against moto, AWS model and price."""
    rows = [
        "| `SessionStore.create` | Ids recorded | Calls per session, by who makes them (service "
        "call, kind) | Calls | Against moto, ms (p50; min–max) | Modelled on AWS, ms | $ per "
        "million sessions (calls + registrar duration) |",
        "|---|---|---|---|---|---|---|",
    ]
    for ids, variants in data["creates"].items():
        for v in variants:
            wall = v["wall_ms"]
            rows.append(
                f"| {v['name']} | {ids} | {_calls_text(v['calls'])} | **{len(v['calls'])}** | "
                f"{statistics.median(wall):.1f}; {_span(wall)} | **{v['modelled_ms']:.0f}** | "
                f"**${v['usd'] * 1e6:.2f}** |"
            )
    return "\n".join(rows)


def check_table(data: dict[str, Any]) -> str:
    """Checking: the cleanup's ownership calls per session, alone and in a batch of 100."""
    wcu = usd("dynamodb:TransactWriteItems")
    rows = [
        "| Sessions in the invocation | Ids per session | TransactWriteItems per session (marks "
        "+ releases) | Actions per session | Minimum (a cleanup trusting the record) | Against "
        "moto, ms a call (min–max) | Modelled on AWS: round trips added to the invocation | $ "
        "per million sessions |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lat = AWS_LATENCY["dynamodb:TransactWriteItems"][0]
    for check in data["checks"].values():
        rows.append(
            f"| {check['sessions']} | {check['ids_per_session']} | **{check['calls']:.2f}** | "
            f"{check['actions']:g} | 0 | {_span(check['ms'])} | 2 (marks, then releases; "
            f"{2 * lat:.0f} ms) | **${check['actions'] * wcu * 1e6:.2f}** |"
        )
    return "\n".join(rows)


def notes(data: dict[str, Any]) -> str:
    """How to read the two tables: the model's sources and assumptions."""
    model = "; ".join(f"`{call}` {ms:g} ms — {why}" for call, (ms, why) in AWS_LATENCY.items())
    return (
        f"{data['creates_n']} sessions per row (after one untimed, which loads each client's "
        "model), against moto on this machine with no latency injected: **moto's latency is "
        "not AWS's** (it builds each answer in Python, one request at a time, on a shared "
        "machine) — read those columns for the ratio between rows, not as a latency. The "
        "registrar's `Invoke` is answered in process by the real `Registrar.handle` (moto "
        "cannot run a function here); its own time (the `Invoke`'s wall time less its calls') "
        "is added to the model and billed as its duration at "
        f"{REGISTRAR_MEMORY_MB} MiB. Modelled AWS latency per call, each in turn: {model}. "
        "Prices: `cdk_session_expiry.cost.CALL_PRICES` (a `PutItem` of an item up to 1 KB "
        "is one write unit, plus one per index the item is in — the same for every row; a "
        "`TransactWriteItems` two per action; a strongly consistent `GetItem` one read "
        "unit; an `Invoke` one Lambda request, plus the duration). The cleanup's check: "
        "the real handler on a batch built by the real store in moto (each session with a "
        "WebSocket connection and a KMS grant: two ids), `SESSION_EXPIRY_MAX_WORKERS=4` as the "
        "moto reference runs; each id is marked `releasing` before its step acts and marked "
        "`released` after it succeeded (docs/ownership.md), the marks of a batch sent at once "
        "and so are its releases: two round trips per invocation, whatever its size."
    )


def goal_rows(data: dict[str, Any]) -> list[list[str]]:
    """The goals of issue 35's bench line: each figure stated beside its minimum."""
    rows = []
    for ids, variants in data["creates"].items():
        reg = next(v for v in variants if v["registrar"])
        low = next(v for v in variants if v["name"].startswith("minimum"))
        rows.append(
            [
                f"Recording ownership at `SessionStore.create` ({ids} id{'s' * (ids != '1')}), "
                "beside its minimum (no ownership: one `PutItem`)",
                f"{len(reg['calls'])} calls vs {len(low['calls'])}; {reg['modelled_ms']:.0f} ms "
                f"vs {low['modelled_ms']:.0f} ms modelled on AWS; ${reg['usd'] * 1e6:.2f} vs "
                f"${low['usd'] * 1e6:.2f} per million sessions",
                "stated",
                _stated(bool(reg["calls"]) and bool(low["calls"])),
            ]
        )
    wcu = usd("dynamodb:TransactWriteItems")
    for check in data["checks"].values():
        rows.append(
            [
                f"Checking ownership in the cleanup, {check['sessions']} session(s) an "
                "invocation, beside its minimum (trusting the record: none)",
                f"{check['calls']:.2f} `TransactWriteItems` a session vs 0; 2 round trips an "
                f"invocation vs 0; ${check['actions'] * wcu * 1e6:.2f} vs $0 per million "
                "sessions",
                "stated",
                _stated(check["clean"]),
            ]
        )
    return rows


def _stated(ok: bool) -> str:
    return "met" if ok else "**not met**"


def tables(data: dict[str, Any]) -> str:
    return f"{create_table(data)}\n\n{check_table(data)}\n\n{notes(data)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ownership_cost", description=__doc__)
    parser.add_argument("--creates", type=int, default=CREATES)
    args = parser.parse_args(argv)
    data = run(creates=args.creates)
    print(
        f"load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in data['load_before'])};"
        f" after: {', '.join(f'{x:.2f}' for x in data['load_after'])}\n"
    )
    print(tables(data))
    print()
    for row in goal_rows(data):
        print("| " + " | ".join(row) + " |")
    return 0 if all(c["clean"] for c in data["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
