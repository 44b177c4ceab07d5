"""The sample stack: a WebSocket API whose sessions fail closed on time."""

from __future__ import annotations

from pathlib import Path

import jsii
from aws_cdk import Acknowledgment, ArnFormat, Duration, Stack, Validations
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct, IConstruct

from cdk_session_expiry import CLEANUP_RUNTIME, SessionExpiry, checkov

HANDLERS_DIR = Path(__file__).resolve().parent / "handlers"
DEFAULT_STAGE_NAME = "live"
DEFAULT_SESSION_TTL = Duration.hours(1)
#: The expiry sweeper's schedule: an expired session is cleaned within this plus processing.
SWEEP_INTERVAL = Duration.minutes(5)
#: TTL health: alarm when time to live (and the sweeper) deleted nothing for a day while
#: sessions were written. The longest window the prop accepts, so a quiet night is no alarm.
TTL_HEALTH_WINDOW = Duration.days(1)
#: Archived sessions are kept for a year, then expire (no storage class transition: archived
#: sessions are a few KB, below S3's 128 KB default minimum for transitions).
ARCHIVE_EXPIRATION = Duration.days(365)


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    """Access logging of the WebSocket stage: to ``destination``, API Gateway's default format."""

    def __init__(self, destination: apigwv2.IAccessLogDestination) -> None:
        self._destination = destination

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat | None:
        return None


