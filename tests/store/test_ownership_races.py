"""Two sessions trying to own one id at once (threads): exactly one wins, the loser gets
:class:`ResourceOwnedError` and nothing of it is written.

moto's request handling is serialised (``one_request_at_a_time``): its TransactWriteItems
deep-copies the tables and restores those copies when the transaction is cancelled, undoing any
write another thread made meanwhile (without the lock, the first test sees a winner whose claim
the loser's cancelled transaction erased), and its backends are not thread safe; DynamoDB
applies each write and each transaction atomically. The sessions' threads still run side by side, so
their requests interleave in every order moto's lock lets them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from session_expiry_runtime.core.ownership import owner_token
from session_expiry_runtime.store import ResourceOwnedError, Session, SessionStore

from ._support import claim_of, raw_item

HOUR = timedelta(hours=1)
ROUNDS = 12


def race(*calls: Callable[[], Session]) -> list[Session | ResourceOwnedError]:
    """Run the calls at the same moment on their own threads; each one's result or error."""
    start = threading.Barrier(len(calls))

    def run(call: Callable[[], Session]) -> Session | ResourceOwnedError:
        start.wait()
        try:
            return call()
        except ResourceOwnedError as err:
            return err

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, calls))


@pytest.fixture
def store(make_store: Any, one_request_at_a_time: None) -> SessionStore:
    return make_store(ownership=True)  # type: ignore[no-any-return]


def _one_winner(outcomes: list[Session | ResourceOwnedError]) -> tuple[str, str]:
    """The winner's and the loser's session ids; fails unless exactly one won."""
    won = [o for o in outcomes if isinstance(o, Session)]
    lost = [o for o in outcomes if isinstance(o, ResourceOwnedError)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    winner, loser = won[0].session_id, lost[0].session_id
    assert lost[0].owner_key == {"pk": winner}  # the loser is told who owns it
    return winner, loser


def test_two_creates_with_one_connection_id(store: SessionStore, ddb: Any) -> None:
    for i in range(ROUNDS):
        a, b, connection = f"a-{i}", f"b-{i}", f"conn-{i}="
        outcomes = race(
            partial(store.create, a, ttl=HOUR, connection_id=connection),
            partial(store.create, b, ttl=HOUR, connection_id=connection),
        )
        winner, loser = _one_winner(outcomes)
        claim = claim_of(ddb, f"connection#{connection}")
        assert claim is not None and claim["owner"] == {"S": owner_token({"pk": winner})}
        assert raw_item(ddb, {"pk": {"S": loser}}) is None


def test_two_attaches_of_one_runtime_session_id(store: SessionStore, ddb: Any) -> None:
    for i in range(ROUNDS):
        a, b = f"a-{i}", f"b-{i}"
        runtime = f"runtime-session-{i:04d}-" + "0" * 20
        store.create(a, ttl=HOUR)
        store.create(b, ttl=HOUR)
        outcomes = race(
            partial(store.attach_agent_session, a, runtime_session_id=runtime, stop_previous=False),
            partial(store.attach_agent_session, b, runtime_session_id=runtime, stop_previous=False),
        )
        winner, loser = _one_winner(outcomes)
        claim = claim_of(ddb, f"agentRuntime#{runtime}")
        assert claim is not None and claim["owner"] == {"S": owner_token({"pk": winner})}
        loser_item = raw_item(ddb, {"pk": {"S": loser}})
        assert loser_item is not None and "agentRuntimeSessionIds" not in loser_item
        winner_item = raw_item(ddb, {"pk": {"S": winner}})
        assert winner_item is not None
        assert winner_item["agentRuntimeSessionIds"] == {"SS": [runtime]}


def test_a_create_and_an_attach_of_one_connection_id(store: SessionStore, ddb: Any) -> None:
    # One path is a transaction, the other a PutItem then an UpdateItem: still one winner.
    for i in range(ROUNDS):
        a, b, connection = f"a-{i}", f"b-{i}", f"conn-{i}="
        store.create(b, ttl=HOUR)
        outcomes = race(
            partial(store.create, a, ttl=HOUR, connection_id=connection),
            partial(store.attach_connection, b, connection, close_previous=False),
        )
        winner, _ = _one_winner(outcomes)
        claim = claim_of(ddb, f"connection#{connection}")
        assert claim is not None and claim["owner"] == {"S": owner_token({"pk": winner})}
        holders = [s for s in (a, b) if "connectionIds" in (raw_item(ddb, {"pk": {"S": s}}) or {})]
        assert holders == [winner]
