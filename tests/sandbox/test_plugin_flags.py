"""Feature flags work through the pytest plugin (issue 26 part 1): the opt-ins app deploys with
``feature_flags=True`` (its AppConfig resources created by the models the emulator teaches moto's
CloudFormation), and a test flips a flag as an operator does (``pipeline.set_feature_flags``, the
kill switch's ``flags set``), runs the cleanup, then drains the deferred work."""

from __future__ import annotations

from pathlib import Path

import pytest
from session_expiry_runtime.store import SessionStore

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.testing import LocalPipeline

pytestmark = pytest.mark.slow

APP = Path(__file__).resolve().parent / "optins_app"


@pytest.fixture(scope="module")
def session_expiry_app_dir() -> Path:
    return APP


@pytest.fixture(scope="module")
def session_expiry_app_function() -> str:
    return "Connect"


def _scratch_keys(p: LocalPipeline, prefix: str) -> list[str]:
    bucket = p.session_environment("Connect")[contract.ENV_SCRATCH_BUCKET]
    listed = p.emulator.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for o in listed.get("Contents", [])]


def test_the_appconfig_resources_are_deployed(session_expiry_pipeline: LocalPipeline) -> None:
    p = session_expiry_pipeline
    assert not {t for t in p.unmodelled_resource_types if t.startswith("AWS::AppConfig::")}
    variables = p.function.configuration["Environment"]["Variables"]
    app = variables[contract.ENV_FLAGS_APPLICATION]
    envs = p.emulator.client("appconfig").list_environments(ApplicationId=app)["Items"]
    (env,) = envs
    deployed = p.emulator.client("appconfig").list_deployments(
        ApplicationId=app, EnvironmentId=env["Id"]
    )["Items"]
    assert [d["State"] for d in deployed] == ["COMPLETE"]
    assert len(env["Monitors"]) == 2


def test_a_step_switched_off_is_done_once_it_is_back_on(
    session_expiry_pipeline: LocalPipeline, session_expiry_app_env: dict[str, str]
) -> None:
    p = session_expiry_pipeline
    store = SessionStore.from_env()
    session = store.create("flagged")
    bucket = p.session_environment("Connect")[contract.ENV_SCRATCH_BUCKET]
    p.emulator.client("s3").put_object(
        Bucket=bucket, Key=f"{session.scratch_prefix}a.txt", Body=b"x"
    )
    answer = p.set_feature_flags(DeleteScratch=False)
    assert answer["flags"]["DeleteScratch"] is False

    p.expire_session("flagged")

    assert _scratch_keys(p, session.scratch_prefix) == [f"{session.scratch_prefix}a.txt"]
    assert p.metrics.total(contract.METRIC_STEPS_DISABLED, Action="DeleteScratch") == 1
    assert p.drain_deferred()["done"] == {}  # still off

    p.set_feature_flags(DeleteScratch=True)
    report = p.drain_deferred()

    assert report["done"] == {"DeleteScratch": 1}
    assert _scratch_keys(p, session.scratch_prefix) == []
    assert p.drain_deferred()["done"] == {}  # nothing twice


def test_fails_an_unknown_flag(session_expiry_pipeline: LocalPipeline) -> None:
    with pytest.raises(ValueError, match="unknown flags \\['Nope'\\]"):
        session_expiry_pipeline.set_feature_flags(Nope=False)


def test_the_operator_outputs_answer_the_deployed_names(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    """``describe-stacks`` answers the outputs of docs/operating.md "Filling in the commands"
    with the deployed names and ids (keys of ``SessionExpiry(stack, "Sessions")``)."""
    p = session_expiry_pipeline
    outputs = p.stack.outputs
    variables = p.function.configuration["Environment"]["Variables"]
    assert (
        outputs["SessionsFeatureFlagsApplicationId607AC88E"]
        == (variables[contract.ENV_FLAGS_APPLICATION])
    )
    assert outputs["SessionsFeatureFlagsProfileIdC46DB5CB"] == variables[contract.ENV_FLAGS_PROFILE]
    (env,) = p.emulator.client("appconfig").list_environments(
        ApplicationId=variables[contract.ENV_FLAGS_APPLICATION]
    )["Items"]
    assert outputs["SessionsFeatureFlagsEnvironmentId9B421C27"] == env["Id"]
    functions = {
        f["FunctionName"] for f in p.emulator.client("lambda").list_functions()["Functions"]
    }
    assert outputs["SessionsCleanupFunctionName37B1685E"] in functions
    assert outputs["SessionsPauseWatchFunctionName4880C4C6"] in functions
    queue = outputs["SessionsFailureQueueUrl2B18CD00"]
    assert queue.startswith("http") and p.emulator.client("sqs").get_queue_attributes(
        QueueUrl=queue
    )
    assert p.emulator.client("dynamodb").describe_table(
        TableName=outputs["SessionsOwnershipTableName0997B7CC"]
    )


class _EmulatorSession:
    """``client(service, **kwargs)`` bound to the emulator, as a boto3 session has it."""

    def __init__(self, pipeline: LocalPipeline) -> None:
        self.pipeline = pipeline

    def client(self, service: str, **kwargs: object) -> object:
        return self.pipeline.emulator.client(service, **kwargs)


def test_the_status_command_reads_the_deployed_stack(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    """``session-expiry status`` (issue 39) finds the construct by its outputs' keys in the
    deployed stack, and every section it reads answers."""
    from session_expiry_runtime.ops import status

    p = session_expiry_pipeline
    view = status.collect(_EmulatorSession(p), p.stack.name)

    assert view["unreadable"] == {}
    assert view["construct"] == "Sessions" and view["cleanupFunction"] == p.function.name
    assert view["mapping"]["state"] == "Enabled"
    assert set(view["featureFlags"]["flags"]) >= {"enabled", "dryRun", "DeleteScratch"}
    assert view["failureQueue"]["messages"] == 0
    assert view["deferredWork"]["table"] == p.stack.outputs["SessionsDeferredWorkTableName9A3264C2"]
    assert isinstance(view["alarmsInAlarm"], list)
    assert view["exitCode"] in (status.EXIT_HEALTHY, status.EXIT_ATTENTION), view["reasons"]
