"""pytest fixtures that run your session code through the deployed shape of your CDK app.

Load them in your root ``conftest.py`` and point them at your CDK app (the directory with its
``cdk.json``; default: pytest's rootdir)::

    pytest_plugins = ["cdk_session_expiry.testing.pytest_plugin"]

    @pytest.fixture(scope="module")
    def session_expiry_app_dir() -> Path:
        return Path(__file__).parent / "infra"

The documentation's "Getting started" has a whole project, run as written by this project's
tests; "Testing your code" describes every fixture and call.

**One deployment per app and test session.** The first module that needs an app deploys it with
the CDK CLI (20-40 s) and the plugin keeps a snapshot of the emulator's state right after the
deploy ([`EmulatorSnapshot`][cdk_session_expiry.testing.EmulatorSnapshot]); every later module
testing the
same app starts from that snapshot (a fraction of a second) instead of deploying again. Within a
module the tests share the pipeline and what they did (as before). What a test starts ends with
it: faults it injected are cleared, schedules and continuous cleanup it started are stopped.

* ``@pytest.mark.session_expiry_fresh(redeploy=True)`` on a module (``pytestmark = ...``):
  deploy the app again with the CDK CLI for this module, e.g. when the module rewrites the app.
* ini option ``session_expiry_restore_each_module = false``: modules share one state, restored
  only for modules marked ``@pytest.mark.session_expiry_fresh``; tests then keep apart by their
  own session ids (measured in "Benchmarks and costs").

Fixtures (module scope unless noted):

* ``session_expiry_app_dir`` — override it; the CDK app's directory (holds ``cdk.json``). A
  directory without one raises
  [`CdkAppNotFoundError`][cdk_session_expiry.testing.CdkAppNotFoundError] naming
  it; no CDK CLI raises [`CdkCliError`][cdk_session_expiry.testing.CdkCliError] saying how to
  install
  one.
* ``session_expiry_stack`` — override it to pick one stack. Default: the only stack with a
  DynamoDB Streams event source mapping.
* ``session_expiry_app_function`` — override it to choose whose environment the tests run with
  (a construct path such as ``"MyStack/Connect"`` or its end ``"Connect"``, a logical id or a
  function name). Default: the one function given ``grant_session_access``, else the
  environment ``SessionExpiry.session_environment()`` describes
  (`app_function`).
* ``session_expiry_emulator`` — the running
  [`LocalEmulator`][cdk_session_expiry.testing.LocalEmulator].
* ``session_expiry_pipeline`` — the app as deployed, read back as a
  [`LocalPipeline`][cdk_session_expiry.testing.LocalPipeline].
* ``session_expiry_app_env`` (function scope) — sets ``os.environ`` to
  [`application_env`][cdk_session_expiry.testing.LocalPipeline.application_env] of the app
  function for the test, so ``from_env()`` constructors and boto3 reach the emulator (and, with
  ``archive_bucket``, ``SESSION_EXPIRY_ARCHIVE_BUCKET`` names the archive); returns it.

The plugin's emulator runs from the first module that needs it to the end of the session, and
steps aside between modules when another ``LocalEmulator`` starts. ``moto.mock_aws`` resets
moto's state: use it in other modules only (the next module restores the deployment).
"""

from __future__ import annotations

import gc
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cdk_session_expiry.testing.emulator import LocalEmulator
from cdk_session_expiry.testing.pipeline import LocalPipeline
from cdk_session_expiry.testing.snapshot import EmulatorSnapshot, SnapshotError

#: The marker of a module that wants the deployment as deployed (or deployed again).
FRESH_MARKER = "session_expiry_fresh"
#: The ini option: restore the deployment's snapshot before every module (default true).
RESTORE_OPTION = "session_expiry_restore_each_module"
_PIPELINE = "session_expiry_pipeline"

_Key = tuple[str, "str | None"]


@dataclass
class DeploymentStats:
    """What the plugin did in this test session (printed in pytest's summary).

    Attributes:
        deploys: seconds of each deploy with the CDK CLI.
        deployed_apps: the app directory of each deploy, in the same order.
        restores: seconds of each module started from a snapshot: the restore and reading the
            pipeline back.
    """

    deploys: list[float] = field(default_factory=list)
    deployed_apps: list[str] = field(default_factory=list)
    restores: list[float] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"session-expiry: {len(self.deploys)} deploy(s) in {sum(self.deploys):.1f} s, "
            f"{len(self.restores)} restore(s) in {sum(self.restores):.2f} s"
        )


