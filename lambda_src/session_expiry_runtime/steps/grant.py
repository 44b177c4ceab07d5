"""``RetireGrant``: retire the session's KMS grant — only once it is proven to be the session's.

The old image says which grant the session held (``grantId``; ``grantToken`` beside it), but an
old image is whatever the last writer of the item wrote, so the image's grant id is only a
question. Two ways to answer it:

**Items with an incarnation (written with ownership records).** The plan claims
``grant#<grant id>``; the runner's ownership check (`base`) hands the step the grant only
when its ownership record (written by ``SessionStore.create_grant`` in the same transaction that
stored the grant on the item) names this record's ``Keys`` and incarnation. Then
``RetireGrant(KeyId=<configured key ARN>, GrantId=...)``:

* success: ``done``; the runner releases the record;
* ``NotFoundException`` on a claim older than ``DEFAULT_GRANT_CONSISTENCY_SECONDS`` (5
  minutes): retired before, ``already-done``;
* ``NotFoundException`` on a younger claim: either a real grant KMS does not show yet (KMS is
  eventually consistent: "there might be a brief delay, usually less than five minutes, until
  the grant is available throughout AWS KMS", AWS KMS API Reference, CreateGrant) or an id no
  grant ever had (the registrar records a grant id without asking KMS). The step does **not**
  fail the record: a failed record holds its shard's later records, other tenants' too, while it
  is retried (docs/security.md, the threat model), and a tenant could claim made-up ids to
  hold them back to back. It **hands the grant over to the grant sweep** (the claim, left
  ``releasing``, gets ``handedOverAt``: `ClaimBatcher.hand_over`) and is ``refused``
  (``grantRefusal`` logged, ``GrantsRefused``, which the skipped-records alarm watches; the
  claim is not released). The first sweep that lists a real grant past its grace for new grants
  retires it (its session is gone); a made-up id is never listed, and its claim leaves with
  the ownership table's time to live. A claim no longer this incarnation's is ``already-done``;
* a record already ``released`` (an earlier run retired the grant): ``already-done`` without a
  call (the runner's doing). No ``ListGrants``: one call per session.

**Items without an incarnation (legacy, written before ownership records)**: today's check by
name, so an upgrade leaves no grant behind:

1. ``ListGrants(KeyId=<configured key ARN>, GrantId=<image's grant id>)`` (read-only). No such
   grant on the key: ``already-done`` (a grant on another key is never touched, since every call
   names the configured key).
2. The grant's ``Name`` must parse (`parse_grant_name`,
   ``session-expiry:<incarnation>:<key>``) to the record's ``Keys`` exactly
   (`owner_key`), and its incarnation must be the last
   segment of the image's scratch prefix (``SessionStore`` wrote both from one incarnation), so a
   grant of a later incarnation of the same key is never the earlier one's.
3. ``RetireGrant``; ``NotFoundException`` is ``already-done``. Never by ``GrantToken``: a token
   identifies a grant on any key.

**Refused** on the legacy path (nothing retired, logged ``refused`` with ``grantRefusal``,
counted as ``GrantsRefused``, which the skipped-records alarm watches, never retried): a grant
named for another session or incarnation, a grant without a name of that form (or an image
without a scratch prefix to compare the name's incarnation with), a record whose ``Keys`` are
not all non-empty Strings, an id KMS calls invalid (``InvalidGrantIdException``). On both paths
an image holding a grant token but no grant id is refused (a token cannot be checked;
``SessionStore`` always writes both).

Preview (dry run): no ``RetireGrant``; logs ``grantWouldBeRetired`` (an owned grant: ``true``;
legacy: the same ``ListGrants`` check, ``false`` when already gone) or refuses as above. The
cleanup retires the grant as its retiring principal (AWS KMS Developer Guide, "Retiring and
revoking grants"); the role needs ``kms:ListGrants`` on the key only for legacy items (AWS KMS
API Reference, "ListGrants").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.clients import CleanupClients
from ..core.config import (
    ACTION_OWNERSHIP,
    ACTION_RETIRE_GRANT,
    DEFAULT_GRANT_CONSISTENCY_SECONDS,
    RuntimeConfig,
)
from ..core.decode import to_json_value
from ..core.grant_names import owner_key, parse_grant_name
from ..core.ownership import KIND_GRANT
from ..owners.outcomes import (
    STEP_ALREADY_DONE,
    STEP_DONE,
    STEP_DRY_RUN,
    STEP_REFUSED,
    StepFailed,
    error_code,
    error_text,
)
from .base import (
    PLAN_REFUSED,
    ClaimRef,
    CleanupStep,
    Plan,
    Session,
    StepContext,
    call_aws,
    nonempty_str,
)

#: Log field holding why the grant was refused (distinct from the scratch step's ``refusal``).
REFUSAL_FIELD = "grantRefusal"


@dataclass(frozen=True)
class GrantTarget:
    """A legacy item's grant, the session key and the incarnation its Name must give."""

    grant_id: str
    key: dict[str, str]
    #: The last segment of the image's scratch prefix; ``None`` without one.
    incarnation: str | None


def _refused(refusal: str, log: dict[str, Any]) -> Plan:
    return Plan(PLAN_REFUSED, log={**log, REFUSAL_FIELD: refusal})


