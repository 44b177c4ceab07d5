"""User-defined cleanup steps (``SESSION_EXPIRY_CUSTOM_STEPS``) against moto's Secrets Manager.

The user's step is a real module written beside the runtime (as the construct stages it in the
code asset): it deletes the Secrets Manager secret the session names, with real boto3 calls
that moto answers.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from runtime_support import REGION, FakeContext, Sandbox, event
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.steps.custom import load_custom_steps, parse_custom_steps

MODULE = "session_secrets_step"
USER_CODE = f"""
import boto3

def _secrets():
    return boto3.client("secretsmanager", region_name={REGION!r})

def delete_secret(old_image, reason):
    name = old_image["secretName"]
    if old_image.get("failCleanup"):
        raise RuntimeError(f"cannot delete {{name}}")
    client = _secrets()
    try:
        client.describe_secret(SecretId=name)
    except client.exceptions.ResourceNotFoundException:
        return "already-done"
    client.delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
    return None

def preview(old_image, reason):
    return {{"secretWouldBeDeleted": old_image["secretName"], "reason": reason}}

NOT_A_FUNCTION = 42
"""
STEP = {"name": "DeleteSessionSecret", "handler": f"{MODULE}.delete_secret"}
SECRET_STEPS = json.dumps([{**STEP, "attributes": ["secretName"]}])


@pytest.fixture
def user_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's module on ``sys.path``, as it sits beside the runtime in the code asset."""
    (tmp_path / f"{MODULE}.py").write_text(textwrap.dedent(USER_CODE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop(MODULE, None)


@pytest.fixture
def secrets(aws: None) -> Any:
    return boto3.client("secretsmanager", region_name=REGION)


def secret_exists(secrets: Any, name: str) -> bool:
    try:
        secrets.describe_secret(SecretId=name)
    except secrets.exceptions.ResourceNotFoundException:
        return False
    return True


def with_secrets(sandbox: Sandbox, secrets: Any, *ids: str, **extra: Any) -> None:
    """Sessions whose item names their own secret (``secretName``), and the secrets."""
    for session_id in ids:
        secrets.create_secret(Name=f"sessions/{session_id}", SecretString="token")
        item_extra = {"secretName": {"S": f"sessions/{session_id}"}}
        item_extra.update(extra.get(session_id, {}))
        sandbox.create_session(session_id, extra=item_extra)
    sandbox.read_stream()


def custom_cleaner(sandbox: Sandbox, steps: str = SECRET_STEPS, **changes: Any) -> SessionCleaner:
    return sandbox.cleaner(dataclasses.replace(sandbox.config, custom_steps=steps, **changes))


def lines(caplog: pytest.LogCaptureFixture) -> dict[str, dict[str, Any]]:
    return {r.session["keys"]["pk"]: r.session for r in caplog.records if hasattr(r, "session")}


def test_deletes_the_secret_of_an_expired_session_and_keeps_a_live_ones(
    user_code: Path, sandbox: Sandbox, secrets: Any, session_logs: pytest.LogCaptureFixture
) -> None:
    with_secrets(sandbox, secrets, "s-expired", "s-live")
    sandbox.delete("s-expired")
    cleaner = custom_cleaner(sandbox)

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }
    assert not secret_exists(secrets, "sessions/s-expired")
    assert secret_exists(secrets, "sessions/s-live")
    assert lines(session_logs)["s-expired"]["steps"]["DeleteSessionSecret"] == "done"


def test_a_redelivered_record_finds_the_secret_gone(
    user_code: Path, sandbox: Sandbox, secrets: Any, session_logs: pytest.LogCaptureFixture
) -> None:
    with_secrets(sandbox, secrets, "s-again")
    sandbox.delete("s-again")
    records = sandbox.removes()
    cleaner = custom_cleaner(sandbox)
    process_batch(event(*records), FakeContext(), cleaner)
    session_logs.clear()

    assert process_batch(event(*records), FakeContext(), cleaner) == {"batchItemFailures": []}
    assert lines(session_logs)["s-again"]["steps"]["DeleteSessionSecret"] == "already-done"


def test_a_raised_error_fails_only_that_record(
    user_code: Path,
    sandbox: Sandbox,
    secrets: Any,
    session_logs: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_secrets(sandbox, secrets, "s-ok", "s-bad", **{"s-bad": {"failCleanup": {"BOOL": True}}})
    sandbox.delete("s-ok")
    sandbox.delete("s-bad")
    records = sandbox.removes()
    cleaner = custom_cleaner(sandbox)
    monkeypatch.setattr(cleaner.metrics, "flush", lambda write=None: [])

    response = process_batch(event(*records), FakeContext(), cleaner)

    bad = next(r for r in records if r["dynamodb"]["Keys"]["pk"]["S"] == "s-bad")
    assert response == {
        "batchItemFailures": [{"itemIdentifier": bad["dynamodb"]["SequenceNumber"]}]
    }
    assert not secret_exists(secrets, "sessions/s-ok")
    assert secret_exists(secrets, "sessions/s-bad")
    assert cleaner.metrics.snapshot()["CleanupFailures|Action=DeleteSessionSecret"] == 1
    line = lines(session_logs)["s-bad"]
    assert line["errors"] == {"DeleteSessionSecret": "RuntimeError: cannot delete sessions/s-bad"}
    assert line["steps"]["DeleteScratch"] == "done"  # its other steps ran side by side


def test_a_dry_run_leaves_the_secret_and_skips_a_step_without_preview(
    user_code: Path, sandbox: Sandbox, secrets: Any, session_logs: pytest.LogCaptureFixture
) -> None:
    with_secrets(sandbox, secrets, "s-dry")
    sandbox.delete("s-dry")
    cleaner = custom_cleaner(sandbox, dry_run=True)

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }
    assert secret_exists(secrets, "sessions/s-dry")
    line = lines(session_logs)["s-dry"]
    assert (line["outcome"], line["steps"]["DeleteSessionSecret"]) == ("dry-run", "dry-run")
    assert "previews" not in line


def test_a_dry_run_calls_the_preview_and_logs_its_fields(
    user_code: Path, sandbox: Sandbox, secrets: Any, session_logs: pytest.LogCaptureFixture
) -> None:
    with_secrets(sandbox, secrets, "s-preview")
    sandbox.delete("s-preview")
    steps = json.dumps([{**STEP, "preview": f"{MODULE}.preview", "attributes": ["secretName"]}])
    cleaner = custom_cleaner(sandbox, steps, dry_run=True)

    process_batch(event(*sandbox.removes()), FakeContext(), cleaner)

    assert secret_exists(secrets, "sessions/s-preview")
    assert lines(session_logs)["s-preview"]["previews"] == {
        "DeleteSessionSecret": {"secretWouldBeDeleted": "sessions/s-preview", "reason": "explicit"}
    }


def test_a_session_without_the_attribute_gives_the_step_nothing_to_do(
    user_code: Path, sandbox: Sandbox, secrets: Any, session_logs: pytest.LogCaptureFixture
) -> None:
    session = sandbox.create_session("s-plain")
    sandbox.read_stream()
    sandbox.delete("s-plain")
    cleaner = custom_cleaner(sandbox)

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }
    line = lines(session_logs)["s-plain"]
    assert line["outcome"] == "cleaned" and line["missingAttributes"] == ["secretName"]
    assert "DeleteSessionSecret" not in line["steps"]
    assert sandbox.is_clean(session)


