"""CPU of parsing one full ``ListObjectsV2`` page (1,000 keys), by timestamp parser, with the
cleanup's keys-only S3 model and with its keys-only parser
(``session_expiry_runtime.core.listing_model``); CPU of validating and serialising one 1,000-key
``DeleteObjects`` request; CPU of listing an empty scratch prefix through botocore's paginator
and through the scratch step's own page loop (``ScratchStep._pages``).

botocore's own parser (``dateutil`` through ``botocore.utils.parse_timestamp``) against the
cleanup's setting (:func:`session_expiry_runtime.core.timestamps.parse_timestamp`), on the same
response body as the bench endpoint sends: the whole botocore ``rest-xml`` parse, every element,
only the timestamp parser differs. ``time.process_time``, best of a few rounds.
"""

from __future__ import annotations

import time
from typing import Any

from . import harness  # noqa: F401 - puts the runtime package on sys.path


def _parse_ms(
    timestamp_parser: Any, rounds: int, keys_only: bool = False, keys_parser: bool = False
) -> float:
    import botocore.session
    from botocore.model import ServiceModel
    from botocore.parsers import ResponseParserFactory
    from session_expiry_runtime.core.listing_model import KeysOnlyParserFactory, keys_only_s3_model

    from .endpoint import STATE, _list_xml

    STATE.reset()
    STATE.seed({"objects": {"b": {"sessions/s-1/": 1000}}})
    body = _list_xml("b", {"list-type": "2", "prefix": "sessions/s-1/", "encoding-type": "url"})
    loader = botocore.session.get_session().get_component("data_loader")
    data = loader.load_service_model("s3", "service-2")
    model = ServiceModel(keys_only_s3_model(data) if keys_only else data, "s3")
    shape = model.operation_model("ListObjectsV2").output_shape
    factory = KeysOnlyParserFactory() if keys_parser else ResponseParserFactory()
    if timestamp_parser is not None:
        factory.set_parser_defaults(timestamp_parser=timestamp_parser)
    parser = factory.create_parser("rest-xml")
    response = {"body": body, "headers": {}, "status_code": 200}
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        parsed = parser.parse(response, shape)
        best = min(best, time.process_time() - t0)
    assert len(parsed["Contents"]) == 1000
    return best * 1000


def _delete_objects_request_ms(rounds: int) -> dict[str, float]:
    """botocore's client-side parameter validation and serialisation of one 1,000-key
    DeleteObjects request (what the scratch client skips, what every client does)."""
    import botocore.session
    from botocore.serialize import create_serializer
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model("s3")
    op = model.operation_model("DeleteObjects")
    params = {
        "Bucket": "b",
        "Delete": {"Objects": [{"Key": f"sessions/s-1/obj-{i:05d}.bin"} for i in range(1000)]},
    }
    serializer = create_serializer("rest-xml", include_validation=False)
    best = {"validate_ms": float("inf"), "serialize_ms": float("inf")}
    for _ in range(rounds):
        t0 = time.process_time()
        report = ParamValidator().validate(params, op.input_shape)
        t1 = time.process_time()
        serializer.serialize_to_request(params, op)
        t2 = time.process_time()
        assert not report.has_errors()
        best["validate_ms"] = min(best["validate_ms"], (t1 - t0) * 1000)
        best["serialize_ms"] = min(best["serialize_ms"], (t2 - t1) * 1000)
    return best


def _empty_listing_ms(rounds: int, calls: int = 200) -> dict[str, float]:
    """CPU of one ``ListObjectsV2`` of an empty prefix, client side: botocore's paginator
    against the scratch step's page loop, on the cleanup's own S3 client. botocore's
    ``Stubber`` answers (an empty page, no HTTP): every request and response goes through the
    client's serialisation, events and parse alike, so the difference is the paginator's own
    work — the class built per ``get_paginator``, JMESPath on every page."""
    from botocore.stub import Stubber
    from session_expiry_runtime.core.clients import SCRATCH_S3_SETTINGS, cleanup_session
    from session_expiry_runtime.core.config import RuntimeConfig
    from session_expiry_runtime.core.decode import parse_record
    from session_expiry_runtime.steps.base import Session, StepContext
    from session_expiry_runtime.steps.scratch import ScratchStep

    s3 = cleanup_session().client(
        "s3",
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",  # noqa: S106 - the Stubber answers: nothing is signed
        config=SCRATCH_S3_SETTINGS,
    )
    step = ScratchStep(RuntimeConfig(scratch_bucket="b"), s3)
    prefix = "sessions/s-1/i-1/"
    page = {"IsTruncated": False, "KeyCount": 0, "Name": "b", "Prefix": prefix, "MaxKeys": 1000}

    def paginator() -> list[Any]:
        return list(s3.get_paginator("list_objects_v2").paginate(Bucket="b", Prefix=prefix))

    ctx = StepContext(Session({}, {"pk": "s-1"}, "ttl", None, parse_record({})))

    def page_loop() -> list[Any]:
        return list(step._pages(prefix, ctx))

    best = {"paginator_ms": float("inf"), "page_loop_ms": float("inf")}
    with Stubber(s3) as stub:
        for _ in range(rounds):
            for name, list_once in (("paginator_ms", paginator), ("page_loop_ms", page_loop)):
                for _ in range(calls):
                    stub.add_response("list_objects_v2", page)
                t0 = time.process_time()
                for _ in range(calls):
                    assert list_once()[0]["KeyCount"] == 0
                best[name] = min(best[name], (time.process_time() - t0) * 1000 / calls)
    return best


def run(rounds: int = 5) -> dict[str, float]:
    from session_expiry_runtime.core.timestamps import parse_timestamp

    request = _delete_objects_request_ms(rounds)
    listing = _empty_listing_ms(rounds)
    return {
        "botocore_default_ms": _parse_ms(None, rounds),
        "fromisoformat_ms": _parse_ms(parse_timestamp, rounds),
        "keys_only_ms": _parse_ms(parse_timestamp, rounds, keys_only=True),
        "keys_parser_ms": _parse_ms(parse_timestamp, rounds, keys_only=True, keys_parser=True),
        "delete_objects_validate_ms": request["validate_ms"],
        "delete_objects_serialize_ms": request["serialize_ms"],
        "empty_listing_paginator_ms": listing["paginator_ms"],
        "empty_listing_page_loop_ms": listing["page_loop_ms"],
    }


if __name__ == "__main__":
    print(run())
