"""Where replay imports custom steps from: where the deployed cleanup function imports them.

The deployed function imports each custom step's ``handler`` and ``preview``
(``SESSION_EXPIRY_CUSTOM_STEPS``, `steps.custom`) from the root of its code, where the
construct copied the *contents* of each ``CustomCleanupStep``'s ``code`` directory beside
``session_expiry_runtime/`` (``cdk_session_expiry.custom_steps``). Replay runs from an
operator's shell with the runtime of the installed package; it puts the steps' code on
``sys.path`` by this rule (`steps_path`), before any handler is imported:

1. ``--steps-path DIR`` (repeatable): each ``DIR`` is what a step's ``code`` names — the
   directory *holding* ``my_steps/`` for a handler ``my_steps.secrets.delete_secret`` — put
   first on ``sys.path``, in the order given. Nothing else is searched.
2. Default, meant for a run from the app's directory (where ``cdk.json`` is), for each step's
   top-level package: the current directory when it holds the package; else wherever Python
   already finds it (installed, ``PYTHONPATH``); else the cleanup function's code as
   ``cdk synth``/``cdk deploy`` staged it in the cloud assembly:
   the ``cdk.out/asset.*/`` directory that holds ``session_expiry_runtime/`` and that package.
   That directory is the deployed function's code when ``cdk.out`` comes from the deployment
   (it is the asset CDK uploaded). Several such directories with that package — an app whose
   ``SessionExpiry`` constructs stage different steps, or several synths of changed step code —
   are refused (`StepsPathError`, naming them): pass ``--steps-path``.

A step found nowhere is left to the import, which fails with ``cannot import 'my_steps...'``;
replay then exits 2 (could not run) with this rule in its message, before any message is read.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ..steps.custom import CustomStepSpec, parse_custom_steps

#: The cloud assembly's directory, relative to the app's directory (the CDK CLI's default
#: ``--output``).
CLOUD_ASSEMBLY = "cdk.out"
RUNTIME_PACKAGE = "session_expiry_runtime"

__all__ = ["CLOUD_ASSEMBLY", "StepsPathError", "steps_path"]


class StepsPathError(ValueError):
    """The custom steps' code cannot be placed: a ``--steps-path`` that is no directory, or
    several staged copies of one step's package in ``cdk.out``."""


def _top_level(spec: CustomStepSpec) -> set[str]:
    names = {spec.handler.split(".", 1)[0]}
    if spec.preview:
        names.add(spec.preview.split(".", 1)[0])
    return names


def _holds(directory: Path, package: str) -> bool:
    return (directory / package).is_dir() or (directory / f"{package}.py").is_file()


def _assets(assembly: Path) -> set[Path]:
    """The file assets of the latest synth: those its ``*.assets.json`` manifests name (CDK
    leaves the directories of earlier synths in ``cdk.out``), nested assemblies included."""
    found: set[Path] = set()
    for manifest in assembly.rglob("*.assets.json"):
        try:
            files = json.loads(manifest.read_text()).get("files") or {}
        except (OSError, ValueError, AttributeError):
            continue
        for entry in files.values():
            source = entry.get("source") if isinstance(entry, dict) else None
            path = source.get("path") if isinstance(source, dict) else None
            if isinstance(path, str) and (manifest.parent / path).is_dir():
                found.add((manifest.parent / path).resolve())
    return found


def _staged(cwd: Path, package: str) -> Path | None:
    """The one staged copy of the cleanup function's code in ``cwd/cdk.out`` (latest synth)
    that holds ``package``, or ``None``.

    Raises:
        StepsPathError: several do.
    """
    assembly = cwd / CLOUD_ASSEMBLY
    if not assembly.is_dir():
        return None
    found = sorted(
        d for d in _assets(assembly) if (d / RUNTIME_PACKAGE).is_dir() and _holds(d, package)
    )
    if len(found) > 1:
        raise StepsPathError(
            f"custom step package {package!r} is staged in {len(found)} copies of the cleanup "
            f"function's code in {assembly}: {', '.join(str(d) for d in found)}; expected one. "
            "Pass --steps-path DIR (the directory your CustomCleanupStep's code names)"
        )
    return found[0] if found else None


def steps_path(
    custom_steps: str | None, given: Sequence[str] = (), cwd: Path | None = None
) -> list[Path]:
    """The directories to put first on ``sys.path`` so that the custom steps import as in the
    deployed function (module docstring); empty without custom steps.

    Args:
        custom_steps: ``SESSION_EXPIRY_CUSTOM_STEPS`` (JSON) of the settings replay runs with.
        given: the ``--steps-path`` directories, in order. Default: none (the default rule).
        cwd: the app's directory. Default: the current directory.

    Raises:
        StepsPathError: a ``--steps-path`` that is not a directory; several staged copies.
        ValueError: ``custom_steps`` is not valid (`parse_custom_steps`).
    """
    specs = parse_custom_steps(custom_steps)
    missing = [d for d in given if not Path(d).is_dir()]
    if missing:  # refused even without custom steps: a mistyped path is never ignored
        raise StepsPathError(f"--steps-path {missing[0]!r}: expected a directory")
    if not specs:
        return []
    if given:
        return [Path(d).resolve() for d in given]
    here = (cwd or Path.cwd()).resolve()
    packages = sorted({name for spec in specs for name in _top_level(spec)})
    found: list[Path] = []
    for package in packages:
        if _holds(here, package):
            where: Path | None = here
        elif importlib.util.find_spec(package) is not None:
            continue  # importable as it is (installed, or on PYTHONPATH)
        else:
            where = _staged(here, package)
        if where is not None and where not in found:
            found.append(where)
    return found


def use_steps_path(directories: Sequence[Path]) -> None:
    """Put ``directories`` first on ``sys.path``, in order (the code root of the deployed
    function comes before anything else installed)."""
    for directory in reversed(directories):
        text = str(directory)
        if text not in sys.path:
            sys.path.insert(0, text)
