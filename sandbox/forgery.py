"""Forgery phase: an item written by another writer of the table names a live session's grant
and scratch prefix, then ends; the deployed cleanup must touch neither.

A live session ``victim-1`` is created by ``SessionStore`` (a grant named for it, scratch
objects). Another writer puts item ``forged-1`` holding the victim's ``grantId``,
``grantToken`` and ``scratchPrefix``, and deletes it (an explicit end). The deployed mapping
delivers the REMOVE to the deployed handler: its ``ListGrants`` shows the grant is named for
``victim-1``, not ``forged-1`` (refused, ``GrantsRefused``), and the prefix is not
``forged-1``'s own (refused, ``ScratchPrefixesRefused``). The victim's grant and objects must
still be there. What moto does not check (who may retire the grant) is irrelevant here: the
cleanup never asks.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from cdk_session_expiry import _runtime_contract as contract


def run(
    *,
    emulator: Any,
    pipeline: Any,
    store: Any,
    bucket: str,
    grantee: str,
    say: Callable[[str], None],
) -> tuple[dict[str, Any], list[str]]:
    """Run the phase; returns its summary and the mismatches."""
    s3, kms = emulator.client("s3"), emulator.client("kms")
    key_arn = pipeline.function.environment[contract.ENV_GRANT_KEY_ARN]
    store.create("victim-1", ttl=timedelta(hours=1))
    victim = store.create_grant("victim-1", grantee_principal=grantee, operations=["Decrypt"])
    keys = [f"{victim.scratch_prefix}{name}" for name in ("a.txt", "b/c.bin")]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    config, ddb = store.config, emulator.client("dynamodb")
    forged_key = {config.partition_key: {"S": "forged-1"}}
    ddb.put_item(
        TableName=store.table_name,
        Item={
            **forged_key,
            config.ttl_attribute: {"N": str(victim.expires_at)},
            config.grant_id_attribute: {"S": victim.grant_id},
            config.grant_token_attribute: {"S": victim.grant_token},
            config.scratch_prefix_attribute: {"S": victim.scratch_prefix},
        },
    )
    metrics = pipeline.metrics
    before = {m: metrics.total(m) for m in _REFUSALS}
    ddb.delete_item(TableName=store.table_name, Key=forged_key)
    pipeline.run_cleanup()
    refused = {m: int(metrics.total(m) - before[m]) for m in _REFUSALS}
    answer = kms.list_grants(KeyId=key_arn, GrantId=victim.grant_id)
    grants = {g["GrantId"] for g in answer["Grants"]}
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=victim.scratch_prefix).get("Contents", [])
    summary = {
        "grant_kept": victim.grant_id in grants,
        "objects_kept": sorted(o["Key"] for o in listed) == sorted(keys),
        "refused": refused,
    }
    mismatches = [
        f"forgery: {what}"
        for ok, what in (
            (summary["grant_kept"], "a live session's grant was retired through a forged item"),
            (summary["objects_kept"], "a live session's objects were deleted through a forgery"),
            (refused == {m: 1 for m in _REFUSALS}, f"refusals counted {refused}, expected 1 each"),
        )
        if not ok
    ]
    say("forgery: an item naming a live session's grant and prefix ended and cleaned")
    store.end("victim-1")
    pipeline.run_cleanup()  # the victim's own end cleans it as usual
    return summary, mismatches


_REFUSALS = (contract.METRIC_GRANTS_REFUSED, contract.METRIC_PREFIXES_REFUSED)


def report_line(summary: dict[str, Any]) -> str:
    """One line of the sandbox report."""
    refused = summary["refused"]
    return (
        "forgery           an item holding a live session's grant and prefix, ended: grant "
        f"{'kept' if summary['grant_kept'] else 'RETIRED'}, objects "
        f"{'kept' if summary['objects_kept'] else 'DELETED'}; GrantsRefused "
        f"{refused[contract.METRIC_GRANTS_REFUSED]}, ScratchPrefixesRefused "
        f"{refused[contract.METRIC_PREFIXES_REFUSED]}"
    )
