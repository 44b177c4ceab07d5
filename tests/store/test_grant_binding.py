"""create_grant binds the grant to its session, names it after the session, and never leaks
it when storing it fails (moto KMS: CreateGrant, ListGrants, RetireGrant)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from session_expiry_runtime.core.grant_names import GrantOwner, grant_name, parse_grant_name
from session_expiry_runtime.store import SessionStore

from ._support import GRANTEE_ROLE, RETIRING_ROLE

HOUR = timedelta(hours=1)


@pytest.fixture
def key_arn(kms: Any) -> str:
    return str(kms.create_key(Description="session data key")["KeyMetadata"]["Arn"])


@pytest.fixture
def store(make_store: Any, key_arn: str) -> SessionStore:
    return make_store(  # type: ignore[no-any-return]
        grant_key_arn=key_arn, retiring_principal=RETIRING_ROLE
    )


def incarnation_of(prefix: str | None) -> str:
    assert prefix is not None
    return prefix.rstrip("/").rsplit("/", 1)[-1]


def test_grant_is_bound_to_its_session_and_named_after_it(
    store: SessionStore, kms: Any, key_arn: str
) -> None:
    created = store.create("s-1", ttl=HOUR)
    s = store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    (grant,) = kms.list_grants(KeyId=key_arn)["Grants"]
    assert grant["GrantId"] == s.grant_id
    assert grant["Constraints"] == {"EncryptionContextSubset": {"sessionId": "s-1"}}
    assert s.encryption_context == {"sessionId": "s-1"}
    incarnation = incarnation_of(created.scratch_prefix)
    assert grant["Name"] == grant_name({"pk": "s-1"}, incarnation)
    assert parse_grant_name(grant["Name"]) == GrantOwner(key={"pk": "s-1"}, incarnation=incarnation)


def test_with_a_sort_key_the_binding_holds_the_partition_too(
    make_store: Any, kms: Any, key_arn: str
) -> None:
    store = make_store(sort_key="sk", grant_key_arn=key_arn, retiring_principal=RETIRING_ROLE)
    created = store.create("s-1", ttl=HOUR, partition="user-7")
    s = store.create_grant(
        "s-1", partition="user-7", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"]
    )
    (grant,) = kms.list_grants(KeyId=key_arn)["Grants"]
    context = {"sessionId": "s-1", "sessionPartition": "user-7"}
    assert grant["Constraints"] == {"EncryptionContextSubset": context}
    assert s.encryption_context == context
    owner = parse_grant_name(grant["Name"])
    assert owner == GrantOwner(
        key={"pk": "user-7", "sk": "s-1"}, incarnation=incarnation_of(created.scratch_prefix)
    )


def test_binding_can_be_turned_off(store: SessionStore, kms: Any, key_arn: str) -> None:
    store.create("s-1", ttl=HOUR)
    store.create_grant(
        "s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"], bind_to_session=False
    )
    (grant,) = kms.list_grants(KeyId=key_arn)["Grants"]
    assert "Constraints" not in grant or not grant["Constraints"]


def test_an_added_context_pair_joins_the_binding(
    store: SessionStore, kms: Any, key_arn: str
) -> None:
    store.create("s-1", ttl=HOUR)
    store.create_grant(
        "s-1",
        grantee_principal=GRANTEE_ROLE,
        operations=["Decrypt"],
        constraints={"EncryptionContextSubset": {"purpose": "scratch"}},
    )
    (grant,) = kms.list_grants(KeyId=key_arn)["Grants"]
    assert grant["Constraints"] == {
        "EncryptionContextSubset": {"purpose": "scratch", "sessionId": "s-1"}
    }


@pytest.mark.parametrize(
    "constraints",
    [
        {"EncryptionContextEquals": {"sessionId": "s-1"}},
        {"EncryptionContextSubset": {"sessionId": "s-2"}},
        {"EncryptionContextSubset": {"SESSIONID": "s-1"}},  # constraint keys ignore case
        {"EncryptionContextSubset": ["sessionId"]},
    ],
)
def test_fails_constraints_that_contradict_the_binding(
    store: SessionStore, kms: Any, key_arn: str, constraints: dict[str, Any]
) -> None:
    store.create("s-1", ttl=HOUR)
    with pytest.raises(ValueError, match="constraints"):
        store.create_grant(
            "s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"], constraints=constraints
        )
    assert kms.list_grants(KeyId=key_arn)["Grants"] == []


def test_fails_a_binding_value_longer_than_a_grant_constraint_takes(
    make_store: Any, kms: Any, key_arn: str
) -> None:
    store = make_store(sort_key="sk", grant_key_arn=key_arn, retiring_principal=RETIRING_ROLE)
    # No session can have such a partition any more (a partition is a scratch prefix segment,
    # at most 255 characters): the binding is checked before the session is read.
    partition = "u" * 385
    with pytest.raises(ValueError, match="384 characters"):
        store.create_grant(
            "s-1", partition=partition, grantee_principal=GRANTEE_ROLE, operations=["Decrypt"]
        )
    assert kms.list_grants(KeyId=key_arn)["Grants"] == []


def test_fails_a_session_whose_key_no_grant_name_can_hold(
    store: SessionStore, kms: Any, key_arn: str
) -> None:
    # The cleanup retires only a grant whose Name names its session: a nameless grant of a
    # long session id would never be retired, so none is created.
    long_id = "s" * 148
    store.create(long_id, ttl=HOUR)
    with pytest.raises(ValueError, match="do not fit a grant Name"):
        store.create_grant(long_id, grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    assert kms.list_grants(KeyId=key_arn)["Grants"] == []
    store.create("s" * 147, ttl=HOUR)  # the longest that fits still gets its named grant
    s = store.create_grant("s" * 147, grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    (grant,) = kms.list_grants(KeyId=key_arn)["Grants"]
    assert grant["GrantId"] == s.grant_id and parse_grant_name(grant["Name"]) is not None


# moto never throttles, answers 500 or denies access: the failing UpdateItem is stubbed on the
# client; CreateGrant, RetireGrant and ListGrants are moto's.
UPDATE_FAILURES = {
    "throttled": ("ProvisionedThroughputExceededException", 400),
    "internal-error": ("InternalServerError", 500),
    "access-denied": ("AccessDeniedException", 400),
}


def fail_updates(ddb: Any, monkeypatch: pytest.MonkeyPatch, code: str, status: int) -> None:
    def update_item(**_: Any) -> Any:
        raise ClientError(
            {
                "Error": {"Code": code, "Message": "injected"},
                "ResponseMetadata": {"HTTPStatusCode": status},
            },
            "UpdateItem",
        )

    monkeypatch.setattr(ddb, "update_item", update_item)


@pytest.mark.parametrize("failure", sorted(UPDATE_FAILURES))
def test_a_grant_not_stored_is_retired(
    store: SessionStore,
    kms: Any,
    ddb: Any,
    key_arn: str,
    monkeypatch: pytest.MonkeyPatch,
    failure: str,
) -> None:
    store.create("s-1", ttl=HOUR)
    code, status = UPDATE_FAILURES[failure]
    fail_updates(ddb, monkeypatch, code, status)
    with pytest.raises(ClientError, match=code):
        store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    assert kms.list_grants(KeyId=key_arn)["Grants"] == []


def test_a_grant_that_cannot_be_retired_either_names_its_session(
    store: SessionStore,
    kms: Any,
    ddb: Any,
    key_arn: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    created = store.create("s-1", ttl=HOUR)
    fail_updates(ddb, monkeypatch, "ProvisionedThroughputExceededException", 400)

    def retire_grant(**_: Any) -> Any:
        raise ClientError(
            {"Error": {"Code": "KMSInternalException", "Message": "injected"}}, "RetireGrant"
        )

    monkeypatch.setattr(kms, "retire_grant", retire_grant)
    with caplog.at_level(logging.ERROR), pytest.raises(ClientError):
        store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    (grant,) = kms.list_grants(KeyId=key_arn)["Grants"]
    assert parse_grant_name(grant["Name"]) == GrantOwner(
        key={"pk": "s-1"}, incarnation=incarnation_of(created.scratch_prefix)
    )
    assert grant["GrantId"] in caplog.text and grant["Name"] in caplog.text
