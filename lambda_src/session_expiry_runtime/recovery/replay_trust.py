"""Which streams replay trusts: the streams of the cleanup's own table, and no other.

A DynamoDB stream ARN is ``arn:<partition>:dynamodb:<region>:<account>:table/<table name>/stream/
<label>`` (Amazon DynamoDB API Reference, ``TableDescription.LatestStreamArn``; the label is a
timestamp of when the stream was enabled). Disabling a table's stream and enabling it again gives
the table a new stream with a new label, and the old stream stays readable for 24 hours
(DynamoDB Developer Guide, "Change data capture for DynamoDB Streams"): a failure of the previous
stream of the *same table* is legitimate. So replay trusts every stream of one table ARN — same
partition, Region, account and table name — and nothing else.

Where the table comes from (`resolve_trusted_streams`):

* **the settings' table** — the table the cleanup settings replay runs with belong to, first
  match wins: the DynamoDB event source mappings of the cleanup function
  (``ListEventSourceMappings``), named by ``--env-from-function`` or, when replay runs with the
  function's own environment, by Lambda's reserved ``AWS_LAMBDA_FUNCTION_NAME``; else
  ``SESSION_EXPIRY_TABLE_NAME`` (``DescribeTable``'s ``TableArn``);
* ``--stream-arn``: a stream ARN (or the table ARN) given by the operator. It narrows the trust
  to that one table, and **must name the settings' table** when the settings name one: the
  cleanup acts with its settings (grant key, scratch bucket, WebSocket endpoint, ownership
  table), and another deployment's records cleaned with them would be reported cleaned while
  their own grants and objects stay, and their messages be deleted. Such a run is refused before
  anything is read (`StreamArnNotOfSettingsTable`, naming both tables). Settings that
  name no table (no function, no ``SESSION_EXPIRY_TABLE_NAME``) leave ``--stream-arn`` the only
  source: its table must then be one replay reaches (``DescribeTable`` by its name answers that
  very ARN, in the Region and account replay runs with), else replay refuses to start
  (`StreamArnTableNotFound`): a run trusting a table that is not there would keep every
  message as ``foreign-stream``, or, with an empty queue or a Kinesis range, exit 0 having
  honoured nothing.

Without any of them replay refuses to start (`NoTrustedStream`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

#: A table ARN; table names are 3-255 of ``A-Z a-z 0-9 _ - .`` (DynamoDB naming rules).
_TABLE_ARN = r"arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table/[A-Za-z0-9_.-]{3,255}"
TABLE_ARN_PATTERN = re.compile(_TABLE_ARN)
#: A stream ARN: its table's ARN, ``/stream/`` and a non-empty label without ``/``.
STREAM_ARN_PATTERN = re.compile(f"(?P<table>{_TABLE_ARN})/stream/[^/]+")

#: Where `resolve_trusted_streams` found the table (for the operator's stderr line).
SOURCE_STREAM_ARN = "--stream-arn"
SOURCE_MAPPINGS = "the event source mappings of function {}"
SOURCE_TABLE_NAME = "SESSION_EXPIRY_TABLE_NAME {} (DescribeTable)"


class NoTrustedStream(ValueError):
    """Replay does not know which stream it may trust; it refuses to start."""


class StreamArnNotOfSettingsTable(ValueError):
    """``--stream-arn`` names another table than the cleanup settings' table; replay refuses
    to start."""


class StreamArnTableNotFound(ValueError):
    """``--stream-arn``, the only source, names a table that replay does not reach (none of
    that name, or one of another Region or account); replay refuses to start."""


def table_of_stream(stream_arn: object) -> str | None:
    """The table ARN of a DynamoDB stream ARN, or ``None`` when ``stream_arn`` is not one."""
    if not isinstance(stream_arn, str):
        return None
    match = STREAM_ARN_PATTERN.fullmatch(stream_arn)
    return match.group("table") if match else None


@dataclass(frozen=True)
class TrustedStreams:
    """Every stream of the tables in ``table_arns`` (usually one table).

    Attributes:
        table_arns: ``arn:<partition>:dynamodb:<region>:<account>:table/<name>``, each.
        source: where they came from (`SOURCE_STREAM_ARN` and friends), in words.
    """

    table_arns: tuple[str, ...]
    source: str = "the caller"

    @classmethod
    def of(cls, arn: str, *, source: str = SOURCE_STREAM_ARN) -> TrustedStreams:
        """The streams of the table of ``arn`` (a stream ARN or a table ARN).

        Raises:
            ValueError: ``arn`` is neither a DynamoDB stream ARN nor a table ARN.
        """
        table = table_of_stream(arn) or (arn if TABLE_ARN_PATTERN.fullmatch(arn) else None)
        if table is None:
            raise ValueError(
                f"{arn!r}: expected a DynamoDB stream ARN "
                "(arn:<partition>:dynamodb:<region>:<account>:table/<name>/stream/<label>) "
                "or table ARN"
            )
        return cls((table,), source)

    def owns(self, stream_arn: object) -> bool:
        """``stream_arn`` is a stream (any label) of one of the trusted tables."""
        return table_of_stream(stream_arn) in self.table_arns

    def expected(self) -> str:
        """The accepted stream ARNs, in words, for error messages."""
        return " or ".join(f"{table}/stream/<label>" for table in self.table_arns)


def _mapped_tables(lambda_client: Any, function_name: str) -> list[str]:
    tables: list[str] = []
    paginator = lambda_client.get_paginator("list_event_source_mappings")
    for page in paginator.paginate(FunctionName=function_name):
        for mapping in page.get("EventSourceMappings") or []:
            table = table_of_stream(mapping.get("EventSourceArn"))
            if table is not None and table not in tables:
                tables.append(table)
    return tables


def resolve_trusted_streams(
    session: Any,
    *,
    stream_arn: str | None = None,
    function_names: Iterable[str] = (),
    table_name: str | None = None,
) -> TrustedStreams:
    """The streams replay may act on (module docstring): the settings' table, narrowed to
    ``stream_arn``'s table when one is given.

    Args:
        session: a ``boto3.session.Session`` (its ``lambda`` and ``dynamodb`` clients).
        stream_arn: the operator's ``--stream-arn`` (a stream or table ARN). Default: none.
        function_names: functions whose DynamoDB event source mappings name the table, tried
            in order. Default: none.
        table_name: ``SESSION_EXPIRY_TABLE_NAME``. Default: none.

    Raises:
        ValueError: ``stream_arn`` is not a DynamoDB stream or table ARN.
        StreamArnNotOfSettingsTable: ``stream_arn``'s table is not the settings' table.
        StreamArnTableNotFound: ``stream_arn`` is the only source and its table is not one
            replay reaches (`require_table`).
        NoTrustedStream: no source names a table.
        botocore.exceptions.ClientError: ``ListEventSourceMappings`` or ``DescribeTable`` failed.
    """
    given = TrustedStreams.of(stream_arn) if stream_arn else None
    settings = _settings_tables(session, function_names, table_name)
    if given is None:
        if settings is None:
            raise NoTrustedStream(
                "no stream to trust: replay acts only on failures of the cleanup's own table's "
                "stream. Pass --stream-arn STREAM_ARN, or --env-from-function CLEANUP_FN (its "
                "event source mapping names the stream), or set SESSION_EXPIRY_TABLE_NAME"
            )
        return settings
    if settings is None:
        require_table(session, given.table_arns[0], stream_arn)
        return given
    if given.table_arns[0] not in settings.table_arns:
        raise StreamArnNotOfSettingsTable(
            f"--stream-arn {stream_arn} is a stream of table {given.table_arns[0]}, but the "
            f"cleanup settings are those of table {' or '.join(settings.table_arns)} (from "
            f"{settings.source}): replaying that table's failures with these settings would "
            "clean nothing of its sessions and delete its messages. Run with that table's "
            "cleanup settings (--env-from-function ITS_CLEANUP_FN), or pass a stream of "
            f"{settings.table_arns[0]}"
        )
    return given


def require_table(session: Any, table_arn: str, given: str | None = None) -> None:
    """``table_arn`` must be a table replay reaches: ``DescribeTable`` of its name, with the
    Region and credentials of ``session``, answers that very ``TableArn``.

    Args:
        session: a ``boto3.session.Session`` (its ``dynamodb`` client).
        table_arn: ``arn:<partition>:dynamodb:<region>:<account>:table/<name>``.
        given: what the operator typed (``--stream-arn``), for the message. Default: the ARN.

    Raises:
        StreamArnTableNotFound: no table of that name, or one of another Region or account
            (both ARNs in the message).
        botocore.exceptions.ClientError: ``DescribeTable`` failed otherwise (no permission).
    """
    name = table_arn.split(":table/", 1)[1]
    dynamodb = session.client("dynamodb")
    region = dynamodb.meta.region_name
    try:
        found = dynamodb.describe_table(TableName=name)["Table"]["TableArn"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
        found = None
    if found == table_arn:
        return
    what = f"--stream-arn {given or table_arn}"
    if found is None:
        raise StreamArnTableNotFound(
            f"{what}: there is no table {name!r} in {region} (DescribeTable: "
            "ResourceNotFoundException, with the account replay runs as): expected a stream of "
            "the session table, the one the cleanup function's event source mapping reads"
        )
    raise StreamArnTableNotFound(
        f"{what} names table {table_arn}, but the table {name!r} replay reaches ({region}, "
        f"the account it runs as) is {found}: expected a stream of the session table in the "
        "Region and account replay runs with (AWS_REGION, AWS_PROFILE)"
    )


def _settings_tables(
    session: Any, function_names: Iterable[str], table_name: str | None
) -> TrustedStreams | None:
    """The settings' table(s): the first function's mapped tables, else ``table_name``'s ARN;
    ``None`` when neither names one."""
    for name in function_names:
        tables = _mapped_tables(session.client("lambda"), name)
        if tables:
            return TrustedStreams(tuple(tables), SOURCE_MAPPINGS.format(name))
    if table_name:
        table_arn = session.client("dynamodb").describe_table(TableName=table_name)["Table"][
            "TableArn"
        ]
        return TrustedStreams.of(table_arn, source=SOURCE_TABLE_NAME.format(table_name))
    return None
