"""The plugin's session of deployments: its emulator steps aside between modules for another
emulator, restarts on the same port, and a broken app fails every module at once (no deploy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdk_session_expiry.testing import CdkAppNotFoundError, LocalEmulator
from cdk_session_expiry.testing.pytest_plugin import _Deployments


def test_steps_aside_for_another_emulator_between_modules_and_comes_back() -> None:
    deployments = _Deployments(restore_each_module=True)
    try:
        port = deployments.running_emulator().port
        with LocalEmulator() as other:  # e.g. a module's own emulator
            assert other.running and not deployments.emulator.running
        assert deployments.running_emulator().port == port
    finally:
        deployments.close()


def test_fails_for_another_emulator_while_a_module_uses_it() -> None:
    deployments = _Deployments(restore_each_module=True)
    try:
        deployments.running_emulator()
        deployments._in_use = True  # a module's tests are running
        with pytest.raises(RuntimeError, match="one emulator per process"):
            LocalEmulator().start()
        assert deployments.emulator.running
    finally:
        deployments.close()


def test_fails_every_module_of_a_broken_app_with_the_first_error(tmp_path: Path) -> None:
    deployments = _Deployments(restore_each_module=True)
    key = (str(tmp_path / "no-app"), None)
    try:
        with pytest.raises(CdkAppNotFoundError) as first:
            deployments.acquire(key, fresh=False, redeploy=False)
        with pytest.raises(CdkAppNotFoundError) as second:
            deployments.acquire(key, fresh=False, redeploy=False)
        assert second.value is first.value
        assert deployments.stats.deploys == []
    finally:
        deployments.close()
