"""bench/archive.py's cost model (issue 24): what the docs' per-1,000-sessions figures rest on.

The measurement itself (``python -m bench --archive-only``) starts moto's server and is not run
here; these check the arithmetic that turns its calls and CPU into USD."""

from __future__ import annotations

import pytest

from bench import archive

P = archive.PRICES


def _run(*, firehose: bool, line_bytes: int = 2_329, cpu_s: float = 0.0) -> dict[str, object]:
    return {"firehose": firehose, "cpu_s": cpu_s, "line_bytes": line_bytes, "calls": {}}


def test_per_object_costs_one_put_per_session_plus_the_cpu() -> None:
    cost = archive.cost(_run(firehose=False, cpu_s=2.0))
    assert cost["service"] == P["s3_put_per_1000"]
    assert cost["lambda"] == pytest.approx(2.0 * archive.LAMBDA_GB * P["lambda_gb_second"])
    assert cost["total"] == pytest.approx(cost["service"] + cost["lambda"])


def test_firehose_bills_each_record_rounded_up_to_5_kb() -> None:
    # A 2,329-byte line and a 5,120-byte line are both billed as 5 KB of ingestion; a
    # 5,121-byte line as 10 KB.
    small, full, over = (
        archive.cost(_run(firehose=True, line_bytes=n))["service"] for n in (2_329, 5_120, 5_121)
    )
    partitioning = (
        archive.FIREHOSE_OBJECTS * P["dynamic_partitioning_per_1000_objects"] / 1_000
        + archive.FIREHOSE_OBJECTS * P["s3_put_per_1000"] / 1_000
    )
    ingest_5kb = 1_000 * 5 / 1024 / 1024 * P["firehose_ingest_gb"]
    processed = 1_000 * 2_329 / 1024**3 * P["dynamic_partitioning_gb"]
    assert small == pytest.approx(ingest_5kb + processed + partitioning)
    assert over - full == pytest.approx(ingest_5kb, rel=1e-3)


def test_the_table_names_both_modes_and_the_prices() -> None:
    data = {
        "sessions": archive.SESSIONS,
        "batch": archive.BATCH,
        "prices": P,
        "runs": [
            {
                **_run(firehose=False, cpu_s=1.8),
                "mode": "per object (PutObject)",
                "calls": {"PutObject": 1000},
            },
            {
                **_run(firehose=True, cpu_s=0.5),
                "mode": "Firehose (PutRecordBatch)",
                "calls": {"PutRecordBatch": 87},
            },
        ],
    }
    for run in data["runs"]:
        run["cost"] = archive.cost(run)
    table = archive.table(data)
    assert "| per object (PutObject) | 1000 PutObject | 1,800 |" in table
    assert "| Firehose (PutRecordBatch) | 87 PutRecordBatch | 500 |" in table
    assert "billed by Firehose as 5 KB" in table
