"""Cleanup steps: the contract (`base`) and the registry of built-in steps, in order.

A resource kind whose release is one call per id is one declaration in
`session_expiry_runtime.core.kinds.DECLARED_KINDS`: its step (`released.ReleasedKindStep`) is built
from it, after the built-in session steps. A step that does more is one new module in this
package (a `CleanupStep` subclass with ``name``, ``build``, ``plan``, ``run`` and, if it can
look before it acts, ``preview``) plus one line in `BUILTIN_STEPS`. The runner
(`session_expiry_runtime.cleanup.runner`) orders steps by phase — the archive gate first, the
session steps side by side, the fan-out after success — so a step's place in this list only
orders steps of the same phase (and their fields in the log line).
"""

from __future__ import annotations

from ..core.clients import CleanupClients
from ..core.config import RuntimeConfig
from .agent_memory import AgentMemoryStep
from .agent_runtime import AgentRuntimeStep
from .archive import ArchiveStep
from .base import BatchStep, CleanupStep
from .browser import BrowserStep
from .code_interpreter import CodeInterpreterStep
from .connection import ConnectionStep
from .custom import load_custom_steps
from .events import EventsStep
from .grant import GrantStep
from .released import build_released_steps
from .scratch import ScratchStep

#: The built-in steps in order; each is built only when its target is configured.
BUILTIN_STEPS: tuple[type[CleanupStep] | type[BatchStep], ...] = (
    ArchiveStep,
    ConnectionStep,
    GrantStep,
    ScratchStep,
    AgentRuntimeStep,
    CodeInterpreterStep,
    BrowserStep,
    AgentMemoryStep,
    EventsStep,
)


def build_steps(config: RuntimeConfig, clients: CleanupClients) -> list[CleanupStep | BatchStep]:
    """The configured steps in registry order (a step without its target is left out), the
    declared kinds' steps (`released`), then the user-defined steps of
    ``SESSION_EXPIRY_CUSTOM_STEPS`` (`custom`).

    Raises:
        ValueError: the custom steps' configuration is invalid or a handler does not import.
    """
    built = [s for s in (t.build(config, clients) for t in BUILTIN_STEPS) if s is not None]
    return [*built, *build_released_steps(config, clients), *load_custom_steps(config)]
