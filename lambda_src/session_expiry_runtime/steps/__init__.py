"""Cleanup steps: the contract (`base`) and the registry of built-in steps, in order.

Adding a built-in step is one new module in this package (a `CleanupStep`
subclass with ``name``, ``build``, ``plan``, ``run`` and, if it can look before it acts,
``preview``) plus one line in `BUILTIN_STEPS`. The runner
(`session_expiry_runtime.runner`) orders steps by phase — the archive gate first, the
session steps side by side, the fan-out after success — so a step's place in this list only
orders steps of the same phase (and their fields in the log line).
"""

from __future__ import annotations

from ..clients import CleanupClients
from ..config import RuntimeConfig
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
    """The configured steps in registry order (a step without its target is left out), then
    the user-defined steps of ``SESSION_EXPIRY_CUSTOM_STEPS`` (`custom`).

    Raises:
        ValueError: the custom steps' configuration is invalid or a handler does not import.
    """
    built = (step_type.build(config, clients) for step_type in BUILTIN_STEPS)
    return [*(step for step in built if step is not None), *load_custom_steps(config)]
