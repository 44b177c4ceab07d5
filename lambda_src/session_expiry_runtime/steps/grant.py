"""``RetireGrant``: retire the session's KMS grant.

By ``GrantToken`` when the old image holds one (tokens are never logged), else by ``GrantId``
and the configured key ARN. ``NotFoundException`` means already retired: ``already-done``.
The cleanup may retire the grant only because it is the grant's retiring principal (AWS KMS
Developer Guide, "Retiring and revoking grants").
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..clients import CleanupClients
from ..config import ACTION_RETIRE_GRANT, RuntimeConfig
from ..outcomes import STEP_ALREADY_DONE, STEP_DONE, StepFailed, error_code, error_text
from .base import CleanupStep, Plan, Session, StepContext, nonempty_str


class GrantStep(CleanupStep):
    name = ACTION_RETIRE_GRANT

    def __init__(self, config: RuntimeConfig, kms: Any) -> None:
        self.kms = kms
        self.key_arn = config.grant_key_arn
        self.attributes = (config.grant_token_attribute, config.grant_id_attribute)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> GrantStep | None:
        return cls(config, clients.kms) if clients.kms is not None else None

    def plan(self, session: Session) -> Plan:
        image = session.image
        values = {name: nonempty_str(image.get(name)) for name in self.attributes}
        invalid = [n for n in self.attributes if n in image and values[n] is None]
        token, grant_id = (values[n] for n in self.attributes)
        if token is None and grant_id is None:
            missing = [n for n in self.attributes if n not in image]
            return Plan.missing_attributes(missing=missing, invalid=invalid)
        by = "GrantToken" if token else "GrantId"  # tokens are not logged
        return Plan.run(
            (token, grant_id), log={"grantId": grant_id, "grantBy": by}, invalid=invalid
        )

    def run(self, plan: Plan, ctx: StepContext) -> str:
        token, grant_id = plan.payload
        return self.retire_grant(grant_token=token, grant_id=grant_id)

    def retire_grant(self, *, grant_token: str | None, grant_id: str | None) -> str:
        """RetireGrant by token, else by id + key ARN; ``NotFoundException`` is success."""
        params = (
            {"GrantToken": grant_token}
            if grant_token
            else {"GrantId": grant_id, "KeyId": self.key_arn}
        )
        try:
            self.kms.retire_grant(**params)
        except ClientError as exc:
            if error_code(exc) == "NotFoundException":
                return STEP_ALREADY_DONE
            raise StepFailed(self.name, error_text(exc)) from exc
        except BotoCoreError as exc:
            raise StepFailed(self.name, error_text(exc)) from exc
        return STEP_DONE
