"""The cost model (``cdk_session_expiry.cost``): its arithmetic against hand-computed cases, one
per service, and a guard that every AWS operation the runtime calls has a price entry (so a new
call cannot be free by omission)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore import xform_name

from cdk_session_expiry import cost
from cdk_session_expiry._runtime_contract import CLEANUP_HANDLER
from cdk_session_expiry.cost import Options, alternatives, monthly_cost, options_from_template
from cdk_session_expiry.sweeper import DEFAULT_SWEEP_WORKERS, DEFAULT_SWEEPER_MEMORY_SIZE

REPO = Path(__file__).resolve().parents[1]
RUNTIME = REPO / "lambda_src" / "session_expiry_runtime"
SAMPLE = REPO / "tests" / "infra" / "snapshots" / "sample_app.json"

#: Nothing but what a case turns on: no connection, no scratch, no logs' share.
BARE: dict[str, Any] = dict(
    connection=False, scratch=False, cpu_ms=0.0, latency_ms=0.0, heartbeats=0
)


def _service(o: Options, key: str) -> float:
    return float(monthly_cost(o)["per_service"][key])


def test_lambda_requests_and_duration_hand_computed() -> None:
    # 1,000,000 sessions, 10 per invocation: 100,000 requests x $0.20/M = $0.02.
    # Invocation: 4 x 20 ms + 10 x 5 ms at 1,769 MB (1 vCPU) = 130 ms; 1,769/1,024 GB x 0.13 s
    # = 0.22458 GB-s per invocation x 100,000 = 22,458 GB-s x $0.0000133334 = $0.29944.
    o = Options(**{**BARE, "cpu_ms": 5.0, "latency_ms": 20.0}, sessions_per_invocation=10)
    assert _service(o, "lambda_request") == pytest.approx(0.02)
    assert _service(o, "lambda_gb_second") == pytest.approx(
        1769 / 1024 * 0.13 * 100_000 * 0.0000133334
    )
    assert _service(o, "lambda_gb_second") == pytest.approx(0.29944, rel=1e-4)


def test_lambda_below_one_vcpu_takes_longer_for_the_same_cost_per_cpu() -> None:
    # 884.5 MB is half a vCPU: 10 ms of CPU takes 20 ms; 0.8638 GB x 0.02 s x 1M = 17,275 GB-s.
    o = Options(**{**BARE, "cpu_ms": 10.0}, memory_mb=884)
    assert _service(o, "lambda_gb_second") == pytest.approx(
        884 / 1024 * (10 / (884 / 1769)) / 1000 * 1e6 * 0.0000133334
    )


def test_dynamodb_ownership_writes_hand_computed() -> None:
    # A connection and a grant: 2 records. Create: the item and 2 records in one transaction,
    # 3 x 2 = 6 units instead of a PutItem's 1 (+5); cleanup: mark and release each record in a
    # transaction, 2 x 2 x 2 = 8; the RetireGrant's request of the shared budget (an UpdateItem
    # of the pace counter) 1. 14 write units x 1M x $0.625/M = $8.75.
    o = Options(**{**BARE, "connection": True}, grant=True)
    assert _service(o, "dynamodb_write_unit") == pytest.approx(8.75)
    # 100 sessions an invocation: the batch reserves its grants' requests in one UpdateItem
    # (issue 38), 0.01 a session: 13.01 units x $0.625 = $8.13125.
    batched = Options(**{**BARE, "connection": True}, grant=True, sessions_per_invocation=100)
    assert _service(batched, "dynamodb_write_unit") == pytest.approx(8.13125)


def test_dynamodb_sweeper_index_writes_hand_computed() -> None:
    # No records; the sweep index: 1 at create, 2 per heartbeat (the expiry moves: delete and
    # put of the entry), the sweep's DeleteItem of item and entry 2. 3 heartbeats: 1 + 6 + 2 = 9
    # units x 1M x $0.625/M = $5.625.
    o = Options(**{**BARE, "heartbeats": 3}, sweep_interval_s=5, sweeper_memory_mb=512)
    assert _service(o, "dynamodb_write_unit") == pytest.approx(5.625)


def test_sweeper_month_hand_computed() -> None:
    # 5 s: 43,200 runs (one a minute) billed 55.1 s at 0.5 GB: 1,190,160 GB-s x $0.0000133334
    # = $15.8690; 12 passes x 4 shards x 0.5 read unit x 43,200 = 1,036,800 units = $0.1296;
    # 43,200 requests = $0.00864. Total $16.0072. (At 256 MB: $8.07, docs/benchmarks.md.)
    o = Options(**BARE, sweep_interval_s=5, sweeper_memory_mb=512, sweep_workers=1)
    assert monthly_cost(o)["fixed"]["expiry sweeper (every 5 s)"] == pytest.approx(16.0072, 1e-4)
    assert cost.sweeper_monthly(5, 256) == pytest.approx(8.07, abs=0.01)
    # 5 min: 8,640 runs x 0.2 s x 0.5 GB = 864 GB-s = $0.01152; 8,640 x 4 x 0.5 units = $0.00216;
    # requests $0.001728.
    assert cost.sweeper_monthly(300, 512) == pytest.approx(0.015408, 1e-4)


def test_fanned_out_sweeper_month_hand_computed() -> None:
    # 4 workers at 1,024 MB, 5 s: 4 x 43,200 runs x 55.1 s x 1 GB = 9,521,280 GB-s x
    # $0.0000133334 = $126.9510; reads as for one worker (every pass Queries the 4 shards once
    # across the workers) $0.1296; 172,800 requests = $0.03456. Total $127.1152.
    o = Options(**BARE, sweep_interval_s=5, sweeper_memory_mb=1024, sweep_workers=4)
    assert monthly_cost(o)["fixed"]["expiry sweeper (every 5 s)"] == pytest.approx(127.1152, 1e-4)
    # 8 shards double the reads: + $0.1296.
    assert cost.sweeper_monthly(5, 1024, 4, 8) - cost.sweeper_monthly(5, 1024, 4, 4) == (
        pytest.approx(0.1296, 1e-3)
    )


def test_kms_grant_hand_computed() -> None:
    # CreateGrant + RetireGrant: 2 requests x 1M x $0.03 per 10,000 = $6.00.
    assert _service(Options(**BARE, grant=True), "kms_request") == pytest.approx(6.0)


def test_s3_listing_pages_and_archive_hand_computed() -> None:
    # 2,500 objects: 3 ListObjectsV2 pages + 1 archive PutObject = 4 x 1M x $0.005/1,000 = $20;
    # 3 DeleteObjects are free.
    o = Options(**{**BARE, "scratch": True}, objects=2500, archive=True)
    assert _service(o, "s3_put_list") == pytest.approx(20.0)
    assert _service(o, "s3_delete") == 0.0


def test_eventbridge_custom_events_hand_computed() -> None:
    # One event per session: 1M x $1.00/M = $1.00.
    assert _service(Options(**BARE, event_bus=True), "events_custom") == pytest.approx(1.0)


def test_cloudwatch_metrics_alarms_and_logs_hand_computed() -> None:
    # 16 metrics x $0.30 + 12 alarms x $0.10 = $6.00 a month; logs: 1M invocations x 1,500 B
    # = 1.5 GB x $0.50 = $0.75.
    o = Options(**BARE, alarms=12)
    fixed = monthly_cost(o)["fixed"]
    assert fixed["CloudWatch metrics"] + fixed["CloudWatch alarms"] == pytest.approx(6.0)
    assert _service(o, "logs_gb") == pytest.approx(0.75)


def test_alternatives_hand_computed() -> None:
    # Nothing but the trigger differs from a bare session: Scheduler 1M invocations x $1/M;
    # Step Functions (2 heartbeats + 2) transitions x 1M x $0.025/1,000 = $100; durable
    # functions 3 operations x 1M x $8/M + 1M more invocations x $0.20/M = $24.20, whatever the
    # heartbeats (a heartbeat adds no operation).
    o = Options(**{**BARE, "heartbeats": 2})
    alt = alternatives(o)
    common = monthly_cost(o)["total"]
    assert alt["EventBridge Scheduler"] - common == pytest.approx(1.0)
    assert alt["Step Functions (Standard)"] - common == pytest.approx(100.0)
    assert alt["Lambda durable functions"] - common == pytest.approx(24.20)
    many = Options(**{**BARE, "heartbeats": 50})
    assert alternatives(many)["Lambda durable functions"] - monthly_cost(many)[
        "total"
    ] == pytest.approx(24.20)


def test_options_from_the_sample_apps_template() -> None:
    o = options_from_template(json.loads(SAMPLE.read_text()), sessions=5)
    assert (o.memory_mb, o.connection, o.grant, o.scratch) == (1769, True, True, True)
    assert (o.archive, o.event_bus, o.grant_sweep, o.sweep_interval_s) == (True, True, True, 300)
    # 12, plus feature_flags' read-failures, deferred-work-age and deferred-work-refused alarms,
    # plus the claim registrar's refused-requests and errors alarms (issue 35), plus the grant
    # key's ceiling (issue 38)
    assert o.alarms == 18 and o.sessions == 5
    assert o.sweeper_memory_mb == DEFAULT_SWEEPER_MEMORY_SIZE
    assert (o.sweep_workers, o.sweep_shards) == (DEFAULT_SWEEP_WORKERS, 4)


def test_the_command_prints_the_bill_for_a_template(capsys: pytest.CaptureFixture[str]) -> None:
    assert cost.main(["--template", str(SAMPLE), "--sessions", "1000000"]) == 0
    out = capsys.readouterr().out
    assert "kms_request" in out and "https://aws.amazon.com/kms/pricing/" in out
    assert "EventBridge Scheduler" in out and "Total: $" in out


def test_fails_on_a_template_without_a_cleanup_function(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="no cleanup function"):
        options_from_template({"Resources": {}})
    bad = REPO / "pyproject.toml"  # not a template
    assert cost.main(["--template", str(bad)]) == 2
    assert "cdk_session_expiry.cost" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("sessions", -1, "sessions=-1: expected at least 0"),
        ("memory_mb", 64, "memory_mb=64: expected at least 128"),
        ("sessions_per_invocation", 0, "sessions_per_invocation=0: expected at least 1"),
        ("sweep_interval_s", 0, "sweep_interval_s=0: expected seconds > 0"),
    ],
)
def test_fails_on_out_of_range_options(field: str, value: int, expected: str) -> None:
    with pytest.raises(ValueError, match=re.escape(expected)):
        Options(**dict[str, Any]({field: value}))


def _called_operations() -> set[tuple[str, str]]:
    """(service, Operation) of every botocore operation whose method name (``.retire_grant(``)
    or name string (``"stop_runtime_session"``) appears in the runtime, for every service the
    runtime builds a client of."""
    source = "\n".join(p.read_text() for p in RUNTIME.rglob("*.py"))
    services = set(re.findall(r'client\(\s*"([a-z0-9-]+)"', source))
    session = botocore.session.get_session()
    called = set()
    for service in services:
        for op in session.get_service_model(service).operation_names:
            snake = xform_name(op)
            if re.search(rf'\.{snake}\(|"{snake}"', source):
                called.add((service, op))
    return called


def test_every_call_in_the_runtime_has_a_price_entry() -> None:
    called = _called_operations()
    assert ("kms", "RetireGrant") in called and ("dynamodb", "TransactWriteItems") in called
    priced_ops = {key.split(":", 1)[1] for key in cost.CALL_PRICES}
    # A name two services share (events' and API Gateway's DeleteConnection) is priced once.
    missing = sorted(
        f"{s}:{op}"
        for s, op in called
        if f"{s}:{op}" not in cost.CALL_PRICES and op not in priced_ops
    )
    assert not missing, f"calls without a price entry in cdk_session_expiry.cost: {missing}"
    for key, (price, units, _) in cost.CALL_PRICES.items():
        assert price in cost.PRICES, f"{key}: no price {price!r}"
        assert units > 0, key


# --- the command: --help without the jsii runtime, and what it does not price (issue 39) -------


def test_help_answers_without_node(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    empty = tmp_path / "bin-without-node"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "JSII_NODE"}
    env["PATH"] = str(empty)
    done = subprocess.run(
        [sys.executable, "-m", "cdk_session_expiry.cost", "--help"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--agentcore-stops" in done.stdout and "not priced:" in done.stdout
    assert done.stderr == ""  # no jsii runtime: no traceback, no Node.js banner
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, cdk_session_expiry.cost; print('aws_cdk' in sys.modules)",
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert imported.stdout.strip() == "False", imported.stderr


def _template_with_unpriced_resources() -> dict[str, Any]:
    from aws_cdk import App, Stack
    from aws_cdk import aws_s3 as s3
    from aws_cdk.assertions import Template

    from cdk_session_expiry import SessionExpiry

    stack = Stack(App(), "Priced")
    sessions = SessionExpiry(
        stack,
        "Sessions",
        feature_flags=True,
        archive_bucket=s3.Bucket(stack, "Archive"),
        archive_query=True,
        circuit_breaker=True,
    )
    sessions.add_dashboard()
    return dict(Template.from_stack(stack).to_json())


def test_the_not_priced_line_names_each_type_the_bill_leaves_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = _template_with_unpriced_resources()
    path = tmp_path / "Priced.template.json"
    path.write_text(json.dumps(template))
    assert cost.main(["--template", str(path)]) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith("not priced: ")
    named = last.removeprefix("not priced: ").split(", ")
    for unpriced in (
        "AWS::AppConfig::Application",
        "AWS::AppConfig::Environment",
        "AWS::AppConfig::ConfigurationProfile",
        "AWS::CloudWatch::Dashboard",
        "AWS::Glue::Database",
        "AWS::Glue::Table",
        "AWS::Athena::WorkGroup",
        "AWS::Athena::NamedQuery",
        "AWS::S3::Bucket",
        "AWS::Lambda::Function (session_expiry_runtime.switches.pause_watch.handler)",
        "AWS::Lambda::Function (session_expiry_runtime.switches.circuit_breaker.handler)",
    ):
        assert unpriced in named, unpriced
    # Every type in the template is either priced or named, and nothing priced is named.
    types = {r["Type"] for r in template["Resources"].values()}
    named_types = {n.split(" (")[0] for n in named}
    assert types <= set(cost.PRICED_RESOURCE_TYPES) | named_types
    assert not named_types & set(cost.PRICED_RESOURCE_TYPES)
    assert f"AWS::Lambda::Function ({CLEANUP_HANDLER})" not in named


def test_a_template_of_priced_resources_has_no_not_priced_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cdk_session_expiry import _runtime_contract as contract

    template = {
        "Resources": {
            "Cleanup": {
                "Type": "AWS::Lambda::Function",
                "Properties": {"Handler": contract.CLEANUP_HANDLER, "MemorySize": 1769},
            },
            "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Alarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": {}},
        }
    }
    assert cost.unpriced_resources(template) == []
    path = tmp_path / "t.json"
    path.write_text(json.dumps(template))
    assert cost.main(["--template", str(path)]) == 0
    assert "not priced" not in capsys.readouterr().out
