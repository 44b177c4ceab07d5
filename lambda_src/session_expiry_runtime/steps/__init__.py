"""Cleanup steps: the contract (`base`) and the registry of built-in steps, in order.

A resource kind whose release is one call per id (or two: ended, then deleted) is one
declaration in `session_expiry_runtime.core.kinds.DECLARED_KINDS`: its step
(`released.ReleasedKindStep`) is built from it, after the built-in session steps — the AgentCore
runtime, code interpreter and browser sessions included. A kind whose release does more names a
step class of its own in its declaration (``ResourceKind.step``: AgentCore Memory's
`agent_memory.AgentMemoryStep`), built in its place. A step of no resource kind is one new
module in this package (a `CleanupStep` subclass with ``name``, ``build``, ``plan``, ``run``
and, if it can look before it acts, ``preview``) plus one line in `SESSION_STEPS` or
`FAN_OUT_STEPS`. The runner
(`session_expiry_runtime.cleanup.runner`) orders steps by phase — the archive gate first, the
session steps side by side, the fan-out after success — so a step's place in this list only
orders steps of the same phase (and their fields in the log line).
"""

from __future__ import annotations

from typing import Any

from ..core.clients import CleanupClients
from ..core.config import RuntimeConfig
from .archive import ArchiveStep
from .base import BatchStep, CleanupStep
from .connection import ConnectionStep
from .custom import load_custom_steps
from .events import EventsStep
from .grant import GrantStep
from .released import build_released_steps
from .scratch import ScratchStep

#: The built-in steps of the session's own resources, in order; each is built only when its
#: target is configured. The declared kinds' steps (`released`) follow them.
SESSION_STEPS: tuple[type[CleanupStep] | type[BatchStep], ...] = (
    ArchiveStep,
    ConnectionStep,
    GrantStep,
    ScratchStep,
)
#: The built-in steps after the declared kinds' (the fan-out).
FAN_OUT_STEPS: tuple[type[CleanupStep] | type[BatchStep], ...] = (EventsStep,)
#: Every built-in step class (the declared kinds' excepted), in order.
BUILTIN_STEPS = (*SESSION_STEPS, *FAN_OUT_STEPS)


def build_steps(config: RuntimeConfig, clients: CleanupClients) -> list[CleanupStep | BatchStep]:
    """The configured steps (a step without its target is left out): `SESSION_STEPS`, the
    declared kinds' steps in declaration order (`released`), `FAN_OUT_STEPS`, then the
    user-defined steps of ``SESSION_EXPIRY_CUSTOM_STEPS`` (`custom`).

    Raises:
        ValueError: the custom steps' configuration is invalid or a handler does not import.
    """

    def built(types: tuple[type[CleanupStep] | type[BatchStep], ...]) -> list[Any]:
        return [s for s in (t.build(config, clients) for t in types) if s is not None]

    declared = build_released_steps(config, clients)
    return [*built(SESSION_STEPS), *declared, *built(FAN_OUT_STEPS), *load_custom_steps(config)]