class _Deployments:
    """The test session's emulator and, per app, its deployment: deployed once, kept as a
    snapshot, restored for each module (see the module docstring)."""

    def __init__(self, *, restore_each_module: bool) -> None:
        self.restore_each_module = restore_each_module
        self.emulator = LocalEmulator()
        self.emulator.on_another_start = self._step_aside
        self.stats = DeploymentStats()
        self._snapshots: dict[_Key, EmulatorSnapshot] = {}
        self._pipelines: dict[_Key, LocalPipeline] = {}
        self._holds: _Key | None = None  # whose state the emulator holds
        self._failed: dict[_Key, BaseException] = {}
        self._in_use = False

    def running_emulator(self) -> LocalEmulator:
        if not self.emulator.running:
            self.emulator.start()
            self._holds = None
        return self.emulator

    def acquire(self, key: _Key, *, fresh: bool, redeploy: bool) -> LocalPipeline:
        """The pipeline of ``key``'s app for one module, deployed or restored as needed."""
        self._in_use = True
        try:
            return self._acquire(key, fresh=fresh, redeploy=redeploy)
        except BaseException:
            self._in_use = False
            raise

    def _acquire(self, key: _Key, *, fresh: bool, redeploy: bool) -> LocalPipeline:
        emulator = self.running_emulator()
        snapshot = self._snapshots.get(key)
        if key in self._failed and not redeploy:
            raise self._failed[key]  # the same app, the same error: fail at once
        if redeploy or snapshot is None:
            return self._deploy(key)
        if self.restore_each_module or fresh or not self._holds_intact(key):
            started = time.monotonic()
            snapshot.restore(emulator)
            self._holds = key
            pipeline = self._pipelines.get(key)
            if pipeline is not None and pipeline.emulator.port == emulator.port:
                pipeline._after_restore()
            else:
                self._replace(key, LocalPipeline.from_stack(emulator, self._stack_of(key)))
            self.stats.restores.append(time.monotonic() - started)
        return self._pipelines[key]

    def release(self, key: _Key) -> None:
        """The module is done: stop what it left running; the emulator may step aside."""
        pipeline = self._pipelines.get(key)
        if pipeline is not None:
            pipeline._end_activity()
        self._in_use = False

    def _deploy(self, key: _Key) -> LocalPipeline:
        app_dir, stack = key
        self.emulator.reset()
        self._holds = None
        started = time.monotonic()
        try:
            pipeline = LocalPipeline.deploy(app_dir, emulator=self.emulator, stack=stack)
        except Exception as err:
            self._failed[key] = err
            raise
        self._failed.pop(key, None)
        self.stats.deploys.append(time.monotonic() - started)
        self.stats.deployed_apps.append(app_dir)
        self._replace(key, pipeline)
        self._holds = key
        try:
            self._snapshots[key] = EmulatorSnapshot.take(self.emulator)
        except SnapshotError as err:
            self._snapshots.pop(key, None)
            warnings.warn(f"{err}; every module deploys {app_dir} again", stacklevel=2)
        return pipeline

    def _replace(self, key: _Key, pipeline: LocalPipeline) -> None:
        old = self._pipelines.pop(key, None)
        if old is not None and old is not pipeline:
            old.close()
        self._pipelines[key] = pipeline

    def _stack_of(self, key: _Key) -> str:
        return key[1] or self._pipelines[key].stack.name

    def _holds_intact(self, key: _Key) -> bool:
        """The emulator still holds ``key``'s deployment (``moto.mock_aws`` or a restart of
        the emulator would have emptied it)."""
        if self._holds != key or key not in self._pipelines:
            return False
        try:
            self.emulator.client("cloudformation").describe_stacks(StackName=self._stack_of(key))
        except Exception:
            return False
        return True

    def _step_aside(self) -> None:
        """Another emulator starts: stop this one if no module uses it."""
        if not self._in_use:
            self.emulator.stop()
            self._holds = None

    def close(self) -> None:
        for pipeline in self._pipelines.values():
            pipeline.close()
        self._pipelines.clear()
        self.emulator.stop()
        # Free the snapshots' S3 objects now: at interpreter exit moto's FakeKey.__del__ fails.
        self._snapshots.clear()
        gc.collect()


def pytest_configure(config: pytest.Config) -> None:
    # moto warns once per resource type its CloudFormation skips (bucket policies, ...); the
    # deploy succeeds, and LocalEmulator.unmodelled_resource_types lists them.
    config.addinivalue_line(
        "filterwarnings", "ignore:Tried to parse AWS:UserWarning:moto.cloudformation"
    )
    config.addinivalue_line(
        "markers",
        f"{FRESH_MARKER}(redeploy=False): this module starts from the app's deployment as "
        "deployed (restored from its snapshot); redeploy=True deploys it again with the CDK CLI",
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        RESTORE_OPTION,
        "restore the deployment's snapshot before every test module (default true); false: "
        "modules share one state and keep apart by their session ids",
        type="bool",
        default=True,
    )


