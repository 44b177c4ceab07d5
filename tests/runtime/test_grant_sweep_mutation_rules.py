"""The grant sweep's rules that `make mutation` found unpinned (issue 40), each named for the
rule: the exact end of the grace period, a session item's ``notAfter`` at or past now or
unreadable, the strongly consistent read of the session named, ``RetireGrant`` by the grant
key, and the release of a retired grant's record only while it names the same owner and
incarnation; and (the pass on the rest of the module) the clients and the process sweeper
built from the environment, the settings it refuses to run without, the marker (only the
stored one dropped for page one, kept when refused otherwise, the page a cut run resumes at,
when it was saved), the end of a pass, names that are not this store's, a grant handed over
by the cleanup, the failures and the exact text of their log lines, and the handler's time
guard.

Real boto3 calls against moto, with the stand-ins of `test_grant_sweeper` (``CreationDate``
added to moto's ``ListGrants`` answer).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from ownership_support import OWNERSHIP_TABLE, calls_of, claim_item, put_claim, raw_claim
from runtime_support import CLEANUP_ROLE, SESSION, TABLE
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.grant_names import GrantOwner, grant_name
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.ownership import (
    ATTR_HANDED_OVER_AT,
    KIND_GRANT,
    STATE_HELD,
    STATE_RELEASED,
    STATE_RELEASING,
    Claim,
    owner_token,
)
from session_expiry_runtime.sweeps import grant_sweeper
from session_expiry_runtime.sweeps.grant_sweep_marker import marker_resource
from test_grant_sweeper import NOW, Grants, grants

__all__ = ["grants"]  # the fixture, shared with test_grant_sweeper.py

WHOLE = NOW.replace(microsecond=0)  # a whole second: `notAfter` equal to now
NOW_S = int(WHOLE.timestamp())
GRACE = 900


def owner(session_id: str = "s-1") -> GrantOwner:
    return GrantOwner(key={"pk": session_id}, incarnation="inc1")


def listed(grants: Grants, grant_id: str) -> dict[str, Any]:
    (grant,) = [
        g
        for g in grants.kms.list_grants(KeyId=grants.sandbox.key_arn)["Grants"]
        if g["GrantId"] == grant_id
    ]
    return grant  # type: ignore[no-any-return]


def test_rule_the_grace_period_ends_exactly_at_its_length(grants: Grants) -> None:
    edge = grants.grant("s-gone", "inc1", created=NOW - timedelta(seconds=GRACE))
    young = grants.grant("s-gone2", "inc1", created=NOW - timedelta(seconds=GRACE - 1))
    sweeper = grants.sweeper()

    assert sweeper.verdict(listed(grants, edge), owner("s-gone"), NOW) == "gone"
    assert sweeper.verdict(listed(grants, young), owner("s-gone2"), NOW) == "recent"


@pytest.mark.parametrize(
    ("not_after", "verdict"),
    [({"N": str(NOW_S)}, "expired"), ({"S": "soon"}, "expired"), ({"N": str(NOW_S + 1)}, "live")],
)
def test_rule_a_session_at_or_past_its_not_after_or_unreadable_is_expired(
    grants: Grants, not_after: dict[str, str], verdict: str
) -> None:
    held = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=held, notAfter=not_after)

    assert grants.sweeper().verdict(listed(grants, held), owner(), WHOLE) == verdict


def test_rule_the_session_item_is_read_strongly_consistent_by_the_owner_key(
    grants: Grants,
) -> None:
    held = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=held)
    sweeper = grants.sweeper()
    calls = calls_of(sweeper._ddb)

    assert sweeper.verdict(listed(grants, held), owner(), NOW) == "live"
    assert sweeper._holds(owner(), held) and not sweeper._holds(owner("s-2"), held)

    reads = [p for name, p in calls if name == "GetItem"]
    assert [(p["TableName"], p["Key"], p["ConsistentRead"]) for p in reads] == [
        (TABLE, {"pk": {"S": "s-1"}}, True),
        (TABLE, {"pk": {"S": "s-1"}}, True),
        (TABLE, {"pk": {"S": "s-2"}}, True),
    ]


def test_rule_a_grant_id_held_as_another_type_is_not_held(grants: Grants) -> None:
    held = grants.grant("s-1", "inc1")
    sweeper = grants.sweeper()
    assert not sweeper._holds_grant({"grantId": {"SS": [held]}}, held)
    assert not sweeper._holds_grant({"grantId": held}, held)
    assert sweeper._holds_grant({"grantId": {"S": held}}, held)


def test_rule_retire_by_the_grant_key_and_already_retired_is_success(grants: Grants) -> None:
    orphan = grants.grant("s-gone", "inc1")
    sweeper = grants.sweeper()
    calls = calls_of(sweeper._kms)

    sweeper.retire({"GrantId": orphan})
    sweeper.retire({"GrantId": orphan})  # NotFoundException: already retired

    assert orphan not in grants.alive()
    assert [p for name, p in calls if name == "RetireGrant"] == [
        {"KeyId": grants.sandbox.key_arn, "GrantId": orphan}
    ] * 2


def test_rule_a_retire_refused_otherwise_raises(grants: Grants) -> None:
    sweeper = grants.sweeper()

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "KMSInternalException"}}, "RetireGrant")

    sweeper._kms.meta.events.register("before-parameter-build.kms.RetireGrant", refuse)
    try:
        with pytest.raises(ClientError, match="KMSInternalException"):
            sweeper.retire({"GrantId": "g" * 64})
    finally:
        sweeper._kms.meta.events.unregister("before-parameter-build.kms.RetireGrant", refuse)


def claim(grants: Grants, grant_id: str) -> Claim:
    put_claim(grants.sandbox.ddb, KIND_GRANT, grant_id, key={"pk": "s-1"}, incarnation="inc1")
    found = Claim.from_item(raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id))
    assert found is not None
    return found


@pytest.mark.parametrize("field", ["owner", "incarnation"])
def test_rule_a_retired_grants_record_is_released_only_with_the_same_owner_and_incarnation(
    grants: Grants, field: str
) -> None:
    held = claim(grants, "g1")
    other = owner_token({"pk": "s-9"}) if field == "owner" else "inc9"
    sweeper = grants.sweeper()

    sweeper._release(Claim(**{**held.__dict__, field: other}), NOW)  # taken over: quietly
    assert raw_claim(grants.sandbox.ddb, KIND_GRANT, "g1")["state"] != {"S": STATE_RELEASED}  # type: ignore[index]

    sweeper._release(held, NOW + timedelta(seconds=5))
    after = raw_claim(grants.sandbox.ddb, KIND_GRANT, "g1")
    assert after is not None and after["state"] == {"S": STATE_RELEASED}
    assert after["stateSince"] == {"N": str(NOW_S + 5)}


def test_rule_a_release_that_fails_otherwise_raises(grants: Grants) -> None:
    held = claim(grants, "g1")
    with pytest.raises(ClientError):
        grants.sweeper(ownership_table_name="no-such-table")._release(held, NOW)
    assert OWNERSHIP_TABLE != "no-such-table"


def test_rule_an_expired_sessions_grant_is_retired_and_its_record_released(
    grants: Grants,
) -> None:
    expired = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=expired, expires_in=-60)
    put_claim(grants.sandbox.ddb, KIND_GRANT, expired, key={"pk": "s-1"}, incarnation="inc1")

    report = grants.sweeper().sweep()

    assert (report.expired_retired, report.orphans_retired, report.would_retire) == (1, 0, 0)
    record = raw_claim(grants.sandbox.ddb, KIND_GRANT, expired)
    assert record is not None and record["state"] == {"S": STATE_RELEASED}


def test_rule_a_dry_run_counts_every_expired_grant_and_retires_nothing(grants: Grants) -> None:
    expired = [grants.grant(s, "inc1") for s in ("s-1", "s-2")]
    for session_id, grant_id in zip(("s-1", "s-2"), expired, strict=True):
        grants.session(session_id, "inc1", holds=grant_id, expires_in=-60)

    report = grants.sweeper(dry_run=True).sweep()

    assert (report.would_retire, report.expired_retired, report.orphans_retired) == (2, 0, 0)
    assert set(expired) <= grants.alive()


# --- the sweep's settings, clients, helpers and handler (mutation pass on part A) -------------


def test_rule_clients_have_bounded_timeouts_and_retries() -> None:
    config = grant_sweeper.client_config()
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}
    assert (config.connect_timeout, config.read_timeout) == (3, 5)


def test_rule_the_process_sweeper_is_built_once_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key_arn = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    monkeypatch.setenv("SESSION_EXPIRY_TABLE_NAME", TABLE)
    monkeypatch.setenv("SESSION_EXPIRY_GRANT_KEY_ARN", key_arn)
    monkeypatch.setenv("SESSION_EXPIRY_RETIRING_PRINCIPAL", CLEANUP_ROLE)
    monkeypatch.setenv("SESSION_EXPIRY_OWNERSHIP_TABLE_NAME", OWNERSHIP_TABLE)
    monkeypatch.setenv("SESSION_EXPIRY_METRICS_NAMESPACE", "Swept")
    monkeypatch.setenv("SESSION_EXPIRY_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND", "3")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(grant_sweeper, "_sweeper", None)

    built = grant_sweeper.get_grant_sweeper()

    assert grant_sweeper.get_grant_sweeper() is built
    assert built.config.table_name == TABLE and built.config.grant_key_arn == key_arn
    assert built.metrics.namespace == "Swept" and built.pacer.per_second == 3
    for client, service in ((built._kms, "kms"), (built._ddb, "dynamodb")):
        assert client.meta.service_model.service_name == service
        assert (client.meta.config.connect_timeout, client.meta.config.read_timeout) == (3, 5)
        assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 3}


def config(**settings: Any) -> RuntimeConfig:
    return RuntimeConfig(
        table_name=TABLE,
        grant_key_arn="arn:aws:kms:us-east-1:123456789012:key/k",
        retiring_principal=CLEANUP_ROLE,
        **settings,
    )


def built(**settings: Any) -> grant_sweeper.GrantSweeper:
    return grant_sweeper.GrantSweeper(
        config(**settings), kms_client="kms", dynamodb_client="ddb", metrics=MetricsRecorder("M")
    )


@pytest.mark.parametrize(
    ("missing", "setting"),
    [
        ("SESSION_EXPIRY_TABLE_NAME", "table_name"),
        ("SESSION_EXPIRY_GRANT_KEY_ARN", "grant_key_arn"),
        ("SESSION_EXPIRY_RETIRING_PRINCIPAL", "retiring_principal"),
    ],
)
def test_fails_without_each_setting_it_needs_naming_it(missing: str, setting: str) -> None:
    with pytest.raises(ValueError) as raised:
        grant_sweeper.GrantSweeper(
            RuntimeConfig(**{**config().__dict__, setting: None}),
            kms_client=None,
            dynamodb_client=None,
            metrics=MetricsRecorder("x"),
        )
    assert str(raised.value) == f"{missing} is not set: the grant sweep needs it"


def test_rule_the_defaults_are_the_utc_clock_and_the_configured_pace() -> None:
    sweeper = built(grant_sweep_kms_requests_per_second=7)
    before = datetime.now(timezone.utc)
    now = sweeper._clock()
    assert now.tzinfo is not None and before <= now <= datetime.now(timezone.utc)
    assert sweeper.pacer.per_second == 7
    assert sweeper.logger is grant_sweeper.LOGGER
    assert (sweeper._kms, sweeper._ddb, sweeper.metrics.namespace) == ("kms", "ddb", "M")


def test_rule_the_marker_lives_in_the_ownership_table_under_the_grant_key() -> None:
    sweeper = built(ownership_table_name=OWNERSHIP_TABLE)
    assert sweeper.marker is not None
    assert (sweeper.marker._ddb, sweeper.marker.table_name, sweeper.marker.key_arn) == (
        "ddb",
        OWNERSHIP_TABLE,
        "arn:aws:kms:us-east-1:123456789012:key/k",
    )
    assert built(ownership_table_name=None).marker is None


def test_rule_a_grant_name_must_give_the_tables_partition_and_sort_key() -> None:
    sweeper = built(partition_key="userId", sort_key="sessionId")
    report = grant_sweeper.GrantSweepReport()

    def grant(key: dict[str, str]) -> dict[str, Any]:
        return {
            "GrantId": "g1",
            "Name": grant_name(key, "inc1"),
            "RetiringPrincipal": CLEANUP_ROLE,
        }

    both = sweeper.owner(grant({"userId": "u", "sessionId": "s"}), report)
    assert both == GrantOwner(key={"userId": "u", "sessionId": "s"}, incarnation="inc1")
    assert sweeper.owner(grant({"userId": "u"}), report) is None
    assert sweeper.owner(grant({"sessionId": "s"}), report) is None
    assert report.unusable_names == 2  # each counted
    assert built().owner(grant({"pk": "s"}), report) == GrantOwner({"pk": "s"}, "inc1")


def test_rule_an_unusable_name_is_logged_with_the_grant_and_the_table(
    caplog: pytest.LogCaptureFixture,
) -> None:
    name = "session-expiry:inc1:bm90IGpzb24"  # "not json"
    report = grant_sweeper.GrantSweepReport()
    with caplog.at_level(logging.WARNING, logger=grant_sweeper.LOGGER.name):
        owner = built().owner(
            {"GrantId": "g7", "Name": name, "RetiringPrincipal": CLEANUP_ROLE}, report
        )

    assert owner is None and report.unusable_names == 1
    (record,) = caplog.records
    assert record.getMessage() == (
        f"grant g7: name {name!r} gives no key of table {TABLE}; skipped, never retired"
    )
    assert record.grantSweep == {"grantId": "g7", "name": name}  # type: ignore[attr-defined]


@pytest.mark.parametrize(("remaining", "out"), [(9_999, True), (10_000, False)])
def test_rule_out_of_time_below_the_margin(remaining: int, out: bool) -> None:
    context = SimpleNamespace(get_remaining_time_in_millis=lambda: remaining)
    assert grant_sweeper._out_of_time(context, 10_000)() is out
    assert grant_sweeper._out_of_time(None, 10_000)() is False


def test_rule_seconds_of_a_number_attribute_only() -> None:
    seconds = grant_sweeper._seconds
    assert seconds({"N": "12.5"}) == Decimal("12.5")
    assert seconds({"N": "soon"}) is None and seconds({"S": "12"}) is None
    assert seconds({"N": 12}) is None and seconds(None) is None


def test_rule_the_error_code_and_text_of_a_failure() -> None:
    refused = ClientError({"Error": {"Code": "Throttled", "Message": "slow down"}}, "ListGrants")
    bare = ClientError({}, "ListGrants")
    assert grant_sweeper._code(refused) == "Throttled" and grant_sweeper._code(bare) == ""
    assert grant_sweeper._error_text(refused) == "Throttled: slow down"
    assert grant_sweeper._error_text(bare) == "Unknown: "
    assert grant_sweeper._error_text(ValueError("boom")) == "ValueError: boom"


def test_rule_the_handler_heeds_the_time_guard_of_its_context(
    grants: Grants, monkeypatch: pytest.MonkeyPatch
) -> None:
    orphan = grants.grant("s-gone", "inc1")
    monkeypatch.setattr(grant_sweeper, "_sweeper", grants.sweeper(time_guard_ms=10_000))
    late = SimpleNamespace(get_remaining_time_in_millis=lambda: 9_999)

    report = grant_sweeper.handler({}, late)

    assert report["incomplete"] and report["checked"] == 0 and orphan in grants.alive()
    on_time = SimpleNamespace(get_remaining_time_in_millis=lambda: 10_000)
    assert grant_sweeper.handler({}, on_time)["orphans_retired"] == 1


def test_rule_the_handler_names_how_many_grants_failed(
    grants: Grants, monkeypatch: pytest.MonkeyPatch
) -> None:
    grants.grant("s-gone", "inc1")
    failing = grants.sweeper(ownership_table_name="no-such-table")
    monkeypatch.setattr(grant_sweeper, "_sweeper", failing)

    with pytest.raises(grant_sweeper.GrantSweepFailed) as raised:
        grant_sweeper.handler({}, None)
    assert str(raised.value) == "2 grant(s) could not be checked or retired"


def refusing(client: Any, operation: str, code: str | None, message: str = "") -> Any:
    """A ``before-call`` handler on ``client`` refusing ``operation`` with ``code`` (what the
    service would answer; ``None``: an error response without its ``Error``); unregister it
    with the returned function."""
    response: dict[str, Any] = {} if code is None else {"Error": {"Code": code, "Message": message}}

    def refuse(**_: Any) -> None:
        raise ClientError(response, operation)

    event = f"before-call.{client.meta.service_model.service_id.hyphenize()}.{operation}"
    client.meta.events.register(event, refuse)
    return lambda: client.meta.events.unregister(event, refuse)


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


def test_rule_a_failed_list_ends_the_run_failed_incomplete_and_logged(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    kms = SESSION.client("kms")
    stub = Stubber(kms)
    stub.add_client_error("list_grants", "KMSInternalException", "try later")
    # No ownership table: the marker cannot be read either, a failure of its own.
    sweeper = grants.sweeper(kms=kms, ownership_table_name="no-such-table")

    with stub, caplog.at_level(logging.ERROR, logger=grant_sweeper.LOGGER.name):
        report = sweeper.sweep()

    assert (report.failures, report.incomplete, report.grants_on_key) == (2, True, None)
    unreadable, listing = errors(caplog)
    assert unreadable.startswith(
        "grant sweep marker unreadable, starting at page one: An error occurred "
        "(ResourceNotFoundException) when calling the GetItem operation"
    )
    assert listing == "ListGrants failed: KMSInternalException: try later"
    assert sweeper.metrics.snapshot()["GrantSweepFailures"] == 2


def test_rule_a_marker_that_cannot_be_written_is_a_failure_logged(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    kms = SESSION.client("kms")
    stub = Stubber(kms)
    key = grants.sandbox.key_arn
    stub.add_response(
        "list_grants",
        {"Grants": [], "Truncated": True, "NextMarker": "page-2"},
        {"KeyId": key, "Limit": 100},
    )
    stub.add_client_error(
        "list_grants",
        "KMSInternalException",
        "down",
        expected_params={"KeyId": key, "Limit": 100, "Marker": "page-2"},
    )
    sweeper = grants.sweeper(kms=kms)
    undo = refusing(sweeper._ddb, "UpdateItem", "ThrottlingException", "slow down")
    try:
        with stub, caplog.at_level(logging.ERROR, logger=grant_sweeper.LOGGER.name):
            report = sweeper.sweep()
    finally:
        undo()

    # The failed page, then the marker that would have kept it for the next run.
    assert (report.failures, report.next_marker, report.incomplete) == (2, "page-2", True)
    assert errors(caplog) == [
        "ListGrants failed: KMSInternalException: down",
        "grant sweep marker not written: ThrottlingException: slow down",
    ]


def test_rule_a_stored_marker_kms_refuses_restarts_the_pass_at_page_one_logged(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    kms = SESSION.client("kms")
    stub = Stubber(kms)
    key = grants.sandbox.key_arn
    stub.add_client_error(
        "list_grants",
        "InvalidMarkerException",
        "bad marker",
        expected_params={"KeyId": key, "Limit": 100, "Marker": "stale"},
    )
    stub.add_response(
        "list_grants", {"Grants": [], "Truncated": False}, {"KeyId": key, "Limit": 100}
    )
    sweeper = grants.sweeper(kms=kms)
    assert sweeper.marker is not None
    sweeper.marker.save("stale", NOW_S, 100)  # the last run stopped there, 100 grants listed

    with stub, caplog.at_level(logging.WARNING, logger=grant_sweeper.LOGGER.name):
        report = sweeper.sweep()

    assert (report.resumed, report.pages, report.failures, report.grants_on_key) == (
        False,
        1,
        0,
        0,
    )
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "KMS refused the stored marker (An error occurred (InvalidMarkerException) when "
        "calling the ListGrants operation: bad marker): starting at page one"
    ]


def paged(grants: Grants, *pages: tuple[str | None, dict[str, Any]]) -> tuple[Any, Stubber]:
    """A KMS client whose ``ListGrants`` answers ``pages`` in order, each (the ``Marker`` it
    expects, the answer or, for a refusal, ``{"refused": code}``)."""
    kms = SESSION.client("kms")
    stub = Stubber(kms)
    for marker, answer in pages:
        params: dict[str, Any] = {"KeyId": grants.sandbox.key_arn, "Limit": 100}
        if marker is not None:
            params["Marker"] = marker
        if "refused" in answer:
            stub.add_client_error("list_grants", answer["refused"], "no", expected_params=params)
        else:
            stub.add_response("list_grants", answer, params)
    return kms, stub


def foreign(grant_id: str) -> dict[str, Any]:
    """A grant of the key that is not this store's (no calls made for it)."""
    return {"GrantId": grant_id, "Name": "other-app", "RetiringPrincipal": "arn:aws:iam::1:role/x"}


