"""An AWS emulator on localhost: moto's server, in this process, with stream records kept.

Needs the ``[testing]`` extra (``moto[server]>=5.2.5,<5.3`` and ``boto3``); both are imported
when an emulator starts, never when `cdk_session_expiry.testing` is imported.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

from cdk_session_expiry.testing._local_invoke import LocalInvokes
from cdk_session_expiry.testing.agentcore import AgentCoreSessions
from cdk_session_expiry.testing.bedrock_sessions import BedrockSessions
from cdk_session_expiry.testing.models import (
    _moto_agentcore_memory,
    _moto_appconfig,
    _moto_firehose,
    _moto_internals,
    _moto_resource_kinds,
    _moto_transactions,
)

#: Account and Region the emulator answers for (moto's default account).
ACCOUNT_ID = "123456789012"
REGION = "us-east-1"

#: Credentials the emulator accepts; never real ones.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}

_UNMODELLED = re.compile(r"No Moto CloudFormation support for (\S+)")
_ACTIVE: list[LocalEmulator] = []
_ACTIVE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Fault:
    """A request the emulator fails instead of answering, like AWS answers an error.

    Matches requests by HTTP ``method`` and exact (decoded) ``path``, e.g. ``DELETE`` and
    ``/@connections/conn-1`` for one API Gateway Management API ``DeleteConnection``. The answer
    has HTTP ``status``, header ``x-amzn-ErrorType: code`` and a JSON body
    ``{"message": message}``: the REST-JSON error shape botocore reads for API Gateway, Lambda
    and similar services (not the XML of S3, SQS or the JSON-1.0 ``__type`` of DynamoDB).
    """

    method: str
    path: str
    status: int = 403
    code: str = "ForbiddenException"
    message: str = "fault injected by the local emulator"

    @classmethod
    def delete_connection(
        cls,
        connection_id: str,
        *,
        status: int = 403,
        code: str = "ForbiddenException",
        message: str = "fault injected by the local emulator",
    ) -> Fault:
        """The API Gateway Management API's ``DeleteConnection`` of one connection (what the
        cleanup calls to close a session's WebSocket connection). Default: HTTP 403
        ``ForbiddenException``; e.g. ``status=500, code="InternalServerErrorException"``."""
        return cls("DELETE", f"/@connections/{connection_id}", status, code, message)

    def matches(self, environ: Mapping[str, Any]) -> bool:
        """Whether the WSGI request ``environ`` is one this fault answers."""
        return bool(
            environ.get("REQUEST_METHOD") == self.method and environ.get("PATH_INFO") == self.path
        )


#: JSON protocol target of every KMS request (``X-Amz-Target: TrentService.<Operation>``).
_KMS_TARGET_PREFIX = "TrentService."
_KMS_LOCK = threading.Lock()
#: JSON protocol target of every DynamoDB request (not DynamoDB Streams: ``DynamoDBStreams_``).
_DYNAMODB_TARGET_PREFIX = "DynamoDB_20120810."
_DYNAMODB_LOCK = threading.Lock()


class _FaultInjector:
    """WSGI middleware in front of moto's application: answers matching requests with an error,
    and the AgentCore Stop operations and Bedrock session management moto lacks (`agentcore`,
    `bedrock_sessions`; after the faults, so a fault can refuse them too)."""

    def __init__(self, app: Callable[..., Iterable[bytes]], emulator: LocalEmulator) -> None:
        self.app = app
        self.emulator = emulator

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        import json

        for fault in list(self.emulator.faults):
            if fault.matches(environ):
                with self.emulator._lock:
                    self.emulator.faults_hit[fault] = self.emulator.faults_hit.get(fault, 0) + 1
                body = json.dumps({"message": fault.message}).encode("utf-8")
                start_response(
                    f"{fault.status} Injected",
                    [
                        ("Content-Type", "application/json"),
                        ("x-amzn-ErrorType", fault.code),
                        ("Content-Length", str(len(body))),
                    ],
                )
                return [body]
        answered = self.emulator.agentcore.answer(environ, start_response)
        if answered is None:
            answered = self.emulator.bedrock_sessions.answer(environ, start_response)
        if answered is not None:
            return answered
        invoked = self.emulator.local_invokes.answer(self.emulator, environ, start_response)
        if invoked is not None:
            return invoked
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if target.startswith(_KMS_TARGET_PREFIX):
            # moto's Key.retire_grant_by_token rebuilds the key's grant dict without a lock:
            # two RetireGrant (or RetireGrant and CreateGrant) calls answered at once on one
            # key lose one change, which AWS never does. KMS requests go one at a time.
            with _KMS_LOCK:
                return self.app(environ, start_response)
        if target.startswith(_DYNAMODB_TARGET_PREFIX):
            # moto applies a TransactWriteItems action by action and undoes them when one
            # fails (see _moto_transactions), so a write answered meanwhile could be seen
            # half-done or undone; DynamoDB applies a transaction atomically. DynamoDB
            # requests go one at a time.
            with _DYNAMODB_LOCK:
                return self.app(environ, start_response)
        return self.app(environ, start_response)


def _ask_running_emulator_to_step_aside() -> None:
    with _ACTIVE_LOCK:
        running = list(_ACTIVE)
    for other in running:
        if other.on_another_start is not None:
            other.on_another_start()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalEmulator:
    """moto's server on ``http://localhost:{port}``, running in a thread of this process.

    moto's internal DynamoDB-to-Lambda delivery is switched off while the emulator runs, so
    stream records stay readable through GetRecords (see `_moto_internals`). Use it as
    a context manager, or call
    [`start`][cdk_session_expiry.testing.LocalEmulator.start]/[`stop`][cdk_session_expiry.testing.LocalEmulator.stop].

    Args:
        port: TCP port on 127.0.0.1. Default: a free port chosen by the OS.
        region: Region clients use. Default: ``us-east-1``.
        verbose_errors: print moto's tracebacks of requests it failed with HTTP 500.
            Default: off (they are counted in `internal_errors`).

    moto keeps its state in module globals, so one emulator runs per process at a time, and it
    starts from an empty state ([`reset`][cdk_session_expiry.testing.LocalEmulator.reset]).
    ``moto.mock_aws`` resets that state too when it
    starts: do not use ``mock_aws`` in the same process while an emulator holds a deployment.
    """

    def __init__(
        self, *, port: int | None = None, region: str = REGION, verbose_errors: bool = False
    ) -> None:
        self.port = port
        self.verbose_errors = verbose_errors
        #: First lines of errors moto raised while answering a request (answered with HTTP
        #: 500; SDK clients retry them). moto's models are not all thread-safe, e.g. listing a
        #: bucket while keys are deleted concurrently.
        self.internal_errors: list[str] = []
        #: Resource types of deployed templates that moto's CloudFormation does not create
        #: (moto warns and skips them), e.g. ``AWS::S3::BucketPolicy``; the emulator teaches it
        #: the types of `_cloudformation_models.TAUGHT_RESOURCE_TYPES`.
        self.unmodelled_resource_types: set[str] = set()
        self.region = region
        self.account_id = ACCOUNT_ID
        #: Requests answered with an error instead of by moto
        #: ([`inject_fault`][cdk_session_expiry.testing.LocalEmulator.inject_fault]).
        self.faults: list[Fault] = []
        #: How many requests each fault answered.
        self.faults_hit: dict[Fault, int] = {}
        self._server: Any = None
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        #: AgentCore sessions registered as running and the Stop calls answered (moto has no
        #: AgentCore data plane; see `cdk_session_expiry.testing.agentcore`).
        self.agentcore = AgentCoreSessions()
        #: Bedrock session-management sessions (``bedrock-agent-runtime``: moto has none; see
        #: `cdk_session_expiry.testing.bedrock_sessions`).
        self.bedrock_sessions = BedrockSessions(ACCOUNT_ID)
        #: ``Invoke`` of the claim registrar, answered by its deployed code (moto would need
        #: Docker; see `_local_invoke`).
        self.local_invokes = LocalInvokes()
        #: Called when another emulator starts while this one runs; it may stop this one (the
        #: pytest plugin's emulator steps aside between test modules, see ``pytest_plugin``).
        self.on_another_start: Callable[[], None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> LocalEmulator:
        """Start the server; return ``self``.

        Raises:
            MotoInternalsChanged: the installed moto no longer has the internals patched here.
        """
        from moto.server import ThreadedMotoServer

        if self._server is not None:
            return self
        # moto also raises a UserWarning per resource type its CloudFormation does not model
        # (bucket policies, ...); the CDK deploy still succeeds.
        warnings.filterwarnings("ignore", category=UserWarning, module=r"moto\.cloudformation")
        _ask_running_emulator_to_step_aside()
        with _ACTIVE_LOCK:
            if _ACTIVE:
                raise RuntimeError(
                    "another LocalEmulator is running in this process; moto keeps its state in "
                    "module globals, so run one emulator per process (stop the other first)"
                )
            _moto_internals.disable_stream_delivery()
            _moto_transactions.install()
            # AgentCore Memory paging and records, Firehose's dynamic partitioning: moto lacks them.
            _moto_agentcore_memory.install()
            _moto_resource_kinds.install()  # the declared kinds' release calls
            _moto_firehose.install()
            _moto_appconfig.install()  # environments, deployments, the AppConfig Data API
            try:
                from cdk_session_expiry.testing.models import _cloudformation_models

                _cloudformation_models.install()  # alarms, ...: every opt-in deploys
                _moto_internals.date_grants()  # ListGrants answers CreationDate, as AWS does
                port = self.port or _free_port()
                server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
                server.start()
                _moto_internals.wrap_wsgi_app(server, lambda app: _FaultInjector(app, self))
            except BaseException:
                _moto_appconfig.uninstall()
                _moto_firehose.uninstall()
                _moto_resource_kinds.uninstall()
                _moto_agentcore_memory.uninstall()
                _moto_transactions.uninstall()
                _moto_internals.restore_stream_delivery()
                raise
            _ACTIVE.append(self)
        # One access-log line per request drowns every report. Errors inside moto (a 500
        # answered to the client, which the SDK retries) are counted in internal_errors and
        # printed only with verbose_errors. Installed only once the server runs, removed by stop.
        werkzeug_log = logging.getLogger("werkzeug")
        werkzeug_log.setLevel(logging.ERROR)
        werkzeug_log.addFilter(self._error_filter)
        logging.getLogger("moto").addFilter(self._moto_filter)
        self._server = server
        self.port = int(server.get_host_and_port()[1])
        # Start from nothing: state left by an earlier emulator or mock_aws in this process
        # (a bootstrap bucket, say) would make a fresh `cdk bootstrap` fail.
        self.reset()
        return self

    def reset(self) -> None:
        """Forget every resource (moto server's ``POST /moto-api/reset``)."""
        import urllib.request

        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")  # noqa: S310
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - localhost
            response.read()
        self.agentcore.reset()
        self.bedrock_sessions.reset()
        _moto_resource_kinds.reset()
        self.local_invokes.close()

    def _error_filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            self.internal_errors.append(record.getMessage().splitlines()[0][:200])
            return self.verbose_errors
        return True

    def _moto_filter(self, record: logging.LogRecord) -> bool:
        # moto warns once per resource it cannot create from a template; keep them as data.
        found = _UNMODELLED.match(record.getMessage())
        if found:
            self.unmodelled_resource_types.add(found.group(1))
            return False
        return True

    def stop(self) -> None:
        """Stop the server and restore moto's stream delivery. Idempotent."""
        logging.getLogger("werkzeug").removeFilter(self._error_filter)
        logging.getLogger("moto").removeFilter(self._moto_filter)
        if self._server is None:
            return
        try:
            self.local_invokes.close()
            self._server.stop()
        finally:
            self._server = None
            self._clients.clear()
            with _ACTIVE_LOCK:
                if self in _ACTIVE:
                    _ACTIVE.remove(self)
            _moto_appconfig.uninstall()
            _moto_firehose.uninstall()
            _moto_resource_kinds.uninstall()
            _moto_agentcore_memory.uninstall()
            _moto_transactions.uninstall()
            _moto_internals.restore_stream_delivery()

    def __enter__(self) -> LocalEmulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the server is running (between
        [`start`][cdk_session_expiry.testing.LocalEmulator.start] and
        [`stop`][cdk_session_expiry.testing.LocalEmulator.stop])."""
        return self._server is not None

    # -- endpoints and clients ---------------------------------------------------------------
    @property
    def endpoint_url(self) -> str:
        """``http://localhost:{port}``. The CDK CLI needs ``localhost``, not ``127.0.0.1``."""
        if self.port is None or self._server is None:
            raise RuntimeError("the emulator is not running; call start() first")
        return f"http://localhost:{self.port}"

    def aws_env(self) -> dict[str, str]:
        """Environment for any AWS SDK or the CDK CLI to talk to this emulator only.

        ``AWS_ACCOUNT_ID_ENDPOINT_MODE=disabled`` keeps botocore from building account-based
        DynamoDB endpoints, which moto's stream API does not answer.
        """
        return {
            **FAKE_CREDENTIALS,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client for ``service`` bound to this emulator (cached per service)."""
        import boto3
        from botocore.config import Config

        if kwargs:
            return self._new_client(boto3, Config, service, **kwargs)
        with self._lock:
            if service not in self._clients:
                self._clients[service] = self._new_client(boto3, Config, service)
            return self._clients[service]

    def _new_client(self, boto3: Any, config_cls: Any, service: str, **kwargs: Any) -> Any:
        kwargs.setdefault(
            "config",
            config_cls(
                retries={"mode": "standard", "max_attempts": 3},
                max_pool_connections=32,
                account_id_endpoint_mode="disabled",
            ),
        )
        return boto3.session.Session().client(
            service,
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=FAKE_CREDENTIALS["AWS_SESSION_TOKEN"],
            **kwargs,
        )

    # -- faults ------------------------------------------------------------------------------
    def inject_fault(self, fault: Fault) -> Fault:
        """Answer every request matching ``fault`` with its error until
        [`clear_fault`][cdk_session_expiry.testing.LocalEmulator.clear_fault].

        The request never reaches moto, so nothing changes: a transient outage or a refusal
        (``ForbiddenException``) of one call, e.g. one connection's ``DeleteConnection``.
        Returns ``fault``.
        """
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_fault(self, fault: Fault) -> None:
        """Stop failing the requests ``fault`` matched (the fault "ends"). Idempotent."""
        with self._lock:
            if fault in self.faults:
                self.faults.remove(fault)

    # -- behaviour moto does not have --------------------------------------------------------
    def ttl_delete(
        self,
        table_name: str,
        key: Mapping[str, Any],
        *,
        ttl_attribute: str,
        now: float | None = None,
    ) -> str | None:
        """Delete an item the way DynamoDB's TTL service does; return the REMOVE record's number.

        The item is deleted only while its TTL attribute is a Number of epoch seconds at or
        before ``now`` (the TTL service re-checks before deleting), and the REMOVE record on the
        stream then carries ``userIdentity``
        ``{type: Service, principalId: dynamodb.amazonaws.com}``.

        Args:
            key: the item's key in DynamoDB JSON, e.g. ``{"pk": {"S": "s-1"}}``.
            ttl_attribute: the table's TTL attribute name.
            now: epoch seconds. Default: the current time.

        Returns:
            The sequence number of the REMOVE record, or ``None`` when the item does not exist
            or has not expired (nothing deleted).
        """
        import time

        ddb = self.client("dynamodb")
        now_s = int(time.time() if now is None else now)
        try:
            ddb.delete_item(
                TableName=table_name,
                Key=dict(key),
                # A String (or any non-Number) TTL never expires; moto cannot compare S with N.
                ConditionExpression="attribute_type(#t, :n) AND #t <= :now",
                ExpressionAttributeNames={"#t": ttl_attribute},
                ExpressionAttributeValues={":now": {"N": str(now_s)}, ":n": {"S": "N"}},
            )
        except ddb.exceptions.ConditionalCheckFailedException:
            return None
        return _moto_internals.mark_ttl_delete(self.account_id, self.region, table_name, key)

    def open_connection_ids(self) -> set[str]:
        """WebSocket connection ids the API Gateway Management API holds open."""
        return _moto_internals.open_connection_ids(self.account_id, self.region)

    def start_agent_session(
        self,
        kind: str,
        target: str,
        session_id: str,
        *,
        qualifier: str | None = None,
        created_at: datetime | None = None,
    ) -> None:
        """Register a running AgentCore session that ``Stop...Session`` will stop and
        ``List...Sessions`` will list, created at ``created_at`` (default now; see
        [`AgentCoreSessions.start`][cdk_session_expiry.testing.agentcore.AgentCoreSessions.start]);
        unknown sessions answer ResourceNotFoundException."""
        self.agentcore.start(kind, target, session_id, qualifier=qualifier, created_at=created_at)

    def hold_resource(self, kind: str, target: str, resource_id: str) -> None:
        """Register a resource of a declared kind (``session_expiry_runtime/core/kinds.py``, e.g.
        ``"paymentSession"``) that its release call will release; unknown ones answer
        ResourceNotFoundException
        (``cdk_session_expiry/testing/models/_moto_resource_kinds.py``)."""
        _moto_resource_kinds.hold(kind, target, resource_id)

    def age_grants(self, seconds: float) -> int:
        """Make every KMS grant ``seconds`` older: its ``CreationDate`` (which the emulator
        records, moto answers none) moves into the past. The grant sweep leaves grants younger
        than its grace period (15 minutes) alone; age them past it to test the sweep now.
        Returns how many grants were aged."""
        return _moto_internals.age_grants(self.account_id, self.region, seconds)

    def open_connection(self, connection_id: str) -> None:
        """Open a WebSocket connection (moto creates one on its first PostToConnection)."""
        self.client("apigatewaymanagementapi").post_to_connection(
            ConnectionId=connection_id, Data=b"connected"
        )


def apply_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """Set ``env`` in ``os.environ``; return the previous values for `restore_env`."""
    previous = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    return previous


def restore_env(previous: Mapping[str, str | None]) -> None:
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
