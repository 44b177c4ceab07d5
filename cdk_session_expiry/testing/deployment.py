"""Read a deployed stack back from the emulator: resources, mappings, function code.

Nothing here looks at the CDK app's Python objects: every value comes from the emulator's
CloudFormation, DynamoDB, Lambda and S3 APIs, so what runs locally is what was deployed.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cdk_session_expiry.testing.emulator import LocalEmulator
from cdk_session_expiry.testing.poller import EventSourceMappingConfig

_WORKER = Path(__file__).resolve().parent / "_lambda_worker.py"
_EXECUTE_API = re.compile(r"^https://[^/]+\.execute-api\.[^/.]+\.amazonaws\.com(/.*)?$")


class FunctionError(Exception):
    """The deployed handler raised (Lambda's ``Unhandled`` function error)."""

    def __init__(self, error_type: str, message: str, stack_trace: list[str]) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message
        self.stack_trace = stack_trace


class FunctionTimeout(FunctionError):
    """The handler ran past the function's timeout; its process was stopped."""


@dataclass
class DeployedFunction:
    """A Lambda function as the emulator holds it, with its deployed code asset.

    Attributes:
        configuration: ``GetFunction()["Configuration"]``.
        code_location: ``GetFunction()["Code"]["Location"]``.
    """

    emulator: LocalEmulator
    configuration: dict[str, Any]
    code_location: str
    _task_root: Path | None = field(default=None, repr=False)

    @classmethod
    def read(cls, emulator: LocalEmulator, name_or_arn: str) -> DeployedFunction:
        """The function ``name_or_arn`` as the emulator holds it (``GetFunction``).

        Raises:
            botocore.exceptions.ClientError: no such function (``ResourceNotFoundException``).
        """
        got = emulator.client("lambda").get_function(FunctionName=name_or_arn)
        return cls(emulator, got["Configuration"], got.get("Code", {}).get("Location", ""))

    @property
    def arn(self) -> str:
        """The function's ARN."""
        return str(self.configuration["FunctionArn"])

    @property
    def name(self) -> str:
        """The function's name."""
        return str(self.configuration["FunctionName"])

    @property
    def handler(self) -> str:
        """The function's ``Handler`` (``module.function`` in its code asset)."""
        return str(self.configuration["Handler"])

    @property
    def timeout_ms(self) -> int:
        """The function's timeout in milliseconds (Lambda's default: 3 seconds)."""
        return int(self.configuration.get("Timeout", 3)) * 1000

    @property
    def role_arn(self) -> str:
        """The ARN of the function's execution role."""
        return str(self.configuration["Role"])

    @property
    def environment(self) -> dict[str, str]:
        """The function's environment variables, as deployed."""
        return dict((self.configuration.get("Environment") or {}).get("Variables") or {})

    def code_zip(self) -> bytes:
        """The deployed code asset, fetched from the bootstrap assets bucket.

        moto reports ``Code.Location`` on AWS's Lambda bucket, which it does not serve; the
        object key in that URL is the asset's key in the bootstrap bucket. The bytes are checked
        against the function's ``CodeSha256``.

        Raises:
            LookupError: no bootstrap bucket holds the asset, or its hash differs.
        """
        key = self.code_location.rsplit("/", 1)[-1]
        s3 = self.emulator.client("s3")
        expected = self.configuration.get("CodeSha256")
        tried = []
        for bucket in _bootstrap_buckets(self.emulator):
            tried.append(bucket)
            try:
                body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            except s3.exceptions.NoSuchKey:
                continue
            digest = base64.b64encode(hashlib.sha256(body).digest()).decode("ascii")
            if expected and digest != expected:
                raise LookupError(
                    f"s3://{bucket}/{key} has sha256 {digest}, but function "
                    f"{self.name} was deployed with {expected}"
                )
            return bytes(body)
        raise LookupError(f"code asset {key} of {self.name} not found in buckets {tried}")

    def task_root(self) -> Path:
        """The code asset extracted to a temporary directory (like Lambda's /var/task)."""
        if self._task_root is None:
            root = Path(tempfile.mkdtemp(prefix=f"lambda-{self.name[:40]}-"))
            with zipfile.ZipFile(io.BytesIO(self.code_zip())) as archive:
                for member in archive.infolist():
                    target = (root / member.filename).resolve()
                    if root.resolve() not in target.parents and target != root.resolve():
                        raise ValueError(f"code asset entry {member.filename!r} escapes the root")
                archive.extractall(root)
            self._task_root = root
        return self._task_root

    def remove_task_root(self) -> None:
        """Delete the extracted code asset, if any."""
        if self._task_root is not None:
            shutil.rmtree(self._task_root, ignore_errors=True)
            self._task_root = None

    def runtime_env(self, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment the handler runs with: its deployed variables, Lambda's reserved
        variables, and the emulator's endpoint and fake credentials.

        A WebSocket management endpoint (``https://{api}.execute-api.{region}.amazonaws.com/{stage}``)
        in the function's variables is pointed at the emulator, whose API Gateway Management API
        answers on ``{endpoint}/@connections`` without api id or stage.
        """
        env = {k: v for k, v in self.environment.items()}
        for name, value in env.items():
            if _EXECUTE_API.match(value):
                env[name] = self.emulator.endpoint_url
        env.update(self.emulator.aws_env())
        env.update(
            {
                "AWS_LAMBDA_FUNCTION_NAME": self.name,
                "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.configuration.get("MemorySize", 128)),
                "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{self.name}",
                "AWS_EXECUTION_ENV": f"AWS_Lambda_{self.configuration.get('Runtime', 'python')}",
                "_HANDLER": self.handler,
                "LAMBDA_TASK_ROOT": str(self.task_root()),
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )
        if overrides:
            env.update(overrides)
        return env

    def start(
        self,
        *,
        env_overrides: Mapping[str, str] | None = None,
        on_log: Callable[[str], None] | None = None,
    ) -> LocalLambda:
        """Start a worker process that hosts the deployed handler; see
        [`LocalLambda`][cdk_session_expiry.testing.LocalLambda]."""
        return LocalLambda(self, self.runtime_env(env_overrides), on_log=on_log)


class LocalLambda:
    """The deployed handler, running in its own Python process from its extracted code asset.

    The process has the function's environment
    ([`DeployedFunction.runtime_env`][cdk_session_expiry.testing.DeployedFunction.runtime_env]),
    imports
    the handler module from the code asset only (``LAMBDA_TASK_ROOT`` first on ``sys.path``),
    and stays warm between invocations like a Lambda execution environment. Call it like a
    handler: ``local(event, context)``; it returns the handler's response or raises
    [`FunctionError`][cdk_session_expiry.testing.FunctionError]. Log lines (stdout and stderr of
    the handler) go to ``on_log`` and
    are kept in `logs`.
    """

    def __init__(
        self,
        function: DeployedFunction,
        env: Mapping[str, str],
        *,
        on_log: Callable[[str], None] | None = None,
    ) -> None:
        self.function = function
        self.env = dict(env)
        self.logs: list[str] = []
        self._on_log = on_log
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._responses: queue.Queue[str | None] = queue.Queue()
        self._spawn()

    def _spawn(self) -> None:
        proc = subprocess.Popen(  # noqa: S603 - this interpreter running our worker file
            [
                sys.executable,
                "-u",
                str(_WORKER),
                str(self.function.task_root()),
                self.function.handler,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        self._proc = proc
        self._responses = queue.Queue()
        assert proc.stdout is not None and proc.stderr is not None
        threading.Thread(
            target=self._pump, args=(proc.stdout, self._responses), daemon=True
        ).start()
        threading.Thread(target=self._pump_logs, args=(proc.stderr,), daemon=True).start()
        first = self._next_line(timeout_s=120)
        reply = json.loads(first)
        if not reply.get("ready"):
            self.close()
            raise FunctionError(
                reply.get("errorType", "Runtime.Error"),
                reply.get("errorMessage", first),
                reply.get("stackTrace", []),
            )

    @staticmethod
    def _pump(stream: IO[str], sink: queue.Queue[str | None]) -> None:
        for line in stream:
            sink.put(line)
        sink.put(None)

    def _pump_logs(self, stream: IO[str]) -> None:
        for line in stream:
            line = line.rstrip("\n")
            self.logs.append(line)
            if self._on_log is not None:
                self._on_log(line)

    def _next_line(self, timeout_s: float) -> str:
        try:
            line = self._responses.get(timeout=timeout_s)
        except queue.Empty:
            raise FunctionTimeout(
                "Sandbox.Timedout", f"Task timed out after {timeout_s:.2f} seconds", []
            ) from None
        if line is None:
            code = self._proc.wait() if self._proc else None
            raise FunctionError(
                "Runtime.ExitError", f"the runtime process exited with {code}", self.logs[-20:]
            )
        return line

    def __call__(self, event: Mapping[str, Any], context: Any = None) -> Any:
        """Invoke the handler with ``event``; return its response (see
        [`invoke`][cdk_session_expiry.testing.LocalLambda.invoke])."""
        return self.invoke(event, context)

    def invoke(
        self, event: Mapping[str, Any], context: Any = None, *, call_first: Sequence[str] = ()
    ) -> Any:
        """Invoke the handler with ``event``; return its response. One invocation at a time:
        a second caller waits for the first (like reserved concurrency 1).

        Args:
            event: the event, JSON-serialisable.
            context: only its ``aws_request_id`` is used. Default: a new request id.
            call_first: names of functions of the handler's module to call, without
                arguments, in the worker just before the handler (e.g. the expiry sweeper's
                ``stop_after_pass``: one pass only). Default: none.

        Raises:
            FunctionError: the handler raised, the process died, or it timed out (then the
                process is restarted for the next invocation, like a new execution environment).
        """
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._spawn()
            request = {
                "event": event,
                "timeout_ms": self.function.timeout_ms,
                "function_arn": self.function.arn,
                "request_id": getattr(context, "aws_request_id", str(uuid.uuid4())),
                "call_first": list(call_first),
            }
            self._send(request)
            try:
                reply = json.loads(self._next_line(self.function.timeout_ms / 1000 + 2))
            except FunctionError:
                self.close()
                raise
        if "response" in reply:
            return reply["response"]
        raise FunctionError(
            reply.get("errorType", "Error"),
            reply.get("errorMessage", ""),
            reply.get("stackTrace", []),
        )

    def _send(self, message: Mapping[str, Any]) -> None:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        with self._write_lock:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()

    def call(self, name: str) -> None:
        """Call the function ``name`` of the handler's module in the worker now, without
        arguments, even while an invocation runs (e.g. the expiry sweeper's
        ``stop_after_pass``). Nothing is answered; a module without ``name`` ignores it. Does
        nothing when the worker is not running."""
        if self._proc is None or self._proc.poll() is not None:
            return
        try:
            self._send({"call": name})
        except (OSError, ValueError):  # the worker just exited: nothing to stop
            pass

    def close(self) -> None:
        """Stop the worker process. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _bootstrap_buckets(emulator: LocalEmulator) -> list[str]:
    cfn = emulator.client("cloudformation")
    buckets: list[str] = []
    try:
        stacks = cfn.describe_stacks(StackName="CDKToolkit")["Stacks"]
    except Exception:
        stacks = []
    for stack in stacks:
        for output in stack.get("Outputs", []):
            if output.get("OutputKey") == "BucketName":
                buckets.append(output["OutputValue"])
    for bucket in emulator.client("s3").list_buckets().get("Buckets", []):
        if bucket["Name"].startswith("cdk-") and bucket["Name"] not in buckets:
            buckets.append(bucket["Name"])
    return buckets


@dataclass
class DeployedStack:
    """A CloudFormation stack in the emulator: its template, resources and outputs."""

    emulator: LocalEmulator
    name: str
    template: dict[str, Any]
    resources: dict[str, tuple[str, str]]  # logical id -> (type, physical id)
    outputs: dict[str, str]

    @classmethod
    def read(cls, emulator: LocalEmulator, stack_name: str) -> DeployedStack:
        """The stack ``stack_name`` as the emulator's CloudFormation holds it.

        Raises:
            botocore.exceptions.ClientError: no such stack (``ValidationError``).
        """
        cfn = emulator.client("cloudformation")
        body = cfn.get_template(StackName=stack_name)["TemplateBody"]
        template = body if isinstance(body, dict) else json.loads(body)
        resources: dict[str, tuple[str, str]] = {}
        paginator = cfn.get_paginator("list_stack_resources")
        for page in paginator.paginate(StackName=stack_name):
            for summary in page["StackResourceSummaries"]:
                resources[summary["LogicalResourceId"]] = (
                    summary["ResourceType"],
                    summary.get("PhysicalResourceId", ""),
                )
        stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
        outputs = {o["OutputKey"]: o.get("OutputValue", "") for o in stack.get("Outputs", [])}
        return cls(emulator, stack_name, template, resources, outputs)

    def physical_ids(self, resource_type: str) -> dict[str, str]:
        """Physical ids of this stack's resources of ``resource_type``, by logical id."""
        return {lid: pid for lid, (rtype, pid) in self.resources.items() if rtype == resource_type}

    def ttl_attribute(self, table_logical_id: str) -> str | None:
        """The table's TTL attribute from the deployed template (moto ignores the setting)."""
        props = self.template.get("Resources", {}).get(table_logical_id, {}).get("Properties", {})
        spec = props.get("TimeToLiveSpecification") or {}
        if spec.get("Enabled") in (True, "true") and isinstance(spec.get("AttributeName"), str):
            return str(spec["AttributeName"])
        return None

    def event_source_mappings(self) -> list[EventSourceMappingConfig]:
        """This stack's DynamoDB Streams event source mappings, as Lambda reports them."""
        uuids = set(self.physical_ids("AWS::Lambda::EventSourceMapping").values())
        lam = self.emulator.client("lambda")
        found: list[EventSourceMappingConfig] = []
        for page in lam.get_paginator("list_event_source_mappings").paginate():
            for mapping in page["EventSourceMappings"]:
                if mapping.get("UUID") in uuids and ":dynamodb:" in mapping["EventSourceArn"]:
                    found.append(EventSourceMappingConfig.from_api(mapping))
        return found
