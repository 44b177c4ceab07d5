"""The packages' layout on disk (issue 37): the runtime's layers, the re-export modules that keep
the documented paths working, and docs/development.md's architecture map.

* `RUNTIME_LAYERS`: the runtime's subpackages from the bottom up. A module may import its own
  package and the packages below it, never one above (`test_no_import_runs_back_up`).
* `REEXPORTS`: each documented path that moved, and where its code lives now. The old module is
  the moved module itself (`sys.modules` alias); each documented `python -m` command answers
  `--help` (`COMMANDS`).
* docs/development.md, "Architecture map": one row per package, in layer order, naming its
  modules; `test_development_map_matches_the_code` prints the table it expects.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RUNTIME = REPO / "lambda_src" / "session_expiry_runtime"
CONSTRUCT = REPO / "cdk_session_expiry"
DEVELOPMENT = REPO / "docs" / "development.md"

#: The runtime's subpackages, lowest layer first; the top level (`TOP`) is above them all.
RUNTIME_LAYERS = (
    "core",
    "owners",
    "records",
    "sinks",
    "sweeps",
    "store_parts",
    "steps",
    "switches",
    "cleanup",
    "recovery",
    "ops",
)
TOP = "(top level)"

#: The construct's subpackages. Each may import the top-level helpers of the construct and
#: `monitoring` (the alarm defaults), never `construct` (the `SessionExpiry` class) at run time.
CONSTRUCT_PACKAGES = ("monitoring", "archiving", "agents", "switches", "testing")

#: Old documented module path -> the module it re-exports (the code moved there, issue 37).
REEXPORTS = {
    "session_expiry_runtime.kill_switch": "session_expiry_runtime.ops.kill_switch",
    "session_expiry_runtime.replay": "session_expiry_runtime.recovery.replay",
    "session_expiry_runtime.status": "session_expiry_runtime.ops.status",
    "cdk_session_expiry.archive_query": "cdk_session_expiry.archiving.archive_query",
}

#: The runtime's top-level modules: the handler, the store's public face, the claim registrar's
#: handler and the re-export modules.
RUNTIME_TOP = {"__init__", "handler", "store", "registrar"} | {
    path.rsplit(".", 1)[1] for path in REEXPORTS if path.startswith("session_expiry_runtime.")
}

#: Every documented `python -m` command (README, docs, `session-expiry --help`).
COMMANDS = (
    "session_expiry_runtime.kill_switch",
    "session_expiry_runtime.replay",
    "session_expiry_runtime.status",
    "session_expiry_runtime.ops.kill_switch",
    "session_expiry_runtime.recovery.replay",
    "session_expiry_runtime.ops.status",
    "cdk_session_expiry.cost",
)


def _module_name(path: Path, root: Path, package: str) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((package, *parts))


def _targets(node: ast.ImportFrom | ast.Import, here: list[str]) -> set[str]:
    """The absolute names one import statement reaches (the module and each imported name)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if node.level:
        base = here[: len(here) - (node.level - 1)]
        module = ".".join([*base, node.module] if node.module else base)
    else:
        module = node.module or ""
    found = {f"{module}.{alias.name}" for alias in node.names}
    if node.module:
        found.add(module)
    return found


def _imports(path: Path, module: str, *, type_only: bool = True) -> set[str]:
    """The names `path` (module `module`) imports; with `type_only` False, not those under
    `if TYPE_CHECKING:`."""
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    tree = ast.parse(path.read_text())
    guarded = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for child in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and (
            type_only or id(node) not in guarded
        ):
            found |= _targets(node, here)
    return found


def _package_of(module: str, root: str) -> str | None:
    """The subpackage of `root` that `module` lies in, `TOP` for a top-level module, or None."""
    parts = module.split(".")
    if parts[0] != root:
        return None
    if len(parts) == 1:
        return TOP
    return parts[1] if (RUNTIME / parts[1]).is_dir() else TOP


def _runtime_modules() -> dict[str, Path]:
    return {
        _module_name(path, RUNTIME, "session_expiry_runtime"): path
        for path in sorted(RUNTIME.rglob("*.py"))
    }


def test_the_runtime_top_level_holds_the_handler_the_store_and_the_subpackages() -> None:
    modules = {path.stem for path in RUNTIME.glob("*.py")}
    packages = {path.name for path in RUNTIME.iterdir() if (path / "__init__.py").is_file()}
    assert modules == RUNTIME_TOP, "a new top-level module: put it in a subpackage"
    assert packages == set(RUNTIME_LAYERS)