def resumed_at(grants: Grants, kms: Any, marker: str) -> grant_sweeper.GrantSweeper:
    sweeper = grants.sweeper(kms=kms)
    assert sweeper.marker is not None
    sweeper.marker.save(marker, NOW_S, 100)  # the last run stopped there, 100 grants listed
    return sweeper


@pytest.mark.parametrize("resumed", [False, True])
def test_rule_a_marker_of_this_run_kms_refuses_fails_the_run_there(
    grants: Grants, resumed: bool
) -> None:
    # Only the marker the last run stored may be dropped for page one; one KMS gave this run
    # is no stale marker, its refusal a failure (resumed or not).
    first = "stored" if resumed else None
    kms, stub = paged(
        grants,
        (first, {"Grants": [], "Truncated": True, "NextMarker": "page-2"}),
        ("page-2", {"refused": "InvalidMarkerException"}),
    )
    sweeper = resumed_at(grants, kms, "stored") if resumed else grants.sweeper(kms=kms)

    with stub:
        report = sweeper.sweep()
        stub.assert_no_pending_responses()

    assert (report.failures, report.incomplete, report.next_marker) == (1, True, "page-2")
    assert report.resumed is resumed


def test_rule_a_stored_marker_refused_otherwise_fails_the_run_and_is_kept(grants: Grants) -> None:
    kms, stub = paged(grants, ("stored", {"refused": "KMSInternalException"}))
    sweeper = resumed_at(grants, kms, "stored")

    with stub:
        report = sweeper.sweep()
        stub.assert_no_pending_responses()

    assert (report.failures, report.incomplete, report.next_marker) == (1, True, "stored")
    assert sweeper.marker is not None and sweeper.marker.load()[0] == "stored"


