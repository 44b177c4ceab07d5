"""Event filter patterns of the cleanup function's event source mapping.

AWS references: Lambda developer guide, "Lambda event filtering" and "Using event filtering
with a DynamoDB event source"; DynamoDB developer guide, "DynamoDB Streams and Time to Live".
A record that matches no filter is dropped for good, so the cleanup handler never depends on
the filter: it skips any record that is not a REMOVE.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from aws_cdk import aws_lambda as lambda_

#: Principal DynamoDB writes into ``userIdentity`` of a REMOVE record caused by TTL.
TTL_PRINCIPAL_ID = "dynamodb.amazonaws.com"


class CleanupEventFilter(enum.Enum):
    """Which stream records reach the cleanup function."""

    #: Every REMOVE record: sessions deleted by TTL and sessions ended explicitly
    #: (``SessionStore.end``). Use this unless explicit deletes are cleaned elsewhere.
    ALL_REMOVES = "ALL_REMOVES"
    #: Only REMOVE records whose ``userIdentity`` says DynamoDB's TTL process deleted the item.
    #: Explicit deletes are dropped by the filter. In a global table, replicated TTL deletes
    #: carry no ``userIdentity`` in the other Regions and are dropped there too, so use this
    #: only on a single-Region table.
    TTL_DELETES_ONLY = "TTL_DELETES_ONLY"


#: The deletes the library itself makes, each a DynamoDB ``DeleteItem`` whose REMOVE record
#: carries no ``userIdentity`` (only DynamoDB's TTL process sets one): the expiry sweeper's
#: conditional delete of a due session, ``SessionStore.create``'s delete of an expired item
#: before it reuses the id, and ``SessionStore.end``.
LIBRARY_DELETES = (
    "the expiry sweeper's DeleteItem of a due session",
    "SessionStore.create's DeleteItem of an expired item before reusing its id",
    "SessionStore.end's DeleteItem",
)


def passes_library_deletes(event_filter: CleanupEventFilter) -> bool:
    """True when ``event_filter`` lets every one of `LIBRARY_DELETES` reach the cleanup.

    ``TTL_DELETES_ONLY`` requires the TTL ``userIdentity``, which none of them carries, so it
    drops them for good (``tests/infra/test_guards.py`` runs the library's real deletes through
    the synthesized filter with moto's pattern matcher).
    """
    return event_filter is CleanupEventFilter.ALL_REMOVES


def filter_pattern(
    event_filter: CleanupEventFilter, *, owner_region: tuple[str, str] | None = None
) -> dict[str, Any]:
    """The filter pattern for ``event_filter``, as the dict that ``FilterCriteria.filter`` takes.

    Every leaf is a list of ``FilterRule`` values, matched case sensitively. ``owner_region``
    (attribute name, Region) adds a global table's owner Region: only REMOVEs whose old image
    holds that String reach the function (``multi_region``).
    """
    pattern: dict[str, Any] = {"eventName": lambda_.FilterRule.is_equal("REMOVE")}
    if event_filter is CleanupEventFilter.TTL_DELETES_ONLY:
        pattern["userIdentity"] = {
            "type": lambda_.FilterRule.is_equal("Service"),
            "principalId": lambda_.FilterRule.is_equal(TTL_PRINCIPAL_ID),
        }
    if owner_region is not None:
        attribute, region = owner_region
        pattern["dynamodb"] = {"OldImage": {attribute: {"S": lambda_.FilterRule.is_equal(region)}}}
    return pattern


def filter_criteria(
    event_filter: CleanupEventFilter,
    *,
    owner_region: tuple[str, str] | None = None,
    under_data: bool = False,
    table_name: str | None = None,
) -> list[Mapping[str, Any]]:
    """The ``filters`` of the event source mapping for ``event_filter``.

    Built with ``FilterCriteria.filter``: a bare dict of ``FilterRule`` values would
    synthesize an empty pattern, which matches every record. ``under_data`` nests the pattern
    under ``data``, where Lambda filters Kinesis records (Lambda Developer Guide, "Filtering
    Kinesis events": a Kinesis Data Streams for DynamoDB record is JSON in ``data``), and adds
    its ``tableName`` when ``table_name`` is given: a Kinesis stream may carry several tables'
    changes, a DynamoDB stream (whose records have no ``tableName``) one table's.
    """
    pattern = filter_pattern(event_filter, owner_region=owner_region)
    if not under_data:
        return [lambda_.FilterCriteria.filter(pattern)]
    if table_name is not None:
        pattern["tableName"] = lambda_.FilterRule.is_equal(table_name)
    return [lambda_.FilterCriteria.filter({"data": pattern})]
