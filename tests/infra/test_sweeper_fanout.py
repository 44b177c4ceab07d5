"""The fanned-out expiry sweep (issue 38): ``expiry_sweep_shards``, ``expiry_sweep_workers`` and
``expiry_sweeper_memory_size`` in the template, and each rejected value.

One stack (synthesized once) holds ``Wide`` (7 workers over 10 shards at 1,769 MB, every 10
minutes: two rules, the second with the last two workers) and ``Quick`` (2 workers, 5 s: reserved
concurrency 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack, assertions

from cdk_session_expiry import SessionExpiry, sweeper
from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.cost import options_from_template
from cdk_session_expiry.validation import PropTypeError

from .helpers import StackTemplate

ENV = Environment(account="123456789012", region="eu-west-1")


class Synth(StackTemplate):
    def __init__(self, outdir: Path, cdk_context: dict[str, Any]) -> None:
        app = App(context=cdk_context, outdir=str(outdir))
        self.stack = stack = Stack(app, "FanOut", env=ENV)
        self.wide = SessionExpiry(
            stack,
            "Wide",
            expiry_sweep_interval=Duration.minutes(10),
            expiry_sweep_shards=10,
            expiry_sweep_workers=7,
            expiry_sweeper_memory_size=1769,
        )
        self.quick = SessionExpiry(
            stack, "Quick", expiry_sweep_interval=Duration.seconds(5), expiry_sweep_workers=2
        )
        self.template = assertions.Template.from_stack(stack)
        self.json: dict[str, Any] = self.template.to_json()


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Synth:
    return Synth(tmp_path_factory.mktemp("sweeper_fanout"), cdk_context)


def _inputs(synth: Synth, rule: Any) -> list[dict[str, Any]]:
    """Each target's event, with the scheduled time filled in as EventBridge would."""
    out = []
    for target in synth.props(rule)["Targets"]:
        transformer = target["InputTransformer"]
        assert transformer["InputPathsMap"] == {"time": "$.time"}
        template = transformer["InputTemplate"].replace("<time>", '"2026-12-06T05:00:00Z"')
        out.append(json.loads(template))
    return out


def test_one_target_per_worker_over_disjoint_shards(synth: Synth) -> None:
    sw = synth.wide.expiry_sweeper
    assert sw is not None
    assert len(sw.schedules) == 2  # 5 targets a rule (EventBridge PutTargets)
    events = [e for rule in sw.schedules for e in _inputs(synth, rule)]
    assert [e[contract.EVENT_SWEEP_SHARDS] for e in events] == [
        [0, 7],
        [1, 8],
        [2, 9],
        [3],
        [4],
        [5],
        [6],
    ]
    assert {e[contract.EVENT_SWEEP_PERIOD_SECONDS] for e in events} == {600}
    assert {e[contract.EVENT_SWEEP_SCHEDULED_AT] for e in events} == {"2026-12-06T05:00:00Z"}
    for rule in sw.schedules:
        props = synth.props(rule)
        assert props["ScheduleExpression"] == "rate(10 minutes)"
        assert {t["Arn"]["Fn::GetAtt"][0] for t in props["Targets"]} == {synth.id(sw.function)}
    assert synth.id(sw.schedules[1]).startswith("WideExpirySweeperSchedule2")


def test_shards_and_memory_reach_the_function_and_the_session_runtime(synth: Synth) -> None:
    sw = synth.wide.expiry_sweeper
    assert sw is not None
    props = synth.props(sw.function)
    assert props["MemorySize"] == 1769
    assert props["Environment"]["Variables"][contract.ENV_SWEEP_SHARDS] == "10"
    assert synth.wide.session_environment()[contract.ENV_SWEEP_SHARDS] == "10"
    assert "ReservedConcurrentExecutions" not in props  # a minute and more: none reserved


def test_a_sub_minute_sweeper_reserves_one_run_per_worker(synth: Synth) -> None:
    sw = synth.quick.expiry_sweeper
    assert sw is not None
    assert synth.props(sw.function)["ReservedConcurrentExecutions"] == 2
    (rule,) = sw.schedules
    events = _inputs(synth, rule)
    assert [e[contract.EVENT_SWEEP_SHARDS] for e in events] == [[0, 2], [1, 3]]
    assert {e[contract.EVENT_SWEEP_PERIOD_SECONDS] for e in events} == {60}  # rate(1 minute)


def test_the_bill_counts_every_worker(synth: Synth) -> None:
    resources = synth.json["Resources"]
    wide = {"Resources": {k: r for k, r in resources.items() if k.startswith("Wide")}}
    o = options_from_template(wide)
    assert (o.sweep_interval_s, o.sweep_workers, o.sweep_shards) == (600, 7, 10)
    assert o.sweeper_memory_mb == 1769


def test_shard_groups_cover_every_shard_once() -> None:
    for shards in range(1, 12):
        for workers in range(1, shards + 1):
            groups = sweeper.shard_groups(shards, workers)
            assert len(groups) == workers and all(groups)
            assert sorted(i for g in groups for i in g) == list(range(shards))


# --- rejected values --------------------------------------------------------------------------
ON = {"expiry_sweep_interval": Duration.minutes(5)}


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({**ON, "expiry_sweep_shards": 0}, r"expiry_sweep_shards=0: .* 1\.\.64"),
        ({**ON, "expiry_sweep_shards": 65}, r"expiry_sweep_shards=65: .* 1\.\.64"),
        ({**ON, "expiry_sweep_workers": 0}, r"expiry_sweep_workers=0: .* 1\.\.20"),
        (
            {**ON, "expiry_sweep_workers": 21, "expiry_sweep_shards": 32},
            r"expiry_sweep_workers=21: .* 1\.\.20",
        ),
        (
            {**ON, "expiry_sweep_workers": 5},
            "expiry_sweep_workers=5 with expiry_sweep_shards=4: expected at most one worker "
            "per shard",
        ),
        (
            {**ON, "expiry_sweeper_memory_size": 127},
            r"expiry_sweeper_memory_size=127: .* 128\.\.10240",
        ),
        (
            {**ON, "expiry_sweeper_memory_size": 10_241},
            r"expiry_sweeper_memory_size=10241: .* 128\.\.10240",
        ),
        (
            {"expiry_sweep_workers": 2},
            "expiry_sweep_workers=2 is set without expiry_sweep_interval",
        ),
        ({"expiry_sweep_shards": 8}, "expiry_sweep_shards=8 is set without expiry_sweep_interval"),
        (
            {"expiry_sweeper_memory_size": 512},
            "expiry_sweeper_memory_size=512 is set without expiry_sweep_interval",
        ),
    ],
)
def test_fails_for_a_sweeper_prop_out_of_range(
    cdk_context: dict[str, Any], props: dict[str, Any], message: str
) -> None:
    stack = Stack(App(context=cdk_context), "Test", env=ENV)
    with pytest.raises(ValueError, match=message):
        SessionExpiry(stack, "Sessions", **props)


@pytest.mark.parametrize(
    "prop", ["expiry_sweep_shards", "expiry_sweep_workers", "expiry_sweeper_memory_size"]
)
def test_fails_for_a_sweeper_prop_that_is_not_a_whole_number(
    cdk_context: dict[str, Any], prop: str
) -> None:
    stack = Stack(App(context=cdk_context), "Test", env=ENV)
    with pytest.raises(PropTypeError, match=f"{prop}="):
        SessionExpiry(stack, "Sessions", **ON, **{prop: 2.5})