class GrantStep(CleanupStep):
    name = ACTION_RETIRE_GRANT
    claims_ownership = True

    def __init__(
        self, config: RuntimeConfig, kms: Any, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.kms = kms
        self.key_arn = config.grant_key_arn
        self.attributes = (config.grant_id_attribute, config.grant_token_attribute)
        self.scratch_prefix_attribute = config.scratch_prefix_attribute
        self.clock = clock

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
        if session.incarnation is not None:
            claims = [ClaimRef(KIND_GRANT, grant_id)]
            return Plan.run(grant_id, log=log, invalid=invalid, claims=claims)
        return self._legacy_plan(session, grant_id, log, invalid)

    def _legacy_plan(
        self, session: Session, grant_id: str, log: dict[str, Any], invalid: list[str]
    ) -> Plan:
        key = owner_key(session.keys)
        if key is None:
            return _refused(
                f"record Keys {to_json_value(session.keys)!r} are not all non-empty Strings: "
                "no grant name can name this session",
                log,
            )
        prefix = nonempty_str(session.image.get(self.scratch_prefix_attribute))
        incarnation = (prefix.rstrip("/").rsplit("/", 1)[-1] or None) if prefix else None
        return Plan.run(GrantTarget(grant_id, key, incarnation), log=log, invalid=invalid)

    def run(self, plan: Plan, ctx: StepContext) -> str:
        if not plan.claims:
            target: GrantTarget = plan.payload
            verdict = self.check(target, ctx)
            if verdict is not None:
                return verdict
            return self._retire(target.grant_id)
        outcomes = [self._retire_claimed(ref, ctx) for ref in plan.owned]
        if STEP_REFUSED in outcomes:
            return STEP_REFUSED
        return STEP_DONE if STEP_DONE in outcomes else STEP_ALREADY_DONE

    def preview(self, plan: Plan, ctx: StepContext) -> str:
        """Dry run: no ``RetireGrant``; the ``ListGrants`` check for a legacy item."""
        if plan.claims:
            ctx.note("grantWouldBeRetired", bool(plan.owned))
            return STEP_DRY_RUN
        verdict = self.check(plan.payload, ctx)
        if verdict == STEP_REFUSED:
            return verdict
        ctx.note("grantWouldBeRetired", verdict is None)
        return STEP_DRY_RUN

    def _retire(self, grant_id: str) -> str:
        return call_aws(
            self.name,
            self.kms.retire_grant,
            already_done=("NotFoundException",),
            KeyId=self.key_arn,
            GrantId=grant_id,
        )

    def _retire_claimed(self, ref: ClaimRef, ctx: StepContext) -> str:
        """RetireGrant of an owned grant; ``NotFoundException`` is ``already-done`` once its
        claim is older than KMS's consistency window, and within it the grant is handed over to
        the grant sweep (`_hand_over`).

        Raises:
            StepFailed: the call failed (``RetireGrant``), or its claim could not be read or
                handed over (``Ownership``).
        """
        try:
            self.kms.retire_grant(KeyId=self.key_arn, GrantId=ref.resource_id)
        except ClientError as exc:
            if error_code(exc) != "NotFoundException":
                raise StepFailed(self.name, error_text(exc)) from exc
        except BotoCoreError as exc:
            raise StepFailed(self.name, error_text(exc)) from exc
        else:
            return STEP_DONE
        try:
            claim = ctx.claim(ref)
        except Exception as exc:
            raise StepFailed(ACTION_OWNERSHIP, error_text(exc)) from exc
        age = Decimal(str(self.clock())) - claim.claimed_at if claim is not None else None
        if age is not None and age < DEFAULT_GRANT_CONSISTENCY_SECONDS:
            return self._hand_over(ref, ctx, int(age))
        return STEP_ALREADY_DONE

    def _hand_over(self, ref: ClaimRef, ctx: StepContext, age: int) -> str:
        """KMS does not find a grant claimed ``age`` seconds ago, within its consistency window:
        ``refused``, the claim handed over to the grant sweep (module docstring); never a
        failure, so the record holds no other record of its shard. ``already-done`` when the
        claim is no longer this incarnation's.

        Raises:
            StepFailed: the hand-over's write failed (``Ownership``).
        """
        batcher, claimant = ctx.claim_batcher, ctx.claimant
        if batcher is None or claimant is None:  # ctx.claim read the claim: never so
            raise StepFailed(ACTION_OWNERSHIP, f"grant {ref.resource_id}: no claim to hand over")
        try:
            handed = batcher.hand_over(claimant, ref)
        except Exception as exc:
            raise StepFailed(ACTION_OWNERSHIP, error_text(exc)) from exc
        if not handed:  # no longer this incarnation's claim
            return STEP_ALREADY_DONE
        return self._refuse(
            ctx,
            f"grant {ref.resource_id}: NotFoundException {age} s after it was claimed: an id no "
            f"grant has, or a grant KMS does not show yet (up to "
            f"{DEFAULT_GRANT_CONSISTENCY_SECONDS} s after CreateGrant, eventual consistency); "
            "not retried, so it holds no other record: handed over to the grant sweep, which "
            "retires it once KMS lists it",
        )

    def check(self, target: GrantTarget, ctx: StepContext) -> str | None:
        """Legacy items: ``None`` when the grant is on the key and named for ``target.key`` and
        ``target.incarnation``; else ``already-done`` (not on the key) or ``refused``
        (``grantRefusal`` noted).

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
        if owner.incarnation != target.incarnation:
            return self._refuse(
                ctx,
                f"grant {target.grant_id} is named for incarnation {owner.incarnation!r} of "
                f"session {target.key}, not {target.incarnation!r} (the last segment of the "
                f"image's {self.scratch_prefix_attribute})",
            )
        return None

    def _refuse(self, ctx: StepContext, refusal: str) -> str:
        ctx.note(REFUSAL_FIELD, refusal)
        return STEP_REFUSED
