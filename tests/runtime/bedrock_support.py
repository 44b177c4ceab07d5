"""Helpers of the Bedrock session kind's tests: Bedrock sessions with stored steps, removed
sessions naming them (with their ownership records), and a cleanup whose Bedrock client the
emulator's `cdk_session_expiry.testing.bedrock_sessions` answers in-process."""

from __future__ import annotations

import dataclasses
from typing import Any

from runtime_support import SESSION, Sandbox
from session_expiry_runtime.cleanup.cleaner import SessionCleaner
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.kinds import declared_kind
from session_expiry_runtime.steps.released import ReleasedKindStep

from cdk_session_expiry.testing.bedrock_sessions import BedrockSessions

#: The ownership kind, the step's name (the metric's ``Action``: the release operation) and the
#: session attribute, as the kind declares them.
KIND = "bedrockSession"
_DECLARED = declared_kind(KIND)
assert _DECLARED is not None and _DECLARED.action is not None
ACTION: str = _DECLARED.action
ATTRIBUTE = _DECLARED.ids.attribute
#: An incarnation that is not the removed item's: a successor's.
LATER_INCARNATION = "a-later-incarnation"


def bedrock_client(sessions: BedrockSessions) -> Any:
    """A ``bedrock-agent-runtime`` client answered by ``sessions`` (the tests' one boto3 session:
    a new one would load the service model again)."""
    return sessions.attach(SESSION.client("bedrock-agent-runtime"))


def new_bedrock_session(sessions: BedrockSessions, *, steps: int = 1) -> str:
    """A new ``ACTIVE`` Bedrock session holding ``steps`` invocation steps; its id."""
    client = bedrock_client(sessions)
    session_id = str(client.create_session()["sessionId"])
    invocation = client.create_invocation(sessionIdentifier=session_id)["invocationId"]
    for i in range(steps):
        client.put_invocation_step(
            sessionIdentifier=session_id,
            invocationIdentifier=invocation,
            invocationStepTime=1_700_000_000 + i,
            payload={"contentBlocks": [{"text": f"turn {i}"}]},
        )
    return session_id


def removed_naming(
    sandbox: Sandbox,
    session_id: str,
    bedrock_ids: list[str],
    *,
    claim: list[str] | None = None,
    successor_holds: tuple[str, ...] | list[str] = (),
    remove: bool = True,
) -> dict[str, Any]:
    """A session naming ``bedrock_ids`` (``bedrockSessionIds``), each of ``claim`` (default:
    all) recorded for it as ``SessionStore`` records it, those of ``successor_holds`` for a later
    incarnation of the same key instead; then deleted, and its REMOVE record (``remove=False``:
    left live, ``{}``)."""
    session = sandbox.create_session(session_id, extra={ATTRIBUTE: {"SS": bedrock_ids}})
    for bedrock_id in bedrock_ids if claim is None else claim:
        holder = LATER_INCARNATION if bedrock_id in successor_holds else session.incarnation
        sandbox.claim(KIND, bedrock_id, session_id, str(holder))
    if not remove:
        return {}
    sandbox.read_stream()
    sandbox.delete(session_id)
    (record,) = sandbox.removes()
    return record


def bedrock_config(sandbox: Sandbox, **changes: Any) -> RuntimeConfig:
    """The sandbox's configuration with the kind switched on, as
    ``resource_targets={"bedrock_sessions": "*"}`` sets it."""
    return dataclasses.replace(sandbox.config, kind_targets=((KIND, "*"),), **changes)


def bedrock_cleaner(sandbox: Sandbox, sessions: BedrockSessions, **changes: Any) -> SessionCleaner:
    """The cleanup with the kind switched on, its Bedrock client answered by ``sessions``."""
    cleaner = sandbox.cleaner(bedrock_config(sandbox, **changes))
    (step,) = [s for s in cleaner.session_steps if s.name == ACTION]
    assert isinstance(step, ReleasedKindStep)
    sessions.attach(step.client)
    return cleaner
