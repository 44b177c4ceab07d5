"""The rule that picks whose environment the application's tests run with (pure: the deployed
functions are given as data; tests/sandbox/test_plugin_optins.py checks it on a deployment)."""

from __future__ import annotations

import pytest

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.testing import AppFunctionError
from cdk_session_expiry.testing.app_function import (
    ARCHIVE_FOR_TESTS,
    StackFunction,
    archive_environment,
    choose,
    derived_session_environment,
)

TABLE = "App-SessionsTable-1"
SESSION = {contract.ENV_TABLE_NAME: TABLE, contract.ENV_RETIRING_PRINCIPAL: "arn:role/cleanup"}


def _function(path: str, handler: str = "index.handler", **env: str) -> StackFunction:
    return StackFunction(
        logical_id=path.split("/")[-1] + "1A2B3C4D",
        name=f"App-{path.split('/')[-1]}-XYZ",
        path=path,
        handler=handler,
        role_arn=f"arn:role/{path.split('/')[-1]}",
        environment=dict(env),
    )


CLEANUP = _function(
    "App/Sessions/CleanupFunction",
    contract.CLEANUP_HANDLER,
    SESSION_EXPIRY_PARTITION_KEY="pk",
    SESSION_EXPIRY_SCRATCH_BUCKET="scratch",
    SESSION_EXPIRY_ARCHIVE_BUCKET="archive",  # the cleanup's own: not a session variable
)
SWEEPER = _function(
    "App/Sessions/ExpirySweeper/Function",
    contract.SWEEPER_HANDLER,
    **SESSION,
    SESSION_EXPIRY_SWEEP_SHARD_ATTRIBUTE="expiryShard",
    SESSION_EXPIRY_SWEEP_INTERVAL_SECONDS="10",  # the sweeper's own
)
GRANT_SWEEP = _function(
    "App/Sessions/GrantSweep/Function", contract.GRANT_SWEEPER_HANDLER, **SESSION
)


def test_the_one_function_given_session_access_not_the_sweepers() -> None:
    connect = _function("App/Connect", **SESSION, GREETING="hi")
    functions = [CLEANUP, SWEEPER, GRANT_SWEEP, connect]
    assert choose(functions, table_name=TABLE, selector=None) is connect


def test_several_with_the_same_environment_count_as_one() -> None:
    a, b = _function("App/A", **SESSION), _function("App/B", **SESSION)
    assert choose([CLEANUP, a, b], table_name=TABLE, selector=None) in (a, b)


def test_fails_when_several_given_access_differ() -> None:
    a, b = _function("App/A", **SESSION), _function("App/B", **SESSION, EXTRA="1")
    with pytest.raises(AppFunctionError) as raised:
        choose([CLEANUP, SWEEPER, a, b], table_name=TABLE, selector=None)
    message = str(raised.value)
    assert "['App/A', 'App/B']" in message
    assert "session_expiry_app_function" in message and "return 'App/A'" in message


def test_a_function_of_another_table_is_not_the_apps() -> None:
    other = _function("App/Other", **{**SESSION, contract.ENV_TABLE_NAME: "another-table"})
    assert choose([CLEANUP, other], table_name=TABLE, selector=None) is None


def test_chosen_by_construct_path_its_end_logical_id_or_name() -> None:
    connect = _function("App/Api/Connect", **SESSION)
    functions = [CLEANUP, connect]
    for selector in ("App/Api/Connect", "Api/Connect", "Connect", connect.logical_id, connect.name):
        assert choose(functions, table_name=TABLE, selector=selector) is connect, selector
    # Chosen, a function's environment is used whatever it holds (the cleanup's here).
    assert choose(functions, table_name=TABLE, selector="CleanupFunction") is CLEANUP


def test_fails_when_the_chosen_name_matches_none_or_several() -> None:
    functions = [_function("App/A/Handler"), _function("App/B/Handler")]
    with pytest.raises(AppFunctionError, match=r"'Handler' matches 2 functions"):
        choose(functions, table_name=TABLE, selector="Handler")
    with pytest.raises(AppFunctionError, match=r"'Nope' matches no function.*App/A/Handler"):
        choose(functions, table_name=TABLE, selector="Nope")


def test_without_one_given_access_the_session_environment_is_rebuilt() -> None:
    env = derived_session_environment([CLEANUP, SWEEPER], table_name=TABLE, cleanup=CLEANUP)
    assert env == {
        contract.ENV_TABLE_NAME: TABLE,
        contract.ENV_PARTITION_KEY: "pk",
        contract.ENV_SCRATCH_BUCKET: "scratch",
        contract.ENV_RETIRING_PRINCIPAL: CLEANUP.role_arn,
        contract.ENV_SWEEP_SHARD_ATTRIBUTE: "expiryShard",
    }


def test_a_test_gets_where_the_cleanup_archives() -> None:
    # Not a session variable (rule 3 leaves it out), but the cleanup's: a test reads the archive.
    assert archive_environment(CLEANUP) == {contract.ENV_ARCHIVE_BUCKET: "archive"}
    assert archive_environment(SWEEPER) == {}
    assert ARCHIVE_FOR_TESTS == ("SESSION_EXPIRY_ARCHIVE_BUCKET", "SESSION_EXPIRY_ARCHIVE_PREFIX")
