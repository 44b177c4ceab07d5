"""The name a command line tool gives itself in its usage and errors.

Each operator command runs two ways: ``python -m <module>`` and the console script
``session-expiry <subcommand>`` (``cdk_session_expiry.cli``, which runs the same ``main``). Its
``--help`` and refusals name the form the operator typed.
"""

from __future__ import annotations

import sys
from pathlib import PurePath

__all__ = ["CONSOLE_SCRIPT", "prog"]

#: The console script's name (``[project.scripts]`` in pyproject.toml).
CONSOLE_SCRIPT = "session-expiry"


def prog(module_form: str, subcommand: str) -> str:
    """``session-expiry <subcommand>`` when the process is the console script (its
    ``sys.argv[0]``), else ``module_form`` (``python -m ...``)."""
    running = PurePath(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return f"{CONSOLE_SCRIPT} {subcommand}" if running == CONSOLE_SCRIPT else module_form
