"""``kill_switch flags``: read and change the cleanup's feature flags in AWS AppConfig.

With the construct's ``feature_flags``, finer levers than the event source mapping's ``Enabled``
(which stays the full stop): one step off (``DeleteScratch=off``), a dry run (``dryRun=on``),
everything deferred (``enabled=off``). A change writes a new hosted configuration version
(``CreateHostedConfigurationVersion``) and deploys it with the construct's deployment strategy
(``StartDeployment``); the environment's monitors roll it back if the cleanup's errors or
on-failure destination alarm goes off during its bake time. The cleanup sees it within its poll
interval (30 seconds by default). CLI::

    python -m session_expiry_runtime.kill_switch flags show --function CLEANUP_FN
    python -m session_expiry_runtime.kill_switch flags set DeleteScratch=off --function CLEANUP_FN
    python -m session_expiry_runtime.kill_switch flags set enabled=on dryRun=off --function ...

Where the flags live is read from the cleanup function's environment
(``SESSION_EXPIRY_FLAGS_*``: ``lambda:GetFunctionConfiguration``); or pass ``--application``,
``--environment``, ``--profile`` and ``--strategy``. Every assignment is checked before anything
is changed: a flag the document does not have, or a value other than ``on``/``off``, is refused
(exit 2, nothing written). Prints one JSON line: the flags in force (``show``) or deployed
(``set``), the version and the deployment. Exit status: 0 done; 2 could not run. Needs
``appconfig:ListEnvironments``, ``ListDeployments``, ``GetHostedConfigurationVersion``,
``CreateHostedConfigurationVersion``, ``StartDeployment``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from ..core.commands import prog
from ..core.config import (
    ENV_FLAGS_APPLICATION,
    ENV_FLAGS_DEPLOYMENT_STRATEGY,
    ENV_FLAGS_ENVIRONMENT,
    ENV_FLAGS_PROFILE,
)

EXIT_DONE = 0
EXIT_COULD_NOT_RUN = 2
_VALUES = {"on": True, "off": False}


class FlagsError(ValueError):
    """A bad request (unknown flag, bad value, flags not configured); nothing was changed."""


@dataclass(frozen=True)
class Where:
    """The AppConfig identifiers of the cleanup's flags."""

    application: str
    environment: str
    profile: str
    strategy: str | None


def parse_assignments(assignments: Iterable[str]) -> dict[str, bool]:
    """``["DeleteScratch=off", "dryRun=on"]`` as ``{"DeleteScratch": False, "dryRun": True}``.

    Raises:
        FlagsError: an assignment is not ``NAME=on`` or ``NAME=off``, a flag is given twice
            (``A=off A=on``: which one was meant?), or none is given.
    """
    parsed: dict[str, bool] = {}
    given: dict[str, str] = {}
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep or not name or value not in _VALUES:
            raise FlagsError(
                f"{assignment!r}: expected NAME=on or NAME=off, e.g. DeleteScratch=off"
            )
        if name in given:
            raise FlagsError(
                f"{name!r} is given twice ({given[name]!r}, {assignment!r}): "
                "expected each flag once"
            )
        given[name] = assignment
        parsed[name] = _VALUES[value]
    if not parsed:
        raise FlagsError("flags set: expected at least one NAME=on|off")
    return parsed


def where_from_function(lambda_client: Any, function: str) -> Where:
    """The identifiers in the cleanup function's environment.

    Raises:
        FlagsError: the function has no feature flags (``feature_flags`` is off).
    """
    env = lambda_client.get_function_configuration(FunctionName=function)
    variables: Mapping[str, str] = (env.get("Environment") or {}).get("Variables") or {}
    if ENV_FLAGS_PROFILE not in variables:
        raise FlagsError(
            f"function {function!r} has no {ENV_FLAGS_PROFILE}: deploy the construct with "
            "feature_flags=True first"
        )
    return Where(
        variables[ENV_FLAGS_APPLICATION],
        variables[ENV_FLAGS_ENVIRONMENT],
        variables[ENV_FLAGS_PROFILE],
        variables.get(ENV_FLAGS_DEPLOYMENT_STRATEGY),
    )


