"""``RetireGrant``: retire the session's KMS grant — only once it is proven to be the session's.

The old image says which grant the session held (``grantId``; ``grantToken`` beside it), but an
old image is whatever the last writer of the item wrote: an item ``s-1`` written with the live
session ``s-2``'s grant id and then deleted would otherwise make the cleanup retire ``s-2``'s
grant. So the image's grant id is only a question, answered by KMS and the record's own
``Keys``:

1. ``ListGrants(KeyId=<configured key ARN>, GrantId=<image's grant id>)`` (read-only). No such
   grant on the key: ``already-done`` (retired before, or never on this key; a grant on another
   key is never touched, since every call names the configured key).
2. The grant's ``Name`` must parse (:func:`~session_expiry_runtime.grant_names.parse_grant_name`,
   the ``session-expiry:<incarnation>:<key>`` that ``SessionStore.create_grant`` writes) to the
   record's ``Keys`` exactly (:func:`~session_expiry_runtime.grant_names.owner_key`). The
   ``Keys`` of a REMOVE record are the deleted item's key, which no writer of the item can
   change; the grant's name is set by whoever created the grant (``kms:CreateGrant``, which the
   construct's conditions tie to the cleanup role as retiring principal), not by table writers.
3. ``RetireGrant(KeyId=<configured key ARN>, GrantId=...)``; ``NotFoundException`` is
   ``already-done``. Never by ``GrantToken``: a token identifies a grant on any key.

**Refused** (nothing retired, the step logged ``refused`` with ``grantRefusal``, counted as
``GrantsRefused``, which the skipped-records alarm watches, never retried): a grant named for
another session, a grant without a name of that form (created outside ``SessionStore`` or with
a key too long for a 256-character name), an image holding a grant token but no grant id (a
token cannot be checked against the key's grants; ``SessionStore`` always writes both), a record
whose ``Keys`` are not all non-empty Strings, an id KMS calls invalid
(``InvalidGrantIdException``).

The incarnation in the name is not compared: within one key, a REMOVE record can only carry a
grant id written while that item existed, and the store never gives a later incarnation's grant
to an earlier item (the key is unique while an item exists).

Preview (dry run): the same ``ListGrants``, nothing retired; logs ``grantWouldBeRetired``
(``true``, or ``false`` when already gone) or refuses as above. The cleanup retires the grant
as its retiring principal (AWS KMS Developer Guide, "Retiring and revoking grants"); the role
also needs ``kms:ListGrants`` on the key (AWS KMS API Reference, "ListGrants").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..clients import CleanupClients
from ..config import ACTION_RETIRE_GRANT, RuntimeConfig
from ..decode import to_json_value
from ..grant_names import owner_key, parse_grant_name
from ..outcomes import (
    STEP_ALREADY_DONE,
    STEP_DRY_RUN,
    STEP_REFUSED,
    StepFailed,
    error_code,
    error_text,
)
from .base import PLAN_REFUSED, CleanupStep, Plan, Session, StepContext, call_aws, nonempty_str

#: Log field holding why the grant was refused (distinct from the scratch step's ``refusal``).
REFUSAL_FIELD = "grantRefusal"


@dataclass(frozen=True)
class GrantTarget:
    """The grant an image names and the session key it must belong to."""

    grant_id: str
    key: dict[str, str]


def _refused(refusal: str, log: dict[str, Any]) -> Plan:
    return Plan(PLAN_REFUSED, log={**log, REFUSAL_FIELD: refusal})


class GrantStep(CleanupStep):
    name = ACTION_RETIRE_GRANT

    def __init__(self, config: RuntimeConfig, kms: Any) -> None:
        self.kms = kms
        self.key_arn = config.grant_key_arn
        self.attributes = (config.grant_id_attribute, config.grant_token_attribute)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> GrantStep | None:
        return cls(config, clients.kms) if clients.kms is not None else None

    def plan(self, session: Session) -> Plan:
        image = session.image
        values = {name: nonempty_str(image.get(name)) for name in self.attributes}
        invalid = [n for n in self.attributes if n in image and values[n] is None]
        grant_id, token = (values[n] for n in self.attributes)
        if grant_id is None and token is None:
            missing = [n for n in self.attributes if n not in image]
            return Plan.missing_attributes(missing=missing, invalid=invalid)
        log: dict[str, Any] = {"grantId": grant_id}  # tokens are never logged
        if grant_id is None:
            return _refused(
                f"{self.attributes[1]} without {self.attributes[0]}: a grant token cannot be "
                "checked against the key's grants (SessionStore always writes both)",
                log,
            )
        key = owner_key(session.keys)
        if key is None:
            return _refused(
                f"record Keys {to_json_value(session.keys)!r} are not all non-empty Strings: "
                "no grant name can name this session",
                log,
            )
        return Plan.run(GrantTarget(grant_id, key), log=log, invalid=invalid)

    def run(self, plan: Plan, ctx: StepContext) -> str:
        target: GrantTarget = plan.payload
        verdict = self.check(target, ctx)
        if verdict is not None:
            return verdict
        return call_aws(
            self.name,
            self.kms.retire_grant,
            already_done=("NotFoundException",),
            KeyId=self.key_arn,
            GrantId=target.grant_id,
        )

    def preview(self, plan: Plan, ctx: StepContext) -> str:
        """Dry run: the same ``ListGrants`` check, no ``RetireGrant``."""
        verdict = self.check(plan.payload, ctx)
        if verdict == STEP_REFUSED:
            return verdict
        ctx.note("grantWouldBeRetired", verdict is None)
        return STEP_DRY_RUN

    def check(self, target: GrantTarget, ctx: StepContext) -> str | None:
        """``None`` when the grant is on the key and named for ``target.key``; else
        ``already-done`` (not on the key) or ``refused`` (``grantRefusal`` noted).

        Raises:
            StepFailed: ``ListGrants`` failed (after botocore's retries).
        """
        try:
            answer = self.kms.list_grants(KeyId=self.key_arn, GrantId=target.grant_id)
        except ClientError as exc:
            if error_code(exc) == "NotFoundException":
                return STEP_ALREADY_DONE
            if error_code(exc) == "InvalidGrantIdException":
                return self._refuse(ctx, f"grant id {target.grant_id!r}: {error_text(exc)}")
            raise StepFailed(self.name, error_text(exc)) from exc
        except BotoCoreError as exc:
            raise StepFailed(self.name, error_text(exc)) from exc
        grants = [g for g in answer.get("Grants") or () if g.get("GrantId") == target.grant_id]
        if not grants:
            return STEP_ALREADY_DONE
        owner = parse_grant_name(grants[0].get("Name"))
        if owner is None:
            return self._refuse(
                ctx,
                f"grant {target.grant_id} has no session-expiry name "
                f"({grants[0].get('Name')!r}): it cannot be proven to be this session's",
            )
        if owner.key != target.key:
            return self._refuse(
                ctx, f"grant {target.grant_id} is named for session {owner.key}, not {target.key}"
            )
        return None

    def _refuse(self, ctx: StepContext, refusal: str) -> str:
        ctx.note(REFUSAL_FIELD, refusal)
        return STEP_REFUSED
