"""The cleanup function's environment: what it accepts, what it rejects, which clients it builds."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, ParamValidationError
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.cleanup.cleaner import build_clients
from session_expiry_runtime.core.config import RuntimeConfig, validate_cleanup_config

KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
ENDPOINT = "https://abc123defg.execute-api.us-east-1.amazonaws.com/prod"
GOOD = {
    "SESSION_EXPIRY_WEBSOCKET_ENDPOINT": ENDPOINT,
    "SESSION_EXPIRY_GRANT_KEY_ARN": KEY_ARN,
    "SESSION_EXPIRY_SCRATCH_BUCKET": "scratch-bucket",
}


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("SESSION_EXPIRY_MAX_WORKERS", "0", "positive integer"),
        ("SESSION_EXPIRY_MAX_WORKERS", "eight", "positive integer"),
        ("SESSION_EXPIRY_TIME_GUARD_MS", "-1", "positive integer"),
        (
            "SESSION_EXPIRY_WEBSOCKET_ENDPOINT",
            "abc123defg.execute-api.us-east-1.amazonaws.com/prod",
            "https://",
        ),
        (
            "SESSION_EXPIRY_WEBSOCKET_ENDPOINT",
            "wss://abc123defg.execute-api.us-east-1.amazonaws.com/prod",
            "https://",
        ),
        ("SESSION_EXPIRY_WEBSOCKET_ENDPOINT", "https:///prod", "https://"),
        ("SESSION_EXPIRY_GRANT_KEY_ARN", "alias/sessions", "key ARN"),
        ("SESSION_EXPIRY_GRANT_KEY_ARN", "1234abcd-12ab-34cd-56ef-1234567890ab", "key ARN"),
        ("SESSION_EXPIRY_SCRATCH_ROOT", "/sessions/", "must not start with '/'"),
        ("SESSION_EXPIRY_SCRATCH_ROOT", "sessions", "must end with '/'"),
        ("SESSION_EXPIRY_SCRATCH_ROOT", "sessions/*/", "wildcards"),
        ("SESSION_EXPIRY_SCRATCH_ROOT", "a//b/", "segment"),
        ("SESSION_EXPIRY_METRICS_NAMESPACE", "x" * 1025, "1-1024"),
    ],
)
def test_fails_on_bad_environment(
    monkeypatch: pytest.MonkeyPatch, fresh_handler: None, name: str, value: str, message: str
) -> None:
    for k, v in {**GOOD, name: value}.items():
        monkeypatch.setenv(k, v)

    with pytest.raises(ValueError, match=message) as raised:
        handler_module.handler(event(), FakeContext())
    assert name in str(raised.value) or "scratch root" in str(raised.value)


def test_fails_again_on_every_invocation_until_fixed(
    monkeypatch: pytest.MonkeyPatch, fresh_handler: None
) -> None:
    monkeypatch.setenv("SESSION_EXPIRY_MAX_WORKERS", "0")
    for _ in range(2):
        with pytest.raises(ValueError):
            handler_module.handler(event(), FakeContext())


def test_only_configured_targets_get_clients() -> None:
    clients = build_clients(RuntimeConfig(scratch_bucket="b"))
    assert clients.s3 is not None and clients.kms is None and clients.apigateway is None


def test_clients_use_the_management_endpoint_and_endpoint_overrides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:5000")
    config = validate_cleanup_config(
        RuntimeConfig.from_env({**GOOD, "SESSION_EXPIRY_MAX_WORKERS": "16"})
    )

    clients = build_clients(config)

    assert clients.apigateway.meta.endpoint_url == ENDPOINT
    assert clients.s3.meta.endpoint_url == "http://127.0.0.1:5000"  # moto_server style override
    for client in (clients.apigateway, clients.kms, clients.s3):
        assert client.meta.config.retries["mode"] == "standard"
        assert client.meta.config.max_pool_connections >= 16


def test_local_http_endpoint_is_accepted_for_moto_server() -> None:
    config = RuntimeConfig(websocket_endpoint="http://127.0.0.1:5000/prod")
    assert validate_cleanup_config(config) is config


def test_event_without_records_is_a_no_op(
    aws: None, monkeypatch: pytest.MonkeyPatch, fresh_handler: None
) -> None:
    sandbox = Sandbox()
    for k, v in sandbox.env().items():
        monkeypatch.setenv(k, v)
    assert handler_module.handler({}, FakeContext()) == {"batchItemFailures": []}
    assert handler_module.handler(event(), None) == {"batchItemFailures": []}


def test_only_the_scratch_and_ownership_clients_skip_client_side_parameter_validation(
    aws: None,
) -> None:
    clients = build_clients(
        RuntimeConfig(
            scratch_bucket="b",
            archive_bucket="a",
            websocket_endpoint=ENDPOINT,
            ownership_table_name="o",
        )
    )
    # A Prefix that is not a string: botocore's validation refuses it before sending; without
    # it the request goes out and S3 (moto) answers. The scratch client's parameters are built
    # by the scratch step itself (BENCHMARKS.md: what brought CPU per session down).
    with pytest.raises(ClientError, match="NoSuchBucket"):
        clients.s3.list_objects_v2(Bucket="no-such-bucket", Prefix=123)
    with pytest.raises(ParamValidationError):
        clients.archive.list_objects_v2(Bucket="no-such-bucket", Prefix=123)
    assert clients.s3.meta.config.retries["mode"] == "standard"  # the shared settings kept
    # The ownership client's requests are built by claims.py alone: a key value that is not a
    # string goes out unvalidated and DynamoDB (moto) answers; the other clients still validate.
    with pytest.raises(ClientError, match="ResourceNotFound"):
        clients.ownership.get_item(TableName="no-such-table", Key={"resource": {"S": 123}})
    with pytest.raises(ParamValidationError):
        clients.apigateway.delete_connection(ConnectionId=123)


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/agent-1",  # 1 after the dash
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/agent-a1B2c3D4e5f",  # 11
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/agent",  # no dash
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:agent/agent-a1B2c3D4e5",  # not a runtime
        "arn:aws:bedrock-agentcore:us-east-1:1234:runtime/agent-a1B2c3D4e5",  # short account
    ],
)
def test_fails_on_an_agent_runtime_arn_outside_agentcores_pattern_saying_what_it_must_be(
    arn: str,
) -> None:
    with pytest.raises(ValueError) as raised:
        validate_cleanup_config(RuntimeConfig(agent_runtime_arn=arn))
    message = str(raised.value)
    assert message.startswith(f"SESSION_EXPIRY_AGENT_RUNTIME_ARN={arn!r}: expected")
    assert "a '-' and exactly 10 letters or digits" in message
    assert "[a-zA-Z][a-zA-Z0-9_]{0,99}-[a-zA-Z0-9]{10}" in message


def test_an_agent_runtime_arn_of_agentcores_pattern_is_accepted() -> None:
    arn = "arn:aws-cn:bedrock-agentcore:cn-north-1:123456789012:runtime/my_agent-a1B2c3D4e5"
    config = RuntimeConfig(agent_runtime_arn=arn)
    assert validate_cleanup_config(config) is config


def test_every_setting_is_read_from_its_own_variable() -> None:
    """Each field of ``RuntimeConfig`` comes from its environment variable (the settings
    tables plus the three read by hand): a distinct value in every variable reaches exactly
    its field, and an empty environment gives the documented defaults."""
    import dataclasses

    from session_expiry_runtime.core import config

    text = {name: f"value-of-{field}" for field, (name, _) in config._TEXT_SETTINGS.items()}
    counts = {name: str(100 + i) for i, (name, _) in enumerate(config._COUNT_SETTINGS.values())}
    flags = {name: "true" for name in config._FLAG_SETTINGS.values()}
    env = {**text, **counts, **flags, config.ENV_SWEEP_INTERVAL_SECONDS: "7"}
    env[config.ENV_REGION] = "eu-west-3"
    read = RuntimeConfig.from_env(env)

    for field, (name, _) in config._TEXT_SETTINGS.items():
        assert getattr(read, field) == env[name], field
    for field, (name, _) in config._COUNT_SETTINGS.items():
        assert getattr(read, field) == int(env[name]), field
    assert all(getattr(read, field) is True for field in config._FLAG_SETTINGS)
    assert (read.sweep_interval_seconds, read.region) == (7, "eu-west-3")
    by_hand = {"sweep_interval_seconds", "region", "agent_memory_record_namespaces"}
    by_hand |= {"kind_targets", "kind_attributes"}  # from the declared kinds' variables
    tables = {*config._TEXT_SETTINGS, *config._COUNT_SETTINGS, *config._FLAG_SETTINGS}
    assert tables | by_hand == {f.name for f in dataclasses.fields(RuntimeConfig)}
    defaults = RuntimeConfig.from_env({})
    assert (defaults.max_workers, defaults.partition_key, defaults.table_name) == (32, "pk", None)
    assert (defaults.dry_run, defaults.sweep_interval_seconds, defaults.region) == (
        False,
        None,
        None,
    )
