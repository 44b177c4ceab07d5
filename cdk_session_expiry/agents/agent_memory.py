"""Amazon Bedrock AgentCore Memory: the data a session wrote, released when it ends
(``agent_memory``, ``agent_memory_record_namespaces``).

Stopping an agent's session does not delete what it wrote to AgentCore Memory: short-term
events stay until they expire (the memory's ``eventExpiryDuration``, fixed at write time, up to
365 days) or are deleted (``DeleteEvent``), and "deleting an event doesn't remove the structured
information derived out of it from the long term memory" (Amazon Bedrock AgentCore API
Reference, ``DeleteEvent``). With ``agent_memory`` the cleanup deletes each removed session's
events (``ListEvents`` by actor and session id, ``DeleteEvent`` each), for the memory sessions
``SessionStore.attach_memory_session`` recorded and whose ownership record (kind
``agentMemory``) names the removed incarnation. With ``agent_memory_record_namespaces`` it also
deletes the long-term records filed under those namespaces for that actor and session
(``ListMemoryRecords``, ``DeleteMemoryRecord``).

Which records are a session's own: a memory record names its namespace, strategy, content and
creation time, but no event or session it came from (API Reference, ``MemoryRecord``). Only a
strategy whose namespace template contains ``{sessionId}`` (e.g. the summary strategy's
``/strategies/{memoryStrategyId}/actors/{actorId}/sessions/{sessionId}/``) files a session's
records apart from other sessions'. So each namespace given must contain ``{sessionId}``
(``{actorId}`` optional; the strategy id written literally): records of actor-wide namespaces
(semantic facts, user preferences, merged across sessions) cannot be told apart and are never
deleted.

IAM (Service Authorization Reference, "Actions, resources, and condition keys for Amazon
Bedrock AgentCore"): ``bedrock-agentcore:ListEvents`` and ``DeleteEvent`` on the memory's ARN
only; with namespaces also ``ListMemoryRecords`` and ``DeleteMemoryRecord`` on it (the calls
the kind's declaration lists, ``session_expiry_runtime/core/kinds.py``, ``step_calls``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.interfaces import aws_bedrockagentcore as agentcore_refs
from constructs import Construct

from .. import _kinds, validation
from .. import _runtime_contract as contract

#: An AgentCore Memory: a ``Memory``/``CfnMemory`` of this app or an import (``IMemoryRef``),
#: its ARN or its id.
AgentMemoryTarget = agentcore_refs.IMemoryRef | str
#: Memory ids (``CreateMemory``: the name, ``-``, 10 letters or digits).
MEMORY_ID_PATTERN = r"[a-zA-Z][a-zA-Z0-9-_]{0,99}-[a-zA-Z0-9]{10}"
_MEMORY_ARN = re.compile(
    rf"arn:(aws[a-z-]*):bedrock-agentcore:([a-z]{{2}}(?:-[a-z]+)+-\d):(\d{{12}}):memory/"
    rf"({MEMORY_ID_PATTERN})"
)
#: A namespace once its placeholders are filled (API Reference, ``ListMemoryRecords``).
_NAMESPACE = re.compile(r"[a-zA-Z0-9/*][a-zA-Z0-9-_/*]*(?::[a-zA-Z0-9-_/*]+)*[a-zA-Z0-9-_/*]*")
_PLACEHOLDERS = ("{actorId}", "{sessionId}")
#: A placeholder with another character than ``/`` beside it (the runtime's copy:
#: ``session_expiry_runtime.core.config.UNBOUNDED_NAMESPACE_PLACEHOLDER``).
_UNBOUNDED_PLACEHOLDER = re.compile(r"[^/]\{(?:actorId|sessionId)\}|\{(?:actorId|sessionId)\}[^/]")


def memory_arn(scope: Construct, target: AgentMemoryTarget) -> str:
    """The memory's ARN (what IAM names and the data plane's ``memoryId`` accepts).

    Raises:
        ValueError: a string that is neither a memory ARN in the stack's Region nor a memory
            id; the message gives the expected forms.
    """
    if not isinstance(target, str):
        return target.memory_ref.memory_arn
    if validation.is_token(target):
        return target
    stack = Stack.of(scope)
    if re.fullmatch(MEMORY_ID_PATTERN, target):
        return stack.format_arn(
            service="bedrock-agentcore", resource="memory", resource_name=target
        )
    found = _MEMORY_ARN.fullmatch(target)
    if found is None:
        raise ValueError(
            f"agent_memory={target!r}: expected an AgentCore Memory (Memory, CfnMemory: "
            "IMemoryRef), its ARN arn:<partition>:bedrock-agentcore:<region>:<account>:memory/"
            f"<id>, or its id ({MEMORY_ID_PATTERN}, e.g. 'chat_memory-a1B2c3D4e5')"
        )
    if not validation.is_token(stack.region) and found.group(2) != stack.region:
        raise ValueError(
            f"agent_memory={target!r} is in Region {found.group(2)}: expected the stack's "
            f"Region {stack.region}, where the cleanup calls AgentCore"
        )
    return target


def check_record_namespaces(
    namespaces: Sequence[str] | None, *, agent_memory: AgentMemoryTarget | None
) -> tuple[str, ...]:
    """The namespace templates, checked.

    Raises:
        ValueError: namespaces without ``agent_memory``; an empty list; a template without
            ``{sessionId}`` (its records are not one session's), with another placeholder, with
            a placeholder that is not a whole segment (two sessions' ids could fill it alike),
            or not a namespace once filled in.
    """
    if namespaces is None:
        return ()
    if agent_memory is None:
        raise ValueError(
            "agent_memory_record_namespaces is set without agent_memory: expected an "
            "agent_memory, or no agent_memory_record_namespaces"
        )
    if isinstance(namespaces, str) or not namespaces:
        raise ValueError(
            f"agent_memory_record_namespaces={namespaces!r}: expected a non-empty list of "
            "namespace templates, e.g. ['/summaries/{actorId}/{sessionId}/']"
        )
    for template in namespaces:
        _check_template(template)
    return tuple(namespaces)


def _check_template(template: str) -> None:
    if not isinstance(template, str) or "{sessionId}" not in template:
        raise ValueError(
            f"agent_memory_record_namespaces: {template!r} has no {{sessionId}}: records of a "
            "namespace without it belong to many sessions and cannot be told apart (they are "
            "never deleted); expected e.g. '/strategies/<strategy id>/actors/{actorId}/"
            "sessions/{sessionId}/'"
        )
    if _UNBOUNDED_PLACEHOLDER.search(template):
        raise ValueError(
            f"agent_memory_record_namespaces: {template!r}: expected each placeholder to be a "
            "whole segment (between '/' or the ends), e.g. '/summaries/{actorId}/{sessionId}/': "
            "ids beside another character fill one namespace for two sessions (actor 'a', "
            "session 'b-c' and actor 'a-b', session 'c' in '{actorId}-{sessionId}')"
        )
    filled = template
    for placeholder in _PLACEHOLDERS:
        filled = filled.replace(placeholder, "x")
    if not _NAMESPACE.fullmatch(filled) or len(filled) > 1024:
        raise ValueError(
            f"agent_memory_record_namespaces: {template!r}: expected a namespace (letters, "
            "digits, '-', '_', '/', ':') whose only placeholders are {actorId} and "
            "{sessionId}; write a strategy id literally"
        )


def configure(function: lambda_.Function, *, memory: str, namespaces: Sequence[str]) -> None:
    """The cleanup's environment and least-privilege statements on the memory."""
    function.add_environment(contract.ENV_AGENT_MEMORY_ID, memory)
    function.add_environment(
        contract.ENV_AGENT_MEMORY_SESSIONS_ATTRIBUTE,
        contract.DEFAULT_AGENT_MEMORY_SESSIONS_ATTRIBUTE,
    )
    if namespaces:
        function.add_environment(
            contract.ENV_AGENT_MEMORY_RECORD_NAMESPACES, json.dumps(list(namespaces))
        )
    # The calls the kind's step makes, as its declaration lists them (core/kinds.py).
    switched_on = frozenset({"agent_memory_record_namespaces"} if namespaces else ())
    actions = list(_kinds.declared("agentMemory").step_iam_actions(switched_on))
    function.add_to_role_policy(iam.PolicyStatement(actions=actions, resources=[memory]))
