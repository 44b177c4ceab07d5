"""Amazon Data Firehose's S3 delivery as the archive uses it, where moto (5.2.x) lacks it.

moto delivers each ``PutRecord``/``PutRecordBatch`` call at once (no buffering) as one object
under ``{Prefix}YYYY/MM/DD/HH/``, uncompressed: it ignores dynamic partitioning (the
``!{partitionKeyFromQuery:...}`` expressions would be written literally), ``CompressionFormat``
and ``ErrorOutputPrefix``. `install` makes an extended S3 destination with dynamic
partitioning deliver like Firehose (Firehose Developer Guide, "Dynamic partitioning"):

* each record's partition keys come from the stream's ``MetadataExtraction`` processor — its
  ``MetadataExtractionQuery`` run by ``jq`` (the PyPI binding of the same jq that Firehose runs,
  ``JsonParsingEngine`` JQ-1.6) on the record's JSON;
* records with the same keys go to one object under the ``Prefix`` with
  ``!{partitionKeyFromQuery:<key>}`` replaced by their values;
* ``CompressionFormat`` ``GZIP`` gzips the object (name ending ``.gz``);
* a record the query cannot read goes to ``ErrorOutputPrefix`` with
  ``!{firehose:error-output-type}`` = ``partitioning-failed``, as Firehose does.

Still not modelled: buffering (one object per call and partition), ``!{timestamp:...}`` and
``!{firehose:random-string}`` in a dynamic prefix, record format conversion, encryption,
retries and the 24-hour retention. Without dynamic partitioning, moto's own delivery is used.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
from collections.abc import Mapping
from typing import Any

_LOCK = threading.Lock()
_COUNT = 0
_ORIGINAL: Any = None
_PARTITION_KEY = re.compile(r"!\{partitionKeyFromQuery:([^}]+)\}")
ERROR_OUTPUT_TYPE = "partitioning-failed"


def check() -> None:
    """Raise ``MotoInternalsChanged`` if moto's Firehose lost what this module replaces."""
    from moto.firehose.models import FirehoseBackend

    from cdk_session_expiry.testing.models._moto_internals import _fail

    if not callable(getattr(FirehoseBackend, "put_s3_records", None)):
        raise _fail("FirehoseBackend.put_s3_records", "is gone (see _moto_firehose.py)")


def install() -> None:
    """Deliver dynamically partitioned streams like Firehose (idempotent, counted)."""
    global _COUNT, _ORIGINAL
    from moto.firehose.models import FirehoseBackend

    with _LOCK:
        _COUNT += 1
        if _COUNT > 1:
            return
        check()
        _ORIGINAL = FirehoseBackend.put_s3_records
        FirehoseBackend.put_s3_records = _put_s3_records  # type: ignore[method-assign,assignment]


def uninstall() -> None:
    """Undo one `install`."""
    global _COUNT, _ORIGINAL
    from moto.firehose.models import FirehoseBackend

    with _LOCK:
        if _COUNT == 0:
            return
        _COUNT -= 1
        if _COUNT == 0 and _ORIGINAL is not None:
            FirehoseBackend.put_s3_records = _ORIGINAL  # type: ignore[method-assign]
            _ORIGINAL = None


def _put_s3_records(
    backend: Any,
    delivery_stream_name: str,
    version_id: str,
    s3_destination: dict[str, Any],
    records: list[dict[str, bytes]],
) -> list[dict[str, str]]:
    query = _extraction_query(s3_destination)
    if query is None:
        return list(_ORIGINAL(backend, delivery_stream_name, version_id, s3_destination, records))
    import jq
    from moto.moto_api._internal import mock_random
    from moto.s3.models import s3_backends

    groups: dict[str, list[bytes]] = {}
    for record in records:
        groups.setdefault(_prefix_of(jq, query, s3_destination, record["Data"]), []).append(
            record["Data"]
        )
    bucket = s3_destination["BucketARN"].split(":")[-1]
    gzipped = s3_destination.get("CompressionFormat") == "GZIP"
    for prefix, lines in groups.items():
        body = b"".join(lines)
        name = f"{delivery_stream_name}-{version_id}-{mock_random.uuid4()}"
        s3_backends[backend.account_id][backend.partition].put_object(
            bucket,
            f"{prefix}{name}{'.gz' if gzipped else ''}",
            gzip.compress(body) if gzipped else body,
        )
    return [{"RecordId": str(mock_random.uuid4())} for _ in records]


def _extraction_query(destination: Mapping[str, Any]) -> str | None:
    """The ``MetadataExtractionQuery`` of a stream with dynamic partitioning on, else None."""
    if not (destination.get("DynamicPartitioningConfiguration") or {}).get("Enabled"):
        return None
    processing = destination.get("ProcessingConfiguration") or {}
    for processor in processing.get("Processors") or []:
        if processor.get("Type") != "MetadataExtraction":
            continue
        for parameter in processor.get("Parameters") or []:
            if parameter.get("ParameterName") == "MetadataExtractionQuery":
                return str(parameter["ParameterValue"])
    return None


def _prefix_of(jq: Any, query: str, destination: Mapping[str, Any], data: bytes) -> str:
    """The record's object prefix: the partition keys filled in, or the error output prefix."""
    try:
        keys = jq.compile(query).input_value(json.loads(data)).first()
        prefix = _PARTITION_KEY.sub(lambda m: str(keys[m.group(1)]), destination["Prefix"])
        if not isinstance(keys, dict) or any(v is None for v in keys.values()):
            raise ValueError(f"partition keys {keys!r}")
        return prefix
    except Exception:
        error_prefix = str(destination.get("ErrorOutputPrefix") or "")
        return error_prefix.replace("!{firehose:error-output-type}", ERROR_OUTPUT_TYPE)