class SessionExpirySampleStack(Stack):
    """WebSocket API ($connect/$default/$disconnect) with sessions managed by SessionExpiry.

    ``$connect`` (IAM-authorized) creates a session and a KMS grant on the session key for the
    message handler's role, ``$default`` heartbeats the session, ``$disconnect`` ends it.
    The cleanup function deletes connections, retires grants and clears scratch objects.

    Beyond time to live (issue 6): the expiry sweeper runs every 5 minutes, so an expired
    session is cleaned within 5 minutes plus processing; a TTL health alarm watches for a day
    without deletions; every cleaned session's old image is archived to an encrypted bucket
    (kept a year) before its cleanup; one ``Session Cleaned`` event per cleaned session goes to
    the ``SessionEventBus`` bus for other services; failed batches go to the SQS on-failure
    queue (replay: ``python -m session_expiry_runtime.replay``).

    Args:
        stage_name: WebSocket stage name. Default: ``"live"``.
        session_ttl: session lifetime, renewed by each message. Default: 1 hour.
        cleanup_enabled: the kill switch; ``False`` disables the cleanup's event source mapping
            (the stream position is kept). Default: ``True``.
        cleanup_dry_run: the cleanup (and sweeper) only log and count what they would do.
            Default: ``False``.
        api_gateway_logs_role: set API Gateway's account-level CloudWatch Logs role, which the
            WebSocket stage's access logging needs; ``False`` when the account already has
            one. Default: on.
        acknowledge_findings: acknowledge the cdk-nag findings this design accepts (see
            ``acknowledge``). Tests turn it off to show every acknowledgement still matches a
            real finding. Default: on.
        agent_runtime_arn, agent_runtime_qualifier, code_interpreter, browser: AgentCore
            targets whose sessions the cleanup stops (``SessionExpiry``'s props of the same
            names; a custom code interpreter and browser of the app, by ARN or identifier: the
            construct refuses the AWS-managed ones). Default: none (the sandbox sets them; a
            real account needs real ones).
        agent_memory, agent_memory_record_namespaces: the AgentCore Memory whose events (and
            records in those namespaces) of each ended session the cleanup deletes. Default:
            none.
        resource_targets: declared resource kinds switched on (``SessionExpiry``'s prop of the
            same name: AgentCore capacity-provider and payment sessions). Default: none.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage_name: str = DEFAULT_STAGE_NAME,
        session_ttl: Duration = DEFAULT_SESSION_TTL,
        cleanup_enabled: bool = True,
        cleanup_dry_run: bool = False,
        acknowledge_findings: bool = True,
        api_gateway_logs_role: bool = True,
        agent_runtime_arn: str | None = None,
        agent_runtime_qualifier: str | None = None,
        code_interpreter: str | None = None,
        browser: str | None = None,
        agent_memory: str | None = None,
        agent_memory_record_namespaces: list[str] | None = None,
        resource_targets: dict[str, str] | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self._acknowledge_findings = acknowledge_findings
        #: (construct path, finding id) of every acknowledgement made.
        self.acknowledgements: list[tuple[str, str]] = []

        # --- keys, buckets, topic --------------------------------------------------------
        session_key = kms.Key(
            self,
            "SessionKey",
            description="Per-session grants of the sample app (retired by session cleanup)",
            enable_key_rotation=True,
        )
        access_logs = s3.Bucket(
            self,
            "AccessLogsBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            # Log delivery is granted by bucket policy (cdk.json flag
            # serverAccessLogsUseBucketPolicy), so ACLs can stay disabled.
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
        )
        scratch = s3.Bucket(
            self,
            "ScratchBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="scratch/",
        )
        archive = s3.Bucket(
            self,
            "ArchiveBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            # A retry overwrites an archived session's object; versions keep the first write
            # and protect the archive against deletes (they expire with the archive).
            versioned=True,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="archive/",
        )
        # Other services react to cleaned sessions here instead of reading the stream.
        event_bus = events.EventBus(
            self, "SessionEventBus", description="Session Cleaned events (cdk-session-expiry)"
        )
        alarm_key = kms.Key(
            self,
            "AlarmTopicKey",
            description="Encrypts the alarm topic; CloudWatch alarms may use it to publish",
            enable_key_rotation=True,
        )
        # Alarms cannot publish to a topic encrypted with the AWS managed key aws/sns.
        alarm_key.grant(
            iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*"
        )
        alarm_topic = sns.Topic(self, "AlarmTopic", master_key=alarm_key, enforce_ssl=True)
        # One customer managed key for the stack's log groups and function environments.
        self.logs_key = kms.Key(
            self,
            "LogsKey",
            description="Encrypts the sample's log groups and function environment variables",
            enable_key_rotation=True,
        )
        self.logs_key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": self.format_arn(
                            service="logs",
                            resource="log-group",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            )
        )
        for bucket, reason in (
            (
                access_logs,
                "The access-log destination of the other buckets: logging it to itself would "
                "loop; its objects expire after 90 days.",
            ),
        ):
            checkov.skip(bucket, ("CKV_AWS_18", reason))
        checkov.skip(
            access_logs,
            ("CKV_AWS_21", "Server access logs are written once and expire after 90 days."),
        )
        checkov.skip(
            scratch,
            (
                "CKV_AWS_21",
                "Per-session scratch data that the cleanup deletes when the session ends: "
                "versions would keep what the cleanup deleted.",
            ),
        )

        # --- WebSocket API -----------------------------------------------------------------
        # Which session a connection belongs to ($default, $disconnect): a session spans
        # several connections, resumed with its token.
        connections = dynamodb.Table(
            self,
            "ConnectionsTable",
            partition_key=dynamodb.Attribute(
                name="connectionId", type=dynamodb.AttributeType.STRING
            ),
            time_to_live_attribute="expiresAt",
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
        )
        checkov.skip(
            connections,
            (
                "CKV_AWS_119",
                "Holds only which session a connection belongs to (two ids), no session data; "
                "encrypted with the AWS managed key aws/dynamodb.",
            ),
        )
        connect_fn = self._handler("ConnectHandler", "connect.handler", session_ttl)
        message_fn = self._handler("MessageHandler", "message.handler", session_ttl)
        disconnect_fn = self._handler("DisconnectHandler", "disconnect.handler", session_ttl)
        for fn in (connect_fn, message_fn, disconnect_fn):
            fn.add_environment("SAMPLE_CONNECTIONS_TABLE", connections.table_name)
        connections.grant(connect_fn, "dynamodb:PutItem")
        connections.grant(message_fn, "dynamodb:GetItem")
        connections.grant(disconnect_fn, "dynamodb:GetItem", "dynamodb:DeleteItem")
        # The message handler keeps each message, encrypted under its session's encryption
        # context, under the session's scratch prefix.
        message_fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"], resources=[scratch.arn_for_objects("sessions/*")]
            )
        )
        api = apigwv2.WebSocketApi(
            self,
            "WebSocketApi",
            description="Sample WebSocket API whose sessions expire (cdk-session-expiry)",
            connect_route_options=apigwv2.WebSocketRouteOptions(
                integration=integrations.WebSocketLambdaIntegration("Connect", connect_fn),
                authorizer=authorizers.WebSocketIamAuthorizer(),
            ),
            default_route_options=apigwv2.WebSocketRouteOptions(
                integration=integrations.WebSocketLambdaIntegration("Message", message_fn),
                # The reply names the session: the token a client resumes it with.
                return_response=True,
            ),
            disconnect_route_options=apigwv2.WebSocketRouteOptions(
                integration=integrations.WebSocketLambdaIntegration("Disconnect", disconnect_fn)
            ),
        )
        for route_id in ("$default-Route", "$disconnect-Route"):
            self.acknowledge(
                api.node.find_child(route_id),
                "AwsSolutions-APIG4",
                "API Gateway accepts an authorizer only on $connect (IAM here); later messages "
                "and the disconnect ride on the connection authorized there.",
            )
        access_log_group = logs.LogGroup(
            self,
            "WebSocketAccessLogs",
            retention=logs.RetentionDays.ONE_MONTH,
            encryption_key=self.logs_key,
        )
        stage = apigwv2.WebSocketStage(
            self,
            "WebSocketStage",
            web_socket_api=api,
            stage_name=stage_name,
            auto_deploy=True,
            access_log_settings=_AccessLogSettings(
                apigwv2.LogGroupLogDestination(access_log_group)
            ),
        )
        if api_gateway_logs_role:
            stage.node.add_dependency(self._api_gateway_account_logs_role())

        # --- sessions ----------------------------------------------------------------------
        self.sessions = SessionExpiry(
            self,
            "Sessions",
            websocket_stage=stage,
            grant_key=session_key,
            scratch_bucket=scratch,
            alarm_actions=[cloudwatch_actions.SnsAction(alarm_topic)],
            expiry_sweep_interval=SWEEP_INTERVAL,
            alarm_ttl_health_window=TTL_HEALTH_WINDOW,
            cleanup_enabled=cleanup_enabled,
            cleanup_dry_run=cleanup_dry_run,
            archive_bucket=archive,
            archive_expiration=ARCHIVE_EXPIRATION,
            # A Glue table, an Athena workgroup and named queries over the archive.
            archive_query=True,
            event_bus=event_bus,
            # Closes checkov's CKV_AWS_158/173 on the construct's functions and log groups.
            function_encryption_key=self.logs_key,
            expiry_sweep_reserved_concurrency=4,  # one per sweeper worker
            agent_runtime=agent_runtime_arn,
            agent_runtime_qualifier=agent_runtime_qualifier,
            code_interpreter=code_interpreter,
            browser=browser,
            agent_memory=agent_memory,
            agent_memory_record_namespaces=agent_memory_record_namespaces,
            resource_targets=resource_targets,
            # Session grants go to the message handler only, bound to their session.
            grant_grantees=[message_fn.role],  # type: ignore[list-item]
            # Kill switches in AWS AppConfig: one step off, a dry run, everything deferred.
            feature_flags=True,
        )
        # Only $connect creates grants; the message handler is the grantee and cannot mint any.
        self.sessions.grant_session_access(connect_fn, create_grants=True)
        for fn in (message_fn, disconnect_fn):
            self.sessions.grant_session_access(fn)
        # The session grant lets the message handler use the session key while a client is
        # connected: $disconnect of the last connection retires it, a resume ($connect) creates
        # a new one (SessionStore's connected_grant, on where the grantee's variable is set).
        for fn in (connect_fn, disconnect_fn):
            fn.add_environment("SESSION_GRANTEE_ROLE_ARN", message_fn.role.role_arn)  # type: ignore[union-attr]
        # $disconnect retires as an IAM principal of the key's account given kms:RetireGrant (AWS
        # KMS Developer Guide, "Retiring and revoking grants": the account delegates it so).
        disconnect_fn.add_to_role_policy(
            iam.PolicyStatement(actions=["kms:RetireGrant"], resources=[session_key.key_arn])
        )
        # The construct acknowledges the findings on its own resources itself
        # (self.sessions.nag_acknowledgements); this stack acknowledges only its own.
        scratch_arn = f"<{self.get_logical_id(scratch.node.default_child)}.Arn>"  # type: ignore[arg-type]
        self.acknowledge(
            message_fn.role.node.find_child("DefaultPolicy"),  # type: ignore[union-attr]
            f"AwsSolutions-IAM5[Resource::{scratch_arn}/sessions/*]",
            "The message handler writes each message under its own session's scratch prefix "
            "(s3:PutObject only); session prefixes are not known in advance.",
        )

    def _api_gateway_account_logs_role(self) -> apigw.CfnAccount:
        """API Gateway's account setting ``cloudWatchRoleArn``, which WebSocket access logging
        needs (one per account and Region: ``sample:apiGatewayLogsRole=false`` leaves an
        existing one alone)."""
        role = iam.Role(
            self,
            "ApiGatewayLogsRole",
            assumed_by=iam.ServicePrincipal("apigateway.amazonaws.com"),
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(
                    "service-role/AmazonAPIGatewayPushToCloudWatchLogs"
                )
            ],
        )
        self.acknowledge(
            role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AmazonAPIGatewayPushToCloudWatchLogs]",
            "API Gateway's account-level logging role: the AWS managed policy is the one AWS "
            "documents for it and keeps current.",
        )
        return apigw.CfnAccount(self, "ApiGatewayAccount", cloud_watch_role_arn=role.role_arn)

    def acknowledge(self, construct: IConstruct, finding_id: str, reason: str) -> None:
        """Acknowledge one cdk-nag finding on ``construct`` (the narrowest that holds it)."""
        self.acknowledgements.append((construct.node.path, finding_id))
        if self._acknowledge_findings:
            Validations.of(construct).acknowledge(Acknowledgment(id=finding_id, reason=reason))

    def _handler(self, construct_id: str, handler: str, session_ttl: Duration) -> lambda_.Function:
        """A route handler: own log group and role (no managed policy), runtime layer added
        by ``grant_session_access``."""
        log_group = logs.LogGroup(
            self,
            f"{construct_id}LogGroup",
            retention=logs.RetentionDays.ONE_MONTH,
            encryption_key=self.logs_key,
        )
        role = iam.Role(
            self, f"{construct_id}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com")
        )
        log_group.grant_write(role)
        self.logs_key.grant_decrypt(role)  # the function's environment
        function = lambda_.Function(
            self,
            construct_id,
            runtime=CLEANUP_RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler=handler,
            code=lambda_.Code.from_asset(str(HANDLERS_DIR), exclude=["__pycache__", "*.pyc"]),
            role=role,
            timeout=Duration.seconds(10),
            memory_size=256,
            logging_format=lambda_.LoggingFormat.JSON,
            log_group=log_group,
            environment={"SESSION_TTL_SECONDS": str(int(session_ttl.to_seconds()))},
            environment_encryption=self.logs_key,
        )
        checkov.skip(function, checkov.VPC)
        checkov.skip(
            function,
            (
                "CKV_AWS_116",
                "Invoked synchronously by API Gateway (a route integration), never "
                "asynchronously: a dead-letter queue would receive nothing.",
            ),
        )
        checkov.skip(
            function,
            (
                "CKV_AWS_115",
                "A route handler of the sample: API Gateway's stage throttling bounds its "
                "invocations; reserving concurrency would take it from the account's pool.",
            ),
        )
        return function
