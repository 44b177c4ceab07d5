"""``DeleteScratch``'s rules that mutation testing found unpinned (issue 40,
``make mutation MUTATION_ARGS="--jobs 1 steps/scratch.py"``): the plan's log fields and the
exact refusals (a key value, partition, incarnation or tenant that is not a String), the
legacy layout under tenant-scoped scratch, the count of objects deleted (keys sent one by one
included, keys S3 reports failed excluded), the text of ``DeleteObjects`` errors, the dry run's
count over several pages, and the action and text of every failure of the listing.

Plans are pure. Runs use a real boto3 S3 client under moto; the answers moto does not give
(per-key ``Errors`` in a ``DeleteObjects`` answer, a listing that names a key outside the prefix,
pages chosen by the test, an ``AccessDenied``) are stubbed with ``runtime_faults.answer``.
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager, nullcontext
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import escape

import pytest
from runtime_faults import answer, s3_error
from runtime_support import BUCKET, SESSION
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.decode import parse_record
from session_expiry_runtime.core.invocation import InvocationScope
from session_expiry_runtime.owners.outcomes import STEP_DONE, STEP_DRY_RUN, StepFailed
from session_expiry_runtime.steps.base import PLAN_REFUSED, PLAN_RUN, Plan, Session, StepContext
from session_expiry_runtime.steps.scratch import STEP_LEGACY_LAYOUT, ScratchStep

CONFIG = RuntimeConfig(scratch_bucket=BUCKET)
#: A table keyed by tenant (partition) and session (sort), with tenant-scoped scratch.
TENANT_KEYED = dataclasses.replace(
    CONFIG, partition_key="tenantId", sort_key="sk", tenant_scoped_scratch=True
)
OWN = "sessions/s-1/i1/"
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"


def _session(image: dict[str, Any], keys: dict[str, Any] | None = None) -> Session:
    return Session(image, keys or {"pk": "s-1"}, "explicit", None, parse_record({}))


def _refusal(config: RuntimeConfig, session: Session) -> str:
    plan = ScratchStep(config, None).plan(session)
    assert plan.status == PLAN_REFUSED
    return str(plan.log["refusal"])


@pytest.fixture
def s3(aws: None) -> Any:
    client = SESSION.client("s3")
    client.create_bucket(Bucket=BUCKET)
    return client


def _put(s3: Any, *names: str, prefix: str = OWN) -> list[str]:
    keys = [f"{prefix}{name}" for name in names]
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    return keys


def _keys(s3: Any, prefix: str = OWN, bucket: str = BUCKET) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]


def _run(s3: Any, ctx: StepContext | None = None) -> tuple[str, StepContext]:
    ctx = ctx or StepContext(_session({"scratchPrefix": OWN, "incarnation": "i1"}))
    return ScratchStep(CONFIG, s3).run(Plan(PLAN_RUN, payload=OWN), ctx), ctx


def _failure(s3: Any, ctx: StepContext | None = None, *, preview: bool = False) -> StepFailed:
    ctx = ctx or StepContext(_session({"scratchPrefix": OWN, "incarnation": "i1"}))
    step = ScratchStep(CONFIG, s3)
    with pytest.raises(StepFailed) as caught:
        (step.preview if preview else step.run)(Plan(PLAN_RUN, payload=OWN), ctx)
    return caught.value


def _delete_result(*errors: tuple[str, str, str | None]) -> tuple[int, dict[str, str], bytes]:
    """A DeleteObjects answer (HTTP 200) listing ``(key, code, message)`` errors; a ``None``
    message leaves the element out (S3's Error type has every member optional)."""
    body = "".join(
        f"<Error><Key>{escape(key)}</Key><Code>{code}</Code>"
        + ("" if message is None else f"<Message>{message}</Message>")
        + "</Error>"
        for key, code, message in errors
    )
    return 200, {}, f'<DeleteResult xmlns="{S3_NS}">{body}</DeleteResult>'.encode()


def _listing(keys: list[str], token: str | None = None, truncated: bool | None = None) -> bytes:
    """A ListObjectsV2 answer naming ``keys``: truncated with ``token`` when there is one."""
    truncated = token is not None if truncated is None else truncated
    contents = "".join(f"<Contents><Key>{escape(k)}</Key><Size>1</Size></Contents>" for k in keys)
    more = "" if token is None else f"<NextContinuationToken>{token}</NextContinuationToken>"
    return (
        f'<ListBucketResult xmlns="{S3_NS}"><Name>{BUCKET}</Name><Prefix>{OWN}</Prefix>'
        f"<KeyCount>{len(keys)}</KeyCount><MaxKeys>1000</MaxKeys>"
        f"<IsTruncated>{str(truncated).lower()}</IsTruncated>{more}{contents}"
        "</ListBucketResult>"
    ).encode()


def _pages(s3: Any, *pages: bytes) -> list[str]:
    """Answer ListObjectsV2 with ``pages`` in turn; the URLs asked, in order."""
    urls: list[str] = []

    def paged(request: Any) -> tuple[int, dict[str, str], bytes]:
        urls.append(request.url)
        return 200, {}, pages[min(len(urls), len(pages)) - 1]

    answer(s3, "ListObjectsV2", paged)
    return urls


# --- the plan ---------------------------------------------------------------------------------
def test_rule_the_step_declares_the_attributes_it_reads() -> None:
    """The step contract's ``attributes``: the prefix, tenant and incarnation attributes, under
    the names configured."""
    config = dataclasses.replace(
        CONFIG, scratch_prefix_attribute="p", tenant_attribute="t", incarnation_attribute="i"
    )
    step = ScratchStep(config, None)

    assert step.attributes == ("p", "t", "i")
    assert step.plan(_session({"p": OWN, "i": "i1"})).payload == OWN


def test_rule_the_plan_logs_the_prefix_and_under_tenant_scoped_scratch_the_tenant() -> None:
    own = "sessions/t-1/s-1/i1/"
    scoped = dataclasses.replace(CONFIG, tenant_scoped_scratch=True)
    image = {"scratchPrefix": own, "tenantId": "t-1", "incarnation": "i1"}

    plan = ScratchStep(scoped, None).plan(_session(image))
    plain = ScratchStep(CONFIG, None).plan(_session({"scratchPrefix": OWN, "incarnation": "i1"}))

    assert (plan.status, plan.payload, plan.log) == (
        PLAN_RUN,
        own,
        {"scratchPrefix": own, "tenant": "t-1"},
    )
    assert (plain.status, plain.payload, plain.log) == (PLAN_RUN, OWN, {"scratchPrefix": OWN})


def test_rule_a_refusal_names_the_prefix_and_the_one_expected_from_keys_and_incarnation() -> None:
    plan = ScratchStep(CONFIG, None).plan(
        _session({"scratchPrefix": "sessions/s-2/i1/", "incarnation": "i1"})
    )

    assert plan.log == {
        "scratchPrefix": "sessions/s-2/i1/",
        "refusal": "scratch prefix 'sessions/s-2/i1/': not the session's own prefix; expected "
        "'sessions/s-1/i1/' (from the record's Keys and its incarnation)",
    }


def test_rule_a_tenant_contradicting_the_keys_is_refused_with_both_tenants_and_logged() -> None:
    image = {"scratchPrefix": "sessions/t-1/s-1/i1/", "tenantId": "t-2", "incarnation": "i1"}

    plan = ScratchStep(TENANT_KEYED, None).plan(_session(image, {"tenantId": "t-1", "sk": "s-1"}))

    assert plan.status == PLAN_REFUSED
    assert plan.log == {
        "scratchPrefix": "sessions/t-1/s-1/i1/",
        "tenant": "t-1",
        "refusal": "tenant 't-2' in the old image is not the tenant 't-1' of the record's Keys",
    }


def test_rule_a_tenant_in_the_keys_is_not_contradicted_by_an_image_without_one() -> None:
    image = {"scratchPrefix": "sessions/t-1/s-1/i1/", "incarnation": "i1"}

    plan = ScratchStep(TENANT_KEYED, None).plan(_session(image, {"tenantId": "t-1", "sk": "s-1"}))

    assert (plan.status, plan.payload) == (PLAN_RUN, "sessions/t-1/s-1/i1/")


def test_rule_without_tenant_scoped_scratch_the_image_tenant_is_not_checked() -> None:
    """The tenant is no segment of the prefix then: the keys alone decide it."""
    config = dataclasses.replace(TENANT_KEYED, tenant_scoped_scratch=False)
    image = {"scratchPrefix": "sessions/t-1/s-1/i1/", "tenantId": "t-2", "incarnation": "i1"}

    plan = ScratchStep(config, None).plan(_session(image, {"tenantId": "t-1", "sk": "s-1"}))

    assert (plan.status, plan.payload, plan.log) == (
        PLAN_RUN,
        "sessions/t-1/s-1/i1/",
        {"scratchPrefix": "sessions/t-1/s-1/i1/"},
    )


NOT_A_STRING = {
    "session id": (CONFIG, {"pk": Decimal(7)}, {}, "session id 7"),
    "partition": (
        dataclasses.replace(CONFIG, sort_key="sk"),
        {"pk": Decimal(7), "sk": "s-1"},
        {},
        "partition 7",
    ),
    "incarnation": (CONFIG, {"pk": "s-1"}, {"incarnation": Decimal(7)}, "incarnation 7"),
    "tenant id": (
        dataclasses.replace(CONFIG, tenant_scoped_scratch=True),
        {"pk": "s-1"},
        {"tenantId": Decimal(7), "incarnation": "i1"},
        "tenant id 7",
    ),
}


@pytest.mark.parametrize("what", list(NOT_A_STRING))
def test_fails_a_key_value_incarnation_or_tenant_that_is_not_a_string_naming_it(
    what: str,
) -> None:
    config, keys, image, said = NOT_A_STRING[what]

    refusal = _refusal(config, _session({"scratchPrefix": "sessions/7/i1/", **image}, keys))

    assert refusal == (
        "scratch prefix 'sessions/7/i1/': not the session's own prefix; no prefix of this "
        f"record can be built: {said}: expected a String"
    )


def test_rule_a_legacy_tenant_scoped_prefix_in_the_old_layout_is_left_to_the_lifecycle() -> None:
    """Tenant-scoped scratch on a table with a sort key whose tenant is not the partition: the
    old layout is ``<root><tenant>/<session id>/<incarnation>/``."""
    config = dataclasses.replace(CONFIG, sort_key="sk", tenant_scoped_scratch=True)
    old = "sessions/t-1/s-1/i0/"
    session = _session({"scratchPrefix": old, "tenantId": "t-1"}, {"pk": "u-1", "sk": "s-1"})

    plan = ScratchStep(config, None).plan(session)

    assert (plan.status, plan.payload) == (PLAN_RUN, old)
    assert plan.log == {"scratchPrefix": old, "tenant": "t-1", "scratchRefusal": "Legacy"}
    assert ScratchStep(config, None).run(plan, StepContext(session)) == STEP_LEGACY_LAYOUT


# --- deleting ---------------------------------------------------------------------------------
def test_rule_keys_sent_one_by_one_are_counted_deleted(s3: Any) -> None:
    """Keys XML cannot carry (a C0 control) or that hold a CR go through DeleteObject, one
    call each; each counts once in ``objectsDeleted``."""
    _put(s3, "a", "b", "ctl-\x01", "cr-\r")

    outcome, ctx = _run(s3)

    assert outcome == STEP_DONE and _keys(s3) == []
    assert (ctx.objects_deleted, ctx.log) == (4, {"objectsDeleted": 4})


def test_rule_keys_s3_reports_failed_are_not_counted_and_errors_are_quoted_exactly(
    s3: Any,
) -> None:
    a, b, c, ctl = _put(s3, "a", "b", "c", "ctl-\x01")
    answer(
        s3,
        "DeleteObjects",
        lambda _: _delete_result((a, "AccessDenied", "Access Denied"), (b, "InternalError", None)),
    )

    failure = _failure(s3)

    assert failure.action == "DeleteScratch"
    assert failure.detail == (
        "DeleteObjects reported 2 error(s): "
        "'sessions/s-1/i1/a': AccessDenied Access Denied; 'sessions/s-1/i1/b': InternalError"
    )
    # The stubbed DeleteObjects deleted nothing; the control key went through DeleteObject.
    assert _keys(s3) == [a, b, c] and ctl not in _keys(s3)


def test_rule_the_count_of_a_partly_failed_delete_excludes_the_failed_keys(s3: Any) -> None:
    a, *_ = _put(s3, "a", "b", "c")
    answer(s3, "DeleteObjects", lambda _: _delete_result((a, "AccessDenied", "no")))
    ctx = StepContext(_session({"scratchPrefix": OWN, "incarnation": "i1"}))

    _failure(s3, ctx)

    assert (ctx.objects_deleted, ctx.log) == (2, {"objectsDeleted": 2})


@pytest.mark.parametrize(("errors", "more"), [(5, ""), (6, " (+1 more)"), (7, " (+2 more)")])
def test_rule_a_failure_quotes_the_first_five_errors_and_counts_the_rest(
    s3: Any, errors: int, more: str
) -> None:
    keys = _put(s3, *(f"k{i}" for i in range(errors)))
    answer(s3, "DeleteObjects", lambda _: _delete_result(*((k, "E", "m") for k in keys)))

    failure = _failure(s3)

    shown = "; ".join(f"{k!r}: E m" for k in keys[:5])
    assert failure.detail == f"DeleteObjects reported {errors} error(s): {shown}{more}"


def test_rule_a_failed_call_fails_the_step_under_its_action_with_the_error(s3: Any) -> None:
    answer(s3, "ListObjectsV2", lambda _: s3_error(403, "AccessDenied", "Access Denied"))

    for preview in (False, True):
        failure = _failure(s3, preview=preview)
        assert (failure.action, failure.detail) == ("DeleteScratch", "AccessDenied: Access Denied")


def test_rule_each_scratch_step_deletes_through_its_own_deleter(s3: Any) -> None:
    """The invocation shares a deleter per step object: two steps of two buckets in one
    invocation each delete in their own bucket."""
    s3.create_bucket(Bucket="other-bucket")
    s3.put_object(Bucket="other-bucket", Key=f"{OWN}o", Body=b"x")
    _put(s3, "a")
    scope = InvocationScope()
    session = _session({"scratchPrefix": OWN, "incarnation": "i1"})
    other = ScratchStep(dataclasses.replace(CONFIG, scratch_bucket="other-bucket"), s3)

    _run(s3, StepContext(session, scope=scope))
    other.run(Plan(PLAN_RUN, payload=OWN), StepContext(session, scope=scope))

    assert _keys(s3) == [] and _keys(s3, bucket="other-bucket") == []


def test_rule_waits_for_the_shared_delete_go_through_the_contexts_waiting(s3: Any) -> None:
    """The deleter waits inside the step context's ``waiting`` (which lends the step's call
    slot to other calls while it waits for another step's ``DeleteObjects``)."""
    entered: list[str] = []

    class Recording(StepContext):
        def waiting(self) -> AbstractContextManager[None]:
            entered.append("waiting")
            return nullcontext()

    _put(s3, "a")

    _run(s3, Recording(_session({"scratchPrefix": OWN, "incarnation": "i1"})))

    assert entered and _keys(s3) == []


# --- listing ----------------------------------------------------------------------------------
def test_rule_a_dry_run_counts_the_keys_under_the_prefix_over_every_page(s3: Any) -> None:
    """Page one names a key outside the prefix (stubbed: S3 never does): not counted."""
    urls = _pages(
        s3,
        _listing([f"{OWN}a", f"{OWN}b", "sessions/s-10/x"], token="t1"),
        _listing([f"{OWN}c"]),
    )
    ctx = StepContext(_session({"scratchPrefix": OWN, "incarnation": "i1"}))

    outcome = ScratchStep(CONFIG, s3).preview(Plan(PLAN_RUN, payload=OWN), ctx)

    assert outcome == STEP_DRY_RUN
    assert ctx.log == {"objectsDeleted": 0, "objectsWouldBeDeleted": 3}
    assert len(urls) == 2 and "continuation-token=t1" in urls[1]


def test_rule_a_listing_naming_a_key_outside_the_prefix_fails_quoting_it(s3: Any) -> None:
    _pages(s3, _listing([f"{OWN}a", "sessions/s-10/keep"]))

    failure = _failure(s3)

    assert (failure.action, failure.detail) == (
        "DeleteScratch",
        "ListObjectsV2 returned 1 key(s) outside 'sessions/s-1/i1/', e.g. "
        "'sessions/s-10/keep'; nothing outside the prefix is deleted",
    )


@pytest.mark.parametrize("preview", [False, True])
def test_rule_the_time_guard_stops_the_listing_under_its_own_action(s3: Any, preview: bool) -> None:
    urls = _pages(s3, _listing([], token="t1"))
    ctx = StepContext(_session({"scratchPrefix": OWN, "incarnation": "i1"}), lambda: True)

    failure = _failure(s3, ctx, preview=preview)

    assert (failure.action, failure.detail) == (
        "TimeGuard",
        "time guard reached while listing 'sessions/s-1/i1/'",
    )
    assert len(urls) == 1


def test_fails_a_page_without_is_truncated_saying_the_rest_cannot_be_listed(s3: Any) -> None:
    _pages(s3, _listing([]).replace(b"<IsTruncated>false</IsTruncated>", b""))

    failure = _failure(s3)

    assert (failure.action, failure.detail) == (
        "DeleteScratch",
        "ListObjectsV2 under 'sessions/s-1/i1/' answered a page without IsTruncated: the rest "
        "of the prefix cannot be listed",
    )


def test_fails_a_token_sent_before_even_when_a_last_page_would_follow(s3: Any) -> None:
    """Tokens A, A, then a last page: the second A fails the listing at once (a listing that
    goes round may never end), never a third call."""
    urls = _pages(s3, _listing([], token="A"), _listing([], token="A"), _listing([f"{OWN}a"]))

    failure = _failure(s3)

    assert (failure.action, failure.detail) == (
        "DeleteScratch",
        "ListObjectsV2 under 'sessions/s-1/i1/' answered a continuation token it was sent "
        "before: the rest of the prefix cannot be listed",
    )
    assert len(urls) == 2
