"""Sandbox phase (issue 20): the cleanup acts only on what the removed incarnation owns.

1. **A tenant forging records against another tenant.** ``tenant-b`` has live sessions, each
   with a WebSocket connection, a runtime, code interpreter and browser session (registered as
   running in the emulator), a KMS grant and scratch objects, all recorded by ``SessionStore``.
   ``tenant-a``, another writer of the same table:

   a. asks ``SessionStore.create`` for sessions holding tenant-b's connection and AgentCore ids:
      every create is refused (``ResourceOwnedError``, naming both sessions) and writes nothing;
   b. writes items itself, as a writer that bypasses ``SessionStore`` would (raw ``PutItem``: an
      incarnation of its own, tenant-b's connection ids, AgentCore session ids, grant id and
      token and scratch prefix; every other item with ``notAfter`` forged to 1, which must not
      make the refusal a counted-only one), and deletes them. The deployed cleanup refuses every
      id under the alarmed cause (``ResourcesRefused`` ``NotOwned``) and the prefix
      (``ScratchPrefixesRefused``);
   c. asks the deployed claim registrar to release, undo and re-claim tenant-b's ids, without a
      claim token and with a made-up one: every request is refused and changes nothing.

   Tenant-b's connections must still be open, its AgentCore sessions running, its grants
   listed and its objects in place: **0 foreign resources touched**.
2. **A reuse-after-expiry storm.** Session ids used with a stable connection id and runtime
   session id (a conversation id per user, say) expire and are created again with the same ids:
   half after their old incarnation's cleanup ran (REMOVE before the re-create), half before it
   (``create`` deletes the expired item itself; REMOVE after the re-create). Every old
   incarnation's grant and objects are gone; every new incarnation's connection is open, its
   runtime session running, its grant listed and its objects in place; the old incarnations'
   late REMOVEs leave the ids the new ones hold alone (``Superseded``, counted, not alarmed).

Everything ends at the end of the phase and is cleaned, so the scenario's own checks stay as
they were. What differs from AWS: connections, AgentCore sessions and grant creation are the
emulator's (see "What differs from AWS" in the docs).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.testing.agentcore import BROWSER, CODE_INTERPRETER, RUNTIME

#: Tenant-b's live sessions, and the ids of the reuse storm (half in each order).
VICTIMS = 6
STORM = 12
_OBJECTS = ("notes.txt", "out/result.json")


@dataclass
class Held:
    """One session's resources, as recorded by the store."""

    session_id: str
    connection_id: str
    agent_ids: tuple[str, str, str]
    grant_id: str
    grant_token: str
    scratch_prefix: str
    keys: list[str] = field(default_factory=list)


