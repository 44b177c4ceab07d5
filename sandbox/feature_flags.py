"""Feature flags: a step switched off and on again, and ``enabled`` off, with nothing lost.

Against the deployed sample app (``feature_flags=True``), as an operator does it: the kill
switch's ``flags set`` (``pipeline.set_feature_flags``: a new hosted version and its deployment
in the emulator's AppConfig) switches ``DeleteScratch`` off; sessions ``ff-1``..``ff-3`` end and
are cleaned — connection and grant released, scratch objects kept and deferred; a drain while the
flag is off does nothing; back on, the drain deletes every deferred prefix once (a second drain
finds nothing). Then ``enabled`` off: session ``ff-4`` ends, the cleanup calls no target (its
grant and objects stay); back on, the drain cleans it whole. Every flag is on again at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from cdk_session_expiry import _runtime_contract as contract

STEP = contract.ACTION_DELETE_SCRATCH
SESSIONS = ("ff-1", "ff-2", "ff-3")


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
    s3 = emulator.client("s3")

    def objects(prefix: str) -> int:
        return len(s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []))

    def session(session_id: str) -> Any:
        created = store.create(session_id, ttl=timedelta(hours=1))
        for name in ("a.txt", "b/c.bin"):
            s3.put_object(Bucket=bucket, Key=f"{created.scratch_prefix}{name}", Body=b"x")
        return store.create_grant(session_id, grantee_principal=grantee, operations=["Decrypt"])

    step_off = _step_off_and_on(pipeline, store, [session(s) for s in SESSIONS], objects, emulator)
    whole = _enabled_off_and_on(pipeline, store, session("ff-4"), objects, emulator)
    summary = {**step_off, **whole}
    mismatches = [
        f"feature flags: {what}"
        for ok, what in (
            (summary["kept_while_off"] == len(SESSIONS), "scratch not kept while the step was off"),
            (summary["others_ran"], "the other steps did not run while the step was off"),
            (summary["drained_while_off"] == 0, "the drain acted while the flag was off"),
            (summary["drained"] == len(SESSIONS), f"the drain did {summary['drained']}"),
            (summary["left_after_drain"] == 0, "scratch left after the drain"),
            (summary["drained_twice"] == 0, "a second drain found work"),
            (summary["untouched_while_disabled"], "a target was called while enabled was off"),
            (summary["cleaned_after_enabled"], "enabled on again: the session was not cleaned"),
        )
        if not ok
    ]
    say("feature flags: a step off and on again, enabled off and on again, drained")
    return summary, mismatches


def _grants(emulator: Any, pipeline: Any) -> set[str]:
    key_arn = pipeline.function.environment[contract.ENV_GRANT_KEY_ARN]
    return {g["GrantId"] for g in emulator.client("kms").list_grants(KeyId=key_arn)["Grants"]}


def _step_off_and_on(
    pipeline: Any, store: Any, sessions: list[Any], objects: Any, emulator: Any
) -> dict[str, Any]:
    pipeline.set_feature_flags(**{STEP: False})
    for s in sessions:
        store.end(s.session_id)
    pipeline.run_cleanup()
    kept = sum(1 for s in sessions if objects(s.scratch_prefix) == 2)
    granted = _grants(emulator, pipeline)
    others_ran = not any(s.grant_id in granted for s in sessions)
    while_off = pipeline.drain_deferred()["done"].get(STEP, 0)
    pipeline.set_feature_flags(**{STEP: True})
    drained = pipeline.drain_deferred()["done"].get(STEP, 0)
    twice = sum(pipeline.drain_deferred()["done"].values())
    return {
        "kept_while_off": kept,
        "others_ran": others_ran,
        "drained_while_off": while_off,
        "drained": drained,
        "left_after_drain": sum(1 for s in sessions if objects(s.scratch_prefix)),
        "drained_twice": twice,
    }


def _enabled_off_and_on(
    pipeline: Any, store: Any, session: Any, objects: Any, emulator: Any
) -> dict[str, Any]:
    pipeline.set_feature_flags(enabled=False)
    store.end(session.session_id)
    pipeline.run_cleanup()
    untouched = objects(session.scratch_prefix) == 2
    untouched = untouched and session.grant_id in _grants(emulator, pipeline)
    pipeline.set_feature_flags(enabled=True)
    done = pipeline.drain_deferred()["done"].get("*", 0)
    cleaned = done == 1 and objects(session.scratch_prefix) == 0
    cleaned = cleaned and session.grant_id not in _grants(emulator, pipeline)
    return {"untouched_while_disabled": untouched, "cleaned_after_enabled": cleaned}


def report_line(summary: dict[str, Any]) -> str:
    """One line of the sandbox report."""
    return (
        f"feature flags     {STEP} off: {summary['kept_while_off']}/{len(SESSIONS)} sessions "
        f"cleaned with scratch kept (other steps "
        f"{'ran' if summary['others_ran'] else 'DID NOT RUN'}), drain while off "
        f"{summary['drained_while_off']}; back on: drained {summary['drained']}, "
        f"{summary['left_after_drain']} left, second drain {summary['drained_twice']}; "
        f"enabled off: {'no target called' if summary['untouched_while_disabled'] else 'CALLED'}"
        f", back on: {'cleaned once' if summary['cleaned_after_enabled'] else 'NOT CLEANED'}"
    )
