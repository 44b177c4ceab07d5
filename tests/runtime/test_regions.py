"""The owner Region rules of a global table (``session_expiry_runtime.core.regions``), pure."""

from __future__ import annotations

import pytest
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.regions import owned_here, require_region, sweep_shard_value

GLOBAL = RuntimeConfig(owner_region_attribute="ownerRegion", region="eu-west-1")


@pytest.mark.parametrize(
    ("image", "owned"),
    [
        ({"ownerRegion": {"S": "eu-west-1"}}, True),
        ({"ownerRegion": {"S": "us-east-1"}}, False),
        ({"ownerRegion": {"S": "EU-WEST-1"}}, False),  # case sensitive, like the filter
        ({"ownerRegion": {"N": "1"}}, False),
        ({}, False),  # written before global_table: nobody's, as the filter drops it
        (None, False),
    ],
)
def test_a_global_table_cleans_only_its_own_regions_sessions(image: object, owned: bool) -> None:
    assert owned_here(image, GLOBAL) is owned  # type: ignore[arg-type]


def test_a_one_region_table_cleans_every_session() -> None:
    assert owned_here({}, RuntimeConfig(region="eu-west-1")) is True


def test_an_unknown_region_owns_nothing() -> None:
    config = RuntimeConfig(owner_region_attribute="ownerRegion")
    assert owned_here({}, config) is False
    assert owned_here({"ownerRegion": {"S": "eu-west-1"}}, config) is False


def test_sweep_shards_carry_the_region_on_a_global_table() -> None:
    assert sweep_shard_value(2, "eu-west-1") == "eu-west-1#2"
    assert sweep_shard_value(2, None) == "2"


def test_fails_a_global_table_without_a_region() -> None:
    with pytest.raises(ValueError, match="expected SESSION_EXPIRY_REGION or AWS_REGION"):
        require_region(RuntimeConfig(owner_region_attribute="ownerRegion"))


def test_the_region_comes_from_aws_region_unless_set() -> None:
    assert RuntimeConfig.from_env({"AWS_REGION": "ap-south-1"}).region == "ap-south-1"
    env = {"AWS_REGION": "ap-south-1", "SESSION_EXPIRY_REGION": "eu-west-1"}
    assert RuntimeConfig.from_env(env).region == "eu-west-1"
