"""``make mutation``: mutmut on the safety-critical modules, one module at a time (issue 40).

For each module of modules.toml (or those named on the command line), in a work directory of
its own (``mutation/.work/<module>/``, made afresh unless ``--keep``): links to the runtime
package and to ``tests/``, the hang guard (``hang_guard.py``), and mutmut's settings
(``mutation/pyproject.toml``) plus the module's ``only_mutate`` and its tests. ``mutmut run``
mutates the module and runs, for each mutant, the module's tests that reach the mutated
function. Then one table: module, mutants,
killed, equivalent (equivalent.toml), survived, kill rate of the non-equivalent mutants, goal;
and every surviving mutant that equivalent.toml does not explain, with its diff.

Usage: ``python mutation/run.py [--jobs N] [--keep | --report] [--mutants PATTERN] [MODULE ...]``
(MODULE as in modules.toml, e.g. ``claims.py steps/grant.py``). Exit status 1 when a module is
below its goal or a mutant was not checked.
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


@dataclass
class Outcome:
    module: str
    goal: float
    statuses: dict[str, int | None] = field(default_factory=dict)
    equivalent: set[str] = field(default_factory=set)

    @property
    def killed(self) -> list[str]:
        """Killed by a failing test or a timeout; never one equivalent.toml lists (a timeout of
        a mutant that changes nothing is a starved run, not a kill)."""
        return [
            m
            for m, c in self.statuses.items()
            if (c in KILLED or c in TIMEOUT) and m not in self.equivalent
        ]

    @property
    def surviving(self) -> list[str]:
        return [
            m
            for m, c in self.statuses.items()
            if c is not None and c not in KILLED and c not in TIMEOUT and m not in self.equivalent
        ]

    @property
    def rate(self) -> float:
        counted = len(self.statuses) - len(self.equivalent & set(self.statuses))
        return len(self.killed) / counted if counted else 1.0


def work_dir(module: str, tests: list[str], keep: bool) -> Path:
    """The module's work directory: links to the package and the tests, mutmut's settings."""
    work = WORK / module.replace("/", "__").removesuffix(".py")
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


def run_module(
    module: str,
    tests: list[str],
    jobs: int,
    keep: bool,
    *,
    run: bool = True,
    only: tuple[str, ...] = (),
) -> dict[str, int | None]:
    """mutmut on ``module`` (unless ``run`` is false: the results of the last run as kept), on
    the mutants whose names match a pattern of ``only`` (mutmut's own filter, ``fnmatch``) when
    there are any; each mutant's exit code (``None``: not checked)."""
    work = WORK / module.replace("/", "__").removesuffix(".py")
    if run:
        work = work_dir(module, tests, keep)
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        with (work / "mutmut.log").open("w") as log:
            subprocess.run(  # noqa: S603 - our own venv's mutmut, fixed arguments
                [str(MUTMUT), "run", "--max-children", str(jobs), *only],
                cwd=work,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,
            )
    meta = work / "mutants" / PACKAGE / f"{module}.meta"
    if not meta.exists():
        sys.exit(f"mutmut wrote no results for {module}; see {work / 'mutmut.log'}")
    data = json.loads(meta.read_text("utf-8"))
    return dict(data["exit_code_by_key"])


def report(outcomes: list[Outcome]) -> bool:
    """Print the table and the surviving mutants; ``True`` when every module met its goal."""
    head = ("module", "mutants", "killed", "equivalent", "survived", "kill rate", "goal")
    # The module column as wide as the longest name and two spaces, 26 at least.
    width = max([26, *(len(o.module) + 2 for o in outcomes)])
    print(
        f"{head[0]:<{width}}{head[1]:>8}{head[2]:>8}{head[3]:>11}{head[4]:>9}{head[5]:>10}"
        f"{head[6]:>6}"
    )
    ok = True
    for o in outcomes:
        unchecked = [m for m, c in o.statuses.items() if c is None]
        met = o.rate >= o.goal and not unchecked
        ok = ok and met
        print(
            f"{o.module:<{width}}{len(o.statuses):>8}{len(o.killed):>8}"
            f"{len(o.equivalent & set(o.statuses)):>11}{len(o.surviving):>9}"
            f"{o.rate:>10.1%}{o.goal:>6.0%}{'' if met else '  BELOW GOAL'}"
        )
        if unchecked:
            # The equivalent mutants among those checked (an unchecked one is in neither count).
            equivalent = {m for m in o.equivalent if o.statuses.get(m) is not None}
            checked = len(o.statuses) - len(unchecked) - len(equivalent)
            print(
                f"    {len(unchecked)} mutants not checked (the run stopped early); of the "
                f"{checked} non-equivalent checked, {len(o.killed) / max(checked, 1):.1%} killed"
            )
    for o in outcomes:
        codes = Counter(o.statuses[m] for m in o.surviving)
        if not o.surviving:
            continue
        print(f"\nsurviving in {o.module} (exit codes {dict(codes)}):")
        diffs = changes(o.module)
        for name in o.surviving:
            print(f"  {name}")
            for line in diffs.get(name, ("(no longer generated)",)):
                print(f"      {line}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="modules of modules.toml (default: all)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument("--keep", action="store_true", help="reuse an earlier run's results")
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
    args = parser.parse_args(argv)
    table = modules()
    unknown = [m for m in args.modules if m not in table]
    if unknown:
        parser.error(f"unknown modules {unknown}: expected some of {sorted(table)}")
    known = equivalents()
    outcomes = []
    for module in args.modules or list(table):
        spec = table[module]
        tests = [str(t) for t in spec["tests"]]  # type: ignore[attr-defined]
        statuses = run_module(
            module, tests, args.jobs, args.keep, run=not args.report, only=tuple(args.mutants)
        )
        listed = {e.mutant for e in known if e.module == module}
        outcomes.append(Outcome(module, float(spec["goal"]), statuses, listed))  # type: ignore[arg-type]
    return 0 if report(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
