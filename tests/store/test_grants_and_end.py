"""create_grant against moto KMS, and the REMOVE record that ``end`` puts on the stream."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from session_expiry_runtime.store import SessionConflictError, SessionGoneError, SessionStore

from ._support import GRANTEE_ROLE, RETIRING_ROLE, FakeClock, raw_item

HOUR = timedelta(hours=1)


@pytest.fixture(params=["expiresAt", "ttl"])
def ttl_attr(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def key_arn(kms: Any) -> str:
    return str(kms.create_key(Description="session data key")["KeyMetadata"]["Arn"])


@pytest.fixture
def store(make_store: Any, key_arn: str, ttl_attr: str) -> SessionStore:
    return make_store(  # type: ignore[no-any-return]
        ttl_attribute=ttl_attr, grant_key_arn=key_arn, retiring_principal=RETIRING_ROLE
    )


def test_create_grant_names_the_cleanup_role_as_retiring_principal(
    store: SessionStore, kms: Any, ddb: Any, key_arn: str
) -> None:
    store.create("s-1", ttl=HOUR, connection_id="conn-1")
    s = store.create_grant(
        "s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt", "GenerateDataKey"]
    )
    grants = kms.list_grants(KeyId=key_arn)["Grants"]
    assert len(grants) == 1
    grant = grants[0]
    assert grant["GrantId"] == s.grant_id
    assert grant["RetiringPrincipal"] == RETIRING_ROLE
    assert grant["GranteePrincipal"] == GRANTEE_ROLE
    assert sorted(grant["Operations"]) == ["Decrypt", "GenerateDataKey"]
    assert s.grant_token
    item = raw_item(ddb, {"pk": {"S": "s-1"}})
    assert item is not None
    assert item["grantId"] == {"S": s.grant_id}
    assert item["grantToken"] == {"S": s.grant_token}
    assert item["connectionId"] == {"S": "conn-1"}


def test_create_grant_twice_conflicts_and_creates_no_second_grant(
    store: SessionStore, kms: Any, key_arn: str
) -> None:
    store.create("s-1", ttl=HOUR)
    first = store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    with pytest.raises(SessionConflictError, match=str(first.grant_id)):
        store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    assert len(kms.list_grants(KeyId=key_arn)["Grants"]) == 1


def test_create_grant_on_an_expired_session_creates_no_grant(
    store: SessionStore, kms: Any, key_arn: str, clock: FakeClock
) -> None:
    store.create("s-1", ttl=HOUR)
    clock.advance(3600)
    with pytest.raises(SessionGoneError, match="'s-1'"):
        store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    assert kms.list_grants(KeyId=key_arn)["Grants"] == []


def test_create_grant_retires_the_grant_when_the_session_ends_meanwhile(
    store: SessionStore, kms: Any, key_arn: str, ddb: Any
) -> None:
    """The session is deleted between the liveness check and storing the grant."""
    store.create("s-1", ttl=HOUR)
    real_create_grant = kms.create_grant

    def create_grant_then_end(**kwargs: Any) -> Any:
        answer = real_create_grant(**kwargs)
        ddb.delete_item(TableName="sessions", Key={"pk": {"S": "s-1"}})
        return answer

    kms.create_grant = create_grant_then_end
    with pytest.raises(SessionGoneError):
        store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    assert kms.list_grants(KeyId=key_arn)["Grants"] == []


def test_end_puts_a_remove_record_with_the_cleanup_targets_on_the_stream(
    store: SessionStore, make_stream: Any, ttl_attr: str
) -> None:
    store.create("s-1", ttl=HOUR, connection_id="conn-1")
    s = store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    assert store.end("s-1") is True

    removes = [r for r in make_stream() if r["eventName"] == "REMOVE"]
    assert len(removes) == 1
    record = removes[0]
    assert "userIdentity" not in record  # an explicit delete, not a TTL delete
    old = record["dynamodb"]["OldImage"]
    assert old["pk"] == {"S": "s-1"}
    assert old["connectionId"] == {"S": "conn-1"}
    assert old["grantId"] == {"S": s.grant_id}
    assert old["grantToken"] == {"S": s.grant_token}
    assert old["scratchPrefix"] == {"S": s.scratch_prefix}
    assert old[ttl_attr] == {"N": str(s.expires_at)}
