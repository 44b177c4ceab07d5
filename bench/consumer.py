"""A consumer project's own test suite, from the wheel: what the testing plugin costs a user.

``bench/consumer_project/`` is a project as a newcomer writes it: a CDK app with sessions, the
dashboard and an expiry sweeper, and three test modules using only the documented plugin API
(an expired session with its scratch objects cleaned, a refused ``DeleteConnection`` reaching
the failure queue and replayed, a sweep run now, the kill switch, the dashboard). It runs with
the wheel of this checkout installed in a fresh venv (:mod:`bench.wheel`), the CDK CLI of this
repository, and pytest, three ways:

* **restore per module** (the default): one deploy, then each module starts from the
  emulator's snapshot;
* **shared state** (``-o session_expiry_restore_each_module=false``): one deploy, the modules
  share the state and keep apart by session ids;
* **deploy per module**: each module in its own pytest process, so each deploys the app (what
  every module cost before the plugin kept a snapshot).

``python -m bench --consumer-only`` runs this section alone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.wheel import REPO, Installed

PROJECT = Path(__file__).resolve().parent / "consumer_project"
MODULES = ("test_expiry.py", "test_failures.py", "test_sweeps.py")
#: The goals the default (restore per module) is measured against, on the bench machine.
GOAL = {"deploys": 1, "wall_s": 90.0, "s_per_test": 3.0}
_SUMMARY = re.compile(
    r"session-expiry: (\d+) deploy\(s\) in ([\d.]+) s, (\d+) restore\(s\) in ([\d.]+) s"
)
_PASSED = re.compile(r"(\d+) passed")
_FAILED = re.compile(r"(\d+) (failed|error)")


def project(into: Path) -> Path:
    """A copy of the consumer project in ``into``."""
    shutil.copytree(PROJECT, into, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def run_suite(installed: Installed, root: Path, *args: str) -> dict[str, Any]:
    """Run the project's pytest with the installed wheel; what it reported.

    Returns:
        ``returncode``, ``wall_s``, ``passed``, ``failed``, ``deploys``, ``deploy_s``,
        ``restores``, ``restore_s`` (the plugin's summary line) and the ``output``'s tail.
    """
    env = {k: v for k, v in installed.env.items() if not k.startswith(("AWS_", "PYTEST_"))}
    # The fresh venv's python3 first (the CDK CLI runs "python3 app.py"), then the CDK CLI this
    # repository pins, found on PATH as a consumer's global install would be.
    env["PATH"] = os.pathsep.join(
        [str(installed.venv / "bin"), str(REPO / "node_modules" / ".bin"), env.get("PATH", "")]
    )
    started = time.monotonic()
    done = subprocess.run(  # noqa: S603 - the fresh venv's python running pytest
        [str(installed.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    wall = time.monotonic() - started
    output = done.stdout + done.stderr
    summary = _SUMMARY.search(output)
    deploys, deploy_s, restores, restore_s = summary.groups() if summary else (0, 0, 0, 0)
    passed = _PASSED.search(output)
    failed = _FAILED.search(output)
    return {
        "returncode": done.returncode,
        "wall_s": wall,
        "passed": int(passed.group(1)) if passed else 0,
        "failed": int(failed.group(1)) if failed else 0,
        "deploys": int(deploys),
        "deploy_s": float(deploy_s),
        "restores": int(restores),
        "restore_s": float(restore_s),
        "output": output[-4000:],
    }


def _per_module(installed: Installed, root: Path) -> dict[str, Any]:
    runs = [run_suite(installed, root, module) for module in MODULES]
    total = {key: sum(r[key] for r in runs) for key in ("wall_s", "passed", "failed", "deploys")}
    total.update(
        returncode=max(r["returncode"] for r in runs),
        deploy_s=sum(r["deploy_s"] for r in runs),
        restores=0,
        restore_s=0.0,
        output=runs[-1]["output"],
    )
    return total


def run(log: Any) -> dict[str, Any]:
    """Build the wheel and a fresh venv, then run the suite the three ways (a few minutes)."""
    with tempfile.TemporaryDirectory(prefix="bench-consumer-") as tmp:
        installed = Installed(Path(tmp) / "install")
        root = project(Path(tmp) / "project")
        variants = {}
        shared = ("-o", "session_expiry_restore_each_module=false")
        for name, runner in (
            ("restore per module", lambda: run_suite(installed, root)),
            ("shared state", lambda: run_suite(installed, root, *shared)),
            ("deploy per module", lambda: _per_module(installed, root)),
        ):
            print(f"  consumer suite, {name} ...", file=log, flush=True)
            variants[name] = runner()
            if variants[name]["returncode"]:
                print(variants[name]["output"], file=log)
    return {"goal": GOAL, "variants": variants, "modules": len(MODULES)}


def per_test_s(variant: dict[str, Any]) -> float:
    """Seconds per test beyond the deploys (wall time minus deploy time, over the tests)."""
    tests = max(1, variant["passed"] + variant["failed"])
    return (variant["wall_s"] - variant["deploy_s"]) / tests


def table(data: dict[str, Any]) -> str:
    """The Markdown table of :func:`run`'s figures, with the goal."""
    goal = data["goal"]
    rows = [
        "| how the modules get the app | result | wall time | deploys (s) | restores (s) "
        "| s per test beyond deploys |",
        "|---|---|---|---|---|---|",
    ]
    for name, v in data["variants"].items():
        result = "passed" if v["returncode"] == 0 else f"FAILED ({v['failed']})"
        rows.append(
            f"| {name} | {v['passed']} {result} | {v['wall_s']:.1f} s | {v['deploys']} "
            f"({v['deploy_s']:.1f}) | {v['restores']} ({v['restore_s']:.2f}) "
            f"| {per_test_s(v):.2f} |"
        )
    default = data["variants"]["restore per module"]
    met = (
        default["returncode"] == 0
        and default["deploys"] <= goal["deploys"]
        and default["wall_s"] <= goal["wall_s"]
        and per_test_s(default) <= goal["s_per_test"]
    )
    rows.append("")
    rows.append(
        f"Goal (restore per module, {data['modules']} modules): {goal['deploys']} deploy per "
        f"session, at most {goal['wall_s']:.0f} s wall time, at most {goal['s_per_test']:.0f} s "
        f"per test beyond the deploy: **{'met' if met else 'not met'}**."
    )
    return "\n".join(rows)
