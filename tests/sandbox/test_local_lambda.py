"""The deployed handler runs from its code asset, in its own process, with its environment."""

from __future__ import annotations

import io
import json
import uuid
import zipfile

import pytest

from cdk_session_expiry.testing import (
    DeployedFunction,
    FunctionError,
    FunctionTimeout,
    LocalEmulator,
)
from cdk_session_expiry.testing.pipeline import EmfMetrics

HANDLER = """
import json, os, time
import session_expiry_runtime

def handler(event, context):
    print(json.dumps({"_aws": {"CloudWatchMetrics": [{"Namespace": "N",
          "Dimensions": [["Reason"]], "Metrics": [{"Name": "SessionsCleaned"}]}]},
          "Reason": "ttl", "SessionsCleaned": 2}))
    if event.get("raise"):
        raise KeyError("boom")
    if event.get("sleep"):
        time.sleep(event["sleep"])
    return {"file": __file__, "runtime_pkg": session_expiry_runtime.__file__,
            "env": os.environ.get("GREETING"), "endpoint": os.environ.get("AWS_ENDPOINT_URL"),
            "remaining": context.get_remaining_time_in_millis()}
"""


def _zip(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buf.getvalue()


def _deploy(emulator: LocalEmulator, files: dict[str, str], timeout_s: int = 3) -> DeployedFunction:
    """Create a function the way a CDK deployment does: code asset in a ``cdk-`` bucket."""
    s3, lam, iam = emulator.client("s3"), emulator.client("lambda"), emulator.client("iam")
    bucket = "cdk-hnb659fds-assets-123456789012-us-east-1"
    if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=bucket)
    key = f"{uuid.uuid4().hex}.zip"
    s3.put_object(Bucket=bucket, Key=key, Body=_zip(files))
    name = f"fn-{uuid.uuid4().hex[:8]}"
    role = iam.create_role(RoleName=f"r-{name}", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lam.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="app.handler",
        Timeout=timeout_s,
        Code={"S3Bucket": bucket, "S3Key": key},
        Environment={"Variables": {"GREETING": "hello"}},
    )
    return DeployedFunction.read(emulator, name)


# The asset ships its own (fake) session_expiry_runtime: the worker must import that one,
# never the copy installed in this virtualenv.
ASSET = {"app.py": HANDLER, "session_expiry_runtime/__init__.py": "MARK = 'asset'\n"}


def test_handler_is_imported_from_the_code_asset_with_the_function_environment(
    emulator: LocalEmulator,
) -> None:
    fn = _deploy(emulator, ASSET)
    local = fn.start()
    try:
        out = local({"hello": 1})
    finally:
        local.close()
    root = str(fn.task_root())
    assert out["file"].startswith(root)
    assert out["runtime_pkg"].startswith(root)
    assert out["env"] == "hello"
    assert out["endpoint"] == emulator.endpoint_url
    assert 0 < out["remaining"] <= 3000
    metrics = EmfMetrics()
    for line in local.logs:
        metrics.add_log_line(line)
    assert metrics.by_dimension("SessionsCleaned", "Reason") == {"ttl": 2.0}
    fn.remove_task_root()


def test_handler_exception_is_a_function_error(emulator: LocalEmulator) -> None:
    fn = _deploy(emulator, ASSET)
    local = fn.start()
    try:
        with pytest.raises(FunctionError, match="KeyError"):
            local({"raise": True})
        assert local({})["env"] == "hello"  # the execution environment stays usable
    finally:
        local.close()
        fn.remove_task_root()


def test_handler_running_past_its_timeout_is_stopped(emulator: LocalEmulator) -> None:
    fn = _deploy(emulator, ASSET, timeout_s=1)
    local = fn.start()
    try:
        with pytest.raises(FunctionTimeout):
            local({"sleep": 30})
        assert local({})["env"] == "hello"  # a fresh execution environment
    finally:
        local.close()
        fn.remove_task_root()


def test_fails_when_the_handler_module_is_missing_from_the_asset(emulator: LocalEmulator) -> None:
    fn = _deploy(emulator, {"other.py": "x = 1\n"})
    with pytest.raises(FunctionError, match="ImportModuleError"):
        fn.start()
    fn.remove_task_root()


def test_fails_when_the_asset_no_longer_matches_the_deployed_hash(emulator: LocalEmulator) -> None:
    fn = _deploy(emulator, ASSET)
    key = fn.code_location.rsplit("/", 1)[-1]
    emulator.client("s3").put_object(
        Bucket="cdk-hnb659fds-assets-123456789012-us-east-1", Key=key, Body=_zip({"app.py": "x"})
    )
    with pytest.raises(LookupError, match="sha256"):
        fn.code_zip()


def test_emf_metrics_sum_by_dimension() -> None:
    metrics = EmfMetrics()
    doc = {
        "_aws": {
            "CloudWatchMetrics": [
                {"Namespace": "N", "Dimensions": [["Action"]], "Metrics": [{"Name": "F"}]}
            ]
        },
        "Action": "RetireGrant",
        "F": 1,
    }
    for _ in range(3):
        metrics.add_log_line(json.dumps(doc))
    metrics.add_log_line("not json _aws")
    metrics.add_log_line('{"level": "INFO"}')
    assert metrics.by_dimension("F", "Action") == {"RetireGrant": 3.0}
    assert metrics.total("F") == 3.0


# A handler that waits until a function of its module is called from outside (the way the
# expiry sweeper's run waits between passes until stop_after_pass).
STOPPABLE = """
import threading

_stop = threading.Event()
_calls = []


def stop_after_pass():
    _calls.append("stop")
    _stop.set()


def handler(event, context):
    stopped = _stop.wait(event.get("wait", 0))
    _stop.clear()
    return {"stopped": stopped, "calls": list(_calls)}
"""


def test_a_function_of_the_handler_module_is_called_during_an_invocation(
    emulator: LocalEmulator,
) -> None:
    import threading

    local = _deploy(emulator, {"app.py": STOPPABLE}, timeout_s=30).start()
    try:
        answers: list[dict[str, object]] = []
        invocation = threading.Thread(target=lambda: answers.append(local({"wait": 25})))
        invocation.start()
        local.call("stop_after_pass")  # answered by the worker's reader thread at once
        local.call("no_such_function")  # ignored
        invocation.join(25)
        assert answers == [{"stopped": True, "calls": ["stop"]}]
        # call_first: called in the worker just before the handler.
        first = local.invoke({"wait": 25}, call_first=["stop_after_pass"])
        assert first == {"stopped": True, "calls": ["stop", "stop"]}
    finally:
        local.close()
    local.call("stop_after_pass")  # the worker is gone: nothing to do
