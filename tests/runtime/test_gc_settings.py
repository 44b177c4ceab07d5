"""The cleanup function tunes CPython's garbage collector once, on its first invocation.

``gc_settings.tune_for_cleanup`` freezes what the execution environment holds after its clients
are built and raises the young-generation threshold (its module docstring says why; ``make
bench`` measures it). Importing the runtime package must change nothing: applications import
``SessionStore`` from it.
"""

from __future__ import annotations

import gc
import importlib
import subprocess
import sys

import pytest
from runtime_support import FakeContext, Sandbox
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.core import gc_settings


@pytest.fixture
def collector_restored() -> tuple[int, int, int]:
    """The test process's collector thresholds at the start; ``tests/conftest.py`` puts the
    collector back after every test."""
    return gc.get_threshold()


def test_first_invocation_freezes_the_clients_and_raises_the_young_threshold(
    sandbox: Sandbox, fresh_handler: None, collector_restored: tuple[int, int, int]
) -> None:
    gc.unfreeze()
    gc.set_threshold(700, *collector_restored[1:])
    assert handler_module.handler({"Records": []}, FakeContext()) == {"batchItemFailures": []}
    assert gc.get_threshold() == (
        gc_settings.YOUNG_GENERATION_THRESHOLD,
        *collector_restored[1:],
    )
    assert gc.get_freeze_count() > 0
    # The cleaner, built before the freeze, is in the permanent generation: gc.get_objects()
    # lists the three generations that collections walk, and it is in none of them.
    cleaner = handler_module.get_cleaner()
    assert gc.is_tracked(cleaner)
    assert all(obj is not cleaner for obj in gc.get_objects())


def test_importing_the_runtime_package_leaves_the_collector_alone() -> None:
    """A fresh interpreter that imports the handler module (as the replay command and
    applications import the package) keeps CPython's default settings."""
    code = (
        "import gc; before = gc.get_threshold(); "
        "import session_expiry_runtime, session_expiry_runtime.handler, "
        "session_expiry_runtime.store; "
        "assert gc.get_threshold() == before, gc.get_threshold(); "
        "assert gc.get_freeze_count() == 0, gc.get_freeze_count(); "
        "assert gc.isenabled(); print('untouched')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "untouched"


def test_tuning_twice_keeps_the_same_threshold(collector_restored: tuple[int, int, int]) -> None:
    importlib.reload(gc_settings)
    gc_settings.tune_for_cleanup()
    gc_settings.tune_for_cleanup()
    assert gc.get_threshold()[0] == gc_settings.YOUNG_GENERATION_THRESHOLD
    assert gc.get_threshold()[1:] == collector_restored[1:]


def test_collection_is_paused_inside_the_block_and_enabled_again_after() -> None:
    assert gc.isenabled()
    with gc_settings.collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collection_pause_restores_the_collector_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError, match="boom"), gc_settings.collection_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_collection_pause_leaves_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with gc_settings.collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_first_invocation_builds_its_clients_with_collection_paused(
    sandbox: Sandbox,
    fresh_handler: None,
    collector_restored: tuple[int, int, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []
    build = handler_module.build_clients

    def recording_build(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return build(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(handler_module, "build_clients", recording_build)
    assert handler_module.handler({"Records": []}, FakeContext()) == {"batchItemFailures": []}
    assert seen == [False]
    assert gc.isenabled()
