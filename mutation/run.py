"""``make mutation``: mutmut on the safety-critical modules, one module at a time (issue 40).

For each module of modules.toml (or those named on the command line), in a work directory of
its own (``mutation/.work/<module>/``, made afresh unless ``--keep``): links to the runtime
package and to ``tests/``, the hang guard (``hang_guard.py``), and mutmut's settings
(``mutation/pyproject.toml``) plus the module's ``only_mutate`` and its tests. ``mutmut run``
mutates the module and runs, for each mutant, the module's tests that reach the mutated
function; its progress goes to ``mutation/.work/<module>/mutmut.log`` (the command prints the
path as each module starts). Then one table: module, mutants, killed (by a failing test or a
timeout), of those by a timeout, equivalent (equivalent.toml), survived, kill rate of the
non-equivalent mutants, goal; and every surviving mutant that equivalent.toml does not explain,
with its diff. A module with no results (never run, or mutmut failed: see its log) is a line of
its own and fails the run.

Usage: ``make mutation MUTATION_ARGS="[--jobs N] [--keep | --report] [--mutants PATTERN]
[MODULE ...]"`` (or ``.venv/bin/python mutation/run.py ...``; MODULE as in modules.toml, e.g.
``owners/claims.py steps/grant.py``). Without ``--keep`` a module's work directory, and the
results of its last run, are deleted first (with ``--mutants`` too: the other mutants are then
unchecked and the module fails its goal); with it mutmut checks only the mutants not checked
yet, and those ``--mutants`` names again. Exit
status 1 when a module is below its goal, has no results or a mutant was not checked; 2 on bad
arguments, before anything is run or deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mutation.mutants import (
    HERE,
    PACKAGE,
    ROOT,
    RUNTIME,
    changes,
    equivalents,
    modules,
)

WORK = HERE / ".work"
MUTMUT = Path(sys.executable).with_name("mutmut")
#: mutmut's exit codes per mutant (mutmut.stats.status_by_exit_code) that count as killed: a
#: test failed, pytest stopped with an internal error, or the tests hung (a timeout).
KILLED = {1, 3}
TIMEOUT = {36, -24, 24, 152, 255}
#: A module's line when it has no results: mutmut failed, or it was never run here.
NO_RESULTS = "  NO RESULTS: mutmut wrote none, see {log}"
NOT_RUN = "  NOT RUN: no results kept in mutation/.work/"


@dataclass
class Outcome:
    module: str
    goal: float
    #: Each mutant's exit code (``None``: not checked); ``None`` when there are no results.
    statuses: dict[str, int | None] | None = field(default_factory=dict)
    equivalent: set[str] = field(default_factory=set)

    @property
    def codes(self) -> dict[str, int | None]:
        """The exit codes; none when there are no results."""
        return self.statuses or {}

    @property
    def killed(self) -> list[str]:
        """Killed by a failing test or a timeout; never one equivalent.toml lists (a timeout of
        a mutant that changes nothing is a starved run, not a kill)."""
        return [
            m
            for m, c in self.codes.items()
            if (c in KILLED or c in TIMEOUT) and m not in self.equivalent
        ]

    @property
    def timeouts(self) -> list[str]:
        """The killed mutants whose tests hung (mutmut's or the hang guard's limit)."""
        return [m for m in self.killed if self.codes[m] in TIMEOUT]

    @property
    def surviving(self) -> list[str]:
        return [
            m
            for m, c in self.codes.items()
            if c is not None and c not in KILLED and c not in TIMEOUT and m not in self.equivalent
        ]

    @property
    def rate(self) -> float:
        counted = len(self.codes) - len(self.equivalent & set(self.codes))
        return len(self.killed) / counted if counted else 1.0


def work_dir(module: str, tests: list[str], keep: bool) -> Path:
    """The module's work directory: links to the package and the tests, mutmut's settings."""
    work = work_path(module)
    if work.exists() and not keep:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    for name, target in ((PACKAGE, RUNTIME), ("tests", ROOT / "tests")):
        link = work / name
        if not link.exists():
            link.symlink_to(target, target_is_directory=True)
    shutil.copyfile(HERE / "hang_guard.py", work / "mutation_hang_guard.py")
    settings = (HERE / "pyproject.toml").read_text("utf-8")
    only = json.dumps([f"{PACKAGE}/{module}"])
    selection = json.dumps(tests)
    settings = settings.replace(
        "[tool.mutmut]\n",
        f"[tool.mutmut]\nonly_mutate = {only}\npytest_add_cli_args_test_selection = {selection}\n",
        1,
    )
    (work / "pyproject.toml").write_text(settings, "utf-8")
    return work


def work_path(module: str) -> Path:
    """``steps/base.py`` → ``mutation/.work/steps__base``."""
    return WORK / module.replace("/", "__").removesuffix(".py")


def results(module: str) -> dict[str, int | None] | None:
    """Each mutant's exit code as the module's last run kept it (``None``: not checked); no
    dictionary at all when there are no results (never run, or mutmut failed)."""
    meta = work_path(module) / "mutants" / PACKAGE / f"{module}.meta"
    if not meta.exists():
        return None
    return dict(json.loads(meta.read_text("utf-8"))["exit_code_by_key"])


def run_module(
    module: str, tests: list[str], jobs: int, keep: bool, only: tuple[str, ...] = ()
) -> dict[str, int | None] | None:
    """mutmut on ``module``, on the mutants whose names match a pattern of ``only`` (mutmut's
    own filter, ``fnmatch``) when there are any; its results as [`results`] reads them."""
    work = work_dir(module, tests, keep)
    log = work / "mutmut.log"
    print(f"{module}: mutmut, {jobs} at once; progress: tail -f {log}", flush=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with log.open("w") as out:
        subprocess.run(  # noqa: S603 - our own venv's mutmut, fixed arguments
            [str(MUTMUT), "run", "--max-children", str(jobs), *only],
            cwd=work,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return results(module)


HEAD = ("module", "mutants", "killed", "timeouts", "equivalent", "survived", "kill rate", "goal")
WIDTHS = (8, 8, 9, 11, 9, 10, 6)


def _row(width: int, cells: tuple[object, ...]) -> str:
    """One line of the table: the module left in ``width``, the figures right in theirs."""
    first, *rest = cells
    return f"{first!s:<{width}}" + "".join(f"{c!s:>{w}}" for c, w in zip(rest, WIDTHS, strict=True))


def _module_line(o: Outcome, width: int) -> bool:
    """Print the module's line (and how much of it was checked); ``True`` when it met its goal."""
    if o.statuses is None:
        log = work_path(o.module) / "mutmut.log"
        print(f"{o.module:<{width}}" + (NO_RESULTS if log.exists() else NOT_RUN).format(log=log))
        return False
    unchecked = [m for m, c in o.statuses.items() if c is None]
    met = o.rate >= o.goal and not unchecked
    listed = len(o.equivalent & set(o.statuses))
    figures = (len(o.statuses), len(o.killed), len(o.timeouts), listed, len(o.surviving))
    line = _row(width, (o.module, *figures, f"{o.rate:.1%}", f"{o.goal:.0%}"))
    print(line + ("" if met else "  BELOW GOAL"))
    if unchecked:
        # The equivalent mutants among those checked (an unchecked one is in neither count).
        equivalent = {m for m in o.equivalent if o.statuses.get(m) is not None}
        checked = len(o.statuses) - len(unchecked) - len(equivalent)
        print(
            f"    {len(unchecked)} mutants not checked (the run stopped early); of the "
            f"{checked} non-equivalent checked, {len(o.killed) / max(checked, 1):.1%} killed"
        )
    return met


