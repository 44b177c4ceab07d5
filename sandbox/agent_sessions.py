"""Sandbox phase: Amazon Bedrock AgentCore sessions stopped with the sessions that used them.

The sample app is deployed with AgentCore targets from context (``deploy_context``: a
runtime ARN in the emulator's account and Region, a custom code interpreter and browser),
so the deployed cleanup function carries them in its environment and its role's policy. Some
sessions that will be ended and some that stay live get AgentCore session ids through
``SessionStore.attach_agent_session``, and the emulator registers those AgentCore sessions as
running (moto has none: ``cdk_session_expiry.testing.agentcore`` answers the Stop calls). A
few browser sessions are left unregistered, as if they had already ended on their own: the
cleanup's ``StopBrowserSession`` gets ``ResourceNotFoundException``, which is done.

``check``, after the cleanup ran, compares the emulator's record with the plan: each ended
session's three AgentCore sessions were stopped (runtime with the deployed ARN and no
qualifier), none of a live session was touched, and no AgentCore step failed.

The declared kinds switched on through ``resource_targets`` (a capacity provider, a payment
manager and Bedrock sessions, :data:`DECLARED_TARGETS`) likewise: each session gets one id of
each, recorded with ``SessionStore.attach_resource`` and held by the emulator
(``cdk_session_expiry/testing/models/_moto_resource_kinds.py``; a Bedrock session is created
with ``CreateSession`` on the emulator's ``bedrock-agent-runtime``,
``cdk_session_expiry/testing/bedrock_sessions.py``); ``check`` requires each ended
session's ids released (a Bedrock session ended, then deleted) and each live session's still
held (a Bedrock session still ``ACTIVE``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.testing import LocalEmulator
from cdk_session_expiry.testing.agentcore import BROWSER, CODE_INTERPRETER, RUNTIME
from cdk_session_expiry.testing.bedrock_sessions import ACTIVE
from cdk_session_expiry.testing.models import _moto_resource_kinds as releases

#: How many ended / live sessions get AgentCore sessions, and how many of the ended ones'
#: browser sessions already ended on their own.
ENDED, LIVE, ALREADY_ENDED_BROWSERS = 12, 4, 3
#: A custom code interpreter and browser of the app (``<name>-<10 letters or digits>``, as
#: ``CreateCodeInterpreter``/``CreateBrowser`` make them): the construct refuses the AWS-managed
#: ``aws.codeinterpreter.v1``/``aws.browser.v1``, shared by every application of an account and
#: Region. The emulator answers any identifier.
CODE_INTERPRETER_ID = "sandboxInterpreter-AbCd123456"
BROWSER_ID = "sandboxBrowser-AbCd123456"


#: The Bedrock session-management kind (``bedrock-agent-runtime``), held by the emulator's
#: `cdk_session_expiry.testing.bedrock_sessions.BedrockSessions`, not by the moto model.
BEDROCK_SESSION = "bedrockSession"
#: ``resource_targets`` of the sandbox: kind → (prop, target as the API takes it; the emulator
#: answers any).
DECLARED_TARGETS = {
    "capacityProviderSession": ("capacity_provider", "sandbox_cp-AbCd123456"),
    "paymentSession": (
        "payment_manager",
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:payment-manager/sandbox-abcd123456",
    ),
    # Bedrock sessions take no target: "*" is the IAM scope (the kind's declaration).
    BEDROCK_SESSION: ("bedrock_sessions", "*"),
}


def deploy_context(emulator: LocalEmulator) -> dict[str, str]:
    """``cdk deploy --context`` values naming AgentCore targets the emulator answers for."""
    runtime_arn = (
        f"arn:aws:bedrock-agentcore:{emulator.region}:{emulator.account_id}"
        ":runtime/sandbox_agent-a1B2c3D4e5"
    )
    return {
        "sample:agentRuntimeArn": runtime_arn,
        "sample:codeInterpreter": CODE_INTERPRETER_ID,
        "sample:browser": BROWSER_ID,
        "sample:resourceTargets": json.dumps(dict(DECLARED_TARGETS.values())),
    }


@dataclass
class AgentPlan:
    """The AgentCore sessions planned for the sandbox's sessions."""

    runtime_arn: str
    code_interpreter_id: str
    browser_id: str
    #: session id -> (runtime session id, code interpreter session id, browser session id)
    ended: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    live: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    already_ended_browsers: set[str] = field(default_factory=set)
    #: (kind, target, id) of the declared kinds' resources of ended / live sessions.
    declared_ended: set[tuple[str, str, str]] = field(default_factory=set)
    declared_live: set[tuple[str, str, str]] = field(default_factory=set)


