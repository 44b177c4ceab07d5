"""Fault injection: the emulator answers chosen requests with an AWS error, until cleared."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from cdk_session_expiry.testing import Fault, LocalEmulator, MotoInternalsChanged
from cdk_session_expiry.testing.models import _moto_internals


def test_a_matching_request_fails_with_the_error_and_changes_nothing(
    emulator: LocalEmulator,
) -> None:
    emulator.open_connection("conn-faulty")
    emulator.open_connection("conn-fine")
    api = emulator.client("apigatewaymanagementapi")
    fault = emulator.inject_fault(Fault(method="DELETE", path="/@connections/conn-faulty"))
    try:
        with pytest.raises(ClientError) as raised:
            api.delete_connection(ConnectionId="conn-faulty")
        assert raised.value.response["Error"]["Code"] == "ForbiddenException"
        assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert emulator.faults_hit[fault] == 1
        assert "conn-faulty" in emulator.open_connection_ids()  # moto never saw it
        api.delete_connection(ConnectionId="conn-fine")  # other requests pass
        assert "conn-fine" not in emulator.open_connection_ids()
    finally:
        emulator.clear_fault(fault)
    api.delete_connection(ConnectionId="conn-faulty")  # the fault ended
    assert "conn-faulty" not in emulator.open_connection_ids()
    assert emulator.faults_hit[fault] == 1


def test_fault_matches_method_and_exact_path_only() -> None:
    fault = Fault(method="DELETE", path="/@connections/c-1")
    assert fault.matches({"REQUEST_METHOD": "DELETE", "PATH_INFO": "/@connections/c-1"})
    assert not fault.matches({"REQUEST_METHOD": "GET", "PATH_INFO": "/@connections/c-1"})
    assert not fault.matches({"REQUEST_METHOD": "DELETE", "PATH_INFO": "/@connections/c-10"})


def test_fails_loudly_when_the_server_no_longer_holds_a_wsgi_app() -> None:
    class Server:
        _server = None

    with pytest.raises(MotoInternalsChanged, match=r"ThreadedMotoServer\._server\.app"):
        _moto_internals.wrap_wsgi_app(Server(), lambda app: app)
