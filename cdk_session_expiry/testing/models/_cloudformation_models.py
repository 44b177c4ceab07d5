"""Resource types the emulator teaches moto's CloudFormation, so every opt-in deploys locally.

moto's CloudFormation skips a resource type it has no model for (it warns and creates nothing);
a template that references such a resource (``Fn::GetAtt``) fails to deploy. The construct's
dashboard (``add_dashboard()``, ``widgets()``) graphs the alarms' state by their ARNs, so without
a model for ``AWS::CloudWatch::Alarm`` a stack with a dashboard cannot be deployed into moto.

Each model here creates the resource through moto's own backend API, so the resource then answers
through the service's API as if ``PutMetricAlarm`` (or ``PutFunctionEventInvokeConfig``) had
been called:

* ``AWS::CloudWatch::Alarm`` — ``cloudwatch.put_metric_alarm`` with the template's properties
  (single metric or metric math); ``Ref`` answers the alarm's name and ``Fn::GetAtt Arn`` its
  ARN (``arn:aws:cloudwatch:{region}:{account}:alarm:{name}``), as AWS does. Without an
  ``AlarmName`` the name is generated as CloudFormation does (``{stack}-{logical id}-{suffix}``).
  Nothing evaluates an alarm: moto publishes no AWS metrics and does not compute alarm states.
* ``AWS::Lambda::EventInvokeConfig`` — ``lambda.put_function_event_invoke_config`` (retry
  attempts, maximum event age, destinations of asynchronous invocations), readable with
  ``GetFunctionEventInvokeConfig``. Asynchronous invocation itself is not emulated.
* ``AWS::SSM::Parameter`` without a ``Name`` (the circuit breaker's state parameter): moto's
  model passed no name to ``put_parameter`` and failed the stack's resource listing; the name
  is generated as CloudFormation generates one, then moto's own model creates the parameter.
* the six ``AWS::AppConfig::*`` types of ``feature_flags`` (`_cloudformation_appconfig`);
* ``Ref`` of an ``AWS::Events::EventBus`` — moto's model answers no physical id, so a ``Ref``
  to a bus (a rule on the fan-out bus, ``events.Rule(event_bus=bus)``) resolved to the model
  itself and failed the deploy; it answers the bus's name, as AWS does.
* ``Outputs`` of a stack deployed by the CDK CLI (a change set): moto built them before the
  template was known and answered none; they are rebuilt once the change set is executed.

`install` makes moto's CloudFormation see the models
(`register_cloudformation_models`, which fails
loudly when moto's model registry changes shape). This module imports moto: the emulator imports
it when it starts, never `cdk_session_expiry.testing` itself. The models are module-level
classes so that an emulator snapshot (`snapshot`) can copy the resources they create.
"""

from __future__ import annotations

from typing import Any

from moto.awslambda.models import lambda_backends
from moto.cloudformation.exceptions import UnformattedGetAttTemplateException
from moto.cloudwatch.models import (
    Dimension,
    Metric,
    MetricDataQuery,
    MetricStat,
    cloudwatch_backends,
)
from moto.core.common_models import CloudFormationModel
from moto.ssm.models import Parameter

from cdk_session_expiry.testing.models import _moto_internals
from cdk_session_expiry.testing.models._cloudformation_appconfig import (
    APPCONFIG_MODELS,
    APPCONFIG_RESOURCE_TYPES,
)

#: The resource types `install` teaches moto's CloudFormation (AppConfig's:
#: `_cloudformation_appconfig`).
TAUGHT_RESOURCE_TYPES = (
    "AWS::CloudWatch::Alarm",
    "AWS::Lambda::EventInvokeConfig",
    "AWS::SSM::Parameter",
    *APPCONFIG_RESOURCE_TYPES,
)


