"""Grants on disconnect: a session's KMS grant lives only while a client is connected.

Against the deployed sample app: stores built from the environments of the deployed
``$connect`` and ``$disconnect`` handlers (each with the grantee variable the stack sets, so
``SessionStore``'s ``connected_grant`` is on as in those handlers). Session ``g-1`` is created
with two connections and its grant; detaching one keeps the grant; detaching the last retires it
(``ListGrants`` no longer shows it); a resume creates a new grant bound to the same session; the
session then ends and the deployed cleanup retires that grant. No grant of the session may be
left, and the first may not come back.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from cdk_session_expiry import _runtime_contract as contract

#: The variable the sample stack sets on the handlers that attach and detach connections.
GRANTEE_VARIABLE = "SESSION_GRANTEE_ROLE_ARN"
OPERATIONS = ("Decrypt", "Encrypt")


def run(
    *, emulator: Any, pipeline: Any, say: Callable[[str], None]
) -> tuple[dict[str, Any], list[str]]:
    """Run the phase; returns its summary and the mismatches."""
    (connect, grantee), (disconnect, _) = (_store(emulator, pipeline, n) for n in _HANDLERS)
    kms = emulator.client("kms")
    key_arn = pipeline.function.environment[contract.ENV_GRANT_KEY_ARN]

    def granted() -> set[str]:
        return {g["GrantId"] for g in kms.list_grants(KeyId=key_arn)["Grants"]}

    for connection in ("g-1-c1", "g-1-c2", "g-1-c3"):
        emulator.open_connection(connection)
    connect.create("g-1", ttl=timedelta(hours=1), connection_id="g-1-c1")
    first = connect.create_grant("g-1", grantee_principal=grantee, operations=list(OPERATIONS))
    connect.attach_connection("g-1", "g-1-c2", close_previous=False)
    one_left = disconnect.detach_connection("g-1", "g-1-c1")
    kept = one_left is not None and one_left.grant_id == first.grant_id
    kept = kept and first.grant_id in granted()
    none_left = disconnect.detach_connection("g-1", "g-1-c2")
    retired = none_left is not None and none_left.grant_id is None
    retired = retired and first.grant_id not in granted()
    resumed = connect.attach_connection("g-1", "g-1-c3")
    regranted = bool(resumed.grant_id) and resumed.grant_id != first.grant_id
    regranted = regranted and resumed.grant_id in granted()
    connect.end("g-1")
    pipeline.run_cleanup()
    left = {first.grant_id, resumed.grant_id} & granted()
    summary = {
        "kept_with_one_connection": kept,
        "retired_with_the_last": retired,
        "new_grant_on_resume": regranted,
        "left_after_cleanup": len(left),
    }
    mismatches = [
        f"grants on disconnect: {what}"
        for ok, what in (
            (kept, "detaching one of two connections did not keep the grant"),
            (retired, "detaching the last connection did not retire the grant"),
            (regranted, "a resume did not create a new grant"),
            (not left, f"grants left after the session ended and was cleaned: {sorted(left)}"),
        )
        if not ok
    ]
    say("grants on disconnect: detach, retire, resume, end and clean")
    return summary, mismatches


_HANDLERS = ("ConnectHandler", "DisconnectHandler")


def _store(emulator: Any, pipeline: Any, function: str) -> tuple[Any, str]:
    """A store as ``function`` deployed builds it (its environment, the grant kept only while
    connected when the stack set the grantee variable), and that grantee."""
    from session_expiry_runtime.core.config import RuntimeConfig
    from session_expiry_runtime.store import ConnectedGrant, SessionStore

    env = pipeline.application_env(function)
    grantee = env.get(GRANTEE_VARIABLE)
    if not grantee:
        raise SystemExit(f"the deployed {function} has no {GRANTEE_VARIABLE}: grants on disconnect")
    store = SessionStore(
        dynamodb_client=emulator.client("dynamodb"),
        kms_client=emulator.client("kms"),
        lambda_client=emulator.client("lambda"),  # the claim registrar's Invoke
        # moto serves the management API at its root (see "What differs from AWS").
        connections_client=emulator.client("apigatewaymanagementapi"),
        config=RuntimeConfig.from_env(env),
        connected_grant=ConnectedGrant(grantee, OPERATIONS),
    )
    return store, grantee


def report_line(summary: dict[str, Any]) -> str:
    """One line of the sandbox report."""
    return (
        "grants on disconnect  one of two connections detached: grant "
        f"{'kept' if summary['kept_with_one_connection'] else 'LOST'}; the last detached: "
        f"{'retired' if summary['retired_with_the_last'] else 'NOT RETIRED'}; resume: "
        f"{'new grant bound to the session' if summary['new_grant_on_resume'] else 'NO GRANT'}; "
        f"after the end and the cleanup {summary['left_after_cleanup']} grants left"
    )
