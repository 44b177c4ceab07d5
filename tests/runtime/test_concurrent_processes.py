"""Several invocations in one execution environment as **processes** (issue 39; Lambda Managed
Instances runs several processes per environment, 16 per vCPU by default, sharing its
ephemeral storage): two invocations at once, each a process of its own with the real handler
(``process_invocation.py``: its own moto), the same ``TMPDIR``. Each answers for its own
records and writes only its own metrics, and neither leaves a file in the shared directory.

Threads of one process: ``test_concurrent_invocations.py`` and
``test_concurrent_sweeps_and_drains.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).with_name("process_invocation.py")
BOUND_S = 240


def test_two_invocations_as_processes_sharing_a_temporary_directory(tmp_path: Path) -> None:
    shared = tmp_path / "ephemeral"
    shared.mkdir()
    env = {**os.environ, "TMPDIR": str(shared), "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled"}
    batches = {"p": 3, "q": 5}
    running = {
        prefix: subprocess.Popen(
            [sys.executable, str(WORKER), prefix, str(count)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for prefix, count in batches.items()
    }
    results = {}
    for prefix, process in running.items():
        out, err = process.communicate(timeout=BOUND_S)
        assert process.returncode == 0, err[-2000:]
        results[prefix] = json.loads(out.strip().splitlines()[-1])

    for prefix, count in batches.items():
        result = results[prefix]
        assert result["response"] == {"batchItemFailures": []}
        assert result["cleaned"] == [f"{prefix}-{n}" for n in range(count)]
        # its own metrics, not the other's: sessions cleaned and their scratch objects (2 each)
        assert result["metrics"]["SessionsCleaned|Reason=explicit"] == count
        assert result["metrics"]["ScratchObjectsDeleted"] == 2 * count
    assert sorted(os.listdir(shared)) == []  # nothing left in the storage they share
