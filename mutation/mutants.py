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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from difflib import unified_diff
from pathlib import Path
from typing import Any

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
def changes(module: str) -> Mapping[str, tuple[str, ...]]:
    """Every mutant mutmut generates for ``module`` (``"owners/claims.py"``, ``"steps/grant.py"``):
    its name -> the changed lines of its diff (``-``/``+`` lines, without the file header)."""
    return _Changes(module)


class _Changes(Mapping[str, tuple[str, ...]]):
    """A module's mutants, each diff made the first time it is asked for: mutmut generates a
    thousand for a large module, and the equivalents test and a run's survivors read a few."""

    def __init__(self, module: str) -> None:
        from mutmut.mutation.file_mutation import mutate_file_contents
        from mutmut.utils.format_utils import get_mutant_name

        _load_mutmut_config()
        relative = Path(PACKAGE) / module
        self._mutated = mutate_file_contents(str(relative), (RUNTIME / module).read_text("utf-8"))
        self._lines = self._mutated.code.splitlines()
        self._order = [get_mutant_name(relative, m) for m in self._mutated.mutant_names]
        self._names = set(self._order)
        self._made: dict[str, tuple[str, ...]] = {}

    def __getitem__(self, name: str) -> tuple[str, ...]:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._made:
            self._made[name] = self._change(name)
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._names)

    def _change(self, name: str) -> tuple[str, ...]:
        """As mutmut's ``get_diff_for_mutant``, with only the two functions' lines parsed (the
        spans mutmut keeps of each generated function), not the whole mutated module."""
        import libcst as cst
        from mutmut.mutation.diff_apply import generated_function_names
        from mutmut.utils.format_utils import orig_function_and_class_names_from_key

        original, class_name = orig_function_and_class_names_from_key(name)
        before, after = (
            self._function(generated, class_name is not None).with_changes(name=cst.Name(original))
            for generated in generated_function_names(name)
        )
        old, new = (cst.Module([f]).code.strip().split("\n") for f in (before, after))
        return changed_lines("\n".join(unified_diff(old, new, lineterm="")))

    def _function(self, generated: str, is_method: bool) -> Any:
        from mutmut.mutation.diff_apply import parse_generated_function

        span = self._mutated.line_span_by_function_name[generated]
        source = "\n".join(self._lines[span.start - 1 : span.end]) + "\n"
        function = parse_generated_function(source, name=generated, is_method=is_method)
        if function is None:
            raise ValueError(f"{generated}: mutmut's line span holds no such function")
        return function


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
