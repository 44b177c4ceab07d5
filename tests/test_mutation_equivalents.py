"""The mutation run's checked-in files stay true (issue 40): ``mutation/equivalent.toml`` names
only mutants mutmut still generates, each with the change it was judged on and a reason, and
``mutation/modules.toml`` names modules and tests that exist.

Fast: mutmut generates the mutants of the files the equivalents name (its own code, in
memory); no mutant is run (``make mutation`` does that).
"""

from __future__ import annotations

import pytest

from mutation.mutants import (
    EQUIVALENT_FILE,
    ROOT,
    RUNTIME,
    Equivalent,
    changes,
    equivalents,
    modules,
    stale_equivalents,
)


def test_every_equivalent_mutant_is_still_generated_with_its_change() -> None:
    assert stale_equivalents(equivalents()) == []


def test_fails_an_equivalent_mutant_the_tool_no_longer_generates() -> None:
    name, change = next(iter(changes("steps/connection.py").items()))
    gone = name.replace("__mutmut_", "__mutmut_9")  # an index past the last mutant
    entries = [
        Equivalent("steps/connection.py", gone, change, "a reason"),
        Equivalent("steps/connection.py", name, ("-    a line", "+    another"), "a reason"),
        Equivalent("owners/claims.py", name, change, "a reason"),
        Equivalent("steps/connection.py", name, change, " "),
    ]

    assert stale_equivalents(entries) == [
        f"{gone}: mutmut no longer generates it",
        f"{name}: its change is now {list(change)}, not ['-    a line', '+    another']",
        f"{name}: not a mutant of owners/claims.py",
        f"{name}: no reason given",
    ]


def test_every_equivalent_mutant_names_its_module_in_modules_toml() -> None:
    listed = modules()
    assert [e.mutant for e in equivalents() if e.module not in listed] == []
    assert EQUIVALENT_FILE.exists()


@pytest.mark.parametrize("module", sorted(modules()))
def test_each_mutated_module_and_its_tests_exist_with_the_goal(module: str) -> None:
    spec = modules()[module]
    assert (RUNTIME / module).is_file()
    assert spec["tests"] and all((ROOT / str(t)).is_file() for t in spec["tests"])  # type: ignore[attr-defined]
    assert spec["goal"] == 0.95
