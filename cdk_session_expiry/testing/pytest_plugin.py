"""pytest fixtures that run your session code through the deployed-shape pipeline.

Load them in your root ``conftest.py``::

    pytest_plugins = ["cdk_session_expiry.testing.pytest_plugin"]

and point them at your CDK app (the directory with its ``cdk.json``; default: pytest's rootdir)::

    @pytest.fixture(scope="module")
    def session_expiry_app_dir() -> Path:
        return Path(__file__).parent / "infra"

Then, in a test module (the documentation's "Getting started", ``docs/getting-started.md``, has
the whole example, run as written by this project's tests)::

    def test_expired_session_is_cleaned(session_expiry_pipeline, session_expiry_app_env):
        emulator = session_expiry_pipeline.emulator
        store = SessionStore.from_env()                  # talks to the emulator
        emulator.open_connection("conn-expired")
        store.create("expired", ttl=timedelta(seconds=1), connection_id="conn-expired")
        emulator.open_connection("conn-live")
        store.create("live", ttl=timedelta(hours=1), connection_id="conn-live")
        session_expiry_pipeline.expire_due(now=time.time() + 5)   # TTL-shaped delete
        report = session_expiry_pipeline.run_cleanup()
        assert report.records_sent_to_on_failure == 0
        assert emulator.open_connection_ids() == {"conn-live"}    # fails if nothing is cleaned

Fixtures (module scope unless noted; the app is deployed once per test module):

* ``session_expiry_app_dir`` — override it; the CDK app's directory (holds ``cdk.json``). A
  directory without one raises :class:`~cdk_session_expiry.testing.CdkAppNotFoundError` naming
  it; no CDK CLI raises :class:`~cdk_session_expiry.testing.CdkCliError` saying how to install
  one.
* ``session_expiry_stack`` — override it to pick one stack (default: found automatically).
* ``session_expiry_emulator`` — a running :class:`LocalEmulator`.
* ``session_expiry_pipeline`` — the app bootstrapped and deployed with the CDK CLI, read back
  as a :class:`LocalPipeline`.
* ``session_expiry_app_env`` (function scope) — sets ``os.environ`` to the pipeline's
  :meth:`LocalPipeline.application_env` for the test, so ``from_env()`` constructors and boto3
  reach the emulator.

Do not combine with ``moto.mock_aws`` in the same module: it resets moto's state.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cdk_session_expiry.testing.emulator import LocalEmulator
from cdk_session_expiry.testing.pipeline import LocalPipeline


@pytest.fixture(scope="module")
def session_expiry_app_dir(request: pytest.FixtureRequest) -> Path:
    """Directory of the CDK app to deploy (holds ``cdk.json``). Default: pytest's rootdir."""
    return Path(str(request.config.rootpath))


@pytest.fixture(scope="module")
def session_expiry_stack() -> str | None:
    """Name of the stack that holds the pipeline. Default: ``None`` (the only one found)."""
    return None


@pytest.fixture(scope="module")
def session_expiry_emulator() -> Iterator[LocalEmulator]:
    """A running emulator on ``http://localhost:{free port}``; stopped after the module."""
    with LocalEmulator() as emulator:
        yield emulator


@pytest.fixture(scope="module")
def session_expiry_pipeline(
    session_expiry_emulator: LocalEmulator,
    session_expiry_app_dir: Path,
    session_expiry_stack: str | None,
) -> Iterator[LocalPipeline]:
    """The app deployed into the emulator with the CDK CLI, read back as a pipeline."""
    pipeline = LocalPipeline.deploy(
        session_expiry_app_dir, emulator=session_expiry_emulator, stack=session_expiry_stack
    )
    try:
        yield pipeline
    finally:
        pipeline.close()


@pytest.fixture
def session_expiry_app_env(
    session_expiry_pipeline: LocalPipeline, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """Apply the pipeline's application environment to ``os.environ`` for one test."""
    env = session_expiry_pipeline.application_env()
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env
