"""Timestamps in AWS answers, parsed by the standard library where it can.

botocore parses every timestamp of every response with ``botocore.utils.parse_timestamp``,
which goes through ``dateutil``: S3's ``LastModified`` of each listed object, 1,000 of them in
a full ``ListObjectsV2`` page, is about two thirds of the CPU the cleanup spends on a listing.
botocore lets a session replace that parser (botocore's documented parser setting:
``session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=...)``),
which `fast_timestamp_session` does with `parse_timestamp`: ISO 8601 through
``datetime.fromisoformat``, everything else through botocore's own parser. No home-made parser
of S3's XML: botocore still reads every element; only the text of a timestamp goes elsewhere.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import boto3
import botocore.session
from botocore.utils import parse_timestamp as botocore_parse_timestamp


def parse_timestamp(value: Any) -> dt.datetime:
    """Parse a timestamp of an AWS response as botocore does, faster for ISO 8601 text.

    Args:
        value: what the response holds: ISO 8601 text (S3's ``2026-11-30T12:00:00.000Z``), an
            RFC 822 date (HTTP headers such as ``Last-Modified``), or epoch seconds (JSON
            protocols, as a number or its text).

    Returns:
        A timezone-aware ``datetime`` equal to ``botocore.utils.parse_timestamp(value)``.
        ISO 8601 text with a time zone (``Z`` or an offset) goes through
        ``datetime.fromisoformat``; a trailing ``Z`` is written as ``+00:00`` first, since
        Python before 3.11 does not accept it. Anything else — epoch seconds, RFC 822, ISO text
        without a time zone or that ``fromisoformat`` refuses — is botocore's own parser's.

    Raises:
        ValueError: botocore's parser cannot read ``value`` either (botocore's own error).
    """
    if isinstance(value, str):
        text = value[:-1] + "+00:00" if value[-1:] in ("Z", "z") else value
        try:
            parsed = dt.datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            if parsed.tzinfo is not None:
                return parsed
    result: dt.datetime = botocore_parse_timestamp(value)
    return result


def fast_timestamp_session(**kwargs: Any) -> boto3.session.Session:
    """A new boto3 session whose clients parse response timestamps with `parse_timestamp`.

    Args:
        kwargs: passed to ``boto3.session.Session`` (``region_name``, ...). Default: none,
            so region, credentials and endpoint overrides come from the usual environment.

    The setting is per botocore session and applies to clients created from it afterwards.
    """
    core = botocore.session.get_session()
    use_fast_timestamps(core)
    return boto3.session.Session(botocore_session=core, **kwargs)


def use_fast_timestamps(core: botocore.session.Session) -> None:
    """Make the clients created from ``core`` afterwards parse timestamps with
    `parse_timestamp` (botocore's documented parser setting)."""
    factory = core.get_component("response_parser_factory")
    factory.set_parser_defaults(timestamp_parser=parse_timestamp)
