"""``session-expiry``: one console script for the operator's commands.

Each subcommand runs the ``main`` of the module that its ``python -m`` form runs, with the same
flags (both forms keep working)::

    session-expiry status ...        python -m session_expiry_runtime.status ...
    session-expiry kill-switch ...   python -m session_expiry_runtime.kill_switch ...
    session-expiry flags ...         python -m session_expiry_runtime.kill_switch flags ...
    session-expiry replay ...        python -m session_expiry_runtime.replay ...
    session-expiry cost ...          python -m cdk_session_expiry.cost ...

The commands are named by module, and imported only when run: the construct's package never
imports the runtime's (the two meet by name only), and ``session-expiry cost --help`` does not
start the jsii runtime (nothing here imports ``aws_cdk``). Exit status: the command's; 2 for an
unknown subcommand.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

#: Subcommand -> (module, the arguments put before the user's, what it does).
COMMANDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "status": (
        "session_expiry_runtime.status",
        (),
        "the cleanup's whole state from the stack's outputs (read-only)",
    ),
    "kill-switch": (
        "session_expiry_runtime.kill_switch",
        (),
        "disable, enable or read the cleanup's event source mapping",
    ),
    "flags": (
        "session_expiry_runtime.kill_switch",
        ("flags",),
        "show or set the cleanup's feature flags in AWS AppConfig",
    ),
    "replay": (
        "session_expiry_runtime.replay",
        (),
        "clean again what reached the on-failure destination, or a time range",
    ),
    "cost": ("cdk_session_expiry.cost", (), "what cleaning sessions costs a month"),
}
PROG = "session-expiry"


def usage() -> str:
    """The script's own help: its subcommands."""
    lines = [
        f"usage: {PROG} {{{','.join(COMMANDS)}}} [ARGS ...]",
        "",
        "The session cleanup's operator commands (each also runs as python -m MODULE):",
        "",
    ]
    for name, (module, before, what) in COMMANDS.items():
        lines.append(f"  {name:<12} {what} (python -m {' '.join((module, *before))})")
    lines += ["", f"{PROG} COMMAND --help shows a command's flags."]
    return "\n".join(lines)


def dispatch(name: str) -> tuple[Any, tuple[str, ...]]:
    """The ``main`` function of subcommand ``name`` and the arguments it takes first.

    Raises:
        KeyError: ``name`` is not a subcommand.
    """
    module, before, _ = COMMANDS[name]
    return importlib.import_module(module).main, before


def main(argv: Sequence[str] | None = None) -> int:
    """The console script; returns the exit status."""
    given = list(sys.argv[1:] if argv is None else argv)
    if not given or given[0] in ("-h", "--help"):
        print(usage())
        return 0 if given else 2
    if given[0] not in COMMANDS:
        print(
            f"{PROG}: unknown command {given[0]!r}: expected one of {', '.join(COMMANDS)}",
            file=sys.stderr,
        )
        return 2
    command, before = dispatch(given[0])
    try:
        return int(command([*before, *given[1:]]))
    except SystemExit as exc:  # argparse's --help (0) and its refusals (2)
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
