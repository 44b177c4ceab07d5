"""AppConfig feature flags served by moto as the emulator teaches it (``_moto_appconfig``), for
the runtime tests of issue 26 part 1."""

from __future__ import annotations

import json

import boto3
from ownership_support import DEFERRED_WORK_TABLE
from runtime_support import REGION
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.switches.deferred import DRAIN_EVENT_KEY

STEPS = ("DeleteConnection", "RetireGrant", "DeleteScratch")
DRAIN = {DRAIN_EVENT_KEY: True}


class Flags:
    """The AppConfig application, environment and feature-flag profile of one test."""

    def __init__(self) -> None:
        self.ac = boto3.client("appconfig", region_name=REGION)
        self.app = self.ac.create_application(Name="session-expiry")["Id"]
        self.profile = self.ac.create_configuration_profile(
            ApplicationId=self.app,
            Name="cleanup-flags",
            LocationUri="hosted",
            Type="AWS.AppConfig.FeatureFlags",
        )["Id"]
        self.env = self.ac.create_environment(ApplicationId=self.app, Name="live")["Id"]
        self.strategy = self.ac.create_deployment_strategy(
            Name="now", DeploymentDurationInMinutes=0, GrowthFactor=100, ReplicateTo="NONE"
        )["Id"]

    def deploy(self, **off: bool) -> None:
        """Deploy a flag document: every flag on except those given ``False`` (or dryRun on)."""
        names = ["enabled", "dryRun", *STEPS]
        values = {n: {"enabled": off.get(n, n != "dryRun")} for n in names}
        document = {"version": "1", "flags": {n: {"name": n} for n in names}, "values": values}
        version = self.ac.create_hosted_configuration_version(
            ApplicationId=self.app,
            ConfigurationProfileId=self.profile,
            Content=json.dumps(document).encode(),
            ContentType="application/json",
        )["VersionNumber"]
        self.ac.start_deployment(
            ApplicationId=self.app,
            EnvironmentId=self.env,
            DeploymentStrategyId=self.strategy,
            ConfigurationProfileId=self.profile,
            ConfigurationVersion=str(version),
        )
        poll_now()

    def env_vars(self) -> dict[str, str]:
        return {
            "SESSION_EXPIRY_FLAGS_APPLICATION": self.app,
            "SESSION_EXPIRY_FLAGS_ENVIRONMENT": self.env,
            "SESSION_EXPIRY_FLAGS_PROFILE": self.profile,
            # The construct sets the deferred-work table with the flags (and only then).
            "SESSION_EXPIRY_DEFERRED_WORK_TABLE_NAME": DEFERRED_WORK_TABLE,
        }


def poll_now() -> None:
    """The poll interval has passed: the next invocation reads AppConfig again."""
    reader = handler_module._flags
    if reader is not None:
        reader._next_poll = None
