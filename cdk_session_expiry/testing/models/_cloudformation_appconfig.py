"""AWS AppConfig resource types for moto's CloudFormation (``feature_flags``), which has none.

Each model creates its resource through moto's AppConfig backend as the emulator teaches it
(`_moto_appconfig`), so a stack deployed by the CDK CLI into the emulator answers the
AppConfig API and the AppConfig Data API like the deployed stack in AWS:

* ``AWS::AppConfig::Application`` — ``Ref``: the application id;
* ``AWS::AppConfig::ConfigurationProfile`` — ``Ref`` and ``ConfigurationProfileId``: its id
  (type, location and validators kept);
* ``AWS::AppConfig::HostedConfigurationVersion`` — ``Ref``: the version number;
* ``AWS::AppConfig::Environment`` — ``Ref`` and ``EnvironmentId``: its id (monitors kept, never
  evaluated);
* ``AWS::AppConfig::DeploymentStrategy`` — ``Ref`` and ``Id``: its id;
* ``AWS::AppConfig::Deployment`` — started and ``COMPLETE`` at once (validated by the profile's
  JSON Schema validators first; a refused document fails the deploy, as in AWS).

An update creates anew (a new version, a new deployment); a delete is best effort.
"""

from __future__ import annotations

from typing import Any

from moto.cloudformation.exceptions import UnformattedGetAttTemplateException
from moto.core.common_models import CloudFormationModel

from cdk_session_expiry.testing.models import _moto_appconfig as appconfig

#: The resource types these models teach moto's CloudFormation.
APPCONFIG_RESOURCE_TYPES = (
    "AWS::AppConfig::Application",
    "AWS::AppConfig::ConfigurationProfile",
    "AWS::AppConfig::HostedConfigurationVersion",
    "AWS::AppConfig::Environment",
    "AWS::AppConfig::DeploymentStrategy",
    "AWS::AppConfig::Deployment",
)


class _AppConfigModel:
    """What every AppConfig model shares: an id, attributes by name, create anew on update. A
    mixin: moto finds models as the *direct* subclasses of ``CloudFormationModel``, so each
    model below names both."""

    resource_type = ""
    attributes: tuple[str, ...] = ()

    def __init__(self, physical_id: str, properties: dict[str, Any]) -> None:
        self.physical_id = physical_id
        self.properties = properties

    @staticmethod
    def cloudformation_name_type() -> str:
        return "Name"

    @classmethod
    def cloudformation_type(cls) -> str:
        return cls.resource_type

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in cls.attributes

    def get_cfn_attribute(self, attribute_name: str) -> str:
        if attribute_name in self.attributes:
            return self.physical_id
        raise UnformattedGetAttTemplateException()

    @property
    def physical_resource_id(self) -> str:
        return self.physical_id

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
    ) -> _AppConfigModel:
        properties = dict(cloudformation_json.get("Properties") or {})
        properties.setdefault("Name", resource_name)
        backend = appconfig.backend_for(account_id, region_name)
        return cls(str(cls.create(backend, properties)), properties)

    @classmethod
    def create(cls, backend: Any, properties: dict[str, Any]) -> str:
        raise NotImplementedError

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> _AppConfigModel:
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
        return None


class CloudFormationAppConfigApplication(_AppConfigModel, CloudFormationModel):
    resource_type = "AWS::AppConfig::Application"

    @classmethod
    def create(cls, backend: Any, properties: dict[str, Any]) -> str:
        app = backend.create_application(properties["Name"], properties.get("Description"), {})
        return str(app.id)


class CloudFormationAppConfigProfile(_AppConfigModel, CloudFormationModel):
    resource_type = "AWS::AppConfig::ConfigurationProfile"
    attributes = ("ConfigurationProfileId",)

    @classmethod
    def create(cls, backend: Any, properties: dict[str, Any]) -> str:
        profile = backend.create_configuration_profile(
            application_id=properties["ApplicationId"],
            name=properties["Name"],
            description=properties.get("Description"),
            location_uri=properties.get("LocationUri") or "hosted",
            retrieval_role_arn=properties.get("RetrievalRoleArn"),
            validators=list(properties.get("Validators") or []),
            _type=properties.get("Type"),
            tags={},
        )
        return str(profile.id)


class CloudFormationAppConfigHostedVersion(_AppConfigModel, CloudFormationModel):
    resource_type = "AWS::AppConfig::HostedConfigurationVersion"

    @classmethod
    def create(cls, backend: Any, properties: dict[str, Any]) -> str:
        version = backend.create_hosted_configuration_version(
            app_id=properties["ApplicationId"],
            config_profile_id=properties["ConfigurationProfileId"],
            description=properties.get("Description"),
            content=properties["Content"],
            content_type=properties.get("ContentType") or "application/json",
            version_label=properties.get("VersionLabel"),
        )
        return str(version.version)


class CloudFormationAppConfigEnvironment(_AppConfigModel, CloudFormationModel):
    resource_type = "AWS::AppConfig::Environment"
    attributes = ("EnvironmentId",)

    @classmethod
    def create(cls, backend: Any, properties: dict[str, Any]) -> str:
        return str(
            appconfig.create_environment(backend, properties["ApplicationId"], properties)["Id"]
        )


class CloudFormationAppConfigStrategy(_AppConfigModel, CloudFormationModel):
    resource_type = "AWS::AppConfig::DeploymentStrategy"
    attributes = ("Id",)

    @classmethod
    def create(cls, backend: Any, properties: dict[str, Any]) -> str:
        return str(appconfig.create_deployment_strategy(backend, properties)["Id"])


class CloudFormationAppConfigDeployment(_AppConfigModel, CloudFormationModel):
    resource_type = "AWS::AppConfig::Deployment"

    @classmethod
    def create(cls, backend: Any, properties: dict[str, Any]) -> str:
        deployment = appconfig.start_deployment(
            backend, properties["ApplicationId"], properties["EnvironmentId"], properties
        )
        return str(deployment["DeploymentNumber"])


#: The models, in the order of `APPCONFIG_RESOURCE_TYPES`.
APPCONFIG_MODELS: list[type[Any]] = [
    CloudFormationAppConfigApplication,
    CloudFormationAppConfigProfile,
    CloudFormationAppConfigHostedVersion,
    CloudFormationAppConfigEnvironment,
    CloudFormationAppConfigStrategy,
    CloudFormationAppConfigDeployment,
]