def install() -> None:
    """Teach moto's CloudFormation the types of `TAUGHT_RESOURCE_TYPES` and the ``Ref``
    of an event bus; idempotent.

    Raises:
        MotoInternalsChanged: moto's CloudFormation model registry changed shape.
    """
    _moto_internals.register_cloudformation_models(
        [
            CloudFormationAlarm,
            CloudFormationEventInvokeConfig,
            CloudFormationParameter,
            *APPCONFIG_MODELS,
        ],
        TAUGHT_RESOURCE_TYPES,
    )
    _moto_internals.name_event_buses()
    _moto_internals.output_change_set_stacks()


def _metric_data_queries(metrics: list[Any]) -> list[Any] | None:
    """The template's ``Metrics`` (metric math) as moto's ``MetricDataQuery`` objects, built
    the way moto's own ``PutMetricAlarm`` handler builds them."""
    if not metrics:
        return None
    queries = []
    for metric in metrics:
        stat: Any = metric.get("MetricStat") or {}
        inner: Any = stat.get("Metric") or {}
        metric_stat = None
        if inner.get("MetricName"):
            metric_stat = MetricStat(
                metric=Metric(
                    metric_name=inner["MetricName"],
                    namespace=inner.get("Namespace"),
                    dimensions=[
                        Dimension(name=d.get("Name"), value=d.get("Value"))
                        for d in inner.get("Dimensions") or []
                    ],
                ),
                period=stat.get("Period"),
                stat=stat.get("Stat"),
                unit=stat.get("Unit"),
            )
        queries.append(
            MetricDataQuery(
                query_id=metric.get("Id"),
                label=metric.get("Label"),
                period=metric.get("Period"),
                return_data=metric.get("ReturnData"),
                expression=metric.get("Expression"),
                metric_stat=metric_stat,
            )
        )
    return queries


def _put_alarm(name: str, properties: dict[str, Any], account_id: str, region: str) -> Any:
    backend: Any = cloudwatch_backends[account_id][region]
    return backend.put_metric_alarm(
        name=name,
        namespace=properties.get("Namespace"),
        metric_name=properties.get("MetricName"),
        metric_data_queries=_metric_data_queries(properties.get("Metrics") or []),
        comparison_operator=properties.get("ComparisonOperator"),
        evaluation_periods=properties.get("EvaluationPeriods"),
        datapoints_to_alarm=properties.get("DatapointsToAlarm"),
        period=properties.get("Period"),
        threshold=properties.get("Threshold"),
        statistic=properties.get("Statistic"),
        extended_statistic=properties.get("ExtendedStatistic"),
        description=properties.get("AlarmDescription"),
        dimensions=properties.get("Dimensions") or [],
        alarm_actions=properties.get("AlarmActions") or [],
        ok_actions=properties.get("OKActions") or [],
        insufficient_data_actions=properties.get("InsufficientDataActions") or [],
        unit=properties.get("Unit"),
        actions_enabled=properties.get("ActionsEnabled", True) in (True, "true"),
        treat_missing_data=properties.get("TreatMissingData"),
        evaluate_low_sample_count_percentile=properties.get("EvaluateLowSampleCountPercentile"),
        threshold_metric_id=properties.get("ThresholdMetricId"),
        rule=None,
        tags=properties.get("Tags") or [],
    )


class CloudFormationAlarm(CloudFormationModel):
    """``AWS::CloudWatch::Alarm``, created with moto's ``put_metric_alarm``."""

    def __init__(self, alarm: Any) -> None:
        self.alarm = alarm

    @staticmethod
    def cloudformation_name_type() -> str:
        return "AlarmName"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudWatch::Alarm"

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr == "Arn"

    def get_cfn_attribute(self, attribute_name: str) -> str:
        if attribute_name == "Arn":
            return str(self.alarm.alarm_arn)
        raise UnformattedGetAttTemplateException()

    @property
    def physical_resource_id(self) -> str:
        return str(self.alarm.name)

    def is_created(self) -> bool:
        return True

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> CloudFormationAlarm:
        properties = cloudformation_json.get("Properties") or {}
        return cls(_put_alarm(resource_name, properties, account_id, region_name))

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> CloudFormationAlarm:
        cls.delete_from_cloudformation_json(
            original_resource.physical_resource_id,
            cloudformation_json,
            account_id,
            region_name,
        )
        return cls.create_from_cloudformation_json(
            new_resource_name, cloudformation_json, account_id, region_name
        )

    @classmethod
    def delete_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> None:
        cloudwatch_backends[account_id][region_name].delete_alarms([resource_name])


