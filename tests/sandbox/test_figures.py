"""The sandbox's figures: a PNG drawn from a run's report, every panel from the report's own
numbers (no sandbox run here: the report of one is enough)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    # The repository's sandbox/ package, not tests/sandbox (this package) of the same name.
    spec = importlib.util.spec_from_file_location(
        f"repo_sandbox_{name}", REPO / "sandbox" / f"{name}.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


figures = _load("figures")

REPORT = {
    "cleaned_by_reason": {"ttl": 120.0, "explicit": 80.0, "ttl-replicated": 12.0},
    "failures_by_action": {"DeleteConnection": 1.0},
    "records_skipped_by_cause": {},
    "objects_deleted_metric": 4321.0,
    "stream": {"records_read": 400, "filtered_out": 3, "invocations": 9, "retries": 2},
    "records_sent_to_on_failure": 1,
    "sweeper": {
        "interval_seconds": 300,
        "expiry_to_clean_p95_seconds": 295.6,
        "expiry_to_clean_max_seconds": 299.0,
    },
}


def test_draws_a_png_of_the_report(tmp_path: Path) -> None:
    path = figures.draw_report(REPORT, tmp_path / "out" / "report.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # six panels, not an empty canvas
