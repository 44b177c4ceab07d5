"""The construct finds its runtime code both from an editable checkout and from a wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from cdk_session_expiry import _runtime_contract as contract

from .helpers import REPO

CONSUMER_APP = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    import aws_cdk as cdk
    import cdk_session_expiry
    from cdk_session_expiry import SessionExpiry

    outdir = Path(sys.argv[1])
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "Consumer")
    SessionExpiry(stack, "Sessions")
    app.synth()
    print(json.dumps({"module": cdk_session_expiry.__file__}))
    """
)


def test_editable_checkout_resolves_the_runtime_in_lambda_src() -> None:
    assert contract.runtime_package_dir() == REPO / "lambda_src" / contract.RUNTIME_PACKAGE


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        args, capture_output=True, text=True, check=False, timeout=600, **kwargs
    )  # type: ignore[call-overload]
    assert result.returncode == 0, f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result  # type: ignore[no-any-return]


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_synthesizes_a_consumer_app(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    # --no-isolation: hatchling comes from the dev venv, so the build needs no network.
    _run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(dist),
            str(REPO),
        ]
    )
    (wheel,) = dist.glob("cdk_session_expiry-*.whl")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)])
    # Dependencies (aws-cdk-lib, constructs, jsii) come from the dev venv's site-packages,
    # appended after the fresh venv's own: a plain path line, so the dev venv's editable
    # .pth files (which point at this checkout) are not processed.
    fresh_site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    (fresh_site / "_dev_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    consumer = tmp_path / "consumer"
    consumer.mkdir()
    (consumer / "app.py").write_text(CONSUMER_APP)
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
    result = _run([str(python), "app.py", str(consumer / "cdk.out")], cwd=consumer, env=env)

    module = Path(json.loads(result.stdout.strip().splitlines()[-1])["module"])
    assert module.is_relative_to(venv), f"imported {module}, not the installed wheel"
    assert not module.is_relative_to(REPO)
    assets = list((consumer / "cdk.out").glob("asset.*"))
    handlers = [a for a in assets if (a / "session_expiry_runtime" / "handler.py").is_file()]
    layers = [a for a in assets if (a / "python" / "session_expiry_runtime" / "store.py").is_file()]
    assert len(handlers) == 1 and len(layers) == 1, [p.name for p in assets]
