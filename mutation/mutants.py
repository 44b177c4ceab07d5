"""mutmut's mutants of a runtime module, and the checked-in equivalent ones (equivalent.toml).

Shared by the driver (``run.py``: the surviving mutants' diffs) and the test that keeps the
equivalents file honest (``tests/test_mutation_equivalents.py``: every mutant it names is
still one mutmut generates, with the same change). Generating the mutants of a file is
mutmut's own code (``mutate_file_contents``), with the settings of ``mutation/pyproject.toml``;
no test runs.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from difflib import unified_diff
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RUNTIME = ROOT / "lambda_src" / "session_expiry_runtime"
MODULES_FILE = HERE / "modules.toml"
EQUIVALENT_FILE = HERE / "equivalent.toml"
#: The package as mutmut sees it from a work directory (its mutant names start with it).
PACKAGE = "session_expiry_runtime"


@dataclass(frozen=True)
class Equivalent:
    """A surviving mutant no test can kill, because it does not change behaviour."""

    module: str
    mutant: str
    change: tuple[str, ...]
    reason: str


def modules() -> dict[str, dict[str, object]]:
    """modules.toml: module path (relative to the runtime package) -> what, tests, goal."""
    with MODULES_FILE.open("rb") as f:
        return dict(tomllib.load(f)["modules"])


def equivalents() -> list[Equivalent]:
    """equivalent.toml's entries, in file order."""
    with EQUIVALENT_FILE.open("rb") as f:
        data = tomllib.load(f)
    return [
        Equivalent(e["module"], e["mutant"], tuple(e["change"].strip().splitlines()), e["reason"])
        for e in data.get("equivalent", [])
    ]


def _load_mutmut_config() -> None:
    """mutmut reads its settings from the working directory's pyproject.toml: load those of
    mutation/pyproject.toml once (mutmut caches them)."""
    from mutmut import configuration

    if configuration._config is not None:
        return
    cwd = Path.cwd()
    os.chdir(HERE)
    try:
        configuration.config()
    finally:
        os.chdir(cwd)


@functools.cache
def changes(module: str) -> dict[str, tuple[str, ...]]:
    """Every mutant mutmut generates for ``module`` (``"claims.py"``, ``"steps/grant.py"``):
    its name -> the changed lines of its diff (``-``/``+`` lines, without the file header)."""
    import libcst as cst
    from mutmut.mutation.diff_apply import read_mutant_function, read_original_function
    from mutmut.mutation.file_mutation import mutate_file_contents
    from mutmut.utils.format_utils import get_mutant_name

    _load_mutmut_config()
    relative = Path(PACKAGE) / module
    mutated = mutate_file_contents(str(relative), (RUNTIME / module).read_text("utf-8"))
    # As mutmut's get_diff_for_mutant, with the mutated module parsed once, not per mutant.
    tree = cst.parse_module(mutated.code)
    out: dict[str, tuple[str, ...]] = {}
    for method in mutated.mutant_names:
        name = get_mutant_name(relative, method)
        before, after = (
            cst.Module([f(tree, name)]).code.strip().split("\n")
            for f in (read_original_function, read_mutant_function)
        )
        out[name] = changed_lines("\n".join(unified_diff(before, after, lineterm="")))
    return out


def changed_lines(diff: str) -> tuple[str, ...]:
    """The ``-``/``+`` lines of a unified diff, without its ``---``/``+++`` header."""
    return tuple(
        line.rstrip()
        for line in diff.splitlines()
        if line[:1] in "-+" and not line.startswith(("---", "+++"))
    )


def module_of(mutant: str) -> str:
    """``session_expiry_runtime.steps.grant.x_f__mutmut_1`` -> ``steps/grant.py``."""
    dotted = mutant.partition("__mutmut_")[0].rpartition(".")[0]
    return dotted.removeprefix(PACKAGE + ".").replace(".", "/") + ".py"


def stale_equivalents(entries: list[Equivalent]) -> list[str]:
    """What is wrong with ``entries``: a mutant mutmut no longer generates, or whose change is
    no longer the recorded one, or listed under another module; empty when all hold."""
    problems: list[str] = []
    generated: Mapping[str, Mapping[str, tuple[str, ...]]] = {
        module: changes(module) for module in sorted({e.module for e in entries})
    }
    for entry in entries:
        if module_of(entry.mutant) != entry.module:
            problems.append(f"{entry.mutant}: not a mutant of {entry.module}")
            continue
        change = generated[entry.module].get(entry.mutant)
        if change is None:
            problems.append(f"{entry.mutant}: mutmut no longer generates it")
        elif change != entry.change:
            problems.append(
                f"{entry.mutant}: its change is now {list(change)}, not {list(entry.change)}"
            )
        if not entry.reason.strip():
            problems.append(f"{entry.mutant}: no reason given")
    return problems
