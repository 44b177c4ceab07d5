"""The Amazon Bedrock AgentCore sessions a session uses: attach_agent_session, and stopping the
replaced ones.

A session may use several AgentCore sessions of each kind over its life (a runtime session that
idled out, a new browser). Like connections, each kind is recorded in a String Set (every id)
plus a single attribute (the latest; items written before the sets hold only it), and the
cleanup stops every one the removed item names and owns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.config import RuntimeConfig
from ..core.kind_settings import KindSettings, settings_of
from ..core.kinds import DECLARED_KINDS, OwnProps, ResourceKind
from .claims import ClaimRequest
from .core import Recording, StoreCore
from .errors import LOGGER, describe, gone, is_condition_failure
from .keys import Key, string_set
from .session import Session


@dataclass(frozen=True)
class AgentKind:
    """One kind of AgentCore session ``attach_agent_session`` records: a declared kind with an
    argument of its own (`session_expiry_runtime.core.kinds.OwnProps.argument`); its id rule,
    attributes, target and release call are the declaration's."""

    declared: ResourceKind

    @property
    def own(self) -> OwnProps:
        assert self.declared.own is not None
        return self.declared.own

    @property
    def kind(self) -> str:
        """The ownership records' kind."""
        return self.declared.kind

    @property
    def argument(self) -> str:
        return str(self.own.argument)

    def settings(self, config: RuntimeConfig) -> KindSettings:
        return settings_of(self.declared, config)

    def check(self, value: str) -> None:
        """Raises ValueError naming ``value`` when the AgentCore API would refuse it."""
        if not self.declared.ids.usable(value):
            raise ValueError(
                f"{self.own.what} {value!r}: expected {self.declared.ids.expected} "
                "(the AgentCore API's)"
            )


#: The kinds ``SessionStore.create``/``attach_agent_session`` take an argument of, in
#: declaration order (runtime, code interpreter, browser).
AGENT_KINDS = tuple(
    AgentKind(k) for k in DECLARED_KINDS if k.own is not None and k.own.argument is not None
)


def agent_session_ids(
    runtime_session_id: str | None,
    code_interpreter_session_id: str | None,
    browser_session_id: str | None,
) -> list[tuple[AgentKind, str]]:
    """The AgentCore session ids given, each with its kind.

    Raises:
        ValueError: an id the AgentCore API would refuse; the message names it.
    """
    given = {
        "runtime_session_id": runtime_session_id,
        "code_interpreter_session_id": code_interpreter_session_id,
        "browser_session_id": browser_session_id,
    }
    ids: list[tuple[AgentKind, str]] = []
    for kind in AGENT_KINDS:
        value = given[kind.argument]
        if value is None:
            continue
        kind.check(value)
        ids.append((kind, value))
    return ids


def agent_session_values(
    config: RuntimeConfig, ids: Iterable[tuple[AgentKind, str]]
) -> dict[str, dict[str, Any]]:
    """The item attributes (low-level form) of a new item's AgentCore sessions: the single
    attribute and the String Set of each kind."""
    values: dict[str, dict[str, Any]] = {}
    for kind, session_id in ids:
        settings = kind.settings(config)
        values[str(settings.single_attribute)] = {"S": session_id}
        values[settings.ids_attribute] = {"SS": [session_id]}
    return values


