"""Listed objects parsed for their keys only (``session_expiry_runtime.core.listing_model``).

The cleanup's S3 clients come from a session whose data loader answers the S3 model with the
``Object`` shape reduced to ``Key``: botocore's own parser then converts one member of each
listed object instead of all of them. What the cleanup reads of a listing — every key, in
order, ``IsTruncated``, ``NextContinuationToken``, ``KeyCount`` — must be exactly what the
unchanged model gives, for any keys: moto answers here, real boto3 parses both ways.
"""

from __future__ import annotations

import copy
from typing import Any

import boto3
import botocore.session
from botocore.model import ServiceModel
from botocore.parsers import ResponseParserFactory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_support import BUCKET, Sandbox
from session_expiry_runtime.cleanup.cleaner import build_clients
from session_expiry_runtime.core.clients import cleanup_session
from session_expiry_runtime.core.listing_model import (
    KeysOnlyListingLoader,
    KeysOnlyParserFactory,
    keys_only_s3_model,
)
from session_expiry_runtime.core.timestamps import parse_timestamp

#: S3 object key text: any Unicode but surrogates and control characters (S3 lists any key
#: URL-encoded, which botocore asks for and decodes; a control character cannot be written in
#: the XML of the DeleteObjects that would clean up between examples), XML's specials included.
KEY_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from("<>&'\"%+ /="),
    min_size=1,
    max_size=40,
)
#: One prefix per example: nothing an example leaves is listed by another.
_EXAMPLES = iter(range(1_000_000))
#: The cleanup's scratch client, built once a test (building clients is the slow part).
_CLIENTS: dict[int, Any] = {}


def _pages(s3: Any, prefix: str, page_size: int) -> list[dict[str, Any]]:
    paginator = s3.get_paginator("list_objects_v2")
    pages = paginator.paginate(
        Bucket=BUCKET, Prefix=prefix, PaginationConfig={"PageSize": page_size}
    )
    return [
        {
            "keys": [item["Key"] for item in page.get("Contents") or ()],
            "members": {frozenset(item) for item in page.get("Contents") or ()},
            "IsTruncated": page.get("IsTruncated"),
            "NextContinuationToken": page.get("NextContinuationToken"),
            "KeyCount": page.get("KeyCount"),
        }
        for page in pages
    ]


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    names=st.lists(KEY_TEXT, min_size=1, max_size=12, unique=True),
    page_size=st.integers(min_value=1, max_value=5),
)
def test_the_keys_only_listing_reads_what_botocores_full_listing_reads(
    sandbox: Sandbox, names: list[str], page_size: int
) -> None:
    prefix = f"sessions/prop-{next(_EXAMPLES)}/"
    sandbox.put_objects([prefix + name for name in names])
    if id(sandbox) not in _CLIENTS:  # the cleanup's own session, once per test's moto
        _CLIENTS.clear()
        _CLIENTS[id(sandbox)] = build_clients(sandbox.config).s3
    reduced = _pages(_CLIENTS[id(sandbox)], prefix, page_size)
    full = _pages(sandbox.s3, prefix, page_size)

    assert [p["keys"] for p in reduced] == [p["keys"] for p in full]
    assert sorted(k for p in reduced for k in p["keys"]) == sorted(prefix + n for n in names)
    for ours_page, their_page in zip(reduced, full, strict=True):
        for field in ("IsTruncated", "NextContinuationToken", "KeyCount"):
            assert ours_page[field] == their_page[field]
        assert ours_page["members"] <= {frozenset({"Key"})}  # the reduction is in effect
        assert all("LastModified" in m for m in their_page["members"])


def test_the_reduced_model_leaves_botocores_cached_model_and_every_other_shape_alone() -> None:
    loader = botocore.session.get_session().get_component("data_loader")
    model = loader.load_service_model("s3", "service-2")
    before = copy.deepcopy(model)

    reduced = keys_only_s3_model(model)

    assert model == before  # botocore's loader caches it: never changed in place
    assert reduced["shapes"]["Object"]["members"] == {
        "Key": model["shapes"]["Object"]["members"]["Key"]
    }
    others = {k: v for k, v in reduced["shapes"].items() if k != "Object"}
    assert others == {k: v for k, v in model["shapes"].items() if k != "Object"}


def test_a_model_without_the_object_shape_is_answered_unchanged() -> None:
    model: dict[str, Any] = {"shapes": {"Bucket": {"type": "structure", "members": {}}}}
    assert keys_only_s3_model(model) is model
    assert keys_only_s3_model({"shapes": {"Object": {"members": {"Size": {}}}}})["shapes"] == {
        "Object": {"members": {"Size": {}}}
    }


