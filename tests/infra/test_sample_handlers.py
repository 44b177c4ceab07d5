"""The sample app's WebSocket route handlers against moto, with the real session runtime.

The handlers run as Lambda would run them: the ``handlers`` directory is the code root
(``connect.handler`` imports ``sessions``) and the runtime comes from the layer's package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from datetime import timedelta
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto import mock_aws

from cdk_session_expiry import _runtime_contract as contract
from sample_app.stack import HANDLERS_DIR

TABLE = "sessions"
GRANTEE = "arn:aws:iam::123456789012:role/message-handler"
CLEANUP_ROLE = "arn:aws:iam::123456789012:role/cleanup"


class Handlers:
    def __init__(self) -> None:
        self.sessions = importlib.import_module("sessions")
        self.connect = importlib.import_module("connect")
        self.message = importlib.import_module("message")
        self.disconnect = importlib.import_module("disconnect")


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    with mock_aws():
        ddb = boto3.client("dynamodb")
        ddb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        kms = boto3.client("kms")
        key_arn = kms.create_key()["KeyMetadata"]["Arn"]
        # What grant_session_access sets (see test_overrides), plus the sample's own variable.
        for name, value in {
            contract.ENV_TABLE_NAME: TABLE,
            contract.ENV_PARTITION_KEY: contract.DEFAULT_PARTITION_KEY,
            contract.ENV_TTL_ATTRIBUTE: contract.DEFAULT_TTL_ATTRIBUTE,
            contract.ENV_SCRATCH_ROOT: contract.DEFAULT_SCRATCH_ROOT,
            contract.ENV_GRANT_KEY_ARN: key_arn,
            contract.ENV_RETIRING_PRINCIPAL: CLEANUP_ROLE,
            "SESSION_GRANTEE_ROLE_ARN": GRANTEE,
            "SESSION_TTL_SECONDS": "600",
        }.items():
            monkeypatch.setenv(name, value)
        yield {"ddb": ddb, "kms": kms, "key_arn": key_arn}


@pytest.fixture
def handlers(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[Handlers]:
    monkeypatch.syspath_prepend(str(HANDLERS_DIR))
    names = ("sessions", "connect", "message", "disconnect")
    for name in names:
        sys.modules.pop(name, None)
    yield Handlers()
    for name in names:
        module: ModuleType | None = sys.modules.pop(name, None)
        del module


def _event(connection_id: str) -> dict[str, Any]:
    return {"requestContext": {"connectionId": connection_id}}


def _item(aws: dict[str, Any], handlers: Handlers, connection_id: str) -> dict[str, Any] | None:
    key = {"pk": {"S": handlers.sessions.session_id_for(connection_id)}}
    return aws["ddb"].get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")


def test_session_id_is_safe_for_any_connection_id(handlers: Handlers) -> None:
    session_id = handlers.sessions.session_id_for("ab/c+d=")
    assert session_id.startswith("ws-") and "/" not in session_id
    assert session_id == handlers.sessions.session_id_for("ab/c+d=")


def test_connect_creates_the_session_and_its_grant(aws: dict[str, Any], handlers: Handlers) -> None:
    assert handlers.connect.handler(_event("conn/1="), None) == {"statusCode": 200, "body": ""}
    item = _item(aws, handlers, "conn/1=")
    assert item is not None
    assert item[contract.DEFAULT_CONNECTION_ID_ATTRIBUTE] == {"S": "conn/1="}
    grants = aws["kms"].list_grants(KeyId=aws["key_arn"])["Grants"]
    assert [(g["GrantId"], g["GranteePrincipal"], g["RetiringPrincipal"]) for g in grants] == [
        (item[contract.DEFAULT_GRANT_ID_ATTRIBUTE]["S"], GRANTEE, CLEANUP_ROLE)
    ]


def test_connect_twice_is_a_conflict(handlers: Handlers) -> None:
    handlers.connect.handler(_event("c1"), None)
    assert handlers.connect.handler(_event("c1"), None)["statusCode"] == 409


def test_message_extends_a_live_session(
    aws: dict[str, Any], handlers: Handlers, monkeypatch: pytest.MonkeyPatch
) -> None:
    handlers.connect.handler(_event("c2"), None)
    before = int(_item(aws, handlers, "c2")[contract.DEFAULT_TTL_ATTRIBUTE]["N"])  # type: ignore[index]
    monkeypatch.setattr(handlers.message, "SESSION_TTL", timedelta(seconds=1200))
    assert handlers.message.handler(_event("c2"), None)["statusCode"] == 200
    after = int(_item(aws, handlers, "c2")[contract.DEFAULT_TTL_ATTRIBUTE]["N"])  # type: ignore[index]
    assert after > before


def test_disconnect_ends_the_session_and_later_messages_are_refused(
    aws: dict[str, Any], handlers: Handlers
) -> None:
    handlers.connect.handler(_event("c3"), None)
    assert handlers.disconnect.handler(_event("c3"), None)["statusCode"] == 200
    assert _item(aws, handlers, "c3") is None
    assert handlers.message.handler(_event("c3"), None) == {
        "statusCode": 410,
        "body": "session expired",
    }
