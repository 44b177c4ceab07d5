"""A session's KMS grant: create_grant (bound to the session, named after it) and attach_grant.

A KMS grant never expires: it lives until it is retired or revoked, and only a principal the
grant names can retire it (KMS Developer Guide, "Grants in AWS KMS" and "Retiring and revoking
grants"). So every grant created here names the cleanup role as its retiring principal, carries
a name that identifies its session (`grant_names`), and is retired at once when it cannot
be stored on its session.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.config import ENV_GRANT_KEY_ARN, ENV_RETIRING_PRINCIPAL
from ..core.grant_names import grant_name
from ..core.ownership import KIND_GRANT
from ..core.prefixes import incarnation_of
from .claims import GRANT_CLAIM_CONDITION, ClaimRequest, TransactionCancelled, refusal
from .core import LIVE, Recording, StoreCore
from .errors import LOGGER, describe, gone, one_grant
from .keys import Key, require_text
from .registrar_client import RegistrarClaims
from .session import ENCRYPTION_CONTEXT_PARTITION, ENCRYPTION_CONTEXT_SESSION_ID, Session

# A session holds one grant (the same one again: an idempotent retry).
_ONE_GRANT = "attribute_not_exists(#gid) OR #gid = :gid"
#: Encryption context values in a grant constraint: at most 384 characters (KMS API Reference,
#: "CreateGrant", ``Constraints``).
_MAX_CONTEXT_VALUE = 384


class GrantsPart(StoreCore):
    """attach_grant, create_grant (see
    [`SessionStore`][session_expiry_runtime.store.SessionStore])."""

    def attach_grant(
        self,
        session_id: str,
        *,
        grant_id: str,
        grant_token: str,
        partition: str | None = None,
    ) -> Session:
        """Store a KMS grant id and token on a live session, for the cleanup to retire.

        The grant must name the cleanup role as its retiring principal (KMS Developer
        Guide, "Retiring and revoking grants");
        [`create_grant`][session_expiry_runtime.store.SessionStore.create_grant] does this for you.
        A session carries at most one grant: attaching a different grant id to a session
        that already has one is refused, since the replaced grant would never be retired.
        Re-attaching the same grant id is allowed (idempotent retries). With ownership records
        the update and the grant's ownership record (``grant#<id>``) are one
        ``TransactWriteItems``, and the session returned is the one read before it, with the
        grant.

        Raises:
            SessionGoneError: the session is missing or not live; the item is unchanged.
            SessionConflictError: the session already carries a different grant id.
            ResourceOwnedError: another session's ownership record names the grant id.
            ValueError: a bad id, partition, grant id or token.
        """
        key = self._key(session_id, partition)
        require_text(grant_id, "grant id")
        require_text(grant_token, "grant token")
        recording = self._recording(key, session_id, partition)
        return self._store_grant(key, session_id, partition, grant_id, grant_token, recording)

    def create_grant(
        self,
        session_id: str,
        *,
        grantee_principal: str,
        operations: Sequence[str],
        partition: str | None = None,
        constraints: Mapping[str, Any] | None = None,
        bind_to_session: bool = True,
    ) -> Session:
        """Create the session's KMS grant and store its id and token on the session.

        Calls KMS ``CreateGrant`` on the configured key (``SESSION_EXPIRY_GRANT_KEY_ARN``)
        with ``RetiringPrincipal`` set to the configured retiring principal
        (``SESSION_EXPIRY_RETIRING_PRINCIPAL``, the construct's cleanup role), because only
        a principal the grant names can retire it (KMS Developer Guide, "Grants in AWS KMS"
        and "Retiring and revoking grants").

        Binding: with ``bind_to_session`` (the default) the grant carries the grant constraint
        ``EncryptionContextSubset`` =
        [`Session.encryption_context`][session_expiry_runtime.store.Session.encryption_context]
        (the session id, and the partition on a table with a sort key), so its cryptographic
        operations work only on requests that carry this session's encryption context: the
        grantee can decrypt data encrypted for this session and no other (KMS Developer Guide,
        "Using grant constraints"; DescribeKey and RetireGrant are not constrained). Encrypt the
        session's data with that context. ``bind_to_session=False`` creates an unbound grant
        (the grantee can use the key for any data while the grant lives); only then may
        ``constraints`` hold more than an ``EncryptionContextSubset`` to add to the binding.

        Name: ``grant_names.grant_name(key, incarnation)``, so a grant never stored can be
        traced to its session by a sweep of the key's grants. A session whose name would be
        longer than 256 characters (a session id beyond about 147 characters without a sort
        key) gets no grant: ``ValueError``.

        Stored as `attach_grant` (above) does; any failure after ``CreateGrant`` retires the new
        grant at once by its token and re-raises (a failed retire is logged).

        Args:
            grantee_principal: ARN of the principal that receives the permissions.
            operations: KMS grant operations, e.g. ``["Decrypt", "GenerateDataKey"]``.
            constraints: extra ``Constraints`` for ``CreateGrant``; default none.
            bind_to_session: bind the grant to this session's encryption context; default on.

        Returns:
            The updated [`Session`][session_expiry_runtime.store.Session], grant id and token set.

        Raises:
            ValueError: no grant key or retiring principal configured, an empty grantee or
                operations list, ``constraints`` that contradict the binding, a binding
                value longer than 384 characters, or a key and incarnation no grant ``Name`` can
                hold (see Name above); the message names the setting or value.
            SessionGoneError: the session is missing or not live.
            SessionConflictError: the session already carries a grant.
            ResourceOwnedError: another session's ownership record names the new grant id.
        """
        self._check_grant_settings(grantee_principal, operations)
        key = self._key(session_id, partition)
        grant_constraints = _grant_constraints(
            session_id, partition, constraints, bind=bind_to_session
        )
        request, current = self._grant_request(key, session_id, partition, grantee_principal)
        request["Operations"] = builtins.list(operations)
        if grant_constraints:
            request["Constraints"] = grant_constraints
        kms = self._kms_client()
        grant = kms.create_grant(**request)
        try:
            return self._store_grant(
                key,
                session_id,
                partition,
                grant["GrantId"],
                grant["GrantToken"],
                self._recording_of(key, current),
            )
        except Exception:
            self._retire_unstored_grant(
                kms, grant, request["Name"], describe(session_id, partition)
            )
            raise

    def _grant_request(
        self, key: Key, session_id: str, partition: str | None, grantee_principal: str
    ) -> tuple[dict[str, Any], Session]:
        """The ``CreateGrant`` request of a live session without a grant, named after it (no
        operations yet), and the session as read."""
        c = self._config
        current = self._get_live(key, consistent=True)
        if current is None:
            raise gone(session_id, partition, "no grant created")
        if current.grant_id:
            raise one_grant(session_id, partition, current.grant_id)
        incarnation = current.incarnation or incarnation_of(current.scratch_prefix) or ""
        name = grant_name({attr: value["S"] for attr, value in key.items()}, incarnation)
        if name is None:
            raise ValueError(
                f"{describe(session_id, partition)}: its key and incarnation "
                f"({incarnation!r}) do not fit a grant Name (at most 256 characters; about 147 "
                "characters of session id without a sort key), and the cleanup retires only a "
                "grant whose Name names its session; use a shorter session id"
            )
        request = {
            "KeyId": c.grant_key_arn,
            "GranteePrincipal": grantee_principal,
            "RetiringPrincipal": c.retiring_principal,
            "Name": name,
        }
        return request, current

    def _store_grant(
        self,
        key: Key,
        session_id: str,
        partition: str | None,
        grant_id: str,
        grant_token: str,
        recording: Recording,
    ) -> Session:
        """Record the grant on the live session: one conditional UpdateItem, or with an
        ownership record one ``TransactWriteItems`` of that update and the grant's claim."""
        c = self._config
        update = "SET #gid = :gid, #gtok = :gtok"
        names = {"#gid": c.grant_id_attribute, "#gtok": c.grant_token_attribute, **recording.names}
        values = {":gid": {"S": grant_id}, ":gtok": {"S": grant_token}, **recording.values}
        condition = recording.and_condition(_ONE_GRANT)
        if recording.holder is None:
            return self._update_live(
                session_id,
                partition,
                key,
                self._now(),
                update,
                names,
                values,
                extra_condition=condition,
                grant_conflict=True,
            )
        claim = ClaimRequest(KIND_GRANT, grant_id, recording.holder)
        self._transact_grant(key, claim, update, names, values, condition)
        assert recording.current is not None
        return dataclasses.replace(recording.current, grant_id=grant_id, grant_token=grant_token)

    def _transact_grant(
        self,
        key: Key,
        claim: ClaimRequest,
        update: str,
        names: dict[str, str],
        values: dict[str, Any],
        condition: str | None,
    ) -> None:
        """The item update and the grant's claim in one ``TransactWriteItems``.

        Raises:
            SessionGoneError, SessionConflictError, ResourceOwnedError: as the write was
                refused (by the item's condition or the claim's).
        """
        claims, holder, now = self._claims, claim.holder, self._now()
        assert claims is not None
        if isinstance(claims, RegistrarClaims):
            self._registered_grant(key, claim, claims, update, names, values, condition)
            return
        item_update = {
            "TableName": self.table_name,
            "Key": key,
            "UpdateExpression": update,
            "ConditionExpression": f"{LIVE} AND {condition}",
            "ExpressionAttributeNames": {**self._names(), **names},
            "ExpressionAttributeValues": {**self._time_values(now), **values},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        claim_put = claims.put_request(claim, now, condition=GRANT_CLAIM_CONDITION)
        try:
            claims.transact([{"Update": item_update}, {"Put": claim_put}])
        except TransactionCancelled as cancelled:
            item_refused = cancelled.failed(0)
            if item_refused is not None:
                old = item_refused.get("Item")
                current = self._to_session(old) if old and self._live(old, now) else None
                if current is not None and current.grant_id:
                    raise one_grant(holder.session_id, holder.partition, current.grant_id) from None
                raise gone(holder.session_id, holder.partition) from None
            claim_refused = cancelled.failed(1)
            if claim_refused is not None:
                raise refusal(claim, claim_refused.get("Item")) from None
            raise cancelled.error from None

    def _registered_grant(
        self,
        key: Key,
        claim: ClaimRequest,
        claims: RegistrarClaims,
        update: str,
        names: dict[str, str],
        values: dict[str, Any],
        condition: str | None,
    ) -> None:
        """With the claim registrar: the grant's claim (fresh only), then the item update; a
        refused update takes the claim back and raises what the transaction would have."""
        holder, now = claim.holder, self._now()
        (claimed,) = claims.put_all([claim], grant=True)
        written, old = self._try_update(key, now, update, names, values, condition)
        if written is not None:
            return
        claims.undo(claimed)
        current = self._to_session(old) if old and self._live(old, now) else None
        if current is not None and current.grant_id:
            raise one_grant(holder.session_id, holder.partition, current.grant_id)
        raise gone(holder.session_id, holder.partition)

    def _check_grant_settings(self, grantee_principal: object, operations: object) -> None:
        c = self._config
        if not c.retiring_principal:
            raise ValueError(
                f"retiring principal {c.retiring_principal!r}: create_grant needs the cleanup "
                f"role ARN (${ENV_RETIRING_PRINCIPAL} or RuntimeConfig.retiring_principal); "
                "without it the cleanup can never retire the grant"
            )
        if not c.grant_key_arn:
            raise ValueError(
                f"grant key {c.grant_key_arn!r}: create_grant needs the KMS key ARN "
                f"(${ENV_GRANT_KEY_ARN} or RuntimeConfig.grant_key_arn)"
            )
        require_text(grantee_principal, "grantee principal")
        if (
            isinstance(operations, str)
            or not isinstance(operations, Sequence)
            or not operations
            or not all(isinstance(op, str) and op for op in operations)
        ):
            raise ValueError(
                f"operations {operations!r}: expected a non-empty list of KMS grant operations, "
                "e.g. ['Decrypt']"
            )

    def _kms_client(self) -> Any:
        if self._kms is None:
            import boto3

            self._kms = boto3.client("kms")
        return self._kms

    def _retire_unstored_grant(
        self, kms: Any, grant: Mapping[str, Any], name: str | None, session: str
    ) -> None:
        """Retire a grant that no session item points to; log it when even that fails."""
        try:
            kms.retire_grant(GrantToken=grant["GrantToken"])
        except (ClientError, BotoCoreError):
            LOGGER.error(
                "grant %s (name %r) on %s for %s was not stored and could not be retired; "
                "retire or revoke it (its name identifies the session)",
                grant["GrantId"],
                name,
                self._config.grant_key_arn,
                session,
                exc_info=True,
            )


def _grant_constraints(
    session_id: str,
    partition: str | None,
    constraints: Mapping[str, Any] | None,
    *,
    bind: bool,
) -> dict[str, Any] | None:
    """The ``Constraints`` of a session's grant (see ``SessionStore.create_grant``)."""
    if not bind:
        return dict(constraints) if constraints else None
    context = {ENCRYPTION_CONTEXT_SESSION_ID: session_id}
    if partition is not None:
        context[ENCRYPTION_CONTEXT_PARTITION] = partition
    for name, value in context.items():
        if len(value) > _MAX_CONTEXT_VALUE:
            raise ValueError(
                f"{name} {value[:40]!r}...: longer than {_MAX_CONTEXT_VALUE} characters, the "
                "limit of a grant constraint's values; pass bind_to_session=False"
            )
    extra = dict(constraints or {})
    subset = extra.pop("EncryptionContextSubset", None) or {}
    if extra or not isinstance(subset, Mapping):
        raise ValueError(
            f"constraints {constraints!r}: a grant bound to its session takes only an added "
            "EncryptionContextSubset; pass bind_to_session=False for other constraints"
        )
    # Keys of a grant constraint are not case sensitive (KMS API Reference, GrantConstraints).
    ours = {name.lower(): name for name in context}
    for name, value in subset.items():
        mine = ours.get(str(name).lower())
        if mine is not None and (name != mine or value != context[mine]):
            raise ValueError(
                f"constraints {constraints!r}: {name!r} contradicts the session binding "
                f"{mine!r}={context[mine]!r}"
            )
    return {"EncryptionContextSubset": {**subset, **context}}