def attach(
    emulator: LocalEmulator,
    store: Any,
    cleanup_env: Mapping[str, str],
    *,
    ended: Sequence[str],
    live: Sequence[str],
) -> AgentPlan:
    """Give the first :data:`ENDED` of ``ended`` and :data:`LIVE` of ``live`` (session ids of
    live sessions) AgentCore sessions, registered as running in the emulator.

    Raises:
        SystemExit: the deployed cleanup function has no AgentCore targets.
    """
    targets = (
        cleanup_env.get(contract.ENV_AGENT_RUNTIME_ARN),
        cleanup_env.get(contract.ENV_CODE_INTERPRETER_ID),
        cleanup_env.get(contract.ENV_BROWSER_ID),
    )
    if not all(targets):
        raise SystemExit(f"the deployed cleanup function has no AgentCore targets: {targets}")
    plan = AgentPlan(*targets)  # type: ignore[arg-type]
    for group, ids in ((plan.ended, ended[:ENDED]), (plan.live, live[:LIVE])):
        for session_id in ids:
            group[session_id] = _attach_one(store, session_id)
    plan.already_ended_browsers = {
        ids[2] for ids in list(plan.ended.values())[:ALREADY_ENDED_BROWSERS]
    }
    for runtime, interpreter, browser in [*plan.ended.values(), *plan.live.values()]:
        emulator.start_agent_session(RUNTIME, plan.runtime_arn, runtime)
        emulator.start_agent_session(CODE_INTERPRETER, plan.code_interpreter_id, interpreter)
        if browser not in plan.already_ended_browsers:
            emulator.start_agent_session(BROWSER, plan.browser_id, browser)
    for held, ids in ((plan.declared_ended, plan.ended), (plan.declared_live, plan.live)):
        for session_id in ids:
            held |= _attach_declared(emulator, store, session_id)
    return plan


def _attach_declared(emulator: LocalEmulator, store: Any, session_id: str) -> set[tuple[str, ...]]:
    """One resource of each declared kind switched on, recorded and held by the emulator."""
    ids = {
        "capacityProviderSession": f"cp-{uuid.uuid4().hex}",
        "paymentSession": f"payment-session-{uuid.uuid4().hex[:15]}",
        BEDROCK_SESSION: emulator.client("bedrock-agent-runtime").create_session()["sessionId"],
    }
    attached = set()
    for kind, (_, target) in DECLARED_TARGETS.items():
        store.attach_resource(session_id, kind, ids[kind])
        if kind != BEDROCK_SESSION:  # created above, held by the emulator's Bedrock sessions
            emulator.hold_resource(kind, target, ids[kind])
        attached.add((kind, target, ids[kind]))
    return attached


def _attach_one(store: Any, session_id: str) -> tuple[str, str, str]:
    ids = (
        f"sandbox-runtime-{uuid.uuid4().hex}",  # 48 characters: the API takes 33-256
        uuid.uuid4().hex[:24],
        uuid.uuid4().hex[:24],
    )
    store.attach_agent_session(
        session_id,
        runtime_session_id=ids[0],
        code_interpreter_session_id=ids[1],
        browser_session_id=ids[2],
        # The session's first AgentCore sessions: nothing to replace, so nothing to stop (and
        # the stop targets need not be in the application's environment).
        stop_previous=False,
    )
    return ids


@dataclass
class AgentResult:
    stopped: dict[str, int]
    not_found: int
    live_untouched: int
    failures: dict[str, float]
    mismatches: list[str]
    #: Resources of the declared kinds released, by kind.
    released: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stopped": self.stopped,
            "already_ended_not_found": self.not_found,
            "live_untouched": self.live_untouched,
            "failures": self.failures,
            "released": self.released,
        }

    def summary_line(self) -> str:
        stopped = ", ".join(f"{op} {n}" for op, n in self.stopped.items())
        return (
            f"agent sessions    stopped: {stopped}; {self.not_found} already ended "
            f"(ResourceNotFoundException = done); {self.live_untouched} live sessions' "
            "untouched; released: " + ", ".join(f"{kind} {n}" for kind, n in self.released.items())
        )