@dataclass
class Phase:
    """The deployed pipeline and what the phase needs of it."""

    emulator: Any
    pipeline: Any
    store: Any
    past_store: Any
    bucket: str
    grantee: str
    targets: tuple[str, str, str]
    mismatches: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.mismatches.append(f"ownership: {what}")

    def open_session(
        self, store: Any, session_id: str, *, tenant: str, ttl: timedelta, reuse: Held | None = None
    ) -> Held:
        """A session with a connection, three AgentCore sessions, a grant and objects."""
        connection = reuse.connection_id if reuse else f"conn-{uuid.uuid4().hex[:12]}"
        agents = reuse.agent_ids if reuse else _agent_ids()
        self.emulator.open_connection(connection)
        for kind, target, agent_id in zip(
            (RUNTIME, CODE_INTERPRETER, BROWSER), self.targets, agents, strict=True
        ):
            self.emulator.start_agent_session(kind, target, agent_id)
        store.create(
            session_id,
            ttl=ttl,
            tenant_id=tenant,
            connection_id=connection,
            runtime_session_id=agents[0],
            code_interpreter_session_id=agents[1],
            browser_session_id=agents[2],
        )
        session = store.create_grant(
            session_id, grantee_principal=self.grantee, operations=["Decrypt"]
        )
        held = Held(
            session_id,
            connection,
            agents,
            session.grant_id or "",
            session.grant_token or "",
            session.scratch_prefix or "",
        )
        s3 = self.emulator.client("s3")
        held.keys = [held.scratch_prefix + name for name in _OBJECTS]
        for key in held.keys:
            s3.put_object(Bucket=self.bucket, Key=key, Body=b"scratch")
        return held

    def untouched(self, held: Held) -> list[str]:
        """What of ``held`` is no longer there (empty: untouched)."""
        gone = []
        if held.connection_id not in self.emulator.open_connection_ids():
            gone.append(f"connection {held.connection_id}")
        running = {s for _, s in self.emulator.agentcore.running()}
        gone += [f"agent session {a}" for a in held.agent_ids if a not in running]
        if held.grant_id not in self._grants():
            gone.append(f"grant {held.grant_id[:8]}")
        if set(held.keys) - self._keys(held.scratch_prefix):
            gone.append(f"objects under {held.scratch_prefix}")
        return gone

    def cleaned(self, held: Held) -> bool:
        return held.grant_id not in self._grants() and not self._keys(held.scratch_prefix)

    def refused(self, refusal: str) -> int:
        metrics = self.pipeline.metrics
        return int(metrics.total(contract.METRIC_RESOURCES_REFUSED, Refusal=refusal))

    def _grants(self) -> set[str]:
        kms = self.emulator.client("kms")
        key_arn = self.pipeline.function.environment[contract.ENV_GRANT_KEY_ARN]
        return {
            g["GrantId"]
            for page in kms.get_paginator("list_grants").paginate(KeyId=key_arn)
            for g in page["Grants"]
        }

    def _keys(self, prefix: str) -> set[str]:
        listed = self.emulator.client("s3").list_objects_v2(Bucket=self.bucket, Prefix=prefix)
        return {o["Key"] for o in listed.get("Contents", [])}


def _agent_ids() -> tuple[str, str, str]:
    return (f"sandbox-runtime-{uuid.uuid4().hex}", uuid.uuid4().hex[:24], uuid.uuid4().hex[:24])


def _forged_item(
    phase: Phase, session_id: str, victim: Held, *, ended_long_ago: bool
) -> dict[str, Any]:
    """An item of tenant-a naming every resource of tenant-b's ``victim`` (raw ``PutItem``);
    ``ended_long_ago`` forges ``notAfter`` to 1 (1970), the attribute that once turned an
    alarmed refusal into a counted-only one (issue 35, route 3)."""
    c = phase.store.config
    forged_end = {c.not_after_attribute: {"N": "1"}} if ended_long_ago else {}
    return {
        **forged_end,
        c.partition_key: {"S": session_id},
        c.ttl_attribute: {"N": str(10**10)},
        c.incarnation_attribute: {"S": uuid.uuid4().hex},
        c.tenant_attribute: {"S": "tenant-a"},
        c.connection_id_attribute: {"S": victim.connection_id},
        c.connection_ids_attribute: {"SS": [victim.connection_id]},
        c.agent_runtime_session_ids_attribute: {"SS": [victim.agent_ids[0]]},
        c.code_interpreter_session_ids_attribute: {"SS": [victim.agent_ids[1]]},
        c.browser_session_ids_attribute: {"SS": [victim.agent_ids[2]]},
        c.grant_id_attribute: {"S": victim.grant_id},
        c.grant_token_attribute: {"S": victim.grant_token},
        c.scratch_prefix_attribute: {"S": victim.scratch_prefix},
    }


