"""CPU of parsing one full ``ListObjectsV2`` page (1,000 keys), by timestamp parser.

botocore's own parser (``dateutil`` through ``botocore.utils.parse_timestamp``) against the
cleanup's setting (:func:`session_expiry_runtime.timestamps.parse_timestamp`), on the same
response body as the bench endpoint sends: the whole botocore ``rest-xml`` parse, every element,
only the timestamp parser differs. ``time.process_time``, best of a few rounds.
"""

from __future__ import annotations

import time
from typing import Any

from . import harness  # noqa: F401 - puts the runtime package on sys.path


def _parse_ms(timestamp_parser: Any, rounds: int) -> float:
    import botocore.session
    from botocore.parsers import ResponseParserFactory

    from .endpoint import STATE, _list_xml

    STATE.reset()
    STATE.seed({"objects": {"b": {"sessions/s-1/": 1000}}})
    body = _list_xml("b", {"list-type": "2", "prefix": "sessions/s-1/", "encoding-type": "url"})
    model = botocore.session.get_session().get_service_model("s3")
    shape = model.operation_model("ListObjectsV2").output_shape
    factory = ResponseParserFactory()
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


def run(rounds: int = 5) -> dict[str, float]:
    from session_expiry_runtime.timestamps import parse_timestamp

    return {
        "botocore_default_ms": _parse_ms(None, rounds),
        "fromisoformat_ms": _parse_ms(parse_timestamp, rounds),
    }


if __name__ == "__main__":
    print(run())
