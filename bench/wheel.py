"""The wheel and sdist built from this checkout, the wheel installed into a fresh venv.

Used by the packaging tests (``tests/infra/test_packaging.py``) and the consumer project's
suite (``bench/consumer.py``, ``tests/sandbox/test_consumer_project.py``): what a user gets from
``pip install``, never this checkout's editable install.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class CommandFailed(RuntimeError):
    """A build or install step exited non-zero; the message holds its command and output."""


def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run ``args``; its completed process.

    Raises:
        CommandFailed: it exited non-zero (the message ends with its stdout and stderr).
    """
    result: subprocess.CompletedProcess[str] = subprocess.run(  # noqa: S603 - our own tools
        args, capture_output=True, text=True, check=False, timeout=600, **kwargs
    )
    if result.returncode != 0:
        raise CommandFailed(f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


class Installed:
    """The wheel and sdist built from this checkout, the wheel installed into a fresh venv."""

    def __init__(self, tmp_path: Path) -> None:
        self.dist = tmp_path / "dist"
        # --no-isolation: hatchling comes from the dev venv, so the build needs no network.
        run(
            [
                sys.executable,
                "-m",
                "build",
                "--wheel",
                "--sdist",
                "--no-isolation",
                "--outdir",
                str(self.dist),
                str(REPO),
            ]
        )
        (self.wheel,) = self.dist.glob("cdk_session_expiry-*.whl")
        (self.sdist,) = self.dist.glob("cdk_session_expiry-*.tar.gz")
        self.venv = tmp_path / "venv"
        run([sys.executable, "-m", "venv", str(self.venv)])
        self.python = self.venv / "bin" / "python"
        run(
            [
                str(self.python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-index",
                str(self.wheel),
            ]
        )
        # Dependencies (aws-cdk-lib, constructs, jsii) come from the dev venv's site-packages,
        # appended after the fresh venv's own: a plain path line, so the dev venv's editable
        # .pth files (which point at this checkout) are not processed.
        fresh_site = Path(
            run(
                [
                    str(self.python),
                    "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                ]
            ).stdout.strip()
        )
        (fresh_site / "_dev_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        self.env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
