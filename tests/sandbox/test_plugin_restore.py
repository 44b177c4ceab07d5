"""One deployment per app and test session: this module tests the same app as
test_plugin_optins.py and starts from the snapshot taken right after its deploy, not from what
that module left, and without deploying it again."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from session_expiry_runtime.store import SessionStore

from cdk_session_expiry.testing import LocalPipeline

pytestmark = pytest.mark.slow

APP = Path(__file__).resolve().parent / "optins_app"


@pytest.fixture(scope="module")
def session_expiry_app_dir() -> Path:
    return APP


@pytest.fixture(scope="module")
def session_expiry_app_function() -> str:
    return "Connect"


def test_the_module_starts_from_the_deployment_as_deployed(
    session_expiry_pipeline: LocalPipeline, request: pytest.FixtureRequest
) -> None:
    p = session_expiry_pipeline
    ddb = p.emulator.client("dynamodb")
    assert ddb.scan(TableName=p.table_name)["Items"] == []
    assert p.on_failure_messages() == []
    assert p.emulator.open_connection_ids() == set()
    assert p.run_cleanup().records_read == 0
    assert p.stack.physical_ids("AWS::CloudWatch::Alarm")
    stats = request.getfixturevalue("_session_expiry_deployments").stats
    if "test_plugin_optins.py" in {i.path.name for i in request.session.items}:
        # The other module of this app ran first in this session and deployed it, once.
        assert stats.deployed_apps.count(str(APP)) == 1 and stats.restores, stats


def test_the_restored_deployment_cleans_sessions(
    session_expiry_pipeline: LocalPipeline, session_expiry_app_env: dict[str, str]
) -> None:
    p = session_expiry_pipeline
    store = SessionStore.from_env()
    p.emulator.open_connection("conn-restored")
    store.create("restored", ttl=timedelta(hours=1), connection_id="conn-restored")
    store.end("restored")

    report = p.run_cleanup()

    assert report.records_sent_to_on_failure == 0
    assert p.emulator.open_connection_ids() == set()
