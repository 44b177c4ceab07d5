"""The pure functions, without AWS: decoding, classification, TTL lag, EMF, the batch response."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from session_expiry_runtime.cleanup.cleaner import batch_response
from session_expiry_runtime.core.decode import (
    DecodeError,
    decode_attribute,
    decode_image,
    parse_record,
    to_json_value,
)
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.ttl import ttl_epoch_seconds
from session_expiry_runtime.records.classify import (
    classify_removal,
    is_ttl_identity,
    ttl_lag_seconds,
)

TTL = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


# --- decoding ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("wire", "value", "json_value"),
    [
        ({"S": "héllo"}, "héllo", "héllo"),
        ({"N": "0"}, Decimal("0"), 0),
        ({"N": "-0.5"}, Decimal("-0.5"), "-0.5"),
        ({"N": "1700000000"}, Decimal(1700000000), 1700000000),
        (
            {"N": "12345678901234567890123456789012345678"},
            Decimal("12345678901234567890123456789012345678"),
            "12345678901234567890123456789012345678",  # beyond 2**53: exact text
        ),
        ({"N": "9007199254740991"}, Decimal(2**53 - 1), 2**53 - 1),
        ({"N": "1E-130"}, Decimal("1E-130"), "1E-130"),
        (
            {"N": "9.9999999999999999999999999999999999999E+125"},
            Decimal("9.9999999999999999999999999999999999999E+125"),
            "9.9999999999999999999999999999999999999E+125",
        ),
        ({"B": "AP8="}, b"\x00\xff", "AP8="),
        ({"BOOL": False}, False, False),
        ({"NULL": True}, None, None),
        ({"SS": ["b", "a"]}, frozenset({"a", "b"}), ["a", "b"]),
        (
            {"NS": ["10", "-2.5", "3"]},
            frozenset({Decimal(10), Decimal("-2.5"), Decimal(3)}),
            ["-2.5", 3, 10],
        ),
        ({"BS": ["Ag==", "AQ=="]}, frozenset({b"\x01", b"\x02"}), ["AQ==", "Ag=="]),
        ({"L": [{"N": "1"}, {"S": "x"}]}, [Decimal(1), "x"], [1, "x"]),
        ({"M": {"a": {"M": {"b": {"NULL": True}}}}}, {"a": {"b": None}}, {"a": {"b": None}}),
    ],
)
def test_decodes_every_type_exactly(wire: dict[str, Any], value: Any, json_value: Any) -> None:
    decoded = decode_attribute(wire)
    assert decoded == value
    assert type(decoded) is type(value)
    assert to_json_value(decoded) == json_value
    json.dumps(to_json_value(decoded))


@pytest.mark.parametrize(
    "wire",
    [
        {"N": "NaN"},
        {"N": "Infinity"},
        {"N": "1_000"},
        {"N": " 1"},
        {"N": 1},
        {"B": "not base64!"},
        {"B": 5},
        {"NULL": False},
        {"BOOL": "true"},
        {"S": 1},
        {"SS": "a"},
        {"SS": [1]},
        {"NS": ["x"]},
        {"L": {}},
        {"M": []},
        {"X": "unknown type"},
        {"S": "a", "N": "1"},
        {},
        "S",
        None,
    ],
)
def test_fails_on_malformed_attribute_value(wire: Any) -> None:
    with pytest.raises(DecodeError):
        decode_attribute(wire)


def test_fails_on_image_that_is_not_a_map() -> None:
    with pytest.raises(DecodeError, match="expected a map"):
        decode_image([{"S": "x"}])


def test_parse_record_never_raises_and_keeps_only_well_typed_fields() -> None:
    for junk in (None, [], "x", {"dynamodb": "x"}, {"dynamodb": {"SequenceNumber": ""}}):
        record = parse_record(junk)
        assert record.sequence_number is None and record.old_image is None
    record = parse_record(
        {
            "eventName": "REMOVE",
            "userIdentity": TTL,
            "dynamodb": {"SequenceNumber": "42", "ApproximateCreationDateTime": 1700000100.0},
        }
    )
    assert record.sequence_number == "42"
    assert record.approximate_creation_time == Decimal("1700000100.0")
    assert record.user_identity == TTL


# --- classification -------------------------------------------------------------------------
CREATED = Decimal(1_700_003_600)


@pytest.mark.parametrize(
    ("identity", "ttl", "created", "reason", "lag"),
    [
        (TTL, Decimal(1_700_000_000), CREATED, "ttl", 3600),
        (TTL, Decimal(1_700_000_000), None, "ttl", None),  # no creation time: no lag
        (None, Decimal(1_700_000_000), CREATED, "deleted-after-expiry", 3600),
        (None, Decimal(1_700_003_600), CREATED, "deleted-after-expiry", 0),  # "at or before"
        (None, Decimal(1_700_003_601), CREATED, "explicit", None),  # still live
        (None, Decimal(1_700_000_000), None, "explicit", None),
        (TTL, "1700000000", CREATED, "explicit", None),  # String TTL never expires
        (None, "1700000000", CREATED, "explicit", None),
        (TTL, Decimal(1_700_000_000_000), CREATED, "explicit", None),  # milliseconds
        (None, Decimal(1_700_000_000_000), Decimal(1_800_000_000_000), "explicit", None),
        (TTL, None, CREATED, "explicit", None),  # missing TTL
        (TTL, True, CREATED, "explicit", None),
        (TTL, Decimal(-1), CREATED, "explicit", None),
        (TTL, frozenset({Decimal(1)}), CREATED, "explicit", None),
        (
            {"type": "Service", "principalId": "other.amazonaws.com"},
            Decimal(1),
            CREATED,
            "explicit",
            None,
        ),
        (
            {"type": "service", "principalId": "dynamodb.amazonaws.com"},
            Decimal(1),
            CREATED,
            "explicit",
            None,
        ),
        ("garbage", Decimal(1_700_000_000), CREATED, "explicit", None),  # present, not absent
    ],
)
def test_classify_removal(identity: Any, ttl: Any, created: Any, reason: str, lag: Any) -> None:
    verdict = classify_removal(
        user_identity=identity, ttl_value=ttl, approximate_creation_time=created
    )
    assert verdict.reason == reason
    assert verdict.lag_seconds == (None if lag is None else Decimal(lag))


def test_ttl_epoch_seconds_bounds() -> None:
    assert ttl_epoch_seconds(Decimal(0)) == 0
    assert ttl_epoch_seconds(99_999_999_999) == Decimal(99_999_999_999)
    assert ttl_epoch_seconds(100_000_000_000) is None
    assert ttl_epoch_seconds(1.5) is None  # floats never come out of the decoder
    assert ttl_lag_seconds(Decimal(10), Decimal(25)) == 15
    assert ttl_lag_seconds(None, Decimal(25)) is None
    assert is_ttl_identity(TTL) and not is_ttl_identity(None)


# --- EMF -------------------------------------------------------------------------------------
def _check_emf(doc: dict[str, Any]) -> None:
    """The structural rules of the EMF specification the documents must follow."""
    meta = doc["_aws"]
    assert isinstance(meta["Timestamp"], int)
    for directive in meta["CloudWatchMetrics"]:
        assert 1 <= len(directive["Namespace"]) <= 1024
        for dimension_set in directive["Dimensions"]:
            for key in dimension_set:
                assert isinstance(doc[key], str) and len(doc[key]) <= 1024
        for metric in directive["Metrics"]:
            target = doc[metric["Name"]]
            assert isinstance(target, (int, float)) or (
                isinstance(target, list) and len(target) <= 100
            )
            assert metric["Unit"] in {"Count", "Seconds"}


def test_emf_documents_follow_the_specification() -> None:
    m = MetricsRecorder("SessionExpiry")
    m.session_cleaned("ttl")
    m.session_cleaned("ttl")
    m.session_cleaned("explicit")
    m.cleanup_failed("RetireGrant")
    m.record_skipped("NotRemove")
    m.objects_deleted(7)
    m.prefix_refused()
    for lag in range(250):
        m.ttl_lag(Decimal(lag))
    lines: list[str] = []

    docs = m.flush(lines.append)

    assert len(lines) == len(docs) and all(line.endswith("\n") for line in lines)
    parsed = [json.loads(line) for line in lines]
    for doc in parsed:
        _check_emf(doc)
    by_dim = {(k, d[k]): d for d in parsed for k in ("Reason", "Action", "Cause") if k in d}
    assert by_dim[("Reason", "ttl")]["SessionsCleaned"] == 2
    assert by_dim[("Reason", "explicit")]["SessionsCleaned"] == 1
    assert by_dim[("Action", "RetireGrant")]["CleanupFailures"] == 1
    assert by_dim[("Cause", "NotRemove")]["RecordsSkipped"] == 1
    undimensioned = [d for d in parsed if d["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[]]]
    assert [len(d["TtlLagSeconds"]) for d in undimensioned] == [100, 100, 50]
    assert undimensioned[0]["ScratchObjectsDeleted"] == 7
    assert undimensioned[0]["ScratchPrefixesRefused"] == 1
    assert m.flush(lines.append) == []  # reset after a flush


def test_emf_nothing_recorded_writes_nothing() -> None:
    lines: list[str] = []
    assert MetricsRecorder("ns").flush(lines.append) == [] and lines == []


# --- the partial batch response ---------------------------------------------------------------
def test_batch_response_has_each_exact_identifier_once_and_never_an_empty_one() -> None:
    assert batch_response([]) == {"batchItemFailures": []}
    assert batch_response(["300", None, "", "100", "300"]) == {
        "batchItemFailures": [{"itemIdentifier": "300"}, {"itemIdentifier": "100"}]
    }


def test_not_xml_safe_matches_exactly_the_characters_outside_xml_1_0_char_plus_cr() -> None:
    """Every code point: the scratch step's class of unsafe characters is the complement of XML
    1.0's ``Char`` production (W3C XML 1.0, section 2.2), plus CR."""
    from session_expiry_runtime.steps.scratch import NOT_XML_SAFE

    def xml_char(c: int) -> bool:
        return (
            c in (0x9, 0xA, 0xD)
            or 0x20 <= c <= 0xD7FF
            or 0xE000 <= c <= 0xFFFD
            or 0x10000 <= c <= 0x10FFFF
        )

    wrong = [
        c
        for c in range(0x110000)
        if bool(NOT_XML_SAFE.search(chr(c))) != (not xml_char(c) or c == 0xD)
    ]
    assert wrong == []
