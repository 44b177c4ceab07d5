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


def test_report_of_a_partial_run_counts_only_the_checked_equivalents(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of some mutants (``--mutants``): the rate of those checked leaves out the
    equivalent mutants that were not run (a run of 111 of 544 mutants printed 110.2 %)."""
    from mutation import run
    from mutation.run import Outcome, report

    monkeypatch.setattr(run, "changes", lambda module: {})  # no module to diff: names only
    statuses: dict[str, int | None] = {"k1": 1, "k2": 1, "e1": 0, "s1": 0, "e2": None, "u": None}
    report([Outcome("m.py", 0.95, statuses, {"e1", "e2"})])

    out = capsys.readouterr().out
    assert "2 mutants not checked" in out
    assert "of the 3 non-equivalent checked, 66.7% killed" in out


def test_report_columns_line_up_under_a_module_name_longer_than_the_column(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sweeps/tool_session_sweeper.py`` is 30 characters: the figures of every line still
    end under their headings (the column is as wide as the longest name)."""
    from mutation import run
    from mutation.run import Outcome, report

    monkeypatch.setattr(run, "changes", lambda module: {})
    long, short = "sweeps/tool_session_sweeper.py", "registrar.py"
    report([Outcome(long, 0.95, {"k": 1}, set()), Outcome(short, 0.95, {"k": 1}, set())])

    head, first, second = capsys.readouterr().out.splitlines()[:3]
    assert first.startswith(long + "  ") and second.startswith(short + " ")
    assert len(head) == len(first) == len(second)
    assert head.index("kill rate") + len("kill rate") == first.index("100.0%") + len("100.0%")
