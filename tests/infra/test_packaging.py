"""The construct finds its runtime code both from an editable checkout and from a wheel."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from bench.wheel import Installed, run
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


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return Installed(tmp_path_factory.mktemp("packaging"))


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_synthesizes_a_consumer_app(
    installed: Installed, tmp_path: Path
) -> None:
    consumer = tmp_path / "consumer"
    consumer.mkdir()
    (consumer / "app.py").write_text(CONSUMER_APP)
    result = run(
        [str(installed.python), "app.py", str(consumer / "cdk.out")],
        cwd=consumer,
        env=installed.env,
    )

    module = Path(json.loads(result.stdout.strip().splitlines()[-1])["module"])
    assert module.is_relative_to(installed.venv), f"imported {module}, not the installed wheel"
    assert not module.is_relative_to(REPO)
    assets = list((consumer / "cdk.out").glob("asset.*"))
    handlers = [a for a in assets if (a / "session_expiry_runtime" / "handler.py").is_file()]
    layers = [a for a in assets if (a / "python" / "session_expiry_runtime" / "store.py").is_file()]
    assert len(handlers) == 1 and len(layers) == 1, [p.name for p in assets]


# --- typed and ready to publish -------------------------------------------------------------

TYPED_CONSUMER = textwrap.dedent(
    """
    from datetime import timedelta

    import aws_cdk as cdk
    from cdk_session_expiry import SessionExpiry
    from session_expiry_runtime.store import Session, SessionStore


    def build(app: cdk.App) -> str:
        stack = cdk.Stack(app, "Consumer")
        sessions = SessionExpiry(stack, "Sessions", batch_size=50)
        return sessions.retiring_principal_arn


    def open_session(store: SessionStore) -> Session:
        return store.create("s-1", ttl=timedelta(minutes=5))
    """
)
#: The same consumer with two mistakes only the library's annotations reveal.
MISTYPED_CONSUMER = TYPED_CONSUMER.replace("batch_size=50", 'batch_size="50"').replace(
    "-> Session:", "-> int:"
)


#: aws-cdk-lib's generated modules take minutes to analyse and are not what is checked here:
#: they are skipped (Any), the annotations of this library's two packages are checked.
MYPY_CONFIG = textwrap.dedent(
    """
    [mypy]
    strict = True
    [mypy-aws_cdk.*,constructs.*,jsii.*]
    follow_imports = skip
    """
)


def _mypy(installed: Installed, source: str, directory: Path) -> subprocess.CompletedProcess[str]:
    directory.mkdir()
    (directory / "consumer.py").write_text(source)
    (directory / "mypy.ini").write_text(MYPY_CONFIG)
    # mypy from the dev venv, resolving imports through the fresh venv's interpreter: the
    # packages come from the installed wheel, never from this checkout.
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--python-executable",
            str(installed.python),
            "consumer.py",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=directory,
        env=installed.env,
    )


def test_wheel_marks_both_packages_typed() -> None:
    for package in (REPO / "cdk_session_expiry", REPO / "lambda_src" / "session_expiry_runtime"):
        assert (package / "py.typed").is_file(), package


@pytest.mark.slow
def test_wheel_holds_py_typed_licence_and_metadata(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
        (metadata_name,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = wheel.read(metadata_name).decode()
    assert {"cdk_session_expiry/py.typed", "session_expiry_runtime/py.typed"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Typing :: Typed" in metadata
    assert "Description-Content-Type: text/markdown" in metadata


@pytest.mark.slow
def test_twine_check_passes_on_wheel_and_sdist(installed: Installed) -> None:
    result = run(
        [
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            str(installed.wheel),
            str(installed.sdist),
        ]
    )
    assert result.stdout.count("PASSED") == 2, result.stdout


@pytest.mark.slow
def test_mypy_sees_the_installed_wheels_types(installed: Installed, tmp_path: Path) -> None:
    clean = _mypy(installed, TYPED_CONSUMER, tmp_path / "clean")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    mistyped = _mypy(installed, MISTYPED_CONSUMER, tmp_path / "mistyped")
    assert mistyped.returncode == 1, mistyped.stdout + mistyped.stderr
    # Both mistakes are found from the installed packages' annotations (without py.typed mypy
    # reports the imports as untyped and sees neither).
    assert '"batch_size"' in mistyped.stdout and "[arg-type]" in mistyped.stdout, mistyped.stdout
    assert "[return-value]" in mistyped.stdout, mistyped.stdout
    assert "import-untyped" not in mistyped.stdout


@pytest.mark.slow
def test_the_console_script_is_installed_and_runs(installed: Installed) -> None:
    """``pip install`` of the wheel puts ``session-expiry`` on the venv's path (issue 39)."""
    script = installed.venv / "bin" / "session-expiry"
    assert script.is_file(), sorted(p.name for p in script.parent.iterdir())
    result = run([str(script), "status", "--help"], env=installed.env)
    assert "--stack" in result.stdout and "exit status" in result.stdout
