"""The sample app's WebSocket route handlers against moto, with the real session runtime.

The handlers run as Lambda would run them: the ``handlers`` directory is the code root
(``connect.handler`` imports ``sessions``) and the runtime comes from the layer's package.
Sessions are reconnectable: ``$connect`` with ``?session=<token>`` resumes the caller's live
session, without one it creates a session; ``$default``/``$disconnect`` find a connection's
session in the connections table.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from datetime import timedelta
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto import mock_aws

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.testing.models._moto_internals import open_connection_ids
from sample_app.stack import HANDLERS_DIR

TABLE = "sessions"
CONNECTIONS = "connections"
BUCKET = "scratch"
GRANTEE = "arn:aws:iam::123456789012:role/message-handler"
CLEANUP_ROLE = "arn:aws:iam::123456789012:role/cleanup"
ENDPOINT = "https://abc123.execute-api.us-east-1.amazonaws.com/live"
ALICE = "arn:aws:iam::123456789012:user/alice"
MALLORY = "arn:aws:iam::123456789012:user/mallory"


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
        for name, key in ((TABLE, "pk"), (CONNECTIONS, "connectionId")):
            ddb.create_table(
                TableName=name,
                KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        kms = boto3.client("kms")
        key_arn = kms.create_key()["KeyMetadata"]["Arn"]
        # What grant_session_access sets (see test_session_access), plus the sample's own.
        for name, value in {
            contract.ENV_TABLE_NAME: TABLE,
            contract.ENV_PARTITION_KEY: contract.DEFAULT_PARTITION_KEY,
            contract.ENV_TTL_ATTRIBUTE: contract.DEFAULT_TTL_ATTRIBUTE,
            contract.ENV_SCRATCH_ROOT: contract.DEFAULT_SCRATCH_ROOT,
            contract.ENV_SCRATCH_BUCKET: BUCKET,
            contract.ENV_GRANT_KEY_ARN: key_arn,
            contract.ENV_RETIRING_PRINCIPAL: CLEANUP_ROLE,
            contract.ENV_WEBSOCKET_ENDPOINT: ENDPOINT,
            contract.ENV_MAX_SESSION_LIFETIME_SECONDS: "28800",
            "SESSION_GRANTEE_ROLE_ARN": GRANTEE,
            "SESSION_TTL_SECONDS": "600",
            "SAMPLE_CONNECTIONS_TABLE": CONNECTIONS,
        }.items():
            monkeypatch.setenv(name, value)
        apigw = boto3.client("apigatewaymanagementapi", endpoint_url=ENDPOINT)
        yield {"ddb": ddb, "kms": kms, "key_arn": key_arn, "apigw": apigw}


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


def _event(connection_id: str, *, caller: str | None = ALICE, **extra: Any) -> dict[str, Any]:
    context: dict[str, Any] = {"connectionId": connection_id}
    if caller is not None:
        context["identity"] = {"userArn": caller}
    return {"requestContext": context, **extra}


def _connect(
    aws: dict[str, Any],
    handlers: Handlers,
    cid: str,
    *,
    token: str | None = None,
    caller: str = ALICE,
) -> dict[str, Any]:
    aws["apigw"].post_to_connection(ConnectionId=cid, Data=b"open")  # moto opens it
    extra = {"queryStringParameters": {"session": token}} if token else {}
    return handlers.connect.handler(_event(cid, caller=caller, **extra), None)  # type: ignore[no-any-return]


def _item(aws: dict[str, Any], session_id: str) -> dict[str, Any] | None:
    key = {"pk": {"S": session_id}}
    return aws["ddb"].get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")


def _open() -> set[str]:
    return open_connection_ids("123456789012", "us-east-1")


def test_connect_without_a_token_creates_a_session_owned_by_the_caller(
    aws: dict[str, Any], handlers: Handlers
) -> None:
    answer = _connect(aws, handlers, "conn/1=")
    assert answer["statusCode"] == 200
    session_id = json.loads(answer["body"])["sessionId"]
    item = _item(aws, session_id)
    assert item is not None
    assert item["owner"] == {"S": ALICE}
    assert item[contract.DEFAULT_CONNECTION_ID_ATTRIBUTE] == {"S": "conn/1="}
    (grant,) = aws["kms"].list_grants(KeyId=aws["key_arn"])["Grants"]
    assert (grant["GrantId"], grant["GranteePrincipal"], grant["RetiringPrincipal"]) == (
        item[contract.DEFAULT_GRANT_ID_ATTRIBUTE]["S"],
        GRANTEE,
        CLEANUP_ROLE,
    )
    assert grant["Constraints"] == {"EncryptionContextSubset": {"sessionId": session_id}}


def test_connect_without_a_caller_identity_is_refused(handlers: Handlers) -> None:
    assert handlers.connect.handler(_event("c0", caller=None), None)["statusCode"] == 403


def test_a_token_resumes_the_callers_session_and_closes_the_old_connection(
    aws: dict[str, Any], handlers: Handlers
) -> None:
    session_id = json.loads(_connect(aws, handlers, "old-1")["body"])["sessionId"]
    answer = _connect(aws, handlers, "new-1", token=session_id)
    assert answer == {"statusCode": 200, "body": json.dumps({"sessionId": session_id})}
    assert "old-1" not in _open() and "new-1" in _open()
    item = _item(aws, session_id)
    assert item is not None and item["connectionIds"] == {"SS": ["new-1"]}
    # $default finds the session of the new connection.
    reply = handlers.message.handler(_event("new-1", body="hello"), None)
    assert reply["statusCode"] == 200
    assert json.loads(reply["body"])["sessionId"] == session_id


def test_a_token_presented_by_another_caller_is_refused_and_changes_nothing(
    aws: dict[str, Any], handlers: Handlers
) -> None:
    session_id = json.loads(_connect(aws, handlers, "alice-1")["body"])["sessionId"]
    before = _item(aws, session_id)
    answer = _connect(aws, handlers, "mallory-1", token=session_id, caller=MALLORY)
    assert answer == {"statusCode": 403, "body": "not your session"}
    assert _item(aws, session_id) == before
    assert "alice-1" in _open()
    assert handlers.message.handler(_event("mallory-1"), None)["statusCode"] == 410


def test_an_expired_or_unknown_token_is_gone_and_a_malformed_one_refused(
    aws: dict[str, Any], handlers: Handlers
) -> None:
    assert _connect(aws, handlers, "c1", token="ws-unknown")["statusCode"] == 410
    assert _connect(aws, handlers, "c2", token="../etc")["statusCode"] == 400


def test_message_extends_the_session_and_encrypts_under_its_context(
    aws: dict[str, Any], handlers: Handlers, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = json.loads(_connect(aws, handlers, "c2")["body"])["sessionId"]
    before = int(_item(aws, session_id)[contract.DEFAULT_TTL_ATTRIBUTE]["N"])  # type: ignore[index]
    monkeypatch.setattr(handlers.message, "SESSION_TTL", timedelta(seconds=1200))
    assert handlers.message.handler(_event("c2", body="secret"), None)["statusCode"] == 200
    after = int(_item(aws, session_id)[contract.DEFAULT_TTL_ATTRIBUTE]["N"])  # type: ignore[index]
    assert after > before
    s3 = boto3.client("s3")
    (obj,) = s3.list_objects_v2(Bucket=BUCKET, Prefix="sessions/")["Contents"]
    assert obj["Key"].startswith(f"sessions/{session_id}/")
    blob = s3.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()
    kms = aws["kms"]
    plain = kms.decrypt(CiphertextBlob=blob, EncryptionContext={"sessionId": session_id})
    assert plain["Plaintext"] == b"secret"
    with pytest.raises(kms.exceptions.InvalidCiphertextException):
        kms.decrypt(CiphertextBlob=blob, EncryptionContext={"sessionId": "ws-other"})


def test_disconnect_forgets_the_connection_and_the_session_stays_resumable(
    aws: dict[str, Any], handlers: Handlers
) -> None:
    session_id = json.loads(_connect(aws, handlers, "c3")["body"])["sessionId"]
    assert handlers.disconnect.handler(_event("c3"), None)["statusCode"] == 200
    assert handlers.message.handler(_event("c3"), None)["statusCode"] == 410
    assert _item(aws, session_id) is not None
    assert _connect(aws, handlers, "c4", token=session_id)["statusCode"] == 200


def _grants(aws: dict[str, Any]) -> list[dict[str, Any]]:
    return aws["kms"].list_grants(KeyId=aws["key_arn"])["Grants"]  # type: ignore[no-any-return]


def test_disconnect_retires_the_grant_and_a_resume_grants_again(
    aws: dict[str, Any], handlers: Handlers
) -> None:
    session_id = json.loads(_connect(aws, handlers, "g1")["body"])["sessionId"]
    (first,) = _grants(aws)

    assert handlers.disconnect.handler(_event("g1"), None)["statusCode"] == 200

    item = _item(aws, session_id)
    assert item is not None and contract.DEFAULT_GRANT_ID_ATTRIBUTE not in item
    assert _grants(aws) == []  # no decrypt grant while no client is connected
    assert _connect(aws, handlers, "g2", token=session_id)["statusCode"] == 200
    (second,) = _grants(aws)
    assert second["GrantId"] != first["GrantId"]
    assert second["GranteePrincipal"] == GRANTEE
    assert second["Constraints"] == {"EncryptionContextSubset": {"sessionId": session_id}}
    assert _item(aws, session_id)[contract.DEFAULT_GRANT_ID_ATTRIBUTE] == {  # type: ignore[index]
        "S": second["GrantId"]
    }


def test_an_end_message_ends_the_session(aws: dict[str, Any], handlers: Handlers) -> None:
    session_id = json.loads(_connect(aws, handlers, "c5")["body"])["sessionId"]
    reply = handlers.message.handler(_event("c5", body='{"action": "end"}'), None)
    assert json.loads(reply["body"]) == {"sessionId": session_id, "ended": True}
    assert _item(aws, session_id) is None
    assert _connect(aws, handlers, "c6", token=session_id)["statusCode"] == 410


def test_fails_connect_with_a_connection_id_another_session_owns(
    aws: dict[str, Any], handlers: Handlers, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the ownership table the construct adds for a WebSocket target: the first session
    # owns its connection id; a replayed $connect with that id cannot create a second one.
    aws["ddb"].create_table(
        TableName="ownership",
        KeySchema=[{"AttributeName": "resource", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "resource", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    monkeypatch.setenv(contract.ENV_OWNERSHIP_TABLE_NAME, "ownership")
    first = json.loads(_connect(aws, handlers, "conn-1")["body"])["sessionId"]
    claim = aws["ddb"].get_item(
        TableName="ownership", Key={"resource": {"S": "connection#conn-1"}}, ConsistentRead=True
    )["Item"]
    assert claim["owner"]["S"] and claim["state"] == {"S": "held"}

    replayed = _connect(aws, handlers, "conn-1")

    assert replayed == {"statusCode": 409, "body": "connection belongs to another session"}
    assert [i["pk"]["S"] for i in aws["ddb"].scan(TableName=TABLE)["Items"]] == [first]
