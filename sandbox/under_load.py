"""``python -m sandbox.under_load``: the sandbox, several times in a row, on a machine kept busy.

The sandbox must not depend on the machine's speed (issue 21): phases that need a session to
expire use the emulator's clock or margins measured from the machine's own calls, and any
mismatch is a report line. This command checks it the way a loaded CI host would stress it:
it starts ``--burners`` processes that each keep one core busy (a pure-Python loop at normal
priority, like another job's test run), runs ``python -m sandbox --quiet`` ``--runs`` times in a
row, prints one line per run (exit status, result, wall time, the load average before and after)
and exits 0 only if every run passed. It is not part of ``make test`` (three runs take a quarter
of an hour); ``docs/sandbox.md`` records when it was last run and what it printed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _burn() -> None:  # pragma: no cover - runs in a child process until terminated
    while True:
        pass


def run_once(index: int, extra: list[str]) -> bool:
    """One sandbox run; prints its line and returns whether it passed."""
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    done = subprocess.run(  # noqa: S603 - our own module, our own interpreter
        [sys.executable, "-m", "sandbox", "--quiet", *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    result = next(
        (line.split()[-1] for line in done.stdout.splitlines() if line.startswith("RESULT")),
        "no report",
    )
    print(
        f"run {index}: exit {done.returncode}, RESULT {result}, {wall:.0f} s, load average "
        f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    if done.returncode != 0:
        print(done.stdout[-3000:] + done.stderr[-3000:], flush=True)
    return done.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.under_load", description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="sandbox runs in a row (default 3)")
    parser.add_argument(
        "--burners",
        type=int,
        default=os.cpu_count() or 2,
        help="busy-loop processes kept running meanwhile (default: one per CPU)",
    )
    parser.add_argument("sandbox_args", nargs="*", help="passed to python -m sandbox")
    args = parser.parse_args(argv)
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.burners)]
    for burner in burners:
        burner.start()
    print(f"{args.burners} busy-loop processes on {os.cpu_count()} CPUs", flush=True)
    try:
        passed = [run_once(i, args.sandbox_args) for i in range(1, args.runs + 1)]
    finally:
        for burner in burners:
            burner.terminate()
    print(f"{sum(passed)}/{args.runs} runs passed under load", flush=True)
    return 0 if all(passed) else 1


if __name__ == "__main__":
    raise SystemExit(main())
