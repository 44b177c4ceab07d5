"""checkov in a venv of its own, beside the project's.

checkov 3.3 pins boto3/botocore 1.35, packaging 23 and networkx 2.6 (checked with
``pip install --dry-run``): installed into the dev venv it would downgrade the boto3 the runtime
and moto are tested with. So the tests install it into ``.venv-checkov`` (git-ignored) on first
use, as ``bench`` does for Powertools, and run its CLI there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from .helpers import REPO

CHECKOV_VERSION = "3.3.30"
CHECKOV_VENV = REPO / ".venv-checkov"


def checkov_executable() -> Path:
    """``.venv-checkov/bin/checkov`` at :data:`CHECKOV_VERSION`, installed on first use."""
    executable = CHECKOV_VENV / "bin" / "checkov"
    stamp = CHECKOV_VENV / f".installed-{CHECKOV_VERSION}"
    if not stamp.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(CHECKOV_VENV)], check=True)
        subprocess.run(
            [
                str(CHECKOV_VENV / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"checkov=={CHECKOV_VERSION}",
            ],
            check=True,
            capture_output=True,
            timeout=900,
        )
        stamp.touch()
    return executable


def run_checkov(directory: Path) -> list[dict[str, Any]]:
    """checkov (framework ``cloudformation``, offline) on every template in ``directory``.

    Returns one entry per failed or skipped check: ``file`` (template name), ``resource``
    (``Type.LogicalId``), ``check_id``, ``result`` (``FAILED``/``SKIPPED``) and ``comment``
    (the skip's reason).
    """
    done = subprocess.run(
        [
            str(checkov_executable()),
            "--directory",
            str(directory),
            "--framework",
            "cloudformation",
            "--skip-download",
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "BC_SKIP_MAPPING": "TRUE", "HOME": str(directory)},
    )
    # checkov exits 1 when a check failed; anything else is an error.
    assert done.returncode in (0, 1), done.stderr[-3000:]
    reports = json.loads(done.stdout)
    findings = []
    for report in reports if isinstance(reports, list) else [reports]:
        results = report.get("results", {})
        for result, key in (("FAILED", "failed_checks"), ("SKIPPED", "skipped_checks")):
            for check in results.get(key, []):
                findings.append(
                    {
                        "file": Path(check["file_path"]).name,
                        "resource": check["resource"],
                        "check_id": check["check_id"],
                        "result": result,
                        "comment": (check.get("check_result") or {}).get("suppress_comment", ""),
                    }
                )
    return findings
