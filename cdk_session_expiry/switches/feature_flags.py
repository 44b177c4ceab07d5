"""Feature flags in AWS AppConfig: the cleanup's kill switches without a deploy (opt-in).

``SessionExpiry(feature_flags=FeatureFlags())`` (or ``feature_flags=True``) adds, under
``Sessions/FeatureFlags`` (assembled by `FeatureFlagsUnit`):

* an AppConfig **application** and an **environment** whose **monitors** are the cleanup's
  errors alarm and its on-failure destination alarm: a flag deployment during which either goes
  to ``ALARM`` is rolled back (AppConfig User Guide, "Setting up permissions for automatic
  rollback"); the monitor role may ``cloudwatch:DescribeAlarms`` those two alarms only;
* a **feature-flag configuration profile** (type ``AWS.AppConfig.FeatureFlags``) with a **JSON
  Schema validator** (`flag_schema`: exactly the flags below, each ``enabled`` a boolean),
  so a malformed flag document is refused before it is deployed;
* a **deployment strategy** (``deployment_strategy``; default `default_strategy`: all at
  once, then 5 minutes of bake time during which the monitors can roll it back);
* the **initial hosted version**, every lever as deployed (``enabled`` on, ``dryRun`` =
  ``cleanup_dry_run``, every step on), and its **deployment**;
* the **drain schedule**: an EventBridge rule that invokes the cleanup function every 5 minutes
  with ``{"sessionExpiryDrain": true}`` to run the work deferred while a flag was off;
* three **alarms**: ``FeatureFlagsReadFailuresAlarm`` (AppConfig could not be read: the last
  good flags stay in force), ``DeferredWorkAgeAlarm`` (deferred work older than 1 day: a step has
  been off that long, or the drain fails) and ``DeferredWorkRefusedAlarm`` (the drain refused a
  deferred record whose session is still in the table, or that it could not verify).

The flags (`flag_names`): ``enabled``, ``dryRun`` and one per step by its metric ``Action``
(``Archive``, ``DeleteConnection``, ``RetireGrant``, ``DeleteScratch``, the AgentCore steps,
custom steps), for the steps this construct configures. The fan-out (``PublishEvent``) has no
flag. The cleanup (runtime ``session_expiry_runtime.switches.feature_flags``) reads them through the
AppConfig Data API, at most every ``poll_interval`` (default 30 seconds) per execution
environment; IAM: ``appconfig:StartConfigurationSession`` and
``appconfig:GetLatestConfiguration`` on this profile's configuration ARN only. Deferred work goes
to its own table, ``Sessions/DeferredWorkTable``, which only the cleanup role may write
(``cdk_session_expiry.switches.deferred_work``); the drain reads each record back from the session
table
before it acts.

A deploy that changes the set of steps changes the initial version's content: CloudFormation
deploys it, which resets every flag to as-deployed. Cost: AppConfig charges per configuration
request received and per configuration received (AWS AppConfig pricing); at the default
30-second poll, about 86,400 requests a month per warm execution environment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_appconfig as appconfig
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .. import _runtime_contract as contract
from ..monitoring import alarms as alarm_defaults
from ..validation import PropTypeError, is_token

FLAG_ENABLED = "enabled"
FLAG_DRY_RUN = "dryRun"
#: The environment's name: the cleanup names it by name (the data API takes a name or an id).
ENVIRONMENT_NAME = "SessionCleanup"
#: How often the drain of deferred work runs.
DRAIN_INTERVAL = Duration.minutes(5)
#: The fastest poll AppConfig allows (``RequiredMinimumPollIntervalInSeconds``: 15).
MIN_POLL_INTERVAL = Duration.seconds(15)
MAX_POLL_INTERVAL = Duration.hours(1)
#: Deferred work older than this raises ``DeferredWorkAgeAlarm`` (claims outlive their session
#: by 2 days: a claimed step kept off longer finds them gone).
DEFERRED_WORK_AGE_THRESHOLD = Duration.days(1)


@dataclass(frozen=True)
class FeatureFlags:
    """Options of ``SessionExpiry(feature_flags=...)``; ``feature_flags=True`` is
    ``FeatureFlags()``.

    Args:
        deployment_strategy: how a flag change rolls out. Default: `default_strategy`
            (all at once, 5 minutes of bake time watched by the monitors).
        poll_interval: how often a cleanup execution environment reads the flags, at least
            15 seconds (AppConfig's minimum) and at most 1 hour. Default: 30 seconds. A flag
            change reaches every environment within this after its deployment.
    """

    deployment_strategy: appconfig.IDeploymentStrategy | None = None
    poll_interval: Duration | None = None

    def check(self) -> None:
        """Reject bad options.

        Raises:
            TypeError: ``poll_interval`` is not a ``Duration``, or ``deployment_strategy`` not
                an ``aws_appconfig.IDeploymentStrategy``.
            ValueError: ``poll_interval`` outside 15 seconds..1 hour.
        """
        interval = self.poll_interval
        if interval is not None and not isinstance(interval, Duration):
            raise TypeError(
                f"feature_flags.poll_interval={interval!r}: expected a Duration, e.g. "
                "Duration.seconds(30)"
            )
        strategy = self.deployment_strategy
        if strategy is not None and not hasattr(strategy, "deployment_strategy_id"):
            raise TypeError(
                f"feature_flags.deployment_strategy={strategy!r}: expected an "
                "aws_appconfig.IDeploymentStrategy"
            )
        if interval is not None and not is_token(interval):
            seconds = interval.to_seconds()
            if not MIN_POLL_INTERVAL.to_seconds() <= seconds <= MAX_POLL_INTERVAL.to_seconds():
                raise ValueError(
                    f"feature_flags.poll_interval={interval.to_human_string()}: expected 15 "
                    "seconds to 1 hour (AppConfig's minimum poll interval is 15 seconds)"
                )


def settle(value: object) -> FeatureFlags | None:
    """The ``feature_flags`` prop as options: ``True`` → ``FeatureFlags()``, ``False``/``None``
    → ``None``.

    Raises:
        PropTypeError: neither a bool nor a [`FeatureFlags`][cdk_session_expiry.FeatureFlags] (a
            ``TypeError`` and a
            ``ValueError``, as for every prop of the wrong type).
        ValueError: see [`FeatureFlags.check`][cdk_session_expiry.FeatureFlags.check].
    """
    if value is None or value is False:
        return None
    if value is True:
        return FeatureFlags()
    if not isinstance(value, FeatureFlags):
        raise PropTypeError(
            f"feature_flags={value!r}: expected True, False or FeatureFlags(...) "
            "(from cdk_session_expiry import FeatureFlags)"
        )
    value.check()
    return value


def flag_names(step_names: Sequence[str]) -> list[str]:
    """The flags: ``enabled``, ``dryRun``, then one per step (metric ``Action`` names).

    Raises:
        ValueError: a step is named like a lever (``enabled``, ``dryRun``) or twice.
    """
    names = [FLAG_ENABLED, FLAG_DRY_RUN, *step_names]
    if len(set(names)) != len(names):
        raise ValueError(
            f"feature flags: step names {list(step_names)}: expected each once and none "
            f"named {FLAG_ENABLED!r} or {FLAG_DRY_RUN!r}"
        )
    return names


def flag_document(step_names: Sequence[str], *, dry_run: bool) -> dict[str, Any]:
    """The initial flag document (AppConfig's ``AWS.AppConfig.FeatureFlags`` format, version 1):
    every lever as deployed — ``enabled`` on, ``dryRun`` = ``dry_run``, every step on."""
    names = flag_names(step_names)
    return {
        "version": "1",
        "flags": {n: {"name": n} for n in names},
        "values": {n: {"enabled": dry_run if n == FLAG_DRY_RUN else True} for n in names},
    }


def flag_schema(step_names: Sequence[str]) -> dict[str, Any]:
    """The JSON Schema (draft 4, what AppConfig's ``JSON_SCHEMA`` validator reads) a flag
    document must match: version ``"1"``, exactly the flags of `flag_names` declared and
    each given a boolean ``enabled`` value, nothing else."""
    names = flag_names(step_names)
    value = {
        "type": "object",
        "properties": {"enabled": {"type": "boolean"}},
        "required": ["enabled"],
    }
    return {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "required": ["version", "flags", "values"],
        "properties": {
            "version": {"enum": ["1"]},
            "flags": {
                "type": "object",
                "required": names,
                "properties": {n: {"type": "object"} for n in names},
                "additionalProperties": False,
            },
            "values": {
                "type": "object",
                "required": names,
                "properties": dict.fromkeys(names, value),
                "additionalProperties": False,
            },
        },
    }


def default_strategy(scope: Construct) -> appconfig.DeploymentStrategy:
    """All at once (growth 100 %, no deployment time), then 5 minutes of bake time: a kill switch
    acts at once, and the monitors can still roll a bad change back."""
    return appconfig.DeploymentStrategy(
        scope,
        "DeploymentStrategy",
        description="Session cleanup flags: all at once, 5 minutes of bake (cdk-session-expiry)",
        rollout_strategy=appconfig.RolloutStrategy.linear(
            growth_factor=100,
            deployment_duration=Duration.minutes(0),
            final_bake_time=Duration.minutes(5),
        ),
    )


class FeatureFlagsUnit(Construct):
    """The AppConfig resources, the cleanup's access, the drain schedule and the alarms (see
    the module docstring); ``Sessions/FeatureFlags``.

    Args:
        options: the settled ``feature_flags``.
        function: the cleanup function (reads the flags, drains deferred work).
        step_names: the configured steps' metric ``Action`` names.
        dry_run: ``cleanup_dry_run`` (the initial ``dryRun``).
        rollback_alarms: the monitors: a deployment is rolled back when one goes to ALARM.
        metrics_namespace: where the runtime writes its metrics.
        alarm_actions: actions of the three alarms.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        options: FeatureFlags,
        function: lambda_.Function,
        step_names: Sequence[str],
        dry_run: bool,
        rollback_alarms: Sequence[cloudwatch.IAlarm],
        metrics_namespace: str,
        alarm_actions: Sequence[cloudwatch.IAlarmAction],
    ) -> None:
        super().__init__(scope, id)
        self.metrics_namespace = metrics_namespace
        #: The flag names, in order.
        self.flag_names = flag_names(step_names)
        self.application = appconfig.Application(
            self, "Application", description="Session cleanup levers (cdk-session-expiry)"
        )
        self.environment = appconfig.Environment(
            self,
            "Environment",
            application=self.application,
            environment_name=ENVIRONMENT_NAME,
            description="Where the session cleanup reads its flags (cdk-session-expiry)",
            monitors=self._monitors(rollback_alarms),
        )
        self.deployment_strategy = options.deployment_strategy or default_strategy(self)
        self.configuration = appconfig.HostedConfiguration(
            self,
            "Flags",
            application=self.application,
            description="Kill switches of the session cleanup (cdk-session-expiry)",
            type=appconfig.ConfigurationType.FEATURE_FLAGS,
            content=appconfig.ConfigurationContent.from_inline_json(
                json.dumps(flag_document(step_names, dry_run=dry_run))
            ),
            validators=[
                appconfig.JsonSchemaValidator.from_inline(json.dumps(flag_schema(step_names)))
            ],
            deployment_strategy=self.deployment_strategy,
            deploy_to=[self.environment],
        )
        self._configure(function, options.poll_interval or Duration.seconds(30))
        self.drain_schedule = events.Rule(
            self,
            "DrainSchedule",
            description="Runs the session cleanup's deferred work (cdk-session-expiry)",
            schedule=events.Schedule.rate(DRAIN_INTERVAL),
            targets=[
                targets.LambdaFunction(
                    function,
                    event=events.RuleTargetInput.from_object(contract.DRAIN_EVENT),
                    retry_attempts=2,
                )
            ],
        )
        self.read_failures_alarm = self._read_failures_alarm(alarm_actions)
        self.deferred_work_age_alarm = self._deferred_age_alarm(alarm_actions)
        #: ``DeferredWorkRefused`` > 0: the drain refused deferred work (a forged item, or one
        #: whose session is still live).
        self.deferred_work_refused_alarm = alarm_defaults.deferred_work_refused_alarm(
            self,
            metric=self.metric(contract.METRIC_DEFERRED_WORK_REFUSED, "Sum"),
            actions=alarm_actions,
        )

    def _monitors(self, alarms: Sequence[cloudwatch.IAlarm]) -> list[appconfig.Monitor]:
        """One monitor per alarm, with a role that may describe those alarms only."""
        role = iam.Role(
            self,
            "MonitorRole",
            assumed_by=iam.ServicePrincipal("appconfig.amazonaws.com"),
            description="Lets AppConfig watch the session cleanup's alarms (cdk-session-expiry)",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:DescribeAlarms"], resources=[a.alarm_arn for a in alarms]
            )
        )
        return [appconfig.Monitor.from_cloud_watch_alarm(a, role) for a in alarms]

    @property
    def configuration_arn(self) -> str:
        """``arn:aws:appconfig:{region}:{account}:application/{app}/environment/*/configuration/
        {profile}``: the resource of the data API's actions. Any environment of the application
        (it has one): naming the environment's id would make the cleanup function depend on the
        environment, whose monitor depends on the function's errors alarm (a cycle)."""
        return Stack.of(self).format_arn(
            service="appconfig",
            resource="application",
            resource_name=(
                f"{self.application.application_id}/environment/*/configuration/"
                f"{self.configuration.configuration_profile_id}"
            ),
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )

    def _configure(self, function: lambda_.Function, poll_interval: Duration) -> None:
        function.add_environment(contract.ENV_FLAGS_APPLICATION, self.application.application_id)
        function.add_environment(contract.ENV_FLAGS_ENVIRONMENT, ENVIRONMENT_NAME)
        function.add_environment(
            contract.ENV_FLAGS_PROFILE, self.configuration.configuration_profile_id
        )
        function.add_environment(
            contract.ENV_FLAGS_POLL_SECONDS, str(int(poll_interval.to_seconds()))
        )
        function.add_environment(  # for the kill switch's `flags set`
            contract.ENV_FLAGS_DEPLOYMENT_STRATEGY,
            self.deployment_strategy.deployment_strategy_id,
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["appconfig:StartConfigurationSession", "appconfig:GetLatestConfiguration"],
                resources=[self.configuration_arn],
            )
        )

    def metric(self, name: str, statistic: str, **options: Any) -> cloudwatch.Metric:
        """One of the runtime's flag metrics (undimensioned), over 5 minutes by default."""
        props: dict[str, Any] = {"period": alarm_defaults.ALARM_PERIOD, **options}
        return cloudwatch.Metric(
            namespace=self.metrics_namespace, metric_name=name, statistic=statistic, **props
        )

    def _read_failures_alarm(self, actions: Sequence[cloudwatch.IAlarmAction]) -> cloudwatch.Alarm:
        return alarm_defaults.feature_flags_read_failures_alarm(
            self,
            metric=self.metric(contract.METRIC_FEATURE_FLAGS_READ_FAILURES, "Sum"),
            actions=actions,
        )

    def _deferred_age_alarm(self, actions: Sequence[cloudwatch.IAlarmAction]) -> cloudwatch.Alarm:
        return alarm_defaults.deferred_work_age_alarm(
            self,
            metric=self.metric(contract.METRIC_DEFERRED_WORK_AGE, "Maximum"),
            threshold=DEFERRED_WORK_AGE_THRESHOLD,
            actions=actions,
        )