def test_the_handler_loads_custom_steps_from_its_environment(
    user_code: Path,
    sandbox: Sandbox,
    secrets: Any,
    monkeypatch: pytest.MonkeyPatch,
    fresh_handler: None,
) -> None:
    for name, value in {**sandbox.env(), "SESSION_EXPIRY_CUSTOM_STEPS": SECRET_STEPS}.items():
        monkeypatch.setenv(name, value)
    with_secrets(sandbox, secrets, "s-env")
    sandbox.delete("s-env")

    assert handler_module.handler(event(*sandbox.removes()), FakeContext()) == {
        "batchItemFailures": []
    }
    assert not secret_exists(secrets, "sessions/s-env")


def test_fails_at_cold_start_when_the_handler_does_not_import(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, fresh_handler: None
) -> None:
    steps = json.dumps([{"name": "Gone", "handler": "no_such_module_here.clean"}])
    for name, value in {**sandbox.env(), "SESSION_EXPIRY_CUSTOM_STEPS": steps}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=r"'Gone'.*'no_such_module_here\.clean'.*cannot import"):
        handler_module.get_cleaner()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("[{", r"is not JSON"),
        ('{"name": "A"}', r"expected a JSON list"),
        ('["A"]', r"entry 0 is 'A'"),
        ('[{"handler": "m.f"}]', r"name None"),
        ('[{"name": "has space", "handler": "m.f"}]', r"name 'has space'"),
        ('[{"name": "A"}]', r"handler None; expected 'package.module.function'"),
        ('[{"name": "A", "handler": "nodots"}]', r"handler 'nodots'"),
        ('[{"name": "A", "handler": "m.f", "preview": "x"}]', r"preview 'x'"),
        (
            '[{"name": "A", "handler": "m.f", "attributes": "secretName"}]',
            r"attributes 'secretName'",
        ),
        ('[{"name": "A", "handler": "m.f", "timeout": 3}]', r"unknown key\(s\) \['timeout'\]"),
        ('[{"name": "RetireGrant", "handler": "m.f"}]', r"'RetireGrant' is a built-in step's"),
        (
            '[{"name": "A", "handler": "m.f"}, {"name": "A", "handler": "m.g"}]',
            r"'A' is used twice",
        ),
    ],
)
def test_fails_bad_custom_step_configuration(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"SESSION_EXPIRY_CUSTOM_STEPS: .*" + message):
        parse_custom_steps(raw)


def test_fails_a_handler_that_is_not_a_function(user_code: Path) -> None:
    config = RuntimeConfig(
        custom_steps=json.dumps([{"name": "A", "handler": f"{MODULE}.NOT_A_FUNCTION"}])
    )
    with pytest.raises(ValueError, match=r"has no function 'NOT_A_FUNCTION'"):
        load_custom_steps(config)


def test_no_configuration_means_no_custom_steps() -> None:
    assert parse_custom_steps(None) == () and parse_custom_steps("") == ()
    assert parse_custom_steps("[]") == ()
