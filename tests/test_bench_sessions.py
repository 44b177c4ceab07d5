"""The bench's synthetic sessions (``bench/sessions.py``) are what ``SessionStore`` writes.

The scale runs and the storm build thousands of sessions without the store; if their items or
ownership records drifted from the store's, the bench would measure a cleanup of records no
deployment produces. Here the real store writes one session into moto (in process) and the
bench builds the same one: both tables must hold exactly the same attributes.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from moto import mock_aws
from session_expiry_runtime.core import prefixes
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.store import SessionStore

from bench import sessions

T0 = 1_767_225_600
RETIRING = "arn:aws:iam::123456789012:role/cleanup"
GRANTEE = "arn:aws:iam::123456789012:role/app"


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def _tables(ddb: Any) -> None:
    ddb.create_table(
        TableName="sessions",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.create_table(
        TableName="ownership",
        AttributeDefinitions=[{"AttributeName": "resource", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "resource", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )


@pytest.mark.parametrize("sweeper", [False, True])
def test_session_item_and_claims_equal_what_the_store_writes(
    ddb: Any, monkeypatch: pytest.MonkeyPatch, sweeper: bool
) -> None:
    _tables(ddb)
    kms = boto3.client("kms", region_name="us-east-1")
    key_arn = kms.create_key()["KeyMetadata"]["Arn"]
    extra = {"sweep_shard_attribute": "expiryShard", "sweep_shards": 4} if sweeper else {}
    config = RuntimeConfig(
        table_name="sessions",
        ownership_table_name="ownership",
        grant_key_arn=key_arn,
        retiring_principal=RETIRING,
        **extra,
    )
    incarnation = "0123456789abcdef0123456789abcdef"
    monkeypatch.setattr(
        "session_expiry_runtime.store_parts.lifetime.new_incarnation", lambda: incarnation
    )
    clock = datetime.fromtimestamp(T0, tz=timezone.utc)
    store = SessionStore(config=config, dynamodb_client=ddb, kms_client=kms, clock=lambda: clock)
    store.create("s-1", ttl=timedelta(hours=1), connection_id="conn-1=", tenant_id="t-1")
    written = store.create_grant("s-1", grantee_principal=GRANTEE, operations=["Decrypt"])
    assert written.scratch_prefix == prefixes.build_scratch_prefix(
        "sessions/", "s-1", incarnation=incarnation
    )

    spec = sessions.SessionSpec(
        "s-1",
        incarnation,
        created_at=T0,
        expires_at=T0 + 3_600,
        connection_id="conn-1=",
        grant_id=written.grant_id,
        grant_token=written.grant_token,
        tenant_id="t-1",
        claim_token=written.claim_token,
    )
    stored = ddb.scan(TableName="sessions")["Items"]
    claims = sorted(ddb.scan(TableName="ownership")["Items"], key=lambda i: i["resource"]["S"])
    assert stored == [sessions.session_item(config, spec)]
    assert claims == sorted(sessions.claim_items(config, spec), key=lambda i: i["resource"]["S"])
    (grant,) = kms.list_grants(KeyId=key_arn)["Grants"]
    assert grant["Name"] == spec.grant_name(config)
