"""One cleanup invocation in a process of its own (``test_concurrent_processes.py``): its own
moto and resources, sessions named ``<prefix>-<n>``, the real handler; prints one JSON line
with the handler's answer, which sessions were cleaned and the metrics it wrote.

Run as ``python process_invocation.py PREFIX COUNT`` with ``TMPDIR`` set to the directory the
processes of one execution environment share.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from moto import mock_aws
from ownership_support import emf_totals
from runtime_support import FakeContext, Sandbox, event

from cdk_session_expiry.testing.models import _moto_transactions


def main(prefix: str, count: int) -> dict[str, object]:
    _moto_transactions.install()
    with mock_aws():
        sandbox = Sandbox()
        os.environ.update(sandbox.env())
        from session_expiry_runtime import handler

        ids = [f"{prefix}-{n}" for n in range(count)]
        sessions = {sid: sandbox.create_session(sid) for sid in ids}
        sandbox.read_stream()
        for sid in ids:
            sandbox.delete(sid)
        records = sandbox.removes()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            response = handler.handler(event(*records), FakeContext())
        return {
            "response": response,
            "cleaned": sorted(sid for sid, s in sessions.items() if sandbox.is_clean(s)),
            "metrics": emf_totals(out.getvalue()),
        }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))
