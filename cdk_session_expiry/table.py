"""The session table and the names of the session attributes the runtime reads and writes.

A new table: on-demand, time to live on the TTL attribute (a Number, epoch seconds), stream
view type ``NEW_AND_OLD_IMAGES`` (REMOVE records must carry the old image), point-in-time
recovery, AWS managed or customer managed encryption, retained by default. A table passed as
``table=`` is checked by ``validation.check_existing_table`` and used as it is.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from constructs import Construct

from . import _runtime_contract as contract
from . import validation


@dataclass(frozen=True)
class SessionAttributes:
    """Key, TTL and session attribute names, shared by the cleanup, the sweeper and the
    session runtime (through the environment of `environment`)."""

    partition_key_name: str
    sort_key_name: str | None
    time_to_live_attribute: str
    connection_id_attribute: str
    grant_id_attribute: str
    grant_token_attribute: str
    scratch_prefix_attribute: str
    tenant_attribute: str

    def props(self) -> dict[str, str | None]:
        """The names keyed by the prop that sets each one."""
        return asdict(self)

    def environment(self) -> dict[str, str]:
        """The variables naming the attributes, as the runtime's ``config`` reads them."""
        env = {
            contract.ENV_PARTITION_KEY: self.partition_key_name,
            contract.ENV_TTL_ATTRIBUTE: self.time_to_live_attribute,
            contract.ENV_CONNECTION_ID_ATTRIBUTE: self.connection_id_attribute,
            contract.ENV_GRANT_ID_ATTRIBUTE: self.grant_id_attribute,
            contract.ENV_GRANT_TOKEN_ATTRIBUTE: self.grant_token_attribute,
            contract.ENV_SCRATCH_PREFIX_ATTRIBUTE: self.scratch_prefix_attribute,
            contract.ENV_TENANT_ATTRIBUTE: self.tenant_attribute,
        }
        if self.sort_key_name is not None:
            env[contract.ENV_SORT_KEY] = self.sort_key_name
        return env


def internal_table(
    scope: Construct,
    construct_id: str,
    *,
    partition_key: str,
    time_to_live_attribute: str,
    encryption_key: kms.IKey | None,
    removal_policy: RemovalPolicy | None,
) -> dynamodb.Table:
    """A table the construct keeps for itself (the ownership and deferred-work tables): a String
    partition key, time to live, on-demand, point-in-time recovery, no stream, the session
    table's encryption (``encryption_key``, else the AWS managed key) and ``removal_policy``
    (``None``: ``RETAIN``)."""
    return dynamodb.Table(
        scope,
        construct_id,
        partition_key=dynamodb.Attribute(name=partition_key, type=dynamodb.AttributeType.STRING),
        time_to_live_attribute=time_to_live_attribute,
        **_stored_safely(encryption_key, removal_policy),
    )


def _stored_safely(
    encryption_key: kms.IKey | None, removal_policy: RemovalPolicy | None
) -> dict[str, Any]:
    """What every table of the construct shares: on-demand, point-in-time recovery, a customer
    managed key when given (else the AWS managed key), ``RETAIN`` unless told otherwise."""
    return {
        "billing_mode": dynamodb.BillingMode.PAY_PER_REQUEST,
        "point_in_time_recovery_specification": dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        "encryption": (
            dynamodb.TableEncryption.AWS_MANAGED
            if encryption_key is None
            else dynamodb.TableEncryption.CUSTOMER_MANAGED
        ),
        "encryption_key": encryption_key,
        "removal_policy": RemovalPolicy.RETAIN if removal_policy is None else removal_policy,
    }


def settle_key_names(
    table: dynamodb.ITable | None,
    *,
    partition_key_name: str | None,
    sort_key_name: str | None,
    time_to_live_attribute: str | None,
    new_table_props: dict[str, object],
) -> tuple[str, str | None, str]:
    """The key and TTL attribute names in effect: the defaults for a new table, a given
    table's own otherwise.

    ``new_table_props`` are the props that only configure a new table (rejected with ``table``).

    Raises:
        ValueError: see ``validation.check_table_only_props`` and
            ``validation.check_existing_table``.
    """
    if table is not None:
        validation.check_table_only_props(**new_table_props)
        return validation.check_existing_table(
            table,
            partition_key_name=partition_key_name,
            sort_key_name=sort_key_name,
            time_to_live_attribute=time_to_live_attribute,
        )
    return (
        contract.DEFAULT_PARTITION_KEY if partition_key_name is None else partition_key_name,
        sort_key_name,
        contract.DEFAULT_TTL_ATTRIBUTE
        if time_to_live_attribute is None
        else time_to_live_attribute,
    )


def create_table(
    scope: Construct,
    attributes: SessionAttributes,
    *,
    encryption_key: kms.IKey | None,
    removal_policy: RemovalPolicy | None,
    deletion_protection: bool | None,
    kinesis_stream: kinesis.IStream | None = None,
) -> dynamodb.Table:
    """The new session table, ``<scope>/Table`` (see the module docstring); with
    ``kinesis_stream``, its Kinesis streaming destination (the Kinesis change source), with
    ``ApproximateCreationDateTime`` in milliseconds."""
    sort_key = (
        None
        if attributes.sort_key_name is None
        else dynamodb.Attribute(name=attributes.sort_key_name, type=dynamodb.AttributeType.STRING)
    )
    return dynamodb.Table(
        scope,
        "Table",
        partition_key=dynamodb.Attribute(
            name=attributes.partition_key_name, type=dynamodb.AttributeType.STRING
        ),
        sort_key=sort_key,
        time_to_live_attribute=attributes.time_to_live_attribute,
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        **_stored_safely(encryption_key, removal_policy),
        deletion_protection=bool(deletion_protection),
        kinesis_stream=kinesis_stream,
        kinesis_precision_timestamp=(
            None
            if kinesis_stream is None
            else dynamodb.ApproximateCreationDateTimePrecision.MILLISECOND
        ),
    )