class AgentSessionsPart(StoreCore):
    """attach_agent_session (see [`SessionStore`][session_expiry_runtime.store.SessionStore])."""

    def attach_agent_session(
        self,
        session_id: str,
        *,
        runtime_session_id: str | None = None,
        code_interpreter_session_id: str | None = None,
        browser_session_id: str | None = None,
        partition: str | None = None,
        stop_previous: bool = True,
    ) -> Session:
        """Record AgentCore sessions on a live session; by default stop the ones they replace.

        Each id given is set as the kind's latest (``agentRuntimeSessionId``,
        ``codeInterpreterSessionId``, ``browserSessionId``) and ``ADD``ed to its String Set
        (``agentRuntimeSessionIds``, ...), in one conditional UpdateItem. With ownership records
        (``SESSION_EXPIRY_OWNERSHIP_TABLE_NAME``), each id is first claimed for this session
        incarnation, as
        [`attach_connection`][session_expiry_runtime.store.SessionStore.attach_connection] does (an
        id another live session owns:
        [`ResourceOwnedError`][session_expiry_runtime.store.ResourceOwnedError], nothing written).

        With ``stop_previous`` (the default) every earlier session of each kind given (the set
        and the single attribute as they were before this write) is stopped with
        ``StopRuntimeSession`` / ``StopCodeInterpreterSession`` / ``StopBrowserSession``
        (``ResourceNotFoundException``: already stopped), then removed from the set and its
        ownership record released; of concurrent attaches each stops every session written
        before it. A session that could not be stopped (e.g. ``AccessDeniedException``) is
        logged and stays recorded: the cleanup stops it when the session ends.
        ``stop_previous=False`` keeps the earlier sessions recorded and running.

        Args:
            runtime_session_id: AgentCore Runtime session id (``runtimeSessionId``, 33-256
                characters); stopped on ``SESSION_EXPIRY_AGENT_RUNTIME_ARN`` (and
                ``..._AGENT_RUNTIME_QUALIFIER``).
            code_interpreter_session_id: code interpreter session id (1-40 letters and
                digits); stopped on ``SESSION_EXPIRY_CODE_INTERPRETER_ID``.
            browser_session_id: browser session id (1-40 letters and digits); stopped on
                ``SESSION_EXPIRY_BROWSER_ID``.
            stop_previous: stop the replaced sessions (default); ``False`` keeps them.

        Returns:
            The session after the write; its ``*_session_ids`` hold no session stopped here.

        Raises:
            SessionGoneError: the session is missing or not live; nothing was written.
            ResourceOwnedError: another session owns one of the ids; nothing was written.
            ValueError: no id given, an id the AgentCore API would refuse, or
                ``stop_previous`` with a kind whose target is not configured (named, with its
                environment variable); nothing was written.
        """
        key = self._key(session_id, partition)
        ids = agent_session_ids(runtime_session_id, code_interpreter_session_id, browser_session_id)
        if not ids:
            raise ValueError(
                "attach_agent_session: expected at least one of runtime_session_id, "
                "code_interpreter_session_id, browser_session_id"
            )
        if stop_previous:
            self._check_stop_targets(kind for kind, _ in ids)
        recording = self._recording(key, session_id, partition)
        requests = [r for kind, i in ids for r in recording.claims(kind.kind, [i])]
        item = self._claimed(
            requests,
            lambda: self._record_agent_sessions(
                key, session_id, partition, ids, recording, stop_previous
            ),
        )
        if not stop_previous:
            return self._to_session(item)
        return self._stop_replaced(key, item, ids, recording, describe(session_id, partition))

    def _record_agent_sessions(
        self,
        key: Key,
        session_id: str,
        partition: str | None,
        ids: Sequence[tuple[AgentKind, str]],
        recording: Recording,
        stop_previous: bool,
    ) -> dict[str, Any]:
        """The conditional UpdateItem; the item before it (``stop_previous``) or after it.

        Raises:
            SessionGoneError: the session (this incarnation) is missing or not live.
        """
        c = self._config
        names: dict[str, str] = dict(recording.names)
        values: dict[str, Any] = dict(recording.values)
        sets, adds = [], []
        for i, (kind, agent_session_id) in enumerate(ids):
            settings = kind.settings(c)
            names[f"#one{i}"] = str(settings.single_attribute)
            names[f"#all{i}"] = settings.ids_attribute
            values[f":one{i}"] = {"S": agent_session_id}
            values[f":all{i}"] = {"SS": [agent_session_id]}
            sets.append(f"#one{i} = :one{i}")
            adds.append(f"#all{i} :all{i}")
        written, _ = self._try_update(
            key,
            self._now(),
            f"SET {', '.join(sets)} ADD {', '.join(adds)}",
            names,
            values,
            recording.condition,
            return_values="ALL_OLD" if stop_previous else "ALL_NEW",
        )
        if written is None:
            raise gone(session_id, partition)
        return written

    def _stop_replaced(
        self,
        key: Key,
        old: Mapping[str, Any],
        ids: Sequence[tuple[AgentKind, str]],
        recording: Recording,
        session: str,
    ) -> Session:
        """Stop every earlier session of the kinds given that this incarnation owns; forget
        and release those stopped; the session as it is after that."""
        c = self._config
        after = dict(old)
        stopped: dict[str, set[str]] = {}
        settle: list[tuple[list[ClaimRequest], set[str]]] = []
        for kind, agent_session_id in ids:
            settings = kind.settings(c)
            single, several = str(settings.single_attribute), settings.ids_attribute
            earlier = (string_set(old.get(several)) | _single(old.get(single))) - {agent_session_id}
            mine, marked = self._may_act_on(recording, kind.kind, earlier)
            done = self._stop_sessions(settings, mine, session)
            settle.append((marked, done))
            after[single] = {"S": agent_session_id}
            after[several] = {"SS": sorted(earlier - done | {agent_session_id})}
            if done:
                stopped[several] = done
        if stopped:  # forgotten before released: the item never names an id it gave up
            after = self._forget(key, stopped) or after
        for marked, done in settle:
            self._settle(marked, done)
        return self._to_session(after)

    def _stop_sessions(
        self, settings: KindSettings, session_ids: Iterable[str], session: str
    ) -> set[str]:
        """The kind's declared release call (``Stop…Session``, with the options configured)
        for each id; the ids now stopped (a declared "gone" answer counts as stopped)."""
        release = settings.kind.release
        assert release is not None  # every AgentKind declares its call
        stopped: set[str] = set()
        for agent_session_id in sorted(session_ids):
            client = self._agentcore_client()
            try:
                getattr(client, release.method)(**settings.release_params(agent_session_id))
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") not in release.gone:
                    _cannot_stop(settings.kind, agent_session_id, session)
                    continue
            except BotoCoreError:
                _cannot_stop(settings.kind, agent_session_id, session)
                continue
            stopped.add(agent_session_id)
        return stopped

    def _forget(self, key: Key, stopped: Mapping[str, set[str]]) -> dict[str, Any] | None:
        """Remove stopped ids from their String Sets; the item after it, ``None`` if gone."""
        names = {"#pk": self._config.partition_key}
        values: dict[str, Any] = {}
        for i, (attribute, ids) in enumerate(sorted(stopped.items())):
            names[f"#set{i}"] = attribute
            values[f":gone{i}"] = {"SS": sorted(ids)}
        try:
            resp = self._ddb.update_item(
                TableName=self.table_name,
                Key=key,
                UpdateExpression="DELETE "
                + ", ".join(f"#set{i} :gone{i}" for i in range(len(stopped))),
                # Never create an item: a session that ended meanwhile stays ended.
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as err:
            if not is_condition_failure(err):
                raise
            return None
        return dict(resp.get("Attributes") or {}) or None

    def _check_stop_targets(self, kinds: Iterable[AgentKind]) -> None:
        for kind in kinds:
            field = kind.own.target_field
            if not getattr(self._config, field):
                raise ValueError(
                    f"{field} {getattr(self._config, field)!r}: "
                    f"attach_agent_session stops the replaced {kind.own.what}s on it and needs "
                    f"${kind.own.target_env} (RuntimeConfig.{field}); pass "
                    "stop_previous=False to keep them running"
                )

    def _agentcore_client(self) -> Any:
        if self._agentcore is None:
            import boto3

            self._agentcore = boto3.client("bedrock-agentcore")
        return self._agentcore


def _single(value: object) -> set[str]:
    if isinstance(value, Mapping) and isinstance(value.get("S"), str):
        return {str(value["S"])}
    return set()


def _cannot_stop(kind: ResourceKind, session_id: str, session: str) -> None:
    LOGGER.warning(
        "could not stop %s %s of %s; it stays recorded for the cleanup",
        kind.label,
        session_id,
        session,
        exc_info=True,
    )