def test_every_subpackage_has_a_map_of_its_rooms() -> None:
    inits = [RUNTIME / name / "__init__.py" for name in RUNTIME_LAYERS] + [
        CONSTRUCT / name / "__init__.py" for name in CONSTRUCT_PACKAGES
    ]
    inits.append(CONSTRUCT / "testing" / "models" / "__init__.py")
    for init in inits:
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc) > 80, f"{init.relative_to(REPO)}: no docstring mapping its modules"


def test_no_import_runs_back_up() -> None:
    rank = {name: index for index, name in enumerate(RUNTIME_LAYERS)}
    rank[TOP] = len(RUNTIME_LAYERS)
    wrong = []
    for module, path in _runtime_modules().items():
        source = _package_of(module, "session_expiry_runtime")
        assert source in rank, f"{module}: a subpackage missing from RUNTIME_LAYERS"
        for target in _imports(path, module):
            package = _package_of(target, "session_expiry_runtime")
            if package is None or package == source:
                continue
            if rank[package] > rank[source] or (package == TOP and source != TOP):
                wrong.append(f"{module} imports {target} ({source} -> {package})")
    assert not wrong, "imports running back up the layers:\n" + "\n".join(sorted(set(wrong)))


def test_fails_on_an_import_running_back_up(tmp_path: Path) -> None:
    """The check above reads relative imports the way Python does: `..cleanup` from `core`."""
    module = tmp_path / "config.py"
    module.write_text("from ..cleanup.batch import process_batch\n")
    found = _imports(module, "session_expiry_runtime.core.config")
    assert "session_expiry_runtime.cleanup.batch" in found
    assert (
        _package_of("session_expiry_runtime.cleanup.batch", "session_expiry_runtime") == "cleanup"
    )


def test_the_construct_packages_do_not_import_the_construct_at_run_time() -> None:
    wrong = [
        module
        for name in CONSTRUCT_PACKAGES
        for path in sorted((CONSTRUCT / name).rglob("*.py"))
        if (module := _module_name(path, CONSTRUCT, "cdk_session_expiry"))
        and any(
            target.startswith("cdk_session_expiry.construct")
            for target in _imports(path, module, type_only=False)
        )
    ]
    assert not wrong


@pytest.mark.parametrize("old", sorted(REEXPORTS))
def test_a_documented_path_is_the_moved_module(old: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(REEXPORTS[old])


def test_the_reexport_modules_are_all_listed() -> None:
    """A module whose body aliases another in `sys.modules` is a re-export: listed in REEXPORTS."""
    found = set()
    for root, package in ((RUNTIME, "session_expiry_runtime"), (CONSTRUCT, "cdk_session_expiry")):
        for path in root.glob("*.py"):
            if "sys.modules[__name__] = " in path.read_text():
                found.add(_module_name(path, root, package))
    assert found == set(REEXPORTS)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_documented_command_answers_help(command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def _expected_map() -> list[tuple[str, str]]:
    """(package, its modules) for each runtime layer, top first, then the construct's packages."""
    rows = [
        (
            f"`session_expiry_runtime` {TOP}",
            ", ".join(f"`{m}`" for m in sorted(RUNTIME_TOP - {"__init__"})),
        )
    ]
    for name in reversed(RUNTIME_LAYERS):
        modules = sorted(p.stem for p in (RUNTIME / name).glob("*.py") if p.stem != "__init__")
        rows.append((f"`session_expiry_runtime.{name}`", ", ".join(f"`{m}`" for m in modules)))
    for name in (*CONSTRUCT_PACKAGES[:-1], "testing/models"):
        modules = sorted(p.stem for p in (CONSTRUCT / name).glob("*.py") if p.stem != "__init__")
        dotted = name.replace("/", ".")
        rows.append((f"`cdk_session_expiry.{dotted}`", ", ".join(f"`{m}`" for m in modules)))
    return rows


def _documented_map() -> list[tuple[str, str]]:
    text = DEVELOPMENT.read_text()
    section = text.split("## Architecture map", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows.append((cells[0], cells[2]))
    return rows


def test_development_map_matches_the_code() -> None:
    expected = _expected_map()
    table = "\n".join(f"| {package} | ... | {modules} |" for package, modules in expected)
    assert _documented_map() == expected, f"docs/development.md's map should read:\n{table}"


def test_the_map_names_the_layers_in_the_order_the_test_enforces() -> None:
    section = DEVELOPMENT.read_text().split("## Architecture map", 1)[1]
    order = re.findall(r"^\| `session_expiry_runtime\.(\w+)`", section, flags=re.MULTILINE)
    assert order == list(reversed(RUNTIME_LAYERS))
