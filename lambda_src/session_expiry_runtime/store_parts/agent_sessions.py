"""The Amazon Bedrock AgentCore sessions a session uses: attach_agent_session, and stopping the
replaced ones.

A session may use several AgentCore sessions of each kind over its life (a runtime session that
idled out, a new browser). Like connections, each kind is recorded in a String Set (every id)
plus a single attribute (the latest; items written before the sets hold only it), and the
cleanup stops every one the removed item names and owns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.agent_sessions import is_runtime_session_id, is_tool_session_id
from ..core.config import (
    ENV_AGENT_RUNTIME_ARN,
    ENV_BROWSER_ID,
    ENV_CODE_INTERPRETER_ID,
    RuntimeConfig,
)
from ..core.kinds import Release, declared_kind
from ..core.ownership import KIND_AGENT_RUNTIME, KIND_BROWSER, KIND_CODE_INTERPRETER
from .claims import ClaimRequest
from .core import Recording, StoreCore
from .errors import LOGGER, describe, gone, is_condition_failure
from .keys import Key, string_set
from .session import Session

#: A session that has already ended answers this (Amazon Bedrock AgentCore API Reference,
#: ``StopRuntimeSession``, ``StopCodeInterpreterSession``, ``StopBrowserSession``): stopped.
_NOT_FOUND = "ResourceNotFoundException"


@dataclass(frozen=True)
class AgentKind:
    """One kind of AgentCore session: its argument, id rule, attributes and Stop operation (the
    operation and its parameters are the kind's declaration's,
    `session_expiry_runtime.core.kinds`)."""

    kind: str  # ownership record kind (``ownership.KIND_*``)
    argument: str
    what: str
    valid: Callable[[object], bool]
    expected: str
    single_field: str  # RuntimeConfig field naming the single attribute
    set_field: str  # RuntimeConfig field naming the String Set attribute
    target_field: str  # RuntimeConfig field naming the target to stop it on
    target_env: str

    @property
    def _release(self) -> Release:
        declared = declared_kind(self.kind)
        assert declared is not None and declared.release is not None
        return declared.release

    @property
    def operation(self) -> str:
        """The bedrock-agentcore client method."""
        return self._release.method

    @property
    def target_parameter(self) -> str:
        return str(self._release.target_parameter)

    @property
    def session_parameter(self) -> str:
        return self._release.id_parameter

    def stop_params(self, config: RuntimeConfig, session_id: str) -> dict[str, str]:
        """The ``Stop…Session`` parameters for one session id (Amazon Bedrock AgentCore API
        Reference; the runtime's endpoint ``qualifier`` when one is configured)."""
        params = {
            self.target_parameter: str(getattr(config, self.target_field)),
            self.session_parameter: session_id,
        }
        if self.kind == KIND_AGENT_RUNTIME and config.agent_runtime_qualifier:
            params["qualifier"] = config.agent_runtime_qualifier
        return params


AGENT_KINDS = (
    AgentKind(
        KIND_AGENT_RUNTIME,
        "runtime_session_id",
        "runtime session id",
        is_runtime_session_id,
        "33-256 characters",
        "agent_runtime_session_attribute",
        "agent_runtime_session_ids_attribute",
        "agent_runtime_arn",
        ENV_AGENT_RUNTIME_ARN,
    ),
    AgentKind(
        KIND_CODE_INTERPRETER,
        "code_interpreter_session_id",
        "code interpreter session id",
        is_tool_session_id,
        "1-40 letters and digits",
        "code_interpreter_session_attribute",
        "code_interpreter_session_ids_attribute",
        "code_interpreter_id",
        ENV_CODE_INTERPRETER_ID,
    ),
    AgentKind(
        KIND_BROWSER,
        "browser_session_id",
        "browser session id",
        is_tool_session_id,
        "1-40 letters and digits",
        "browser_session_attribute",
        "browser_session_ids_attribute",
        "browser_id",
        ENV_BROWSER_ID,
    ),
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
    given = (runtime_session_id, code_interpreter_session_id, browser_session_id)
    ids: list[tuple[AgentKind, str]] = []
    for kind, value in zip(AGENT_KINDS, given, strict=True):
        if value is None:
            continue
        if not kind.valid(value):
            raise ValueError(
                f"{kind.what} {value!r}: expected {kind.expected} (the AgentCore API's)"
            )
        ids.append((kind, value))
    return ids


def agent_session_values(
    config: RuntimeConfig, ids: Iterable[tuple[AgentKind, str]]
) -> dict[str, dict[str, Any]]:
    """The item attributes (low-level form) of a new item's AgentCore sessions: the single
    attribute and the String Set of each kind."""
    values: dict[str, dict[str, Any]] = {}
    for kind, session_id in ids:
        values[getattr(config, kind.single_field)] = {"S": session_id}
        values[getattr(config, kind.set_field)] = {"SS": [session_id]}
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
            names[f"#one{i}"] = getattr(c, kind.single_field)
            names[f"#all{i}"] = getattr(c, kind.set_field)
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
            single, several = getattr(c, kind.single_field), getattr(c, kind.set_field)
            earlier = (string_set(old.get(several)) | _single(old.get(single))) - {agent_session_id}
            mine, marked = self._may_act_on(recording, kind.kind, earlier)
            done = self._stop_sessions(kind, mine, session)
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

    def _stop_sessions(self, kind: AgentKind, session_ids: Iterable[str], session: str) -> set[str]:
        """``Stop…Session`` each id; the ids now stopped (``ResourceNotFoundException``
        counts as stopped)."""
        stopped: set[str] = set()
        for agent_session_id in sorted(session_ids):
            client = self._agentcore_client()
            try:
                getattr(client, kind.operation)(**kind.stop_params(self._config, agent_session_id))
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") != _NOT_FOUND:
                    _cannot_stop(kind, agent_session_id, session)
                    continue
            except BotoCoreError:
                _cannot_stop(kind, agent_session_id, session)
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
            if not getattr(self._config, kind.target_field):
                raise ValueError(
                    f"{kind.target_field} {getattr(self._config, kind.target_field)!r}: "
                    f"attach_agent_session stops the replaced {kind.what}s on it and needs "
                    f"${kind.target_env} (RuntimeConfig.{kind.target_field}); pass "
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


def _cannot_stop(kind: AgentKind, session_id: str, session: str) -> None:
    LOGGER.warning(
        "could not stop %s %s of %s; it stays recorded for the cleanup",
        kind.what,
        session_id,
        session,
        exc_info=True,
    )
