"""Fixtures of the template tests: cdk.json's context, a runtime package, synth helpers."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdk_session_expiry import _runtime_contract as contract

from .helpers import REPO, cdk_json_context


@pytest.fixture(scope="session")
def cdk_context() -> dict[str, Any]:
    return cdk_json_context()


@pytest.fixture(scope="session", autouse=True)
def runtime_package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The runtime package the assets copy.

    While ``handler.py`` is still being written in ``lambda_src``, point the construct at a
    temporary copy with a placeholder handler, so that template tests do not wait for it.
    The CLI and packaging tests run in subprocesses and always use the real package.
    """
    try:
        yield contract.runtime_package_dir()
        return
    except FileNotFoundError:
        pass
    source = REPO / "lambda_src" / contract.RUNTIME_PACKAGE
    copy = tmp_path_factory.mktemp("runtime") / contract.RUNTIME_PACKAGE
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "handler.py").write_text("def handler(event, context):\n    return None\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(contract, "runtime_package_dir", lambda: copy)
        yield copy
