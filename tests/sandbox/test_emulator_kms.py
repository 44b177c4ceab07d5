"""KMS grants in the emulator: concurrent retirements on one key all take effect, as on AWS.

moto's ``Key.retire_grant_by_token`` rebuilds the key's grant dict without a lock, so two
RetireGrant calls (or a RetireGrant and a CreateGrant) answered at the same time on one key can
lose one of the changes; the emulator answers KMS requests one at a time.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

from cdk_session_expiry.testing import LocalEmulator

GRANTS = 200


def test_concurrent_retirements_by_token_on_one_key_all_take_effect(
    emulator: LocalEmulator,
) -> None:
    kms = emulator.client("kms")
    key = kms.create_key(Description="grants")["KeyMetadata"]["Arn"]
    role = f"arn:aws:iam::{emulator.account_id}:role/app"
    tokens = [
        kms.create_grant(KeyId=key, GranteePrincipal=role, Operations=["Decrypt"])["GrantToken"]
        for _ in range(GRANTS)
    ]

    # The emulator's server runs in this process: switch threads often, as a loaded machine
    # does, so that moto's unlocked read-modify-write of the grants would lose retirements.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(lambda token: kms.retire_grant(GrantToken=token), tokens))
    finally:
        sys.setswitchinterval(interval)

    assert kms.list_grants(KeyId=key)["Grants"] == []
