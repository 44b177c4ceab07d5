"""Amazon Bedrock AgentCore targets: the sessions the cleanup stops for each removed session.

An AgentCore runtime session, code interpreter session or browser session keeps running (and
billing) until its own idle timeout unless someone stops it. With these props the cleanup calls,
for a session whose old image names one (attributes ``agentRuntimeSessionId``,
``codeInterpreterSessionId``, ``browserSessionId`` by default):

* ``StopRuntimeSession(agentRuntimeArn, runtimeSessionId, qualifier?)`` (``agent_runtime``,
  ``agent_runtime_qualifier``);
* ``StopCodeInterpreterSession(codeInterpreterIdentifier, sessionId)`` (``code_interpreter``);
* ``StopBrowserSession(browserIdentifier, sessionId)`` (``browser``).

``ResourceNotFoundException`` (the session already ended) counts as done.

Targets: a resource of this app or an imported one through aws-cdk-lib's reference interfaces
(``Runtime``/``CfnRuntime``: ``IRuntimeRef``; ``CodeInterpreterCustom``/
``CfnCodeInterpreterCustom.from_code_interpreter_id``: ``ICodeInterpreterCustomRef``;
``BrowserCustom``/``CfnBrowserCustom.from_browser_id``: ``IBrowserCustomRef``), or a string: the
resource's ARN or identifier (a custom tool's is ``<name>-<10 letters or digits>``).

Each kind may have several sessions per session: the session item holds the latest id in the
single attribute and every id in a String Set (``agentRuntimeSessionIds``,
``codeInterpreterSessionIds``, ``browserSessionIds``, fixed names); the cleanup stops every one
its ownership record shows the removed session owns (`ownership`).

IAM (Service Authorization Reference, "Actions, resources, and condition keys for Amazon Bedrock
AgentCore"): each action on the named resource only, for the cleanup role and for every function
given ``grant_session_access`` (``SessionStore.attach_agent_session`` stops the sessions it
replaces); the actions are the kinds' declared release calls (``session_expiry_runtime/core/
kinds.py``). ``StopRuntimeSession`` on the runtime (``runtime/<id>``) and its one endpoint used
(``runtime/<id>/runtime-endpoint/<qualifier>``, ``DEFAULT`` without a qualifier, the endpoint
AgentCore uses then); ``StopCodeInterpreterSession`` on ``code-interpreter-custom/<id>``;
``StopBrowserSession`` on ``browser-custom/<id>``.

**AWS-managed tools are refused** (``ValueError`` at synth): the ARN of ``aws.codeinterpreter.v1``
(``arn:<partition>:bedrock-agentcore:<region>:aws:code-interpreter/aws.codeinterpreter.v1``) or
``aws.browser.v1`` names one resource shared by every application of the account in that Region,
so a role allowed to stop its sessions may stop any application's sessions there. AWS offers no
condition to narrow it: the reference lists no condition key for ``StopCodeInterpreterSession``
or ``StopBrowserSession``, and none for the AWS-managed ``code-interpreter`` and ``browser``
resource types (the custom types have only ``aws:ResourceTag/${TagKey}``, which a shared AWS
resource does not carry). Use a custom code interpreter or browser of the app
(``aws_bedrockagentcore.CodeInterpreterCustom`` / ``BrowserCustom``). With
``allow_stopping_shared_aws_managed_tool_sessions=True`` the AWS-managed tool is accepted and its
statement is marked by its ``Sid`` (``StopSharedAwsManagedCodeInterpreterSessions``,
``StopSharedAwsManagedBrowserSessions``), without a condition since none exists: the ownership
records then are the only guard (the cleanup stops a session only when its claim names the
removed session), and any code that holds either role can stop other applications' sessions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.interfaces import aws_bedrockagentcore as agentcore_refs
from constructs import Construct

from .. import _kinds, validation
from .. import _runtime_contract as contract

#: An AgentCore runtime: a ``Runtime``/``CfnRuntime`` (or import), or its ARN.
AgentRuntimeTarget = agentcore_refs.IRuntimeRef | str
#: A code interpreter: a custom one (``ICodeInterpreterCustomRef``), its ARN, its identifier, or
#: (with ``allow_stopping_shared_aws_managed_tool_sessions`` only) ``"aws.codeinterpreter.v1"``.
CodeInterpreterTarget = agentcore_refs.ICodeInterpreterCustomRef | str
#: A browser: a custom one (``IBrowserCustomRef``), its ARN, its identifier, or (with
#: ``allow_stopping_shared_aws_managed_tool_sessions`` only) ``"aws.browser.v1"``.
BrowserTarget = agentcore_refs.IBrowserCustomRef | str

#: Endpoint AgentCore uses for ``StopRuntimeSession`` without a qualifier.
DEFAULT_ENDPOINT = "DEFAULT"
_PARTITION = r"aws[a-z-]*"
_REGION = r"[a-z]{2}(?:-[a-z]+)+-\d"
#: Runtime ids: the runtime's name, a ``-`` and exactly 10 letters or digits (the agentRuntimeId
#: pattern of the Amazon Bedrock AgentCore Control API Reference, GetAgentRuntime).
RUNTIME_ID_PATTERN = r"[a-zA-Z][a-zA-Z0-9_]{0,99}-[a-zA-Z0-9]{10}"
_RUNTIME_ARN = re.compile(
    rf"arn:({_PARTITION}):bedrock-agentcore:({_REGION}):(\d{{12}}):runtime/({RUNTIME_ID_PATTERN})"
)
#: Endpoint names (CreateAgentRuntimeEndpoint's name pattern); ``DEFAULT`` fits it.
_QUALIFIER = re.compile(r"[a-zA-Z][a-zA-Z0-9_]{0,47}")
#: Custom tool ids (name + "-" + 10 characters, as CreateCodeInterpreter/CreateBrowser make).
_CUSTOM_ID = r"[a-zA-Z][a-zA-Z0-9_]{0,47}-[a-zA-Z0-9]{10}"
#: AWS-managed tool ids, e.g. ``aws.codeinterpreter.v1``.
_MANAGED_ID = r"aws\.[a-z]+\.v\d+"


@dataclass(frozen=True)
class _Tool:
    """One kind of AgentCore tool: its prop, resource types and environment variable."""

    prop: str
    custom_type: str
    managed_type: str
    managed_example: str
    env: str
    ids_env: str
    default_ids_attribute: str
    action: str
    #: Sid of the statement on an AWS-managed tool (opt-in only): the risk, visible in the
    #: template.
    shared_sid: str
    #: The CDK construct of a custom tool, for the error that refuses an AWS-managed one.
    custom_construct: str

    def arn_pattern(self) -> re.Pattern[str]:
        return re.compile(
            rf"arn:({_PARTITION}):bedrock-agentcore:({_REGION}):"
            rf"(?:(\d{{12}}):{self.custom_type}/({_CUSTOM_ID})|"
            rf"aws:{self.managed_type}/({_MANAGED_ID}))"
        )


CODE_INTERPRETER = _Tool(
    prop="code_interpreter",
    custom_type="code-interpreter-custom",
    managed_type="code-interpreter",
    managed_example="aws.codeinterpreter.v1",
    env=contract.ENV_CODE_INTERPRETER_ID,
    ids_env=contract.ENV_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE,
    default_ids_attribute=contract.DEFAULT_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE,
    action=_kinds.declared("codeInterpreter").iam_action,
    shared_sid="StopSharedAwsManagedCodeInterpreterSessions",
    custom_construct="aws_bedrockagentcore.CodeInterpreterCustom",
)
BROWSER = _Tool(
    prop="browser",
    custom_type="browser-custom",
    managed_type="browser",
    managed_example="aws.browser.v1",
    env=contract.ENV_BROWSER_ID,
    ids_env=contract.ENV_BROWSER_SESSION_IDS_ATTRIBUTE,
    default_ids_attribute=contract.DEFAULT_BROWSER_SESSION_IDS_ATTRIBUTE,
    action=_kinds.declared("browser").iam_action,
    shared_sid="StopSharedAwsManagedBrowserSessions",
    custom_construct="aws_bedrockagentcore.BrowserCustom",
)


@dataclass(frozen=True)
class ToolTarget:
    """A resolved code interpreter or browser: the identifier the API takes and the ARN IAM
    names."""

    identifier: str
    arn: str
    #: An AWS-managed tool (``aws.<tool>.v<n>``), shared by the account's applications.
    aws_managed: bool = False


@dataclass(frozen=True)
class AgentCoreTargets:
    """The AgentCore targets of one ``SessionExpiry`` (each optional) and the session
    attributes naming their sessions."""

    runtime_arn: str | None
    qualifier: str | None
    code_interpreter: ToolTarget | None
    browser: ToolTarget | None
    runtime_session_attribute: str
    code_interpreter_session_attribute: str
    browser_session_attribute: str

    @property
    def any(self) -> bool:
        """True when at least one target is set."""
        return any(t is not None for t in (self.runtime_arn, self.code_interpreter, self.browser))

    def attribute_props(self) -> dict[str, str | None]:
        """The attribute names of the targets that are set, keyed by their prop."""
        props: dict[str, str | None] = {}
        if self.runtime_arn is not None:
            props["agent_runtime_session_attribute"] = self.runtime_session_attribute
        if self.code_interpreter is not None:
            props["code_interpreter_session_attribute"] = self.code_interpreter_session_attribute
        if self.browser is not None:
            props["browser_session_attribute"] = self.browser_session_attribute
        return props

    def attribute_environment(self) -> dict[str, str]:
        """The attribute names of the targets set, for the cleanup and ``SessionStore``: the
        single attribute (the latest session id) and the String Set of every session id."""
        names = {
            "agent_runtime_session_attribute": contract.ENV_AGENT_RUNTIME_SESSION_ATTRIBUTE,
            "code_interpreter_session_attribute": contract.ENV_CODE_INTERPRETER_SESSION_ATTRIBUTE,
            "browser_session_attribute": contract.ENV_BROWSER_SESSION_ATTRIBUTE,
        }
        env = {names[prop]: value for prop, value in self.attribute_props().items() if value}
        return {**env, **self.ids_attribute_props()}

    def ids_attribute_props(self) -> dict[str, str]:
        """The String Set attributes (every session id of a kind) of the targets set, keyed by
        their environment variable; fixed names, no props."""
        env: dict[str, str] = {}
        if self.runtime_arn is not None:
            env[contract.ENV_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE] = (
                contract.DEFAULT_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE
            )
        for tool, target in ((CODE_INTERPRETER, self.code_interpreter), (BROWSER, self.browser)):
            if target is not None:
                env[tool.ids_env] = tool.default_ids_attribute
        return env

    def environment(self) -> dict[str, str]:
        """The targets and their attribute names: what the cleanup reads to stop sessions, and
        what ``SessionStore.attach_agent_session`` reads to stop the sessions it replaces."""
        env = self.attribute_environment()
        if self.runtime_arn is not None:
            env[contract.ENV_AGENT_RUNTIME_ARN] = self.runtime_arn
            if self.qualifier is not None:
                env[contract.ENV_AGENT_RUNTIME_QUALIFIER] = self.qualifier
        for tool, target in ((CODE_INTERPRETER, self.code_interpreter), (BROWSER, self.browser)):
            if target is not None:
                env[tool.env] = target.identifier
        return env

    def statements(self) -> list[iam.PolicyStatement]:
        """One ``bedrock-agentcore:Stop…Session`` statement per target, on that target only (an
        AWS-managed tool's with its ``Sid``; see the module docstring)."""
        found: list[iam.PolicyStatement] = []
        if self.runtime_arn is not None:
            endpoint = self.qualifier or DEFAULT_ENDPOINT
            found.append(
                iam.PolicyStatement(
                    actions=[_kinds.declared("agentRuntime").iam_action],
                    resources=[self.runtime_arn, f"{self.runtime_arn}/runtime-endpoint/{endpoint}"],
                )
            )
        for tool, target in ((CODE_INTERPRETER, self.code_interpreter), (BROWSER, self.browser)):
            if target is not None:
                found.append(
                    iam.PolicyStatement(
                        sid=tool.shared_sid if target.aws_managed else None,
                        actions=[tool.action],
                        resources=[target.arn],
                    )
                )
        return found

    def configure(self, function: lambda_.Function) -> None:
        """The cleanup's environment and `statements`."""
        for name, value in self.environment().items():
            function.add_environment(name, value)
        for statement in self.statements():
            function.add_to_role_policy(statement)

    def grant(self, grantee: iam.IGrantable) -> iam.Grant | None:
        """`statements` on ``grantee``'s policy (an application function: its store stops
        the sessions ``attach_agent_session`` replaces); ``None`` without targets."""
        grant: iam.Grant | None = None
        for statement in self.statements():
            added = iam.Grant.add_to_principal(
                grantee=grantee,
                actions=statement.actions,
                resource_arns=statement.resources,
            )
            if statement.sid:
                # Grant.add_to_principal builds its own statement: mark it like the cleanup's.
                for built in added.principal_statements:
                    built.sid = statement.sid
            grant = added if grant is None else grant.combine(added)
        return grant


def resolve_targets(
    scope: Construct,
    *,
    agent_runtime: AgentRuntimeTarget | None,
    agent_runtime_qualifier: str | None,
    code_interpreter: CodeInterpreterTarget | None,
    browser: BrowserTarget | None,
    agent_runtime_session_attribute: str,
    code_interpreter_session_attribute: str,
    browser_session_attribute: str,
    allow_stopping_shared_aws_managed_tool_sessions: bool = False,
) -> AgentCoreTargets:
    """Check the AgentCore props and settle ARNs and identifiers.

    Raises:
        ValueError: an ARN or identifier not of the expected form (the message gives it), an
            ARN in another Region than the stack's, a qualifier without ``agent_runtime`` or
            not an endpoint name; an AWS-managed code interpreter or browser without
            ``allow_stopping_shared_aws_managed_tool_sessions`` (see the module docstring), or
            that opt-in without an AWS-managed tool.
    """
    runtime_arn = None if agent_runtime is None else _runtime_arn(scope, agent_runtime)
    if agent_runtime_qualifier is not None:
        _check_qualifier(agent_runtime_qualifier, runtime_arn)
    tools = {
        tool: None if target is None else _tool_target(scope, tool, target)
        for tool, target in ((CODE_INTERPRETER, code_interpreter), (BROWSER, browser))
    }
    check_aws_managed_tools(tools, allowed=allow_stopping_shared_aws_managed_tool_sessions)
    return AgentCoreTargets(
        runtime_arn=runtime_arn,
        qualifier=agent_runtime_qualifier,
        code_interpreter=tools[CODE_INTERPRETER],
        browser=tools[BROWSER],
        runtime_session_attribute=agent_runtime_session_attribute,
        code_interpreter_session_attribute=code_interpreter_session_attribute,
        browser_session_attribute=browser_session_attribute,
    )


#: The opt-in prop that accepts an AWS-managed tool (see the module docstring).
OPT_IN_PROP = "allow_stopping_shared_aws_managed_tool_sessions"


def check_aws_managed_tools(tools: dict[_Tool, ToolTarget | None], *, allowed: bool) -> None:
    """Refuse an AWS-managed code interpreter or browser unless ``allowed``, and the opt-in
    without one (it would linger, unexplained, after a switch to a custom tool).

    Raises:
        ValueError: the message names the prop, why, and what to use instead.
    """
    managed = [(tool, t) for tool, t in tools.items() if t is not None and t.aws_managed]
    if allowed and not managed:
        raise ValueError(
            f"{OPT_IN_PROP}=True is set without an AWS-managed code_interpreter or browser: "
            f"expected code_interpreter='aws.codeinterpreter.v1' or browser='aws.browser.v1' "
            f"(or their ARNs), or no {OPT_IN_PROP}"
        )
    if allowed or not managed:
        return
    tool, target = managed[0]
    kind = tool.managed_type.replace("-", " ")
    raise ValueError(
        f"{tool.prop}={target.identifier!r} is the AWS-managed {kind}: its ARN "
        f"(…:aws:{tool.managed_type}/{target.identifier}) names one resource shared by every "
        "application of the account in this Region, and IAM offers no condition to narrow "
        f"{tool.action}, so the cleanup role (and every function given grant_session_access) "
        f"could stop another application's {kind} sessions. Expected a custom {kind} of this "
        f"app ({tool.custom_construct}, its ARN, or its identifier "
        f"'<name>-<10 letters or digits>'), or {OPT_IN_PROP}=True to accept that risk"
    )


def _runtime_arn(scope: Construct, runtime: AgentRuntimeTarget) -> str:
    if not isinstance(runtime, str):
        return runtime.runtime_ref.agent_runtime_arn
    if validation.is_token(runtime):
        return runtime
    found = _RUNTIME_ARN.fullmatch(runtime)
    if found is None:
        raise ValueError(
            f"agent_runtime={runtime!r}: expected an AgentCore runtime ARN "
            "arn:<partition>:bedrock-agentcore:<region>:<account>:runtime/<runtime id>, where "
            "the runtime id is the runtime's name (a letter, then up to 99 letters, digits or "
            f"'_'), a '-' and exactly 10 letters or digits ({RUNTIME_ID_PATTERN}), e.g. "
            "'arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/my_agent-a1B2c3D4e5', "
            "or a Runtime/CfnRuntime"
        )
    _check_region(scope, "agent_runtime", runtime, found.group(2))
    return runtime


def _check_qualifier(qualifier: str, runtime_arn: str | None) -> None:
    if runtime_arn is None:
        raise ValueError(
            f"agent_runtime_qualifier={qualifier!r} is set without agent_runtime: expected an "
            "agent_runtime, or no agent_runtime_qualifier"
        )
    if not validation.is_token(qualifier) and not _QUALIFIER.fullmatch(qualifier):
        raise ValueError(
            f"agent_runtime_qualifier={qualifier!r}: expected an AgentCore runtime endpoint "
            "name (a letter, then up to 47 letters, digits or '_'), e.g. 'DEFAULT' or 'prod'"
        )


def _tool_target(scope: Construct, tool: _Tool, target: object) -> ToolTarget:
    ref = getattr(target, f"{tool.prop}_custom_ref", None)
    if ref is not None:
        return ToolTarget(getattr(ref, f"{tool.prop}_id"), getattr(ref, f"{tool.prop}_arn"))
    if not isinstance(target, str):
        raise validation.PropTypeError(
            f"{tool.prop}={validation.shown(target)}: expected an I{_title(tool.prop)}CustomRef, "
            "an ARN or an identifier"
        )
    if validation.is_token(target):
        raise ValueError(
            f"{tool.prop}={target!r} is unresolved: expected a literal ARN or identifier, or an "
            f"I{_title(tool.prop)}CustomRef (IAM needs the ARN, the cleanup the identifier)"
        )
    if target.startswith("arn:"):
        return _tool_from_arn(scope, tool, target)
    return _tool_from_identifier(scope, tool, target)


def _tool_from_arn(scope: Construct, tool: _Tool, arn: str) -> ToolTarget:
    found = tool.arn_pattern().fullmatch(arn)
    if found is None:
        raise ValueError(
            f"{tool.prop}={arn!r}: expected an ARN "
            f"arn:<partition>:bedrock-agentcore:<region>:<account>:{tool.custom_type}/<id> or "
            f"arn:<partition>:bedrock-agentcore:<region>:aws:{tool.managed_type}/"
            f"{tool.managed_example}"
        )
    _check_region(scope, tool.prop, arn, found.group(2))
    if found.group(5) is not None:
        return ToolTarget(found.group(5), arn, aws_managed=True)
    return ToolTarget(found.group(4), arn)


def _tool_from_identifier(scope: Construct, tool: _Tool, identifier: str) -> ToolTarget:
    stack = Stack.of(scope)
    prefix = f"arn:{stack.partition}:bedrock-agentcore:{stack.region}"
    if re.fullmatch(_MANAGED_ID, identifier):
        return ToolTarget(
            identifier, f"{prefix}:aws:{tool.managed_type}/{identifier}", aws_managed=True
        )
    if re.fullmatch(_CUSTOM_ID, identifier):
        return ToolTarget(identifier, f"{prefix}:{stack.account}:{tool.custom_type}/{identifier}")
    raise ValueError(
        f"{tool.prop}={identifier!r}: expected the identifier of a custom "
        f"{tool.managed_type.replace('-', ' ')} (<name>-<10 letters or digits>, e.g. "
        f"'my_tool-a1B2c3D4e5'), an ARN, or the AWS-managed {tool.managed_example!r} (with "
        f"{OPT_IN_PROP}=True only)"
    )


def _check_region(scope: Construct, prop: str, arn: str, region: str) -> None:
    stack_region = Stack.of(scope).region
    if not validation.is_token(stack_region) and region != stack_region:
        raise ValueError(
            f"{prop}={arn!r} is in Region {region}: expected the stack's Region "
            f"{stack_region}, where the cleanup function calls AgentCore"
        )


def _title(prop: str) -> str:
    return "".join(part.title() for part in prop.split("_"))
