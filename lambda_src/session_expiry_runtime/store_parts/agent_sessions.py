"""The Amazon Bedrock AgentCore sessions a session uses: attach_agent_session."""

from __future__ import annotations

from ..agent_sessions import is_runtime_session_id, is_tool_session_id
from ..config import RuntimeConfig
from .core import StoreCore
from .session import Session


def agent_session_values(
    config: RuntimeConfig,
    runtime_session_id: str | None,
    code_interpreter_session_id: str | None,
    browser_session_id: str | None,
) -> dict[str, dict[str, str]]:
    """The item attributes (low-level form) of the AgentCore session ids given.

    Raises:
        ValueError: an id the AgentCore API would refuse; the message names it.
    """
    c = config
    checks = (
        (
            c.agent_runtime_session_attribute,
            runtime_session_id,
            "runtime session id",
            is_runtime_session_id,
            "33-256 characters",
        ),
        (
            c.code_interpreter_session_attribute,
            code_interpreter_session_id,
            "code interpreter session id",
            is_tool_session_id,
            "1-40 letters and digits",
        ),
        (
            c.browser_session_attribute,
            browser_session_id,
            "browser session id",
            is_tool_session_id,
            "1-40 letters and digits",
        ),
    )
    values: dict[str, dict[str, str]] = {}
    for attribute, value, what, valid, expected in checks:
        if value is None:
            continue
        if not valid(value):
            raise ValueError(f"{what} {value!r}: expected {expected} (the AgentCore API's)")
        values[attribute] = {"S": value}
    return values


class AgentSessionsPart(StoreCore):
    """attach_agent_session (see :class:`SessionStore`)."""

    def attach_agent_session(
        self,
        session_id: str,
        *,
        runtime_session_id: str | None = None,
        code_interpreter_session_id: str | None = None,
        browser_session_id: str | None = None,
        partition: str | None = None,
    ) -> Session:
        """Record the AgentCore sessions a live session uses, for the cleanup to stop.

        The cleanup calls ``StopRuntimeSession``, ``StopCodeInterpreterSession`` and
        ``StopBrowserSession`` for the ids the removed item holds (with the construct's
        AgentCore props set). Only the ids given are written; an id given again replaces the
        earlier one, which the cleanup will then no longer stop (stop it yourself, or let its
        idle timeout end it).

        Args:
            runtime_session_id: AgentCore Runtime session id (``runtimeSessionId``, 33-256
                characters), stored in ``agentRuntimeSessionId``.
            code_interpreter_session_id: code interpreter session id (1-40 letters and digits),
                stored in ``codeInterpreterSessionId``.
            browser_session_id: browser session id (1-40 letters and digits), stored in
                ``browserSessionId``.

        Raises:
            SessionGoneError: the session is missing or not live; the item is unchanged.
            ValueError: no id given, or an id the AgentCore API would refuse (named).
        """
        key = self._key(session_id, partition)
        values = agent_session_values(
            self._config, runtime_session_id, code_interpreter_session_id, browser_session_id
        )
        if not values:
            raise ValueError(
                "attach_agent_session: expected at least one of runtime_session_id, "
                "code_interpreter_session_id, browser_session_id"
            )
        names = {f"#agent{i}": name for i, name in enumerate(values)}
        update = "SET " + ", ".join(f"{n} = :{n[1:]}" for n in names)
        placeholders = {f":{n[1:]}": values[attr] for n, attr in names.items()}
        return self._update_live(
            session_id, partition, key, self._now(), update, names, placeholders
        )