def test_other_services_and_model_types_come_from_botocores_loader_unchanged() -> None:
    core = botocore.session.get_session()
    theirs = core.get_component("data_loader")
    ours = KeysOnlyListingLoader(theirs)

    assert ours.load_service_model("kms", "service-2") is theirs.load_service_model(
        "kms", "service-2"
    )
    assert ours.load_service_model("s3", "paginators-1") is theirs.load_service_model(
        "s3", "paginators-1"
    )
    assert ours.load_service_model("s3", "service-2") is ours.load_service_model("s3", "service-2")
    assert ours.list_available_services("service-2") == theirs.list_available_services("service-2")


def test_only_the_cleanups_session_lists_keys_only(sandbox: Sandbox) -> None:
    sandbox.put_objects(["sessions/t/a.txt"])
    plain = boto3.session.Session().client("s3")
    cleanup = cleanup_session().client("s3")

    (theirs,) = plain.list_objects_v2(Bucket=BUCKET, Prefix="sessions/t/")["Contents"]
    (ours,) = cleanup.list_objects_v2(Bucket=BUCKET, Prefix="sessions/t/")["Contents"]

    assert ours == {"Key": "sessions/t/a.txt"}
    assert theirs["Key"] == ours["Key"] and "Size" in theirs


S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
#: Members S3 sends beside ``Key`` in a listed object (Amazon S3 API Reference, "Object").
OTHER_MEMBERS = {
    "LastModified": "2026-11-30T12:00:00.000Z",
    "ETag": "&quot;9dd4e461268c8034f5c8564e155c67a6&quot;",
    "Size": "1",
    "StorageClass": "STANDARD",
    "ChecksumAlgorithm": "CRC64NVME",
    "ChecksumType": "FULL_OBJECT",
    "Owner": "<ID>abc</ID><DisplayName>me</DisplayName>",
}


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@st.composite
def listed_object(draw: Any) -> str:
    """One ``<Contents>`` element: usually one ``Key`` among S3's other members in any order;
    sometimes none or two (botocore's own answer must then come out)."""
    members = draw(st.lists(st.sampled_from(sorted(OTHER_MEMBERS)), unique=True))
    key_text = KEY_TEXT | st.just("")  # an empty element is an empty string, not None
    keys = draw(st.lists(key_text, max_size=2))  # none, one or two
    if draw(st.integers(0, 9)) > 0:  # mostly one, as S3 sends
        keys = keys[:1] or [draw(key_text)]
    children = [f"<{m}>{OTHER_MEMBERS[m]}</{m}>" for m in members]
    children += [f"<Key>{_escape(k)}</Key>" for k in keys]
    order = draw(st.permutations(range(len(children))))
    return "<Contents>" + "".join(children[i] for i in order) + "</Contents>"


def _parse(factory: Any, model: dict[str, Any], body: bytes) -> Any:
    shape = ServiceModel(model, "s3").operation_model("ListObjectsV2").output_shape
    factory.set_parser_defaults(timestamp_parser=parse_timestamp)
    response = {"body": body, "headers": {}, "status_code": 200}
    return _comparable(factory.create_parser("rest-xml").parse(response, shape))


def _comparable(value: Any) -> Any:
    """``value`` with XML elements as (tag, text): botocore answers a member that occurs twice
    (two ``Key`` children) with its raw elements, which compare by identity."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if hasattr(value, "tag") and hasattr(value, "text"):
        return ("element", value.tag, value.text)
    return value


@settings(max_examples=200, deadline=None)
@given(
    objects=st.lists(listed_object(), max_size=8),
    namespaced=st.booleans(),
    truncated=st.booleans(),
)
def test_the_keys_only_parser_answers_what_botocores_parser_answers(
    objects: list[str], namespaced: bool, truncated: bool
) -> None:
    """The shortcut (one ``Key`` child read by tag) against botocore's generic walk, on the
    same reduced model and the same body; and on the full model, where it must not apply."""
    ns = f' xmlns="{S3_NS}"' if namespaced else ""
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult{ns}><Name>b</Name>'
        f"<Prefix>sessions/</Prefix><KeyCount>{len(objects)}</KeyCount><MaxKeys>1000</MaxKeys>"
        f"<IsTruncated>{str(truncated).lower()}</IsTruncated>"
        + ("<NextContinuationToken>tok</NextContinuationToken>" if truncated else "")
        + "".join(objects)
        + "</ListBucketResult>"
    ).encode()
    full = botocore.session.get_session().get_component("data_loader")
    model = full.load_service_model("s3", "service-2")
    reduced = keys_only_s3_model(model)

    ours = _parse(KeysOnlyParserFactory(), reduced, body)
    assert ours == _parse(ResponseParserFactory(), reduced, body)
    assert _parse(KeysOnlyParserFactory(), model, body) == _parse(
        ResponseParserFactory(), model, body
    )


def test_the_cleanups_session_keeps_the_timestamp_setting_with_the_keys_only_parser() -> None:
    core = cleanup_session()._session
    factory = core.get_component("response_parser_factory")
    assert isinstance(factory, KeysOnlyParserFactory)
    assert factory.create_parser("rest-xml")._timestamp_parser is parse_timestamp
    assert factory.create_parser("json")._timestamp_parser is parse_timestamp