def test_rule_page_one_refused_after_a_stale_marker_fails_the_run(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    # KMS refusing the first page is no stale marker: the run fails, never asks again.
    kms, stub = paged(
        grants,
        ("stale", {"refused": "InvalidMarkerException"}),
        (None, {"refused": "InvalidMarkerException"}),
    )

    with stub, caplog.at_level(logging.ERROR, logger=grant_sweeper.LOGGER.name):
        report = resumed_at(grants, kms, "stale").sweep()
        stub.assert_no_pending_responses()

    assert (report.failures, report.incomplete, report.pages) == (1, True, 0)
    assert errors(caplog) == ["ListGrants failed: InvalidMarkerException: no"]


def test_rule_a_run_cut_inside_a_page_resumes_at_that_page(grants: Grants) -> None:
    kms, stub = paged(
        grants,
        (None, {"Grants": [], "Truncated": True, "NextMarker": "page-2"}),
        ("page-2", {"Grants": [foreign("g1"), foreign("g2")], "Truncated": False}),
    )
    sweeper = grants.sweeper(kms=kms)
    asked = iter([False, False, True])  # between the pages, before g1, before g2

    with stub:
        report = sweeper.sweep(out_of_time=lambda: next(asked))
        stub.assert_no_pending_responses()

    assert (report.checked, report.incomplete, report.next_marker) == (1, True, "page-2")
    assert sweeper.marker is not None and sweeper.marker.load() == ("page-2", 0)


@pytest.mark.parametrize(
    "last",
    [
        {"Grants": [], "Truncated": False, "NextMarker": "more"},
        {"Grants": [], "Truncated": True},
    ],
    ids=["not-truncated-with-a-marker", "truncated-without-a-marker"],
)
def test_rule_a_page_ends_the_pass_unless_truncated_with_a_next_marker(
    grants: Grants, last: dict[str, Any]
) -> None:
    kms, stub = paged(grants, (None, last))

    with stub:
        report = grants.sweeper(kms=kms).sweep()
        stub.assert_no_pending_responses()

    assert (report.pages, report.incomplete, report.next_marker) == (1, False, None)


def test_rule_grants_the_store_did_not_create_are_not_unusable_names(
    caplog: pytest.LogCaptureFixture,
) -> None:
    report = grant_sweeper.GrantSweepReport()
    sweeper = built()
    ours = grant_name({"pk": "s"}, "inc1")
    with caplog.at_level(logging.WARNING, logger=grant_sweeper.LOGGER.name):
        for grant in (
            {"GrantId": "g1", "RetiringPrincipal": CLEANUP_ROLE},  # no name
            {"GrantId": "g2", "Name": "other-app", "RetiringPrincipal": CLEANUP_ROLE},
            {"GrantId": "g3", "Name": ours, "RetiringPrincipal": "arn:aws:iam::1:role/x"},
            {"GrantId": "g4", "Name": ours},
        ):
            assert sweeper.owner(grant, report) is None
    assert report.unusable_names == 0 and caplog.records == []


def test_rule_a_grant_kms_no_longer_knows_is_already_retired(grants: Grants) -> None:
    # moto retires an unknown grant without complaint; KMS answers NotFoundException.
    sweeper = grants.sweeper()
    undo = refusing(sweeper._kms, "RetireGrant", "NotFoundException", "no such grant")
    try:
        sweeper.retire({"GrantId": "g" * 64})  # no error: done
    finally:
        undo()
    undo = refusing(sweeper._kms, "RetireGrant", None)
    try:
        with pytest.raises(ClientError):  # no error code: not known to be retired
            sweeper.retire({"GrantId": "g" * 64})
    finally:
        undo()


@pytest.mark.parametrize(
    ("state", "handed_over_at", "retired"),
    [
        (STATE_RELEASING, {"N": str(NOW_S - 60)}, True),  # the cleanup gave it up: at once
        (STATE_HELD, {"N": str(NOW_S - 60)}, False),  # put back, held again: pending
        (STATE_RELEASING, {"S": "a minute ago"}, False),  # no time it was handed over
        (STATE_RELEASING, None, False),  # still the stream path's
    ],
    ids=["releasing-handed-over", "held-again", "unreadable-time", "not-handed-over"],
)
def test_rule_only_a_releasing_record_handed_over_is_retired_at_once(
    grants: Grants, state: str, handed_over_at: dict[str, str] | None, retired: bool
) -> None:
    gone = grants.grant("s-gone", "inc1")
    item = claim_item(KIND_GRANT, gone, key={"pk": "s-gone"}, incarnation="inc1", state=state)
    if handed_over_at is not None:
        item[ATTR_HANDED_OVER_AT] = handed_over_at
    grants.sandbox.ddb.put_item(TableName=OWNERSHIP_TABLE, Item=item)

    report = grants.sweeper().sweep()

    assert (report.orphans_retired, report.kept_pending) == ((1, 0) if retired else (0, 1))
    assert (gone in grants.alive()) is not retired


def stored_marker(grants: Grants) -> dict[str, Any]:
    item = grants.sandbox.ddb.get_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": marker_resource(grants.sandbox.key_arn)}},
        ConsistentRead=True,
    )["Item"]
    return item  # type: ignore[no-any-return]