def _restore_each_module(config: pytest.Config) -> bool:
    try:
        return bool(config.getini(RESTORE_OPTION))
    except ValueError:  # the plugin was loaded after startup (a conftest below the root)
        return True


_STATS_KEY = pytest.StashKey[DeploymentStats]()


@pytest.fixture(scope="session")
def _session_expiry_deployments(request: pytest.FixtureRequest) -> Iterator[_Deployments]:
    deployments = _Deployments(restore_each_module=_restore_each_module(request.config))
    request.config.stash[_STATS_KEY] = deployments.stats
    try:
        yield deployments
    finally:
        deployments.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    stats = terminalreporter.config.stash.get(_STATS_KEY, None)
    if stats is not None and (stats.deploys or stats.restores):
        terminalreporter.write_line(stats.summary())


@pytest.fixture(scope="module")
def session_expiry_app_dir(request: pytest.FixtureRequest) -> Path:
    """Directory of the CDK app to deploy (holds ``cdk.json``). Default: pytest's rootdir."""
    return Path(str(request.config.rootpath))


@pytest.fixture(scope="module")
def session_expiry_stack() -> str | None:
    """Name of the stack that holds the pipeline. Default: ``None`` (the only one found)."""
    return None


@pytest.fixture(scope="module")
def session_expiry_app_function() -> str | None:
    """Whose environment ``session_expiry_app_env`` applies: a construct path (or its end), a
    logical id or a function name. Default: ``None``, the rule of
    [`session_environment`][cdk_session_expiry.testing.LocalPipeline.session_environment]."""
    return None


@pytest.fixture(scope="module")
def session_expiry_emulator(
    _session_expiry_deployments: _Deployments, request: pytest.FixtureRequest
) -> LocalEmulator:
    """The running emulator on ``http://localhost:{port}``; it holds the app's deployment in
    modules that use ``session_expiry_pipeline``, and nothing in others."""
    emulator = _session_expiry_deployments.running_emulator()
    module_items = [
        i for i in request.session.items if getattr(i, "module", None) is request.module
    ]
    if not any(_PIPELINE in getattr(i, "fixturenames", ()) for i in module_items):
        emulator.reset()
        _session_expiry_deployments._holds = None
    return emulator


@pytest.fixture(scope="module")
def session_expiry_pipeline(
    _session_expiry_deployments: _Deployments,
    session_expiry_emulator: LocalEmulator,
    session_expiry_app_dir: Path,
    session_expiry_stack: str | None,
    request: pytest.FixtureRequest,
) -> Iterator[LocalPipeline]:
    """The app deployed into the emulator (once per session) or restored from its snapshot,
    read back as a pipeline."""
    marker = request.node.get_closest_marker(FRESH_MARKER)
    key = (str(Path(session_expiry_app_dir).resolve()), session_expiry_stack)
    pipeline = _session_expiry_deployments.acquire(
        key,
        fresh=marker is not None,
        redeploy=bool(marker is not None and marker.kwargs.get("redeploy")),
    )
    try:
        yield pipeline
    finally:
        _session_expiry_deployments.release(key)


@pytest.fixture(autouse=True)
def _session_expiry_test_ends(request: pytest.FixtureRequest) -> Iterator[None]:
    """What a test starts ends with it: faults, schedules, continuous cleanup."""
    if _PIPELINE not in request.fixturenames:
        yield
        return
    pipeline: LocalPipeline = request.getfixturevalue(_PIPELINE)
    faults = list(pipeline.emulator.faults)
    yield
    pipeline._end_activity()
    for fault in list(pipeline.emulator.faults):
        if fault not in faults:
            pipeline.emulator.clear_fault(fault)


@pytest.fixture
def session_expiry_app_env(
    session_expiry_pipeline: LocalPipeline,
    session_expiry_app_function: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """Apply the app function's environment
    ([`LocalPipeline.application_env`][cdk_session_expiry.testing.LocalPipeline.application_env]) to
    ``os.environ`` for one test; returns it.

    Raises:
        AppFunctionError: ``session_expiry_app_function`` names no function, or several; or
            it is unset and several functions given session access differ.
    """
    env = session_expiry_pipeline.application_env(session_expiry_app_function)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env
