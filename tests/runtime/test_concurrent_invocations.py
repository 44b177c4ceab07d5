"""Several invocations in one execution environment (issue 39, Lambda Managed Instances): on
threads of one process sharing the handler's warm clients (the experimental threaded Python
runtime), each invocation's records, failures and results stay its own; and an invocation
writes nothing to the temporary directory that the processes of one environment share.

Real handler, real boto3 calls against moto. The API Gateway Management API's answer for one
connection is a stubbed 403 (``runtime_faults.answer``), so one invocation has a failure the
other must not see.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from runtime_faults import answer, rest_json_error
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime import handler as handler_module

JOIN_BOUND_S = 60


@pytest.fixture
def deployed(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(handler_module, "_cleaner", None)  # read this environment
    return sandbox


def _removes(sandbox: Sandbox, ids: list[str]) -> dict[str, Any]:
    sessions = {sid: sandbox.create_session(sid) for sid in ids}
    sandbox.read_stream()
    for sid in ids:
        sandbox.delete(sid)
    records = {r["dynamodb"]["Keys"]["pk"]["S"]: r for r in sandbox.removes()}
    return {"sessions": sessions, "records": records}


def test_two_invocations_on_threads_keep_their_records_and_failures(deployed: Sandbox) -> None:
    batch_a = _removes(deployed, ["a-1", "a-fail", "a-3"])
    batch_b = _removes(deployed, ["b-1", "b-2", "b-3"])
    cleaner = handler_module.get_cleaner()
    failing = batch_a["sessions"]["a-fail"].connection_id
    answer(
        cleaner.clients.apigateway,
        "DeleteConnection",
        lambda request: (
            rest_json_error(403, "ForbiddenException")
            if failing.rstrip("=") in request.url
            else None
        ),
    )
    responses: dict[str, Any] = {}
    start = threading.Barrier(2)

    def invoke(name: str, records: dict[str, Any]) -> None:
        start.wait()
        responses[name] = handler_module.handler(event(*records.values()), FakeContext())

    threads = [
        threading.Thread(target=invoke, args=("a", batch_a["records"])),
        threading.Thread(target=invoke, args=("b", batch_b["records"])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_BOUND_S)

    failed_sequence = batch_a["records"]["a-fail"]["dynamodb"]["SequenceNumber"]
    assert responses["a"] == {"batchItemFailures": [{"itemIdentifier": failed_sequence}]}
    assert responses["b"] == {"batchItemFailures": []}
    for sid in ("a-1", "a-3"):
        assert deployed.is_clean(batch_a["sessions"][sid]), sid
    for sid, session in batch_b["sessions"].items():
        assert deployed.is_clean(session), sid
    assert deployed.connection_exists(failing)


def test_each_invocation_on_threads_keeps_its_own_deadline(deployed: Sandbox) -> None:
    # One invocation arrives with its deadline already inside the time guard: it starts no
    # record and reports every one failed (retried later). The other, at the same time on
    # another thread of the same process, has minutes left and cleans all of its own.
    late = _removes(deployed, ["late-1", "late-2"])
    timely = _removes(deployed, ["timely-1", "timely-2"])
    responses: dict[str, Any] = {}
    start = threading.Barrier(2)

    def invoke(name: str, records: dict[str, Any], remaining_ms: int) -> None:
        start.wait()
        context = FakeContext(remaining_ms)
        responses[name] = handler_module.handler(event(*records.values()), context)

    threads = [
        threading.Thread(target=invoke, args=("late", late["records"], 1)),
        threading.Thread(target=invoke, args=("timely", timely["records"], 300_000)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_BOUND_S)

    late_sequences = sorted(r["dynamodb"]["SequenceNumber"] for r in late["records"].values())
    assert sorted(f["itemIdentifier"] for f in responses["late"]["batchItemFailures"]) == (
        late_sequences
    )
    assert responses["timely"] == {"batchItemFailures": []}
    assert all(deployed.is_intact(s) for s in late["sessions"].values())
    assert all(deployed.is_clean(s) for s in timely["sessions"].values())


def test_an_invocation_writes_nothing_to_the_shared_temporary_directory(
    deployed: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On Managed Instances the processes of one execution environment share its ephemeral
    # storage: the runtime keeps its state in memory, per process, and writes no file there.
    shared = tmp_path / "tmp"
    shared.mkdir()
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    batch = _removes(deployed, ["t-1", "t-2"])

    response = handler_module.handler(event(*batch["records"].values()), FakeContext())

    assert response == {"batchItemFailures": []}
    assert tempfile.gettempdir() == str(shared)
    assert sorted(os.listdir(shared)) == []
