"""Resource kinds: each kind of resource a session owns, declared once.

A **resource kind** is everything the construct and the runtime need to know about one kind of
resource a session holds and the cleanup releases: the session attribute that records its ids,
the ownership records' kind (``<kind>#<id>``), the id rule, the call that releases one (client,
operation, parameters, the answers that mean "already gone"), the IAM action and resource, the
construct prop naming its target, the metric ``Action`` and the row of the docs' "what remains"
table. Everything else derives from the declaration:

=============================  ================================================================
what                           derived by
=============================  ================================================================
the cleanup step               `session_expiry_runtime.steps.released.ReleasedKindStep` (one per
                               configured kind, in `session_expiry_runtime.steps.build_steps`),
                               or the kind's own (``step``)
recording an id (with claim)   ``SessionStore.attach_resource(session_id, kind, id)``; the
                               ``OwnProps.argument`` kinds also ``create``/``attach_agent_session``
stopping replaced sessions     ``attach_agent_session(stop_previous=True)``: the declared call
the registrar's "named ids"    `session_expiry_runtime.registrar` reads every kind's attributes
the ownership kinds, labels    `session_expiry_runtime.core.ownership.KINDS`, ``store_parts.claims``
the runtime's settings         ``RuntimeConfig.kind_targets``/``kind_attributes`` (from_env)
the boto3 client               ``CleanupClients.services`` (one per service)
construct prop, env, IAM       ``SessionExpiry(resource_targets={prop: target})``
                               (`cdk_session_expiry.resource_kinds`); an ``OwnProps`` kind's
                               IAM action and metric ``Action`` from its declaration, its typed
                               prop's validation in ``cdk_session_expiry.agents``
the price of the call          ``cdk_session_expiry.cost.CALL_PRICES``
the docs row                   ``docs/agentcore.md``, checked by ``tests/test_resource_kinds.py``
=============================  ================================================================

Adding a kind is one `ResourceKind` in `DECLARED_KINDS` (plus its tests and docs); a resource
ended before it is deleted declares both calls (``Release.first``: the Bedrock session kind); a
call with an optional parameter of the configuration declares it (``Release.options``: the
runtime's endpoint ``qualifier``); a kind switched on by typed props of its own rather than a
key of ``resource_targets`` says where its settings live (``OwnProps``: the AgentCore runtime,
code interpreter, browser and Memory kinds; ``OwnProps.argument`` is the keyword of
``SessionStore.create``/``attach_agent_session`` that records one id, and their replaced
sessions are stopped with the same declared call); a kind whose release is more than calls per
id names a step class of its own (``step``, ``step_action``: AgentCore Memory lists its events
page by page under the time guard, deletes each, then the long-term records of the namespaces
given, and counts both per memory session).

**Connections and grants are not declared here**: owned and claimed like every kind, but their
release and recording do what a declaration cannot say. A connection is deleted on the API
Gateway Management API of one stage (a client built on the stage's callback URL, IAM
``execute-api:ManageConnections`` on ``…/{stage}/DELETE/@connections/*``, ``GoneException``),
and is recorded by the reconnect rules (``attach_connection`` closing the earlier ones,
``detach_connection``, grants bound to the last connection). A grant is retired with
``RetireGrant(KeyId, GrantId)`` paced by the KMS budget shared with the grant sweep
(``shared_pace``), recorded with a token never logged, proven the session's by its ``Name`` on
items written before ownership records (``grant_names``), and trusted gone on
``NotFoundException`` only once older than KMS's consistency window. What of theirs derives from
one place: their ownership kinds (``ownership.KINDS``) and labels (``store_parts.claims``), their
metric ``Action`` and reserved step names (``config.ACTION_*``) and their prices
(``cdk_session_expiry.cost.CALL_PRICES``); docs/development.md, "Resource kinds: declared once".

This module is **standard library only** and imports nothing of this package: the construct
loads this very file by its path (``cdk_session_expiry/_kinds.py``; the construct never
imports the runtime package, and the runtime is deployed alone in the Lambda asset), so both
sides read one declaration. Custom steps' own kinds (``CustomCleanupStep(resource_attribute=
...)``, ``custom:<name>``) are `ResourceKind` values too (`custom_resource_kind`), built from
``SESSION_EXPIRY_CUSTOM_KINDS`` at run time, released by the user's handler.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "BUILTIN_KIND_NAMES",
    "DECLARED_KINDS",
    "DocsRow",
    "Ids",
    "OwnProps",
    "Release",
    "ResourceKind",
    "StepCall",
    "Target",
    "custom_resource_kind",
    "declared_kind",
    "method_of",
]

#: What a session already ended or deleted answers on the AgentCore data plane (Amazon Bedrock
#: AgentCore API Reference: every Stop/Delete operation lists ``ResourceNotFoundException``).
NOT_FOUND = ("ResourceNotFoundException",)


@dataclass(frozen=True)
class Ids:
    """How a session records the ids of one kind.

    Attributes:
        attribute: the String Set attribute holding every id (its default name).
        env: the environment variable that names the attribute (the construct sets it).
        pattern: a regular expression every usable id matches in full (the API's pattern).
        lengths: the API's (shortest, longest) id, in characters.
        expected: the rule in words, for errors ("1-100 letters, digits, '-' or '_'").
    """

    attribute: str
    env: str
    pattern: str = r"(?s).+"
    lengths: tuple[int, int] = (1, 400_000)
    expected: str = "a non-empty string"

    def usable(self, value: object) -> bool:
        """``True`` for an id the API accepts (never raises)."""
        low, high = self.lengths
        return (
            isinstance(value, str)
            and low <= len(value) <= high
            and re.fullmatch(self.pattern, value) is not None
        )


@dataclass(frozen=True)
class Target:
    """The resource the ids live on (a capacity provider, a payment manager), set once per
    construct.

    Attributes:
        env: the environment variable holding it (the cleanup's and ``SessionStore``'s).
        prop: the key of ``SessionExpiry(resource_targets={...})`` that sets it.
        pattern: a regular expression a literal target matches in full; a group named ``id``,
            if any, is what the API takes (an ARN given, an identifier sent).
        expected: the accepted forms in words, for the construct's error.
        iam_resource: the IAM resource ARN, with ``{partition}``, ``{region}``, ``{account}``
            and ``{target}`` (the target as the API takes it).
    """

    env: str
    prop: str
    pattern: str
    expected: str
    iam_resource: str


@dataclass(frozen=True)
class Release:
    """The call that releases one id.

    Attributes:
        operation: the API operation (``"DeleteCapacityProviderSession"``); also the metric's
            ``Action`` and the step's name.
        id_parameter: the operation's parameter taking the id.
        target_parameter: the parameter taking the target (``None``: none).
        gone: the error codes meaning the resource is already gone (``already-done``).
        after: names (``Action``) of the steps that must have finished for the session before
            this one starts (the runtime session is stopped before its workspace is deleted).
        price: ``cdk_session_expiry.cost.CALL_PRICES``'s entry: (price key, units, what counts),
            for ``first`` too.
        first: an operation called before ``operation``, with the same parameters, for a
            resource that must be ended before it can be deleted (``EndSession`` before
            ``DeleteSession``); ``None``: one call. Its ``gone`` answers mean already done (the
            second call is not made), its ``first_continues`` answers go on to the second call,
            any other fails the step.
        first_continues: the error codes of ``first`` that go on to ``operation`` (a resource
            already ended, say).
        options: optional parameters of both calls, each ``(parameter, setting)``: sent when
            the configuration sets ``setting`` (a `RuntimeConfig` field, `OwnProps`): the
            runtime's endpoint ``qualifier``.
    """

    operation: str
    id_parameter: str
    target_parameter: str | None = None
    gone: tuple[str, ...] = NOT_FOUND
    after: tuple[str, ...] = ()
    price: tuple[str, float, str] = ("agentcore_stop", 1, "call")
    first: str | None = None
    first_continues: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()

    @property
    def operations(self) -> tuple[str, ...]:
        """Every operation of one release, in call order (``first``, then ``operation``)."""
        return (*((self.first,) if self.first else ()), self.operation)

    @property
    def method(self) -> str:
        """The boto3 method: ``DeletePaymentSession`` → ``delete_payment_session``."""
        return method_of(self.operation)


def method_of(operation: str) -> str:
    """The boto3 method of an API operation: ``EndSession`` → ``end_session``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower()


@dataclass(frozen=True)
class StepCall:
    """One operation a kind's own step calls (``ResourceKind.step_calls``), granted on the
    kind's target.

    Attributes:
        operation: the API operation (``"ListEvents"``).
        when: the setting that switches the call on — a `RuntimeConfig` field and the
            construct prop of the same name (``"agent_memory_record_namespaces"``); ``None``:
            always.
    """

    operation: str
    when: str | None = None


@dataclass(frozen=True)
class OwnProps:
    """Where a built-in kind switched on by a typed prop of its own (``agent_runtime``,
    ``code_interpreter``, ``browser``, ``agent_memory``), not by a key of ``resource_targets``,
    keeps its settings on each side.

    Attributes:
        prop: the ``SessionExpiry`` prop naming its target (the construct builds the step's
            metric ``Action`` list from it).
        target_field: the `RuntimeConfig` field holding the target (``None``: the kind is off).
        target_env: the environment variable setting it (named by ``SessionStore``'s errors).
        ids_field: the `RuntimeConfig` field naming the String Set of every id.
        single_field: the field naming the attribute of the latest id (items written before
            the sets hold only it); ``None``: none.
        argument: the keyword of ``SessionStore.create`` and ``attach_agent_session`` recording
            one id (``runtime_session_id``); ``None``: recorded otherwise.
        what: what that argument's errors call one id (``"runtime session id"``).
    """

    prop: str
    target_field: str
    target_env: str
    ids_field: str
    single_field: str | None = None
    argument: str | None = None
    what: str = ""


@dataclass(frozen=True)
class DocsRow:
    """The kind's row in ``docs/agentcore.md``'s "what the cleanup releases, and what remains"
    table: ``| service | releases | remains |``."""

    service: str
    releases: str
    remains: str

    def markdown(self) -> str:
        return f"| {self.service} | {self.releases} | {self.remains} |"


@dataclass(frozen=True)
class ResourceKind:
    """One kind of resource a session owns (module docstring).

    Attributes:
        kind: the ownership records' kind, the first part of ``<kind>#<id>``.
        service: the boto3 client of its release calls.
        iam_prefix: the IAM service prefix of its actions; ``None``: ``service`` (AgentCore's
            is; ``bedrock-agent-runtime``'s is ``bedrock``).
        label: what an error calls one ("AgentCore payment session").
        ids: how the session records the ids.
        target: the target's environment, prop and IAM resource; ``None`` for a kind whose
            target the construct sets through a prop of its own (a built-in's).
        release: the call; ``None`` when a step of its own releases the kind (``step``), or for
            a custom kind (the user's handler).
        docs: the kind's rows of the docs table (none for a custom kind).
        step: ``"module.Class"`` of a step of its own, relative to
            ``session_expiry_runtime.steps``; ``None``: the generic step releases it.
        own: the settings of a built-in switched on by props of its own (`OwnProps`); ``None``:
            `RuntimeConfig.kind_targets`/``kind_attributes`` hold them (``target``).
        step_action: the metric ``Action`` of a step of its own (``step``); a declared
            release's is its operation.
        step_calls: the operations a step of its own calls (`StepCall`): its IAM actions.
    """

    kind: str
    label: str
    ids: Ids
    service: str = "bedrock-agentcore"
    iam_prefix: str | None = None
    target: Target | None = None
    release: Release | None = None
    docs: tuple[DocsRow, ...] = ()
    step: str | None = None
    own: OwnProps | None = field(default=None, compare=False)
    step_action: str | None = None
    step_calls: tuple[StepCall, ...] = ()

    @property
    def iam_action(self) -> str | None:
        """``<service>:<operation>`` of its release (``None`` without a declared call)."""
        if self.release is None:
            return None
        return f"{self.iam_prefix or self.service}:{self.release.operation}"

    @property
    def iam_actions(self) -> tuple[str, ...]:
        """``<service>:<operation>`` of every call of its release (``Release.first`` too)."""
        if self.release is None:
            return ()
        return tuple(f"{self.iam_prefix or self.service}:{op}" for op in self.release.operations)

    def step_iam_actions(self, settings: frozenset[str] = frozenset()) -> tuple[str, ...]:
        """``<service>:<operation>`` of each of ``step_calls`` that is always made or switched
        on by one of ``settings`` (the names of the settings set)."""
        return tuple(
            f"{self.iam_prefix or self.service}:{call.operation}"
            for call in self.step_calls
            if call.when is None or call.when in settings
        )

    @property
    def action(self) -> str | None:
        """The metric ``Action`` of its step: its release operation, or ``step_action``
        (``None``: a custom kind, released by the user's step)."""
        return self.step_action if self.release is None else self.release.operation


# --- the declared kinds ------------------------------------------------------------------------
#: Payment manager ARNs (``paymentManagerArn`` of ``DeletePaymentSession``).
PAYMENT_MANAGER_ARN = (
    r"arn:(aws|aws-[a-z0-9-]+):bedrock-agentcore:[a-z0-9-]+:[0-9]{12}:"
    r"payment-manager/[a-z0-9]([a-z0-9-]{0,47}[a-z0-9])?-[a-z0-9]{10}"
)

_TOOL_ID = Ids(
    attribute="",
    env="",
    pattern=r"[0-9a-zA-Z]{1,40}",
    lengths=(1, 40),
    expected="1-40 letters and digits",
)

#: The built-in kinds with a prop of their own (``agent_runtime``, ``code_interpreter``,
#: ``browser``, ``agent_memory``: typed props, ``cdk_session_expiry.agents.agentcore`` and
#: ``agent_memory``), then the kinds whose target is a key of ``resource_targets``.
DECLARED_KINDS: tuple[ResourceKind, ...] = (
    ResourceKind(
        kind="agentRuntime",
        label="AgentCore runtime session",
        ids=Ids(
            attribute="agentRuntimeSessionIds",
            env="SESSION_EXPIRY_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE",
            pattern=r"(?s).+",
            lengths=(33, 256),
            expected="33-256 characters",
        ),
        # Without it a runtime session keeps running until its idle timeout (15 minutes by
        # default) or its maximum lifetime (8 hours).
        release=Release(
            "StopRuntimeSession",
            "runtimeSessionId",
            target_parameter="agentRuntimeArn",
            options=(("qualifier", "agent_runtime_qualifier"),),
        ),
        own=OwnProps(
            prop="agent_runtime",
            target_field="agent_runtime_arn",
            target_env="SESSION_EXPIRY_AGENT_RUNTIME_ARN",
            ids_field="agent_runtime_session_ids_attribute",
            single_field="agent_runtime_session_attribute",
            argument="runtime_session_id",
            what="runtime session id",
        ),
        docs=(
            DocsRow(
                "AgentCore Runtime (`agent_runtime`)",
                "the runtime session: `StopRuntimeSession` ends its microVM at once, and with it "
                "the session's memory and local filesystem",
                "managed session storage (a runtime with a `sessionStorage` filesystem "
                "configuration, preview) survives a stop and is deleted after 14 days without "
                'an invocation of that session ("Survives stop/resume; 14-day idle expiry", '
                'AgentCore Developer Guide, "File system configurations for AgentCore Runtime"); '
                "no API deletes it sooner. Files on your own S3 Files or EFS file systems stay "
                "until you delete them",
            ),
        ),
    ),
    ResourceKind(
        kind="codeInterpreter",
        label="AgentCore code interpreter session",
        ids=Ids(
            attribute="codeInterpreterSessionIds",
            env="SESSION_EXPIRY_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE",
            pattern=_TOOL_ID.pattern,
            lengths=_TOOL_ID.lengths,
            expected=_TOOL_ID.expected,
        ),
        release=Release(
            "StopCodeInterpreterSession",
            "sessionId",
            target_parameter="codeInterpreterIdentifier",
        ),
        own=OwnProps(
            prop="code_interpreter",
            target_field="code_interpreter_id",
            target_env="SESSION_EXPIRY_CODE_INTERPRETER_ID",
            ids_field="code_interpreter_session_ids_attribute",
            single_field="code_interpreter_session_attribute",
            argument="code_interpreter_session_id",
            what="code interpreter session id",
        ),
        docs=(
            DocsRow(
                "AgentCore Code Interpreter (`code_interpreter`)",
                "the code interpreter session: `StopCodeInterpreterSession` ends it; its files "
                "are no longer reachable",
                'the session data is kept under a 30-day time to live retention policy ("The '
                'time to live (TTL) retention policy for the session data is 30 days", '
                'Developer Guide, "Session management" of the Code Interpreter); no API deletes '
                "it sooner",
            ),
        ),
    ),
    ResourceKind(
        kind="browser",
        label="AgentCore browser session",
        ids=Ids(
            attribute="browserSessionIds",
            env="SESSION_EXPIRY_BROWSER_SESSION_IDS_ATTRIBUTE",
            pattern=_TOOL_ID.pattern,
            lengths=_TOOL_ID.lengths,
            expected=_TOOL_ID.expected,
        ),
        release=Release(
            "StopBrowserSession",
            "sessionId",
            target_parameter="browserIdentifier",
        ),
        own=OwnProps(
            prop="browser",
            target_field="browser_id",
            target_env="SESSION_EXPIRY_BROWSER_ID",
            ids_field="browser_session_ids_attribute",
            single_field="browser_session_attribute",
            argument="browser_session_id",
            what="browser session id",
        ),
        docs=(
            DocsRow(
                "AgentCore Browser (`browser`)",
                "the browser session: `StopBrowserSession` ends it",
                "session recordings, if the browser records to your S3 bucket, stay there under "
                "that bucket's lifecycle",
            ),
        ),
    ),
    ResourceKind(
        kind="capacityProviderSession",
        label="AgentCore capacity-provider session",
        ids=Ids(
            attribute="capacityProviderSessionIds",
            env="SESSION_EXPIRY_CAPACITY_PROVIDER_SESSION_IDS_ATTRIBUTE",
            pattern=r"[a-zA-Z0-9][a-zA-Z0-9-_]*",
            lengths=(1, 100),
            expected="1-100 letters, digits, '-' or '_', the first a letter or digit",
        ),
        target=Target(
            env="SESSION_EXPIRY_CAPACITY_PROVIDER_ID",
            prop="capacity_provider",
            pattern=(
                r"(?:arn:aws[a-z-]*:bedrock-agentcore:[a-z0-9-]+:\d{12}:capacity-provider/)?"
                r"(?P<id>[a-zA-Z][a-zA-Z0-9_]{0,47}-[a-zA-Z0-9]{10})"
            ),
            expected=(
                "a capacity provider's identifier '<name>-<10 letters or digits>' or its ARN "
                "arn:<partition>:bedrock-agentcore:<region>:<account>:capacity-provider/<id>"
            ),
            iam_resource="arn:{partition}:bedrock-agentcore:{region}:{account}:"
            "capacity-provider/{target}",
        ),
        # "After you delete a session, you cannot restart it" (API Reference,
        # DeleteCapacityProviderSession): the runtime session is stopped first.
        release=Release(
            "DeleteCapacityProviderSession",
            "sessionId",
            target_parameter="capacityProviderId",
            after=("StopRuntimeSession",),
        ),
        docs=(
            DocsRow(
                "AgentCore Runtime on a capacity provider (`resource_targets` "
                '`"capacity_provider"`)',
                "the session's workspace on the instances: `DeleteCapacityProviderSession` "
                "once `StopRuntimeSession` has stopped the runtime session (ids recorded with "
                '`attach_resource(session_id, "capacityProviderSession", id)`); the session '
                "cannot be restarted",
                "`StopRuntimeSession` alone leaves a stopped session's workspace on its EBS "
                "volume in your account; the capacity provider and its instances, shared by "
                "every session, stay until you scale them in",
            ),
        ),
    ),
    ResourceKind(
        kind="paymentSession",
        label="AgentCore payment session",
        ids=Ids(
            attribute="paymentSessionIds",
            env="SESSION_EXPIRY_PAYMENT_SESSION_IDS_ATTRIBUTE",
            pattern=r"payment-session-[0-9a-zA-Z-]{15}",
            lengths=(31, 31),
            expected="'payment-session-' and 15 letters, digits or '-' (31 characters)",
        ),
        target=Target(
            env="SESSION_EXPIRY_PAYMENT_MANAGER_ARN",
            prop="payment_manager",
            pattern=PAYMENT_MANAGER_ARN,
            expected=(
                "a payment manager's ARN arn:<partition>:bedrock-agentcore:<region>:<account>:"
                "payment-manager/<name>-<10 lowercase letters or digits>"
            ),
            iam_resource="{target}",
        ),
        # "Permanently removes the payment session record" (API Reference,
        # DeletePaymentSession): an expired agent session can no longer spend.
        release=Release(
            "DeletePaymentSession", "paymentSessionId", target_parameter="paymentManagerArn"
        ),
        docs=(
            DocsRow(
                'AgentCore payments (`resource_targets` `"payment_manager"`)',
                "the payment session: `DeletePaymentSession` removes it for good, so the expired "
                "agent session can no longer spend (ids recorded with "
                '`attach_resource(session_id, "paymentSession", id)`)',
                "payments already made and the payment instruments stay (they are the user's); "
                "without the key a payment session can spend until its own "
                "`expiryTimeInMinutes` (15-480 minutes, API Reference, `CreatePaymentSession`)",
            ),
        ),
    ),
    ResourceKind(
        kind="agentMemory",
        label="AgentCore Memory session",
        ids=Ids(
            attribute="agentMemorySessions",
            env="SESSION_EXPIRY_AGENT_MEMORY_SESSIONS_ATTRIBUTE",
            pattern=r"[^/]+(?:/[^/]+)*/[a-zA-Z0-9][a-zA-Z0-9-_]*",
            lengths=(3, 356),
            expected="<actorId>/<sessionId>",
        ),
        step="agent_memory.AgentMemoryStep",
        step_action="DeleteMemoryEvents",
        # Events by actor and session, page by page, then each deleted; the long-term records
        # of the namespaces given (agent_memory_record_namespaces) likewise.
        step_calls=(
            StepCall("ListEvents"),
            StepCall("DeleteEvent"),
            StepCall("ListMemoryRecords", when="agent_memory_record_namespaces"),
            StepCall("DeleteMemoryRecord", when="agent_memory_record_namespaces"),
        ),
        own=OwnProps(
            prop="agent_memory",
            target_field="agent_memory_id",
            target_env="SESSION_EXPIRY_AGENT_MEMORY_ID",
            ids_field="agent_memory_sessions_attribute",
        ),
        docs=(
            DocsRow(
                "AgentCore Memory (`agent_memory`)",
                "the short-term **events** of each memory session the session recorded "
                "(`ListEvents` by actor and session id, `DeleteEvent` each)",
                "without `agent_memory` the events stay until the memory's "
                "`eventExpiryDuration` (up to 365 days, fixed when each event was written; "
                'Developer Guide, "Create an AgentCore Memory")',
            ),
            DocsRow(
                "AgentCore Memory (`agent_memory_record_namespaces`)",
                "the long-term **records** filed under the namespaces given, for that actor and "
                "memory session (`ListMemoryRecords`, `DeleteMemoryRecord`)",
                "records of actor-wide strategies (semantic facts, user preferences: namespaces "
                "without `{sessionId}`) are never deleted: a record does not say which session "
                "it came from, and \"deleting an event doesn't remove the structured information "
                'derived out of it from the long term memory" (API Reference, `DeleteEvent`). '
                "They stay until the strategy's record expiry (`recordExpiryDurationDays`, at "
                "least 31 days; none by default: they never expire)",
            ),
        ),
    ),
    ResourceKind(
        kind="bedrockSession",
        label="Bedrock session",
        service="bedrock-agent-runtime",
        iam_prefix="bedrock",
        ids=Ids(
            attribute="bedrockSessionIds",
            env="SESSION_EXPIRY_BEDROCK_SESSION_IDS_ATTRIBUTE",
            pattern=r"[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}",
            lengths=(36, 36),
            expected="a session id as CreateSession returns it (a lower-case UUID)",
        ),
        # Bedrock sessions belong to the account and Region, not to a resource: the target is
        # the IAM scope of the sessions the cleanup may end and delete; the ownership records
        # decide which ones it does. The calls take no target.
        target=Target(
            env="SESSION_EXPIRY_BEDROCK_SESSIONS",
            prop="bedrock_sessions",
            pattern=r"\*",
            expected="'*' (every Bedrock session of the stack's account and Region)",
            iam_resource="arn:{partition}:bedrock:{region}:{account}:session/{target}",
        ),
        # "Deletes a session that you ended. You can't delete a session with an ACTIVE status"
        # (Amazon Bedrock API Reference, DeleteSession). Neither call pages: DeleteSession
        # deletes the session's invocations and steps with it. EndSession lists
        # ConflictException without saying when (a session already ended or expired can answer
        # it): the delete's answer decides.
        release=Release(
            "DeleteSession",
            "sessionIdentifier",
            first="EndSession",
            first_continues=("ConflictException",),
            price=("bedrock_session_call", 1, "call"),
        ),
        docs=(
            DocsRow(
                "Bedrock session management (`bedrock_sessions`)",
                "each Bedrock session the session recorded: `EndSession`, then `DeleteSession`, "
                "which deletes its invocations and invocation steps (where LangGraph's "
                "`BedrockSessionSaver` keeps its checkpoints, [Agent frameworks]"
                "(agent-frameworks.md))",
                "sessions the application did not record: the API has an `EXPIRED` status, but "
                "AWS documents no expiry that deletes a session or its content (API Reference, "
                "`SessionStatus`, `DeleteSession`), so an unrecorded session stays until "
                "something deletes it",
            ),
        ),
    ),
)


def declared_kind(kind: str) -> ResourceKind | None:
    """The declaration of ``kind`` (built-in), or ``None``."""
    return next((k for k in DECLARED_KINDS if k.kind == kind), None)


#: Every declared kind's name (connections and grants are the store's own, not declared here:
#: `session_expiry_runtime.core.ownership.KINDS` has them all).
BUILTIN_KIND_NAMES: tuple[str, ...] = tuple(k.kind for k in DECLARED_KINDS)


def custom_resource_kind(step_name: str, attribute: str) -> ResourceKind:
    """The kind of the custom step ``step_name`` (``custom:<name>``) whose ids are in the String
    Set ``attribute``: recorded like any declared kind (``SessionStore.attach_resource``),
    released by the step's own handler."""
    return ResourceKind(
        kind=f"custom:{step_name}",
        label=f"{step_name} resource",
        ids=Ids(attribute=attribute, env=""),
    )
