"""A custom step with its own resource kind (issue 35, route 5): it acts only on ids its
session owns, checked by the runner against their ownership records like a built-in kind.

Real boto3 calls against moto (Secrets Manager, DynamoDB). The user's step is a real module on
``sys.path``, as the construct stages it beside the runtime.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from runtime_support import REGION, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.core.ownership import custom_kind, custom_kinds_of, resource_key
from session_expiry_runtime.steps.custom import OwnedCustomStep, parse_custom_steps

MODULE = "session_secret_kind_step"
USER_CODE = f"""
import boto3

CALLS = []

def delete_secret(secret_arn, session):
    CALLS.append((secret_arn, dict(session.keys), session.incarnation, session.reason))
    client = boto3.client("secretsmanager", region_name={REGION!r})
    try:
        client.describe_secret(SecretId=secret_arn)
    except client.exceptions.ResourceNotFoundException:
        return "already-done"
    client.delete_secret(SecretId=secret_arn, ForceDeleteWithoutRecovery=True)
    return None
"""
NAME = "DeleteSessionSecret"
KIND = custom_kind(NAME)
STEPS = json.dumps(
    [{"name": NAME, "handler": f"{MODULE}.delete_secret", "resourceAttribute": "secretArns"}]
)


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    (tmp_path / f"{MODULE}.py").write_text(textwrap.dedent(USER_CODE))
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    yield importlib.import_module(MODULE)
    sys.modules.pop(MODULE, None)


@pytest.fixture
def secrets(aws: None) -> Any:
    return boto3.client("secretsmanager", region_name=REGION)


def exists(secrets: Any, arn: str) -> bool:
    try:
        secrets.describe_secret(SecretId=arn)
    except secrets.exceptions.ResourceNotFoundException:
        return False
    return True


def cleaner(sandbox: Sandbox) -> SessionCleaner:
    return sandbox.cleaner(dataclasses.replace(sandbox.config, custom_steps=STEPS))


def test_a_custom_step_acts_only_on_the_ids_its_session_owns(
    sandbox: Sandbox, secrets: Any, user_module: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Tenant A names tenant B's secret in its own item beside its own, and ends its session:
    B's secret stays (refused, NotOwned, alarmed), A's is deleted, and the handler learns the
    record's keys and incarnation."""
    b_arn = secrets.create_secret(Name="tenant-b/secret", SecretString="b")["ARN"]
    a_arn = secrets.create_secret(Name="tenant-a/secret", SecretString="a")["ARN"]
    victim = sandbox.create_session("s-b", extra={"secretArns": {"SS": [b_arn]}})
    sandbox.claim(KIND, b_arn, "s-b", str(victim.incarnation))
    forger = sandbox.create_session("s-a", extra={"secretArns": {"SS": [a_arn, b_arn]}})
    sandbox.claim(KIND, a_arn, "s-a", str(forger.incarnation))
    sandbox.read_stream()
    sandbox.delete("s-a")
    (record,) = sandbox.removes()

    response = process_batch(event(record), FakeContext(), cleaner(sandbox))

    assert response == {"batchItemFailures": []}
    assert exists(secrets, b_arn)
    assert not exists(secrets, a_arn)
    assert user_module.CALLS == [(a_arn, {"pk": "s-a"}, forger.incarnation, "explicit")]
    (line,) = [r.session for r in caplog.records if hasattr(r, "session")]
    assert line["ownership"] == {NAME: {b_arn: "NotOwned"}}


def test_an_image_naming_only_another_sessions_id_calls_nothing(
    sandbox: Sandbox, secrets: Any, user_module: Any
) -> None:
    b_arn = secrets.create_secret(Name="tenant-b/only", SecretString="b")["ARN"]
    victim = sandbox.create_session("s-b", extra={"secretArns": {"SS": [b_arn]}})
    sandbox.claim(KIND, b_arn, "s-b", str(victim.incarnation))
    sandbox.create_session("s-a", extra={"secretArns": {"SS": [b_arn]}})
    sandbox.read_stream()
    sandbox.delete("s-a")
    (record,) = sandbox.removes()

    assert process_batch(event(record), FakeContext(), cleaner(sandbox)) == {
        "batchItemFailures": []
    }
    assert exists(secrets, b_arn) and user_module.CALLS == []


def test_the_step_declares_its_kind_and_plans_claims(user_module: Any) -> None:
    (spec,) = parse_custom_steps(STEPS)
    step = OwnedCustomStep(spec)
    assert step.claims_ownership and step.kind == "custom:DeleteSessionSecret"
    assert resource_key(step.kind, "arn:x") == "custom:DeleteSessionSecret#arn:x"


@pytest.mark.parametrize("value", ["", 3, ["secretArns"]])
def test_fails_a_resource_attribute_that_is_not_a_name(value: Any) -> None:
    raw = json.dumps([{"name": NAME, "handler": "m.f", "resourceAttribute": value}])
    with pytest.raises(ValueError, match="resourceAttribute"):
        parse_custom_steps(raw)


def test_custom_kinds_name_each_steps_kind_and_its_attribute() -> None:
    raw = json.dumps({"DeleteSessionSecret": "secretArns", "DropQueue": "queueUrls"})

    assert custom_kinds_of(raw) == {
        "custom:DeleteSessionSecret": "secretArns",
        "custom:DropQueue": "queueUrls",
    }
    assert custom_kinds_of("") == custom_kinds_of(None) == {}


def test_fails_custom_kinds_that_are_not_json() -> None:
    expected = r"^SESSION_EXPIRY_CUSTOM_KINDS: 'not json' is not JSON \("
    with pytest.raises(ValueError, match=expected):
        custom_kinds_of("not json")


@pytest.mark.parametrize("raw", ["[]", '{"Step": ""}', '{"Step": 3}'])
def test_fails_custom_kinds_that_are_not_names_to_attributes(raw: str) -> None:
    expected = (
        f"SESSION_EXPIRY_CUSTOM_KINDS: {raw!r}; expected an object of custom step names to the "
        'attribute holding their ids, e.g. {"DeleteSessionSecret": "secretArns"}'
    )
    with pytest.raises(ValueError) as raised:
        custom_kinds_of(raw)
    assert str(raised.value) == expected


def test_fails_custom_kinds_naming_a_step_that_is_not_a_name() -> None:
    with pytest.raises(ValueError) as raised:
        custom_kinds_of('{"bad name!": "attr"}')
    assert str(raised.value) == (
        "custom step name 'bad name!': expected a letter, then up to 63 letters, digits, '-' or '_'"
    )


@pytest.mark.parametrize("name", [3, None, "", "9lives", "x" * 65])
def test_fails_a_custom_kind_of_what_is_not_a_step_name(name: object) -> None:
    with pytest.raises(ValueError, match=rf"^custom step name {re.escape(repr(name))}: "):
        custom_kind(name)  # type: ignore[arg-type]
    assert custom_kind("x" * 64) == "custom:" + "x" * 64
