"""``make sandbox`` in CI: the whole scenario against the real sample app, from nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_sandbox_scenario_leaks_nothing_and_deletes_nothing_live(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "sandbox", "--quiet", "--report-json", str(report_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["leaked"] == 0
    assert report["wrongly_deleted"] == 0
    assert report["mismatches"] == []
    assert report["records_sent_to_on_failure"] == 0
    sessions = report["sessions"]
    assert sessions["expired"] > 0 and sessions["ended"] > 0 and sessions["live"] > 0
    assert report["ttl_deletes"] == sessions["expired"]
    gone = sessions["expired"] + sessions["ended"]
    assert report["connections_closed"] == gone
    assert report["grants_retired"] == gone
    assert report["objects_deleted"] > 2 * 1_000  # includes sessions with > 1,000 objects
    assert "RESULT            OK" in done.stdout
