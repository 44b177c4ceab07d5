"""A consumer project built from the wheel passes its own tests with the pytest plugin
(bench/consumer_project: an expired session with its scratch objects cleaned, a refused
DeleteConnection reaching the failure queue and replayed, a sweep run now, the kill switch, the
dashboard on), deploying its app once for its three modules. ``make bench`` reports its wall
time against a goal (bench/consumer.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import consumer
from bench.wheel import Installed

pytestmark = pytest.mark.slow


def test_the_consumer_suite_passes_with_one_deploy(tmp_path: Path) -> None:
    installed = Installed(tmp_path / "install")
    root = consumer.project(tmp_path / "project")

    result = consumer.run_suite(installed, root)

    assert result["returncode"] == 0, result["output"]
    assert (result["passed"], result["failed"]) == (6, 0), result["output"]
    # One deploy for the session; the two later modules start from its snapshot.
    assert (result["deploys"], result["restores"]) == (1, len(consumer.MODULES) - 1)
    # In the project, the plugin is the wheel's, not this checkout's.
    assert _plugin_path(installed, root).is_relative_to(installed.venv)


def _plugin_path(installed: Installed, root: Path) -> Path:
    from bench.wheel import run

    done = run(
        [str(installed.python), "-c", "import cdk_session_expiry.testing as t; print(t.__file__)"],
        env=installed.env,
        cwd=root,
    )
    return Path(done.stdout.strip())
