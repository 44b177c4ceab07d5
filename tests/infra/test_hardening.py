"""function_encryption_key and reserved concurrency: set on the cleanup and sweeper functions
and their log groups, and their checkov skips gone; Duration defaults shown in words."""

from __future__ import annotations

import json
import pydoc
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack, assertions
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match

from cdk_session_expiry import SessionExpiry, checkov
from cdk_session_expiry.hardening import WARNING_IMPORTED_KEY

ENV = Environment(account="123456789012", region="eu-west-1")


class Hardened:
    def __init__(self, cdk_context: dict[str, Any], **props: Any) -> None:
        self.stack = Stack(App(context=cdk_context), "Test", env=ENV)
        self.key = kms.Key(self.stack, "FunctionKey", enable_key_rotation=True)
        self.sessions = SessionExpiry(
            self.stack,
            "Sessions",
            expiry_sweep_interval=Duration.minutes(5),
            function_encryption_key=self.key,
            **props,
        )
        self.template = assertions.Template.from_stack(self.stack)
        self.json = self.template.to_json()

    def id(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)  # type: ignore[no-any-return]

    def props(self, construct: Any) -> dict[str, Any]:
        return self.json["Resources"][self.id(construct)]["Properties"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def hardened(cdk_context: dict[str, Any]) -> Hardened:
    return Hardened(
        cdk_context, cleanup_reserved_concurrency=20, expiry_sweep_reserved_concurrency=4
    )


def _functions(h: Hardened) -> list[Any]:
    assert h.sessions.expiry_sweeper is not None
    return [h.sessions.cleanup_function, h.sessions.expiry_sweeper.function]


def test_functions_and_log_groups_use_the_key(hardened: Hardened) -> None:
    key_arn = {"Fn::GetAtt": [hardened.id(hardened.key), "Arn"]}
    for function in _functions(hardened):
        assert hardened.props(function)["KmsKeyArn"] == key_arn
        assert hardened.props(function.log_group)["KmsKeyId"] == key_arn
        assert function.role is not None
        statements = hardened.props(function.role.node.find_child("DefaultPolicy"))[
            "PolicyDocument"
        ]["Statement"]
        assert {"Action": "kms:Decrypt", "Effect": "Allow", "Resource": key_arn} in statements


def test_key_policy_lets_cloudwatch_logs_use_the_key(hardened: Hardened) -> None:
    statements = hardened.props(hardened.key)["KeyPolicy"]["Statement"]
    (logs,) = [s for s in statements if s.get("Sid") == "CloudWatchLogsOfSessionExpiry"]
    # logs.<region>.<URL suffix>: the suffix stays a pseudo parameter (China: amazonaws.com.cn).
    assert "logs.eu-west-1." in json.dumps(logs["Principal"]["Service"])
    assert "kms:GenerateDataKey*" in logs["Action"]
    arn = json.dumps(logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"])
    assert ":logs:eu-west-1:123456789012:log-group:*" in arn


def test_reserved_concurrency_is_set(hardened: Hardened) -> None:
    cleanup, sweeper = _functions(hardened)
    assert hardened.props(cleanup)["ReservedConcurrentExecutions"] == 20
    assert hardened.props(sweeper)["ReservedConcurrentExecutions"] == 4


def test_closed_checks_are_not_skipped(hardened: Hardened) -> None:
    for function in _functions(hardened):
        skipped = checkov.skipped(function)
        assert "CKV_AWS_173" not in skipped and "CKV_AWS_115" not in skipped
        assert set(skipped) == {"CKV_AWS_116", "CKV_AWS_117"}
        assert "CKV_AWS_158" not in checkov.skipped(function.log_group)


def test_an_imported_key_gets_a_warning(cdk_context: dict[str, Any]) -> None:
    stack = Stack(App(context=cdk_context), "Test", env=ENV)
    key = kms.Key.from_key_arn(stack, "Imported", "arn:aws:kms:eu-west-1:123456789012:key/abc")
    SessionExpiry(stack, "Sessions", function_encryption_key=key)
    assertions.Annotations.from_stack(stack).has_warning(
        "/Test/Sessions", Match.string_like_regexp(f"{WARNING_IMPORTED_KEY}|logs.eu-west-1")
    )


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"cleanup_reserved_concurrency": 0}, "cleanup_reserved_concurrency"),
        ({"cleanup_reserved_concurrency": -1}, "cleanup_reserved_concurrency"),
        ({"expiry_sweep_reserved_concurrency": 1}, "without expiry_sweep_interval"),
        (
            {"expiry_sweep_interval": Duration.seconds(30), "expiry_sweep_reserved_concurrency": 2},
            "=2 with a sub-minute expiry_sweep_interval and expiry_sweep_workers=4: expected 4",
        ),
        (
            {"expiry_sweep_interval": Duration.minutes(5), "expiry_sweep_reserved_concurrency": 3},
            "=3 with expiry_sweep_workers=4: expected at least 4, one per worker",
        ),
    ],
)
def test_fails_for_reserved_concurrency_out_of_range(
    cdk_context: dict[str, Any], props: dict[str, Any], message: str
) -> None:
    stack = Stack(App(context=cdk_context), "Test", env=ENV)
    with pytest.raises(ValueError, match=message):
        SessionExpiry(stack, "Sessions", **props)


def test_fails_for_a_function_encryption_key_that_is_not_a_key(
    cdk_context: dict[str, Any],
) -> None:
    stack = Stack(App(context=cdk_context), "Test", env=ENV)
    with pytest.raises(TypeError, match="function_encryption_key"):
        SessionExpiry(stack, "Sessions", function_encryption_key="alias/mine")


def test_help_shows_duration_defaults_in_words() -> None:
    text = pydoc.render_doc(SessionExpiry, renderer=pydoc.plaintext)
    assert "object at 0x" not in text
    for words in ("Default:\n            5 minutes", "Default: 6 hours", "Default: 1 hour"):
        assert " ".join(words.split()) in " ".join(text.split())
