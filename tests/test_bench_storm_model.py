"""The storm's simulated clock (``bench/storm_model.py``) and its inputs (``storm_report``):
hand-computed capacities, the settings the construct deploys, grants retired on disconnect."""

from __future__ import annotations

import pytest

from bench import storm_model as sm
from bench import storm_report as sr
from cdk_session_expiry._runtime_contract import DEFAULT_KMS_RETIRE_GRANT_BUDGET
from cdk_session_expiry.construct import DEFAULT_PARALLELIZATION_FACTOR

OWNERSHIP = "Ownership table write units (TransactWriteItems, 2 per record) (4,000/s)"


def _data(cpu_s: float = 0.004, budget_writes: int = 1_000) -> dict:
    """A storm run of 1,000 sessions with a connection, a grant and a scratch prefix each;
    ``budget_writes`` of the shared RetireGrant budget (one a grant without reservations)."""
    n = 1_000
    calls = {
        "DeleteConnection": n,
        "RetireGrant": n,
        "UpdateItem": budget_writes,
        "ListObjectsV2": n,
        "TransactWriteItems": 40,
    }
    return {
        "sizes": [n],
        "sweeper_cpu_per_delete_s": [0.001],
        "cleanup_cpu_s": [cpu_s],
        "calls": {str(n): {"cleanup_calls": calls}},
    }


def test_the_model_deploys_the_constructs_defaults() -> None:
    settings = sm.Settings()
    assert settings.parallelization_factor == DEFAULT_PARALLELIZATION_FACTOR == 2
    assert settings.rate("RetireGrant") == DEFAULT_KMS_RETIRE_GRANT_BUDGET == 10
    assert settings.rate("OwnershipWriteUnits") == 4_000


def test_retire_grant_rate_is_the_budget_never_above_kms_quota() -> None:
    assert sm.Settings(retire_grant_budget=33).rate("RetireGrant") == 33
    assert sm.Settings(retire_grant_budget=500).rate("RetireGrant") == sm.KMS_RETIRE_GRANT_QUOTA


def test_ownership_write_units_per_session() -> None:
    # A connection only: one record marked and released, 2 units each time.
    connection = sr.measured(_data(), 1_000, grants=False)
    assert "UpdateItem" not in connection.calls_per_session  # went with the grant
    assert connection.ownership_units == pytest.approx(4.0)
    # A connection and a grant: two records (8) and the budget's UpdateItem (1).
    both = sr.measured(_data(), 1_000)
    assert both.ownership_units == pytest.approx(9.0)
    # With each batch of 100 reserving its grants' requests in one write (issue 38): 8.01.
    reserved = sr.measured(_data(budget_writes=10), 1_000)
    assert reserved.ownership_units == pytest.approx(8.01)
    rates = sm.stage_rates(sm.Settings(), connection)
    assert rates[OWNERSHIP] == pytest.approx(1_000.0)
    warm = sm.stage_rates(sm.Settings(ownership_write_units=12_000), connection)
    assert warm["Ownership table write units (TransactWriteItems, 2 per record) (12,000/s)"] == (
        pytest.approx(3_000.0)
    )


def test_grants_retired_on_disconnect_come_off_the_cleanup() -> None:
    m = sr.measured(_data(), 1_000, disconnected=0.9)
    assert m.calls_per_session["RetireGrant"] == pytest.approx(0.1)
    assert m.calls_per_session["UpdateItem"] == pytest.approx(0.1)
    assert m.calls_per_session["DeleteConnection"] == pytest.approx(0.1)
    assert m.calls_per_session["ListObjectsV2"] == pytest.approx(1.0)
    assert m.claims_per_session == pytest.approx(0.2)
    assert m.retired_on_disconnect == pytest.approx(0.9)
    # 4.04 calls a session become 1.304: the CPU shrinks with them.
    assert m.cleanup_cpu_s == pytest.approx(0.004 * 1.304 / 4.04)


def test_grants_drain_at_the_shared_budget() -> None:
    """1,000 grants at 10 a second: about 100 s after the first sweeper pass, and no second of
    the simulation spends more than the budget (the calls go out when the budget grants them)."""
    out = sm.simulate(1_000, sm.Settings(), sr.measured(_data(), 1_000))
    assert out.first_limit() == "the shared RetireGrant budget (10/s)"
    assert 100 <= out.drained_s <= 100 + 5 + 5
    assert out.peak_rate("RetireGrant") <= 11  # one second's edge may hold an 11th


def test_two_batches_per_shard_let_the_ownership_table_bind() -> None:
    """With a slow cleanup (5 ms a session) one batch per shard binds below the ownership
    table's 1,000 sessions a second; two do not."""
    data = _data(cpu_s=0.010)  # 5 ms for a session with a connection only
    m = sr.measured(data, 1_000, grants=False)
    one = sm.stage_rates(sm.Settings(parallelization_factor=1), m)
    two = sm.stage_rates(sm.Settings(parallelization_factor=2), m)
    cpu = "cleanup CPU (shards × parallelization × vCPU ÷ CPU per session)"  # noqa: RUF001
    assert min(one, key=one.__getitem__) == cpu
    assert min(two, key=two.__getitem__) == OWNERSHIP


def test_a_run_cut_by_its_time_guard_is_continued_by_the_next_minutes_run() -> None:
    """Below a minute the sweeper runs on ``rate(1 minute)``: runs start a minute apart. The
    storm fell due as one run's first pass began (at 0); that run stops once 55.5 s have passed
    since it began (the page in progress finishes) and the next run, at 60 s, continues."""
    latency = sm.Latency()
    assert sm.Settings().sweeper_run_s == 55.5
    # A page of 500 deletes takes 0.75 s (1.5 ms each), its Query 10 ms: 0.76 s a page from
    # the first pass at 5 s, so the 67th page ends at 55.92 s, past the guard.
    times = sm._worker_times(40_000, 0.0015, sm.Settings(), latency)
    assert len(times) == 40_000
    first = [t for t in times if t < sm.RUN_PERIOD_S]
    assert len(first) == 67 * 500
    assert max(first) == pytest.approx(5 + 67 * 0.76)
    second = sorted(t for t in times if t >= sm.RUN_PERIOD_S)
    assert second[0] == pytest.approx(60 + 0.01 + 0.0015)  # not a minute after the guard
    assert second[-1] == pytest.approx(60 + 13 * 0.76)
