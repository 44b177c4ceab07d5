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