def _event_invoke_config(properties: dict[str, Any]) -> dict[str, Any]:
    """The ``PutFunctionEventInvokeConfig`` request of the template's properties."""
    config: dict[str, Any] = {}
    for name in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds", "DestinationConfig"):
        if properties.get(name) is not None:
            config[name] = properties[name]
    for name in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds"):
        if name in config:
            config[name] = int(config[name])
    return config


class CloudFormationEventInvokeConfig(CloudFormationModel):
    """``AWS::Lambda::EventInvokeConfig``, created with moto's
    ``put_function_event_invoke_config``."""

    def __init__(self, function_name: str, qualifier: str) -> None:
        self.function_name = function_name
        self.qualifier = qualifier

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::Lambda::EventInvokeConfig"

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return False

    def get_cfn_attribute(self, attribute_name: str) -> str:
        raise UnformattedGetAttTemplateException()

    @property
    def physical_resource_id(self) -> str:
        # CloudFormation answers a generated id; the function and qualifier identify it.
        return f"{self.function_name}:{self.qualifier}"

    def is_created(self) -> bool:
        return True

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> CloudFormationEventInvokeConfig:
        properties = cloudformation_json.get("Properties") or {}
        function_name = str(properties["FunctionName"])
        lambda_backends[account_id][region_name].put_function_event_invoke_config(
            function_name, _event_invoke_config(properties)
        )
        return cls(function_name, str(properties.get("Qualifier", "$LATEST")))

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> CloudFormationEventInvokeConfig:
        cls.delete_from_cloudformation_json(
            new_resource_name,
            {"Properties": {"FunctionName": original_resource.function_name}},
            account_id,
            region_name,
        )
        return cls.create_from_cloudformation_json(
            new_resource_name, cloudformation_json, account_id, region_name
        )

    @classmethod
    def delete_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> None:
        function_name = (cloudformation_json.get("Properties") or {}).get("FunctionName")
        if not function_name:
            return
        try:
            lambda_backends[account_id][region_name].delete_function_event_invoke_config(
                str(function_name)
            )
        except Exception:  # noqa: S110 - already gone with its function, as in AWS
            pass


class CloudFormationParameter(CloudFormationModel):
    """``AWS::SSM::Parameter``: moto's own model (``moto.ssm.models.Parameter``), given the
    name CloudFormation generates when the template names none (CloudFormation User Guide,
    ``AWS::SSM::Parameter``, ``Name``: "If you don't specify a name, AWS CloudFormation
    generates a unique physical ID")."""

    @staticmethod
    def cloudformation_name_type() -> str:
        return "Name"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SSM::Parameter"

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return bool(Parameter.has_cfn_attr(attr))

    @staticmethod
    def _named(resource_name: str, cloudformation_json: dict[str, Any]) -> dict[str, Any]:
        properties = dict(cloudformation_json.get("Properties") or {})
        properties["Name"] = properties.get("Name") or resource_name
        return {**cloudformation_json, "Properties": properties}

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        return Parameter.create_from_cloudformation_json(
            resource_name,
            cls._named(resource_name, cloudformation_json),
            account_id,
            region_name,
            **kwargs,
        )

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> Any:
        return Parameter.update_from_cloudformation_json(
            original_resource,
            new_resource_name,
            cls._named(new_resource_name, cloudformation_json),
            account_id,
            region_name,
        )

    @classmethod
    def delete_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> None:
        Parameter.delete_from_cloudformation_json(
            resource_name, cloudformation_json, account_id, region_name
        )
