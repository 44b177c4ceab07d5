"""Expiry by tenant: the tenant in every EMF document of a tenant-scoped session.

Real sessions in moto, real stream records, the real ``process_batch``; the EMF lines read back
from stdout as CloudWatch Logs would receive them. The one answer moto does not give — a
``DeleteConnection`` refused with ``ForbiddenException`` (moto never refuses) — is stubbed
through botocore's event system (``runtime_faults``), and says so.
"""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
from typing import Any

import pytest
from ownership_support import put_claim
from runtime_faults import answer, rest_json_error
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.core.config import DIMENSION_TENANT
from session_expiry_runtime.core.metrics import MAX_TENANT_CHARACTERS, MetricsRecorder, tenant_text
from session_expiry_runtime.core.ownership import KIND_GRANT

from cdk_session_expiry import tenant_metrics


def documents(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


def metric_names(doc: dict[str, Any]) -> set[str]:
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    return {m["Name"] for m in directive["Metrics"]}


def run(sandbox: Sandbox, capsys: pytest.CaptureFixture[str], cleaner: Any = None) -> list[Any]:
    cleaner = cleaner or sandbox.cleaner()
    capsys.readouterr()
    response = process_batch(event(*sandbox.removes()), FakeContext(), cleaner)
    return [response, documents(capsys.readouterr().out)]


def test_every_document_of_a_tenant_scoped_session_carries_its_tenant(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox.create_session("s-1", tenant="acme", expires_at=1)
    sandbox.read_stream()
    sandbox.delete("s-1")

    response, docs = run(sandbox, capsys)

    assert response == {"batchItemFailures": []}
    assert docs  # SessionsCleaned, TtlLagSeconds, ScratchObjectsDeleted ...
    assert all(doc[DIMENSION_TENANT] == "acme" for doc in docs)
    cleaned = [d for d in docs if "SessionsCleaned" in metric_names(d)]
    assert [(d["Reason"], d["SessionsCleaned"]) for d in cleaned] == [("deleted-after-expiry", 1)]
    # A property, not a dimension (by default): the alarms' metrics are unchanged.
    assert cleaned[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Reason"]]


def test_sessions_of_two_tenants_and_none_are_counted_apart(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox.create_session("s-1", tenant="acme")
    sandbox.create_session("s-2", tenant="acme")
    sandbox.create_session("s-3", tenant="globex")
    sandbox.create_session("s-4")  # no tenant attribute
    sandbox.read_stream()
    for sid in ("s-1", "s-2", "s-3", "s-4"):
        sandbox.delete(sid)

    _, docs = run(sandbox, capsys)

    cleaned = {
        d.get(DIMENSION_TENANT): d["SessionsCleaned"]
        for d in docs
        if "SessionsCleaned" in metric_names(d)
    }
    assert cleaned == {"acme": 2, "globex": 1, None: 1}


def test_failed_and_refused_sessions_carry_their_tenant(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = sandbox.create_session("s-1", tenant="acme")
    refused = sandbox.create_session("s-2", tenant="globex")
    # Another session's ownership record now names s-2's grant: refused (NotOwned).
    put_claim(sandbox.ddb, KIND_GRANT, refused.grant_id, key={"pk": "s-9"}, incarnation="i-9")
    sandbox.read_stream()
    sandbox.delete("s-1")
    sandbox.delete("s-2")
    cleaner = sandbox.cleaner()
    # Stub: moto never refuses DeleteConnection; AWS answers ForbiddenException (HTTP 403).
    answer(
        cleaner.clients.apigateway,
        "DeleteConnection",
        lambda r: (
            rest_json_error(403, "ForbiddenException")
            if failing.connection_id.rstrip("=") in r.url
            else None
        ),
    )

    response, docs = run(sandbox, capsys, cleaner)

    assert len(response["batchItemFailures"]) == 1
    failures = [d for d in docs if "CleanupFailures" in metric_names(d)]
    assert [(d[DIMENSION_TENANT], d["Action"]) for d in failures] == [("acme", "DeleteConnection")]
    refusals = [d for d in docs if "ResourcesRefused" in metric_names(d)]
    assert [(d[DIMENSION_TENANT], d["Refusal"], d["ResourcesRefused"]) for d in refusals] == [
        ("globex", "NotOwned", 1)
    ]


def contributors(rule: dict[str, Any], docs: list[dict[str, Any]]) -> dict[str, float]:
    """What a Contributor Insights rule (``CloudWatchLogRule``, JSON, one key, ``Sum``) makes of
    log events: the sum of ``ValueOf`` by key over the events every filter matches. The rule's
    paths are ``$.<member>``: the EMF documents are flat at the root.

    The emulator creates no insight rules (moto has no Contributor Insights), so the rule body
    the construct synthesizes is evaluated here, on the cleanup's real log lines."""
    contribution = rule["Contribution"]
    assert rule["LogFormat"] == "JSON" and rule["AggregateOn"] == "Sum"

    def member(doc: dict[str, Any], path: str) -> Any:
        assert path.startswith("$.") and "." not in path[2:]
        return doc.get(path[2:])

    def matches(doc: dict[str, Any], flt: dict[str, Any]) -> bool:
        value = member(doc, flt["Match"])
        if "IsPresent" in flt:
            return (value is not None) == flt["IsPresent"]
        if "GreaterThan" in flt:
            return isinstance(value, (int, float)) and value > flt["GreaterThan"]
        raise AssertionError(f"filter not evaluated here: {flt}")

    totals: dict[str, float] = {}
    (key,) = contribution["Keys"]
    for doc in docs:
        if all(matches(doc, flt) for flt in contribution["Filters"]):
            tenant = member(doc, key)
            totals[tenant] = totals.get(tenant, 0) + member(doc, contribution["ValueOf"])
    return totals


def test_the_contributor_insights_rules_rank_tenants_from_the_cleanups_log_lines(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    for sid, tenant in (("s-1", "acme"), ("s-2", "acme"), ("s-3", "globex"), ("s-4", None)):
        session = sandbox.create_session(sid, tenant=tenant)
        if sid == "s-3":
            put_claim(
                sandbox.ddb, KIND_GRANT, session.grant_id, key={"pk": "s-9"}, incarnation="i-9"
            )
    sandbox.read_stream()
    for sid in ("s-1", "s-2", "s-3", "s-4"):
        sandbox.delete(sid)
    cleaner = sandbox.cleaner()
    answer(  # Stub: moto never refuses DeleteConnection (see test_failed_and_refused_...)
        cleaner.clients.apigateway,
        "DeleteConnection",
        lambda r: rest_json_error(403, "ForbiddenException") if "/s-2-" in r.url else None,
    )

    _, docs = run(sandbox, capsys, cleaner)

    rules = {
        rule_id: tenant_metrics.rule_body("/aws/lambda/cleanup", metric)
        for rule_id, metric in tenant_metrics.RULES
    }
    assert contributors(rules["TopTenantsCleaned"], docs) == {"acme": 1, "globex": 1}
    assert contributors(rules["TopTenantsFailed"], docs) == {"acme": 1}
    assert contributors(rules["TopTenantsRefused"], docs) == {"globex": 1}


def test_the_opt_in_tenant_dimension_adds_a_dimension_set(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox.create_session("s-1", tenant="acme")
    sandbox.create_session("s-2")
    sandbox.read_stream()
    sandbox.delete("s-1")
    sandbox.delete("s-2")
    config = dataclasses.replace(sandbox.config, metrics_tenant_dimension=True)
    cleaner = sandbox.cleaner(config)
    cleaner.metrics.tenant_dimension = True  # as the handler builds it from the config

    _, docs = run(sandbox, capsys, cleaner)

    sets = {
        d.get(DIMENSION_TENANT): d["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
        for d in docs
        if "SessionsCleaned" in metric_names(d)
    }
    # Aggregate and per tenant for the tenant's session; the aggregate only without a tenant.
    assert sets == {"acme": [["Reason"], ["Reason", "Tenant"]], None: [["Reason"]]}


def test_the_handler_reads_the_tenant_dimension_from_its_environment(
    monkeypatch: pytest.MonkeyPatch, fresh_handler: None, aws: None
) -> None:
    from session_expiry_runtime import handler as handler_module

    sandbox = Sandbox()
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SESSION_EXPIRY_METRICS_TENANT_DIMENSION", "true")

    assert handler_module.get_cleaner().metrics.tenant_dimension is True


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("acme", "acme"),
        (Decimal("42"), "42"),
        (7, "7"),
        ({"b", "a"}, '["a","b"]'),
        (True, "true"),
        ("", None),
        (None, None),
    ],
)
def test_tenant_text(value: object, text: str | None) -> None:
    assert tenant_text(value) == text


def test_a_long_tenant_is_cut_to_the_longest_dimension_value() -> None:
    assert tenant_text("t" * 2000) == "t" * MAX_TENANT_CHARACTERS


def test_a_view_shares_the_recorders_totals_and_flush_resets_them() -> None:
    recorder = MetricsRecorder("ns")
    recorder.for_tenant("acme").session_cleaned("ttl")
    recorder.session_cleaned("ttl")
    assert recorder.snapshot() == {"SessionsCleaned|Reason=ttl": 2}
    written: list[str] = []
    docs = recorder.flush(written.append)
    assert [d.get(DIMENSION_TENANT) for d in docs] == [None, "acme"]
    assert recorder.documents() == []


def test_a_count_made_while_flush_writes_is_kept_for_the_next_flush() -> None:
    # Another thread of the process (a record thread still running, a sweep sharing the
    # recorder) counts between the documents being taken and the recorder being reset: that
    # count must go out with the next flush, not be cleared unwritten.
    recorder = MetricsRecorder("ns")
    recorder.session_cleaned("ttl")
    recorder.for_tenant("acme").ttl_lag(3)

    written: list[str] = []

    def write_while_another_thread_counts(line: str) -> None:
        if not written:
            recorder.session_cleaned("explicit")
            recorder.for_tenant("acme").ttl_lag(5)
        written.append(line)

    recorder.flush(write_while_another_thread_counts)
    assert '"Reason":"ttl"' in written[0] and '"TtlLagSeconds":[3.0]' in written[1]
    assert recorder.snapshot() == {"SessionsCleaned|Reason=explicit": 1, "TtlLagSeconds": [5.0]}
