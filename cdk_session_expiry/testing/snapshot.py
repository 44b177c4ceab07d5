"""A snapshot of the emulator's state, restored instead of deploying the same app again.

Deploying a CDK app into the emulator takes 20-40 s (synth, assets, CloudFormation); restoring
the state it left takes a fraction of a second. The pytest plugin deploys each app once per test
session, takes an [`EmulatorSnapshot`][cdk_session_expiry.testing.EmulatorSnapshot] right after the
deploy, and restores it into the
emulator of every later module that tests the same app, so each module starts from the
deployment as it was, with nothing left by another module.

What a snapshot holds: every resource of every service moto holds at that moment (moto's
backends, copied), the names of the S3 buckets, and what the
[`LocalEmulator`][cdk_session_expiry.testing.LocalEmulator] learnt while
deploying (the resource types moto's CloudFormation skipped). Not held: faults injected, AgentCore
sessions registered, and the processes and threads of a
[`LocalPipeline`][cdk_session_expiry.testing.LocalPipeline] (a pipeline is read
back from the restored state, its positions on the stream start at the stream's beginning, like
a new event source mapping at ``TRIM_HORIZON`` after the records already cleaned).

The copy relies on moto internals (`_moto_internals.snapshot_backends`); a moto release
that changes them fails loudly
([`MotoInternalsChanged`][cdk_session_expiry.testing.MotoInternalsChanged]), and a resource moto
holds that
cannot be copied raises `SnapshotError` naming its type (the plugin then deploys again).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from cdk_session_expiry.testing.emulator import LocalEmulator
from cdk_session_expiry.testing.models import _moto_internals
from cdk_session_expiry.testing.models._moto_internals import SnapshotError as SnapshotError


@dataclass
class EmulatorSnapshot:
    """The emulator's state at one moment (see the module docstring); restore it any number of
    times, into the same or a later emulator of this process.

    Attributes:
        taken_seconds: how long taking it took, in seconds.
        unmodelled_resource_types: the emulator's ``unmodelled_resource_types`` when taken.
    """

    _state: Any = field(repr=False)
    taken_seconds: float
    unmodelled_resource_types: frozenset[str] = frozenset()

    @classmethod
    def take(cls, emulator: LocalEmulator) -> EmulatorSnapshot:
        """Copy the state of ``emulator`` (running, nothing else writing to it).

        Raises:
            RuntimeError: the emulator is not running.
            SnapshotError: a resource moto holds cannot be copied (the message names its type).
            MotoInternalsChanged: moto's backends changed shape.
        """
        if not emulator.running:
            raise RuntimeError("the emulator is not running; start it before taking a snapshot")
        started = time.monotonic()
        state = _moto_internals.snapshot_backends()
        return cls(
            _state=state,
            taken_seconds=time.monotonic() - started,
            unmodelled_resource_types=frozenset(emulator.unmodelled_resource_types),
        )

    def restore(self, emulator: LocalEmulator) -> float:
        """Replace everything ``emulator`` holds by this snapshot's state (moto's reset, then the
        copied resources); faults and AgentCore sessions are cleared. Returns the seconds taken.

        Raises:
            RuntimeError: the emulator is not running.
            MotoInternalsChanged: moto's backends changed shape.
        """
        if not emulator.running:
            raise RuntimeError("the emulator is not running; start it before restoring")
        started = time.monotonic()
        emulator.reset()
        for fault in list(emulator.faults):
            emulator.clear_fault(fault)
        _moto_internals.restore_backends(self._state)
        emulator.unmodelled_resource_types.update(self.unmodelled_resource_types)
        return time.monotonic() - started