def _tenant_forgery(phase: Phase) -> dict[str, Any]:
    from session_expiry_runtime.store import ResourceOwnedError

    victims = [
        phase.open_session(phase.store, f"tb-{i}", tenant="tenant-b", ttl=timedelta(hours=1))
        for i in range(1, VICTIMS + 1)
    ]
    refused_at_write = 0
    for i, victim in enumerate(victims, start=1):
        try:
            phase.store.create(
                f"ta-ask-{i}",
                tenant_id="tenant-a",
                connection_id=victim.connection_id,
                runtime_session_id=victim.agent_ids[0],
                code_interpreter_session_id=victim.agent_ids[1],
                browser_session_id=victim.agent_ids[2],
            )
        except ResourceOwnedError:
            refused_at_write += 1
    written = phase.store.get(f"ta-ask-{VICTIMS}") is not None
    before = phase.refused(contract.REFUSAL_NOT_OWNED)
    sent_before = phase.pipeline.run_cleanup().records_sent_to_on_failure
    ddb, table = phase.emulator.client("dynamodb"), phase.store.table_name
    for i, victim in enumerate(victims, start=1):
        item = _forged_item(phase, f"ta-forged-{i}", victim, ended_long_ago=i % 2 == 0)
        ddb.put_item(TableName=table, Item=item)
        key = phase.store.config.partition_key
        ddb.delete_item(TableName=table, Key={key: item[key]})
    report = phase.pipeline.run_cleanup()
    asked = _ask_the_registrar(phase, victims)
    touched = {v.session_id: phase.untouched(v) for v in victims}
    foreign = sum(len(t) for t in touched.values())
    not_owned = phase.refused(contract.REFUSAL_NOT_OWNED) - before
    phase.check(refused_at_write == VICTIMS and not written, "a create with another's ids wrote")
    phase.check(foreign == 0, f"tenant-b resources touched: {touched}")
    phase.check(not_owned == 5 * VICTIMS, f"NotOwned {not_owned}, expected {5 * VICTIMS}")
    phase.check(
        report.records_sent_to_on_failure == sent_before,
        "forged records reached the failure queue",
    )
    for victim in victims:
        phase.store.end(victim.session_id)
    phase.pipeline.run_cleanup()
    phase.check(all(phase.cleaned(v) for v in victims), "tenant-b's own end did not clean it")
    return {
        "victims": VICTIMS,
        "refused_at_write": refused_at_write,
        "not_owned": not_owned,
        "foreign_touched": foreign,
        "registrar_requests": asked,
    }


def _ask_the_registrar(phase: Phase, victims: list[Held]) -> int:
    """Tenant-a asks the deployed claim registrar (a real ``Invoke``, answered by its deployed
    code) to release, undo and re-claim each of tenant-b's ids, naming tenant-b's key and live
    incarnation (or a made-up one) but not its claim token, which only a reader of tenant-b's
    item has — once without a token and once with a made-up one: every request is refused and
    leaves tenant-b's ownership records as they were. Returns how many requests were made."""
    import json

    function = phase.store.config.claim_registrar_function
    phase.check(bool(function), "the application's functions have no claim registrar")
    if not function:
        return 0
    lam, ddb = phase.emulator.client("lambda"), phase.emulator.client("dynamodb")
    table = phase.store.config.ownership_table_name
    key_name = phase.store.config.partition_key
    asked = 0
    for victim in victims:
        live = phase.store.get(victim.session_id, consistent=True)
        assert live is not None and live.incarnation is not None
        resources = [["connection", victim.connection_id], ["grant", victim.grant_id]]
        records = [
            ddb.get_item(TableName=table, Key={"resource": {"S": f"{k}#{i}"}}, ConsistentRead=True)
            for k, i in resources
        ]
        made_up = uuid.uuid4().hex
        asks = (("release", live.incarnation), ("undo", live.incarnation), ("claim", made_up))
        for (op, incarnation), token in itertools.product(asks, (None, uuid.uuid4().hex)):
            request = {
                "op": op,
                "key": {key_name: victim.session_id},
                "incarnation": incarnation,
                "resources": resources,
                **({} if token is None else {"token": token}),
            }
            answer = lam.invoke(FunctionName=function, Payload=json.dumps(request).encode())
            body = json.loads(answer["Payload"].read())
            asked += 1
            changed = (
                body.get("released") or body.get("undone") or (body.get("ok") and op == "claim")
            )
            phase.check(not changed, f"the registrar did {op} for tenant-a: {body}")
        after = [
            ddb.get_item(TableName=table, Key={"resource": {"S": f"{k}#{i}"}}, ConsistentRead=True)
            for k, i in resources
        ]
        phase.check(
            [r.get("Item") for r in after] == [r.get("Item") for r in records],
            f"tenant-b's ownership records of {victim.session_id} changed",
        )
    return asked


