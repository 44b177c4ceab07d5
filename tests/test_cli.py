"""The ``session-expiry`` console script (issue 39): each subcommand runs its ``python -m``
module's ``main`` with the same flags, ``--help`` works for each, and ``cost --help`` does not
start the jsii runtime."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cdk_session_expiry import cli

REPO = Path(__file__).resolve().parents[1]
#: Subcommand -> the module its ``python -m`` form runs, and the arguments that form puts first.
EXPECTED = {
    "status": ("session_expiry_runtime.status", ()),
    "kill-switch": ("session_expiry_runtime.kill_switch", ()),
    "flags": ("session_expiry_runtime.kill_switch", ("flags",)),
    "replay": ("session_expiry_runtime.replay", ()),
    "cost": ("cdk_session_expiry.cost", ()),
}


def test_the_console_script_is_declared() -> None:
    text = (REPO / "pyproject.toml").read_text()
    scripts = text.split("[project.scripts]\n", 1)[1].split("\n[", 1)[0]
    declared = [line for line in scripts.splitlines() if line and not line.startswith("#")]
    assert declared == ['session-expiry = "cdk_session_expiry.cli:main"']


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_subcommand_runs_its_modules_main(name: str) -> None:
    module, before = EXPECTED[name]
    command, given = cli.dispatch(name)

    assert command is sys.modules[module].main
    assert given == before


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_help_works_for_each_subcommand(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and "--" in out


def test_the_same_flags_reach_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "--stack", "not a name"]) == 2  # refused before any call
    assert "--stack 'not a name'" in capsys.readouterr().err
    assert cli.main(["flags", "show", "--function", "f", "--application", "a"]) == 2
    assert "with --function" in capsys.readouterr().err


def test_the_script_lists_its_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name, (module, _) in EXPECTED.items():
        assert f"  {name} " in out and module in out


def test_fails_an_unknown_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["stauts"]) == 2
    assert "unknown command 'stauts'" in capsys.readouterr().err
    assert cli.main([]) == 2


def test_cost_help_does_not_start_the_jsii_runtime() -> None:
    code = (
        "import sys\n"
        "from cdk_session_expiry.cli import main\n"
        "assert main(['cost', '--help']) == 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'jsii'))\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_help_names_the_form_the_operator_typed(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the console script the usage reads ``session-expiry <name>``; from ``python -m``
    it reads the module form (a fresh user's trial: both once said ``python -m``)."""
    module, before = EXPECTED[name]
    monkeypatch.setattr(sys, "argv", ["/venv/bin/session-expiry", name, "--help"])
    assert cli.main([name, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: session-expiry {name}")

    monkeypatch.setattr(sys, "argv", ["/repo/module.py", "--help"])
    command, given = cli.dispatch(name)
    with pytest.raises(SystemExit):
        command([*given, "--help"])
    typed = " ".join(("python -m", module, *before))
    assert capsys.readouterr().out.startswith(f"usage: {typed}")