def _survivors(o: Outcome) -> None:
    """Every surviving mutant of the module that equivalent.toml does not explain, diffed."""
    if not o.surviving:
        return
    codes = Counter(o.codes[m] for m in o.surviving)
    print(f"\nsurviving in {o.module} (exit codes {dict(codes)}):")
    diffs = changes(o.module)
    for name in o.surviving:
        print(f"  {name}")
        for line in diffs.get(name, ("(no longer generated)",)):
            print(f"      {line}")


def report(outcomes: list[Outcome]) -> bool:
    """Print the table and the surviving mutants; ``True`` when every module met its goal."""
    # The module column as wide as the longest name and two spaces, 26 at least.
    width = max([26, *(len(o.module) + 2 for o in outcomes)])
    print(_row(width, HEAD))
    met = [_module_line(o, width) for o in outcomes]
    for o in outcomes:
        _survivors(o)
    return all(met)


def positive(text: str) -> int:
    """``--jobs``: a whole number of at least one."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of at least 1")
    return value


def parser() -> argparse.ArgumentParser:
    """The command line; ``--help`` prints this module's whole docstring."""
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("modules", nargs="*", help="modules of modules.toml (default: all)")
    parser.add_argument(
        "--jobs", type=positive, default=1, help="mutants run at once (default one)"
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="reuse each module's work directory and the results kept in it: check only the "
        "mutants not checked yet (and those --mutants names)",
    )
    parser.add_argument(
        "--report", action="store_true", help="run nothing: the table of the last run as kept"
    )
    parser.add_argument(
        "--mutants",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run only the mutants matching PATTERN (fnmatch; repeatable), e.g. '*_Coalescer*'",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    command = parser()
    args = command.parse_args(argv)
    table = modules()
    unknown = [m for m in args.modules if m not in table]
    if unknown:
        command.error(f"unknown modules {unknown}: expected some of {sorted(table)}")
    known = equivalents()
    outcomes = []
    for module in args.modules or list(table):
        spec = table[module]
        tests = [str(t) for t in spec["tests"]]  # type: ignore[attr-defined]
        if args.report:
            statuses = results(module)
        else:
            statuses = run_module(module, tests, args.jobs, args.keep, tuple(args.mutants))
        listed = {e.mutant for e in known if e.module == module}
        outcomes.append(Outcome(module, float(spec["goal"]), statuses, listed))  # type: ignore[arg-type]
    return 0 if report(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
