"""The construct and the runtime agree on every name they share.

``cdk_session_expiry/_runtime_contract.py`` (infrastructure) and
``session_expiry_runtime.core.config`` (runtime) each hold a copy of the environment variable
names, defaults, metric names, dimension names and dimension values. Only this test imports
both; the construct itself never imports the runtime.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from session_expiry_runtime.core import config as runtime

from cdk_session_expiry import _runtime_contract as infra

SHARED_PREFIXES = (
    "ENV_",
    "DEFAULT_",
    "METRIC_",
    "DIMENSION_",
    "REASON_",
    "ACTION_",
    "CAUSE_",
    "REFUSAL_",
    "BREAKER_",
    "EVENT_",
)
SHARED_NAMES = sorted(n for n in dir(infra) if n.startswith(SHARED_PREFIXES))
PACKAGE = Path(infra.__file__).resolve().parent
#: The construct's own modules; ``testing/`` (local test tooling) has its own rules.
CONSTRUCT_MODULES = sorted(p for p in PACKAGE.glob("*.py"))


def test_the_contract_shares_names() -> None:
    assert len([n for n in SHARED_NAMES if n.startswith("ENV_")]) >= 10
    assert any(n.startswith("METRIC_") for n in SHARED_NAMES)


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_runtime_has_the_same_value(name: str) -> None:
    assert hasattr(runtime, name), f"session_expiry_runtime.core.config has no {name}"
    assert getattr(runtime, name) == getattr(infra, name)


def test_every_runtime_name_is_known_to_the_construct() -> None:
    # Dimension values feed the construct's metric_* methods and dashboards: a value the
    # runtime emits but the construct does not know is a metric nobody can alarm on.
    runtime_names = {n for n in dir(runtime) if n.startswith(SHARED_PREFIXES)}
    assert runtime_names - set(SHARED_NAMES) == set()


@pytest.mark.parametrize(
    "handler",
    [
        infra.CLEANUP_HANDLER,
        infra.SWEEPER_HANDLER,
        infra.GRANT_SWEEPER_HANDLER,
        infra.PAUSE_WATCH_HANDLER,
        infra.CIRCUIT_BREAKER_HANDLER,
    ],
)
def test_cleanup_handler_exists_in_the_runtime_package(handler: str) -> None:
    module, function = handler.rsplit(".", 1)
    path = infra.runtime_package_dir().parent.joinpath(*module.split(".")).with_suffix(".py")
    tree = ast.parse(path.read_text())
    assert function in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_the_sweeper_has_the_stop_hook_the_emulator_calls() -> None:
    from session_expiry_runtime.sweeps import sweeper

    module, _ = infra.SWEEPER_HANDLER.rsplit(".", 1)
    assert module == sweeper.__name__
    assert callable(getattr(sweeper, infra.SWEEPER_STOP_HOOK))


@pytest.mark.parametrize("path", CONSTRUCT_MODULES, ids=lambda p: p.name)
def test_the_construct_never_imports_the_runtime(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(m.split(".")[0] == infra.RUNTIME_PACKAGE for m in imported)


def test_max_session_lifetime_reaches_the_runtime() -> None:
    """The construct's ``max_session_lifetime`` is what ``SessionStore.from_env()`` enforces."""
    from aws_cdk import App, Duration, Stack

    from cdk_session_expiry import SessionExpiry

    assert infra.DEFAULT_MAX_SESSION_LIFETIME_SECONDS == 8 * 3600  # AgentCore Runtime's default
    stack = Stack(App(), "Lifetime")
    default = SessionExpiry(stack, "Default").session_environment()
    assert runtime.RuntimeConfig.from_env(default).max_session_lifetime_seconds == 8 * 3600
    two_hours = SessionExpiry(
        stack, "TwoHours", max_session_lifetime=Duration.hours(2)
    ).session_environment()
    assert runtime.RuntimeConfig.from_env(two_hours).max_session_lifetime_seconds == 7200


def test_both_sides_check_agentcore_runtime_ids_against_the_same_pattern() -> None:
    from cdk_session_expiry.agents import agentcore

    assert agentcore.RUNTIME_ID_PATTERN == runtime.AGENT_RUNTIME_ID_PATTERN
    assert runtime.AGENT_RUNTIME_ID_PATTERN == r"[a-zA-Z][a-zA-Z0-9_]{0,99}-[a-zA-Z0-9]{10}"