def test_rule_the_marker_records_when_each_run_saved_or_reset_it(grants: Grants) -> None:
    kms, stub = paged(
        grants,
        (None, {"Grants": [foreign("g1")], "Truncated": True, "NextMarker": "page-2"}),
        ("page-2", {"Grants": [], "Truncated": False}),
    )
    later = WHOLE + timedelta(seconds=60)
    with stub:
        grants.sweeper(kms=kms, now=WHOLE).sweep(out_of_time=iter([False, True]).__next__)
        cut = stored_marker(grants)
        grants.sweeper(kms=kms, now=later).sweep()
        stub.assert_no_pending_responses()

    assert (cut["nextMarker"], cut["savedAt"], cut["passListed"]) == (
        {"S": "page-2"},
        {"N": str(NOW_S)},
        {"N": "1"},
    )
    reset = stored_marker(grants)
    assert reset["savedAt"] == {"N": str(NOW_S + 60)} and "nextMarker" not in reset


def test_rule_the_sweep_judges_by_its_own_clock(grants: Grants) -> None:
    # Created now by the wall clock: recent to a sweep at now, an orphan to one an hour later.
    orphan = grants.grant("s-gone", "inc1", created=datetime.now(timezone.utc))

    assert grants.sweeper(now=datetime.now(timezone.utc)).sweep().kept_recent == 1
    report = grants.sweeper(now=datetime.now(timezone.utc) + timedelta(hours=1)).sweep()

    assert report.orphans_retired == 1 and orphan not in grants.alive()