def _reuse_storm(phase: Phase) -> dict[str, Any]:
    ids = [f"reuse-{i}" for i in range(1, STORM + 1)]
    before_ids, after_ids = ids[: STORM // 2], ids[STORM // 2 :]
    old = {
        sid: phase.open_session(phase.past_store, sid, tenant="tenant-r", ttl=timedelta(minutes=1))
        for sid in ids
    }
    key = phase.store.config.partition_key
    for sid in before_ids:  # REMOVE before the re-create: TTL deletes, the cleanup runs
        phase.pipeline.ttl_delete({key: {"S": sid}})
    phase.pipeline.run_cleanup()
    superseded_before = phase.refused(contract.REFUSAL_SUPERSEDED)
    new = {
        sid: phase.open_session(
            phase.store, sid, tenant="tenant-r", ttl=timedelta(hours=1), reuse=old[sid]
        )
        for sid in ids
    }  # the after-half's create deletes the expired item: its REMOVE follows
    phase.pipeline.run_cleanup()
    superseded = phase.refused(contract.REFUSAL_SUPERSEDED) - superseded_before
    old_cleaned = sum(phase.cleaned(old[sid]) for sid in ids)
    new_touched = {sid: phase.untouched(new[sid]) for sid in ids}
    new_intact = sum(not t for t in new_touched.values())
    phase.check(old_cleaned == STORM, f"old incarnations cleaned {old_cleaned}/{STORM}")
    phase.check(new_intact == STORM, f"new incarnations touched: {new_touched}")
    phase.check(
        superseded == 4 * len(after_ids),
        f"Superseded {superseded}, expected "
        f"{4 * len(after_ids)} (connection and three AgentCore ids of each)",
    )
    for sid in ids:
        phase.store.end(sid)
    phase.pipeline.run_cleanup()
    phase.check(all(phase.cleaned(new[sid]) for sid in ids), "the new incarnations' end failed")
    return {
        "ids": STORM,
        "before": len(before_ids),
        "after": len(after_ids),
        "old_cleaned": old_cleaned,
        "new_intact": new_intact,
        "superseded": superseded,
    }


def run(
    *,
    emulator: Any,
    pipeline: Any,
    store: Any,
    past_store: Any,
    bucket: str,
    grantee: str,
    say: Callable[[str], None],
) -> tuple[dict[str, Any], list[str]]:
    """Run both parts; returns the summary and the mismatches."""
    env: Mapping[str, str] = pipeline.function.environment
    targets = (
        env.get(contract.ENV_AGENT_RUNTIME_ARN, ""),
        env.get(contract.ENV_CODE_INTERPRETER_ID, ""),
        env.get(contract.ENV_BROWSER_ID, ""),
    )
    if not all(targets):
        raise SystemExit(f"the deployed cleanup function has no AgentCore targets: {targets}")
    phase = Phase(emulator, pipeline, store, past_store, bucket, grantee, targets)
    tenants = _tenant_forgery(phase)
    say(
        f"ownership: tenant-a asked for {tenants['refused_at_write']} sessions with tenant-b's ids "
        f"(all refused at write) and ended {VICTIMS} forged items naming tenant-b's resources: "
        f"{tenants['not_owned']} ids refused NotOwned, {tenants['foreign_touched']} foreign "
        f"resources touched; {tenants['registrar_requests']} requests to the claim registrar for "
        "tenant-b's ids changed nothing"
    )
    storm = _reuse_storm(phase)
    say(
        f"ownership: reuse storm of {storm['ids']} ids ({storm['before']} re-created after the old "
        f"cleanup, {storm['after']} before it): old incarnations cleaned {storm['old_cleaned']}, "
        f"new untouched {storm['new_intact']}, Superseded {storm['superseded']}"
    )
    return {"tenants": tenants, "storm": storm}, phase.mismatches


def report_line(summary: dict[str, Any]) -> str:
    """Two lines of the sandbox report."""
    t, s = summary["tenants"], summary["storm"]
    return (
        f"ownership         tenant forgery: {t['refused_at_write']}/{t['victims']} creates with "
        f"another tenant's ids refused; forged items ended: NotOwned {t['not_owned']}, foreign "
        f"resources touched {t['foreign_touched']}; registrar requests for its ids "
        f"{t['registrar_requests']}, none applied\n"
        f"                  reuse after expiry: {s['ids']} ids ({s['before']} REMOVE before, "
        f"{s['after']} after the re-create): old cleaned {s['old_cleaned']}/{s['ids']}, new "
        f"untouched {s['new_intact']}/{s['ids']} (Superseded {s['superseded']})"
    )
