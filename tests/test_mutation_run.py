"""``make mutation``'s command line and table (``mutation/run.py``, issue 40): the figures line
up under their headings, a module without results is named and fails the run, bad arguments
are refused before anything is run or deleted. No mutant is run: mutmut is replaced by a
program that writes nothing (``/bin/true``) where a run is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mutation import run
from mutation.run import Outcome, main, report


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``mutation/.work/`` in a temporary directory; mutmut a program that writes nothing."""
    monkeypatch.setattr(run, "WORK", tmp_path)
    monkeypatch.setattr(run, "MUTMUT", Path("/bin/true"))
    return tmp_path


def kept(module: str, codes: dict[str, int | None]) -> None:
    """The results a run of ``module`` keeps: mutmut's ``.meta`` file (under the ``work``
    fixture's directory)."""
    meta = run.work_path(module) / "mutants" / run.PACKAGE / f"{module}.meta"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"exit_code_by_key": codes}), "utf-8")


def test_report_of_a_partial_run_counts_only_the_checked_equivalents(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of some mutants (``--mutants``): the rate of those checked leaves out the
    equivalent mutants that were not run (a run of 111 of 544 mutants printed 110.2 %)."""
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
    monkeypatch.setattr(run, "changes", lambda module: {})
    long, short = "sweeps/tool_session_sweeper.py", "registrar.py"
    report([Outcome(long, 0.95, {"k": 1}, set()), Outcome(short, 0.95, {"k": 1}, set())])

    head, first, second = capsys.readouterr().out.splitlines()[:3]
    assert first.startswith(long + "  ") and second.startswith(short + " ")
    assert len(head) == len(first) == len(second)
    assert head.index("kill rate") + len("kill rate") == first.index("100.0%") + len("100.0%")


def test_report_counts_the_timeouts_among_the_killed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A timeout is a kill, and its own column says how many of the kills were one."""
    statuses: dict[str, int | None] = {"k": 1, "t1": 24, "t2": 36, "e": 24, "s": 0}
    met = report([Outcome("m.py", 0.5, statuses, {"e", "s"})])

    head, line = capsys.readouterr().out.splitlines()[:2]
    assert met
    assert head.split()[1:6] == ["mutants", "killed", "timeouts", "equivalent", "survived"]
    # 5 mutants, 3 killed of which 2 by a timeout (the equivalent's timeout is neither), 2
    # equivalent, none surviving.
    assert line.split()[1:7] == ["5", "3", "2", "2", "0", "100.0%"]


def test_report_of_a_module_never_run_says_so_and_fails(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    met = report([Outcome("steps/grant.py", 0.95, None, set())])

    assert not met
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("steps/grant.py") and "NOT RUN" in line


def test_report_prints_every_module_kept_when_one_has_no_results(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--report`` after a run of one module: its line, and the other named as not run (it
    used to stop at the first module without results and print nothing)."""
    kept("owners/claims.py", {"a": 1, "b": 3, "c": 24})

    status = main(["--report", "steps/grant.py", "owners/claims.py"])

    lines = capsys.readouterr().out.splitlines()
    assert status == 1
    assert lines[1].startswith("steps/grant.py") and "NOT RUN" in lines[1]
    assert lines[2].split()[:7] == ["owners/claims.py", "3", "3", "1", "0", "0", "100.0%"]


def test_a_run_names_each_modules_log_and_a_run_without_results(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log's path as the module starts (the run is otherwise quiet for minutes); a mutmut
    that wrote no results is a line naming that log, and the run fails."""
    status = main(["--jobs", "3", "registrar.py"])

    out = capsys.readouterr().out.splitlines()
    log = work / "registrar" / "mutmut.log"
    assert status == 1
    assert out[0] == f"registrar.py: mutmut, 3 at once; progress: tail -f {log}"
    assert (
        out[2].startswith("registrar.py") and f"NO RESULTS: mutmut wrote none, see {log}" in out[2]
    )


@pytest.mark.parametrize("jobs", ["0", "-1", "two", "1.5"])
def test_fails_jobs_that_is_not_a_whole_number_of_at_least_one(
    jobs: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before anything is run or deleted: the module's earlier results stay."""
    kept("registrar.py", {"a": 1})

    with pytest.raises(SystemExit) as stopped:
        main(["--jobs", jobs, "registrar.py"])

    assert stopped.value.code == 2
    assert f"argument --jobs: {jobs!r}: expected a whole number of at least 1" in (
        capsys.readouterr().err
    )
    assert run.results("registrar.py") == {"a": 1}


def test_fails_a_module_not_in_modules_toml_before_deleting_anything(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept("registrar.py", {"a": 1})

    with pytest.raises(SystemExit) as stopped:
        main(["registrar.py", "core/nope.py"])

    assert stopped.value.code == 2
    assert "unknown modules ['core/nope.py']: expected some of" in capsys.readouterr().err
    assert run.results("registrar.py") == {"a": 1}


def test_help_says_where_the_progress_goes_and_what_keep_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])

    text = " ".join(capsys.readouterr().out.split())
    assert "mutation/.work/<module>/mutmut.log" in text
    assert (
        "Without ``--keep`` a module's work directory, and the results of its last run, "
        "are deleted first" in text
    )
    assert (
        "Exit status 1 when a module is below its goal, has no results or a mutant was not checked"
        in text
    )