class FlagStore:
    """The flag document of one profile, its deployments to one environment."""

    def __init__(self, client: Any, where: Where) -> None:
        self.client = client
        self.where = where
        self.environment_id = self._environment_id()

    def _environment_id(self) -> str:
        found = self.client.list_environments(ApplicationId=self.where.application)["Items"]
        for env in found:
            if self.where.environment in (env["Id"], env["Name"]):
                return str(env["Id"])
        raise FlagsError(f"environment {self.where.environment!r}: not in the application")

    def deployed(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The document last deployed to the environment, and that deployment."""
        deployments = self.client.list_deployments(
            ApplicationId=self.where.application, EnvironmentId=self.environment_id
        )["Items"]
        # A rolled-back deployment's version is not in force (the one before it is).
        mine = [d for d in deployments if d.get("State") not in ("ROLLED_BACK", "ROLLING_BACK")]
        if not mine:
            raise FlagsError("no flag deployment in force in the environment")
        latest = max(mine, key=lambda d: int(d["DeploymentNumber"]))
        version = self.client.get_hosted_configuration_version(
            ApplicationId=self.where.application,
            ConfigurationProfileId=self.where.profile,
            VersionNumber=int(latest.get("ConfigurationVersion") or 0),
        )
        return json.loads(version["Content"].read()), latest

    def deploy(self, document: Mapping[str, Any], description: str) -> dict[str, Any]:
        """Write ``document`` as a new version and start its deployment; the deployment."""
        if self.where.strategy is None:
            raise FlagsError("no deployment strategy: pass --strategy")
        version = self.client.create_hosted_configuration_version(
            ApplicationId=self.where.application,
            ConfigurationProfileId=self.where.profile,
            Content=json.dumps(document).encode("utf-8"),
            ContentType="application/json",
            Description=description,
        )["VersionNumber"]
        started: dict[str, Any] = self.client.start_deployment(
            ApplicationId=self.where.application,
            EnvironmentId=self.environment_id,
            DeploymentStrategyId=self.where.strategy,
            ConfigurationProfileId=self.where.profile,
            ConfigurationVersion=str(version),
            Description=description,
        )
        return started


def values_of(document: Mapping[str, Any]) -> dict[str, bool]:
    """``{flag: enabled}`` of a flag document."""
    values = document.get("values") or {}
    return {n: bool((values.get(n) or {}).get("enabled")) for n in document.get("flags") or {}}


def changed(document: Mapping[str, Any], wanted: Mapping[str, bool]) -> dict[str, Any]:
    """``document`` with ``wanted`` applied.

    Raises:
        FlagsError: a name of ``wanted`` is not a flag of the document.
    """
    flags = document.get("flags") or {}
    unknown = sorted(set(wanted) - set(flags))
    if unknown:
        raise FlagsError(f"unknown flags {unknown}: expected some of {sorted(flags)}")
    values = {n: dict(v) for n, v in (document.get("values") or {}).items()}
    for name, on in wanted.items():
        values.setdefault(name, {})["enabled"] = on
    return {**document, "values": values}


def run(args: argparse.Namespace, session: boto3.session.Session) -> dict[str, Any]:
    """One ``flags`` command; the JSON line to print.

    Raises:
        FlagsError, botocore.exceptions.ClientError: nothing changed.
    """
    if args.action == "show" and args.assignments:
        raise FlagsError(
            f"flags show takes no NAME=on|off (got {args.assignments}): expected flags set to "
            "change a flag"
        )
    wanted = parse_assignments(args.assignments) if args.action == "set" else {}
    store = FlagStore(session.client("appconfig"), _where(args, session))
    document, deployment = store.deployed()
    if args.action == "show":
        return {"flags": values_of(document), "deployment": _summary(deployment)}
    new = changed(document, wanted)
    text = ", ".join(f"{n}={'on' if v else 'off'}" for n, v in wanted.items())
    started = store.deploy(new, f"kill_switch flags set {text}")
    return {"flags": values_of(new), "deployment": _summary(started)}


def _where(args: argparse.Namespace, session: boto3.session.Session) -> Where:
    """Where the flags live: the function's environment (``--strategy`` overrides its strategy),
    or the explicit identifiers; never a mix of both (one would be silently ignored).

    Raises:
        FlagsError: neither, or both, are given.
    """
    explicit = [f"--{n}" for n in ("application", "environment", "profile") if getattr(args, n)]
    if args.function and explicit:
        raise FlagsError(
            f"--application, --environment and --profile (got {' '.join(explicit)}) with "
            "--function: expected one or the other"
        )
    if args.function:
        where = where_from_function(session.client("lambda"), args.function)
        return replace(where, strategy=args.strategy) if args.strategy else where
    if len(explicit) == 3:
        return Where(args.application, args.environment, args.profile, args.strategy)
    raise FlagsError("expected --function, or --application, --environment and --profile")


def _summary(deployment: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("DeploymentNumber", "ConfigurationVersion", "State", "Description")
    return {k: deployment.get(k) for k in keys}


def parser() -> argparse.ArgumentParser:
    """The ``flags`` command's arguments."""
    p = argparse.ArgumentParser(
        prog=prog("python -m session_expiry_runtime.kill_switch flags", "flags"),
        description=(
            "Show or change the session cleanup's feature flags in AWS AppConfig (construct\n"
            "prop feature_flags): a new hosted configuration version, deployed with the\n"
            "construct's deployment strategy; rolled back if the cleanup's errors or\n"
            "on-failure alarm fires during its bake. The event source mapping toggle\n"
            "(disable/enable) stays the full stop."
        ),
        epilog=(
            "flags: enabled (off: every record deferred, no call at all), dryRun (on: nothing\n"
            "changed), and one per step by its metric Action (DeleteConnection, RetireGrant,\n"
            "DeleteScratch, Archive, ...; off: the step deferred, the others run). Deferred\n"
            "work is done within 5 minutes of its flag being on again.\n\n"
            "examples:\n"
            "  ... flags show --function CLEANUP_FN\n"
            "  ... flags set DeleteScratch=off --function CLEANUP_FN\n"
            "  ... flags set enabled=on dryRun=off --function CLEANUP_FN\n\n"
            "exit status: 0 done; 2 could not run (nothing changed)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=["show", "set"])
    p.add_argument("assignments", nargs="*", metavar="NAME=on|off", help="with set")
    p.add_argument("--function", help="the cleanup function (reads where the flags live)")
    p.add_argument("--application", help="AppConfig application id (without --function)")
    p.add_argument("--environment", help="AppConfig environment name or id")
    p.add_argument("--profile", help="configuration profile id")
    p.add_argument(
        "--strategy",
        help="deployment strategy id (set; with --function, instead of the construct's)",
    )
    return p


def main(argv: Iterable[str], session: boto3.session.Session | None = None) -> int:
    """The ``flags`` CLI; returns the exit status."""
    args = parser().parse_args(list(argv))
    try:
        answer = run(args, session or boto3.session.Session())
    except (FlagsError, ClientError, BotoCoreError) as exc:
        sys.stderr.write(f"kill_switch flags: {type(exc).__name__}: {exc}\n")
        return EXIT_COULD_NOT_RUN
    sys.stdout.write(json.dumps(answer, sort_keys=True, default=str) + "\n")
    return EXIT_DONE
