"""Run the real CDK CLI against a [`LocalEmulator`][cdk_session_expiry.testing.LocalEmulator]."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from cdk_session_expiry.testing.emulator import LocalEmulator

#: The CDK CLI this library is tested with (``package.json``); it reads the cloud assembly
#: schema of aws-cdk-lib 2.275 (55). An older CLI fails to read a newer aws-cdk-lib's output.
TESTED_CDK_CLI_VERSION = "2.1148.1"


class CdkCliError(RuntimeError):
    """The CDK CLI failed, or there is none; the message holds the command and the end of its
    output, or what was searched and how to install one."""


class CdkAppNotFoundError(CdkCliError, FileNotFoundError):
    """The directory given as the CDK app holds no ``cdk.json`` (or does not exist)."""


def find_cdk_cli(start: Path) -> list[str]:
    """The command that runs the CDK CLI: ``node_modules/.bin/cdk`` of ``start`` or a parent
    (the version a committed ``package-lock.json`` pins), else ``cdk`` on ``PATH``.

    Raises:
        CdkCliError: no CDK CLI found; the message names the directories searched and how to
            install one.
    """
    searched = [start.resolve(), *start.resolve().parents]
    for directory in searched:
        candidate = directory / "node_modules" / ".bin" / "cdk"
        if candidate.is_file():
            return [str(candidate)]
    found = shutil.which("cdk")
    if found:
        return [found]
    raise CdkCliError(
        f"no CDK CLI found: looked for node_modules/.bin/cdk in {searched[0]} and each of its "
        f"parents, then for 'cdk' on PATH. Install the CDK CLI (Node.js 22 or 24; 20 still runs "
        f"it) beside your app with 'npm install aws-cdk@{TESTED_CDK_CLI_VERSION}' (the version "
        "this library is tested with; any CDK CLI v2 that reads your aws-cdk-lib's cloud "
        "assembly works), or globally with 'npm install -g aws-cdk', so that 'cdk --version' runs."
    )


def check_app_dir(app_dir: Path, *, app: str | None = None) -> Path:
    """``app_dir`` resolved, once it is known to hold a CDK app (its ``cdk.json``; with an
    ``app`` override, the directory only needs to exist).

    Raises:
        CdkAppNotFoundError: the directory does not exist or has no ``cdk.json``; the message
            names the directory searched and, for the pytest plugin, the fixture to override.
    """
    resolved = app_dir.resolve()
    fixture_hint = (
        "With the pytest plugin, override the session_expiry_app_dir fixture to return the "
        "directory where you run 'cdk synth' (default: pytest's rootdir)."
    )
    if not resolved.is_dir():
        raise CdkAppNotFoundError(
            f"CDK app directory {resolved} does not exist: expected the directory that holds "
            f"your app's cdk.json. {fixture_hint}"
        )
    if app is None and not (resolved / "cdk.json").is_file():
        raise CdkAppNotFoundError(
            f"no cdk.json in {resolved}: expected the directory of your CDK app, whose cdk.json "
            f'says how to run it (e.g. {{"app": "python3 app.py"}}). {fixture_hint}'
        )
    return resolved


class CdkCli:
    """``cdk bootstrap`` and ``cdk deploy`` of one CDK app into the emulator.

    Args:
        emulator: a running emulator; every AWS call of the CLI goes to it.
        app_dir: directory holding the app's ``cdk.json``.
        app: ``--app`` override (a command or a cloud assembly directory). Default: ``cdk.json``'s.
        context: ``--context`` values.
        output_dir: cloud assembly directory. Default: a fresh temporary directory, so the
            working tree's ``cdk.out`` is never touched.
        timeout_s: per command. Default: 600.

    Raises:
        CdkAppNotFoundError: ``app_dir`` does not exist or has no ``cdk.json``.
        CdkCliError: no CDK CLI is installed (the message says how to get one).
    """

    def __init__(
        self,
        emulator: LocalEmulator,
        app_dir: Path | str,
        *,
        app: str | None = None,
        context: Mapping[str, str] | None = None,
        output_dir: Path | str | None = None,
        timeout_s: float = 600,
    ) -> None:
        self.emulator = emulator
        self.app_dir = check_app_dir(Path(app_dir), app=app)
        self.app = app
        self.context = dict(context or {})
        self.timeout_s = timeout_s
        # Find the CLI first: a missing CLI must not leave an empty output directory behind.
        self._cdk = find_cdk_cli(self.app_dir)
        self.output_dir = (
            Path(output_dir)
            if output_dir
            else Path(tempfile.mkdtemp(prefix="cdk-session-expiry-out-"))
        )

    def env(self) -> dict[str, str]:
        """The CLI's environment: this interpreter's bin directory first on PATH (so
        ``python3 app.py`` uses it), the emulator's endpoint and fake credentials, nothing of
        the caller's AWS profile."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("AWS_") and k not in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION")
        }
        env.update(self.emulator.aws_env())
        env.update(
            {
                "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
                "CDK_DEFAULT_ACCOUNT": self.emulator.account_id,
                "CDK_DEFAULT_REGION": self.emulator.region,
                "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
                "JSII_DEPRECATED": "quiet",
                "NODE_NO_WARNINGS": "1",
                "CDK_DISABLE_VERSION_CHECK": "1",
            }
        )
        return env

    def _common(self) -> list[str]:
        args = ["--no-notices", "--no-version-reporting", "--output", str(self.output_dir)]
        if self.app:
            args += ["--app", self.app]
        for key, value in self.context.items():
            args += ["--context", f"{key}={value}"]
        return args

    def run(self, args: Sequence[str]) -> str:
        """Run ``cdk <args>``; return its combined output.

        Raises:
            CdkCliError: non-zero exit or timeout.
        """
        command = [*self._cdk, *args]
        try:
            done = subprocess.run(  # noqa: S603 - fixed executable, arguments from the caller
                command,
                cwd=self.app_dir,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            raise CdkCliError(f"{' '.join(command)} timed out after {self.timeout_s}s") from err
        output = (done.stdout or "") + (done.stderr or "")
        if done.returncode != 0:
            tail = "\n".join(output.splitlines()[-40:])
            raise CdkCliError(f"{' '.join(command)} exited {done.returncode}:\n{tail}")
        return output

    def bootstrap(self) -> str:
        """``cdk bootstrap aws://{account}/{region}`` into the emulator."""
        target = f"aws://{self.emulator.account_id}/{self.emulator.region}"
        return self.run(["bootstrap", target, *self._common()])

    def deploy(self, stacks: Sequence[str] = ()) -> dict[str, dict[str, str]]:
        """``cdk deploy --require-approval never`` of ``stacks`` (default: all).

        Returns:
            Stack outputs by stack name, as ``--outputs-file`` writes them.
        """
        outputs = self.output_dir / "outputs.json"
        selection = list(stacks) or ["--all"]
        self.run(
            [
                "deploy",
                *selection,
                "--require-approval",
                "never",
                "--outputs-file",
                str(outputs),
                *self._common(),
            ]
        )
        if not outputs.is_file():
            return {}
        loaded: dict[str, dict[str, str]] = json.loads(outputs.read_text(encoding="utf-8"))
        return loaded