def check(
    emulator: LocalEmulator,
    plan: AgentPlan,
    failures_by_action: Mapping[str, float],
    say: Callable[[str], None],
) -> AgentResult:
    """Compare the emulator's AgentCore record with the plan (see the module docstring)."""
    calls = emulator.agentcore.calls
    mismatches: list[str] = []
    expected = (
        {("StopRuntimeSession", plan.runtime_arn, ids[0]) for ids in plan.ended.values()}
        | {
            ("StopCodeInterpreterSession", plan.code_interpreter_id, ids[1])
            for ids in plan.ended.values()
        }
        | {("StopBrowserSession", plan.browser_id, ids[2]) for ids in plan.ended.values()}
    )
    seen = {(c.operation, c.target, c.session_id) for c in calls}
    for missing in sorted(expected - seen):
        mismatches.append(f"agent sessions: no {missing[0]} for {missing[2]}")
    live_ids = {i for ids in plan.live.values() for i in ids}
    touched = [c for c in calls if c.session_id in live_ids]
    if touched:
        mismatches.append(f"agent sessions: live sessions' AgentCore sessions stopped: {touched}")
    if any(c.qualifier is not None for c in calls if c.operation == "StopRuntimeSession"):
        mismatches.append("agent sessions: StopRuntimeSession sent a qualifier; none deployed")
    not_found = [c for c in calls if not c.stopped]
    if {c.session_id for c in not_found} != plan.already_ended_browsers:
        mismatches.append(
            f"agent sessions: not found for {sorted(c.session_id for c in not_found)}, "
            f"expected only the already ended browsers {sorted(plan.already_ended_browsers)}"
        )
    mismatches += _declared_mismatches(emulator, plan)
    failures = {
        action: n
        for action, n in failures_by_action.items()
        if action.startswith(("Stop", "DeleteCapacityProvider", "DeletePayment", "DeleteSession"))
        and n
    }
    if failures:
        mismatches.append(f"agent sessions: AgentCore steps failed: {failures}")
    running = {session for _, session in emulator.agentcore.running()}
    untouched = sum(1 for ids in plan.live.values() if set(ids) <= running)
    if untouched != len(plan.live):
        mismatches.append(
            f"agent sessions: {untouched} of {len(plan.live)} live sessions' AgentCore "
            "sessions still all running"
        )
    result = AgentResult(
        stopped={
            op: sum(1 for c in calls if c.operation == op and c.stopped)
            for op in ("StopRuntimeSession", "StopCodeInterpreterSession", "StopBrowserSession")
        },
        not_found=len(not_found),
        live_untouched=untouched,
        released=_released(emulator),
        failures=failures,
        mismatches=mismatches,
    )
    say(result.summary_line())
    return result


def _released(emulator: LocalEmulator) -> dict[str, int]:
    """Resources of each declared kind released (a Bedrock session: deleted)."""
    released = {
        kind: sum(1 for c in releases.calls() if c.kind == kind and c.released)
        for kind in DECLARED_TARGETS
        if kind != BEDROCK_SESSION
    }
    released[BEDROCK_SESSION] = sum(
        1
        for c in emulator.bedrock_sessions.calls
        if c.operation == "DeleteSession" and c.status < 300
    )
    return released


def _held(emulator: LocalEmulator) -> set[tuple[str, str, str]]:
    """(kind, target, id) of every declared kind's resource the emulator holds (a Bedrock
    session while ``ACTIVE``)."""
    held = {
        (kind, target, i)
        for kind in DECLARED_TARGETS
        if kind != BEDROCK_SESSION
        for target, i in releases.held(kind)
    }
    sessions = emulator.bedrock_sessions
    _, target = DECLARED_TARGETS[BEDROCK_SESSION]
    held |= {
        (BEDROCK_SESSION, target, i) for i in sessions.session_ids() if sessions.status(i) == ACTIVE
    }
    return held


def _declared_mismatches(emulator: LocalEmulator, plan: AgentPlan) -> list[str]:
    """Each ended session's declared resources released, each live one's still held."""
    held = _held(emulator)
    mismatches = []
    left = sorted(plan.declared_ended & held)
    if left:
        mismatches.append(f"declared kinds: ended sessions' resources not released: {left}")
    gone = sorted(plan.declared_live - held)
    if gone:
        mismatches.append(f"declared kinds: live sessions' resources released: {gone}")
    return mismatches
