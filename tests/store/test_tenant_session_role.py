"""docs/ownership.md, "One function, many tenants": the broker's ``tenant_store`` (the page's
``tenant_broker.py`` block, run as written) assumes the tenant role with the tenant as a session
tag and builds a ``SessionStore`` whose DynamoDB and claim-registrar calls carry those
credentials.

Real boto3 calls against moto (STS, DynamoDB). moto does not evaluate IAM: neither the role's
trust policy (``sts:TagSession``, the required tag) nor ``dynamodb:LeadingKeys`` =
``${aws:PrincipalTag/tenant}`` is enforced here, so what is asserted is what the broker sends
(the role, the session tag, the session name) and which credentials sign each call; the
statements themselves are asserted in ``tests/infra/test_tenant_session_role.py``. The claim
registrar runs in-process: its ``Invoke`` is answered before moto sees it (moto's Lambda would
need Docker), after recording which credentials signed it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import boto3.session
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from docsite.doc_examples import DOCS, examples
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.registrar import Registrar

from ._support import OWNERSHIP_TABLE, TABLE, claim_of, create_ownership_table, create_table

ROLE_ARN = "arn:aws:iam::123456789012:role/tenant-sessions"
REGISTRAR = "claim-registrar"


class _Raw(io.BytesIO):
    """An HTTP body botocore can read whole (``Payload`` is a streaming blob) or stream."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.getvalue()


def broker_module() -> dict[str, Any]:
    """The page's ``tenant_broker.py`` block, executed as a module would be."""
    (block,) = [
        b
        for b in examples(DOCS / "ownership.md")
        if b.kind == "file" and b.target == "broker/tenant_broker.py"
    ]
    namespace: dict[str, Any] = {"__name__": "tenant_broker"}
    exec(compile(block.code, block.where, "exec"), namespace)
    return namespace


@pytest.fixture
def deployed(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The tenant table, the ownership table, the environment the construct sets on the
    broker, and every ``Invoke`` of the registrar answered in-process (its signer recorded)."""
    create_table(ddb, partition_key="tenantId", sort_key="sessionId")
    create_ownership_table(ddb)
    env = {
        "SESSION_EXPIRY_TABLE_NAME": TABLE,
        "SESSION_EXPIRY_PARTITION_KEY": "tenantId",
        "SESSION_EXPIRY_SORT_KEY": "sessionId",
        "SESSION_EXPIRY_TENANT_ATTRIBUTE": "tenantId",
        "SESSION_EXPIRY_OWNERSHIP_TABLE_NAME": OWNERSHIP_TABLE,
        "SESSION_EXPIRY_CLAIM_REGISTRAR_FUNCTION": REGISTRAR,
        "TENANT_ROLE_ARN": ROLE_ARN,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    registrar = Registrar(RuntimeConfig.from_env(), ddb)
    signed: list[str] = []

    def answer(request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        signed.append(str(request.headers["Authorization"]))
        body = json.dumps(registrar.handle(json.loads(request.body or b"{}"))).encode()
        url, request.url = request.url, "http://registrar-in-process.invalid/"
        return AWSResponse(url, 200, {}, _Raw(body))  # type: ignore[arg-type]

    original = boto3.session.Session.client

    def client(self: Any, service: str, *args: Any, **kwargs: Any) -> Any:
        made = original(self, service, *args, **kwargs)
        if service == "lambda":
            made.meta.events.register_first("before-send.lambda.Invoke", answer)
        return made

    monkeypatch.setattr(boto3.session.Session, "client", client)
    return {"signed": signed}


def test_the_broker_assumes_the_tenant_role_with_the_tenant_as_session_tag(
    deployed: dict[str, Any], ddb: Any
) -> None:
    sts = boto3.client("sts", region_name="us-east-1")
    sent: list[dict[str, Any]] = []
    sts.meta.events.register(
        "provide-client-params.sts.AssumeRole", lambda params, **_: sent.append(dict(params))
    )
    given: list[str] = []
    sts.meta.events.register(
        "after-call.sts.AssumeRole",
        lambda parsed, **_: given.append(parsed["Credentials"]["AccessKeyId"]),
    )

    store = broker_module()["tenant_store"]("acme:eu@1", sts=sts)

    assert sent == [
        {
            "RoleArn": ROLE_ARN,
            "RoleSessionName": "tenant-acme-eu@1",  # the characters IAM refuses replaced
            "Tags": [{"Key": "tenant", "Value": "acme:eu@1"}],
            "DurationSeconds": 900,
        }
    ]
    # The store's calls are signed with the tenant role's credentials, not the broker's.
    (access_key,) = given
    session = store.create(
        "s-1", partition="acme:eu@1", ttl=timedelta(hours=1), connection_id="conn-1="
    )
    assert session.connection_id == "conn-1="
    assert deployed["signed"] and all(
        f"Credential={access_key}/" in header for header in deployed["signed"]
    )
    assert store.get("s-1", partition="acme:eu@1", consistent=True) is not None
    assert claim_of(ddb, "connection#conn-1=")  # recorded through the registrar


def test_the_broker_handler_creates_the_verified_tenant_s_session(
    deployed: dict[str, Any], ddb: Any
) -> None:
    """The page's ``handler`` ($connect): the tenant from the authorizer's context, the session
    and connection recorded under that tenant's partition, through the registrar."""
    event = {
        "requestContext": {"connectionId": "conn-7=", "authorizer": {"tenantId": "globex"}},
        "queryStringParameters": {"session": "s-7"},
    }

    assert broker_module()["handler"](event, None) == {"statusCode": 200}

    item = ddb.get_item(
        TableName=TABLE,
        Key={"tenantId": {"S": "globex"}, "sessionId": {"S": "s-7"}},
        ConsistentRead=True,
    )["Item"]
    assert item["connectionId"] == {"S": "conn-7="}
    assert claim_of(ddb, "connection#conn-7=")  # recorded through the registrar
    assert deployed["signed"]  # the registrar was invoked with the tenant role's credentials


def test_the_store_s_dynamodb_client_runs_as_the_assumed_role(deployed: dict[str, Any]) -> None:
    sts = boto3.client("sts", region_name="us-east-1")
    store = broker_module()["tenant_store"]("tenant-a", sts=sts)
    credentials = store._ddb._request_signer._credentials  # the client the store was given
    caller = boto3.client(
        "sts",
        region_name="us-east-1",
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key,
        aws_session_token=credentials.token,
    ).get_caller_identity()
    assert caller["Arn"] == "arn:aws:sts::123456789012:assumed-role/tenant-sessions/tenant-tenant-a"
