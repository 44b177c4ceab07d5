"""Review 33: replay CLI values an operator's shell can produce empty.

``--queue-url "$QUEUE_URL"`` with the variable unset passes ``--queue-url ''``. argparse counts
the option as given (the source group is satisfied), but every later check asks whether the
value is truthy, so an empty source was taken for no source at all:

* ``--queue-url ''`` (or ``--kinesis-stream-arn ''``) ran the S3 branch with ``Bucket=None``
  after resolving the trusted streams and building the cleaner: a ``TypeError`` traceback and
  no summary line;
* ``--queue-url '' --max-messages 1`` was refused as "expected it only with --queue-url URL";
* ``--env-from-function ''`` silently ran with the shell's own ``SESSION_EXPIRY_*`` settings
  and replayed (deleted) the queue's messages;
* ``--stream-arn ''`` was silently ignored (the trust was not narrowed as asked).

Each must be refused before any AWS call, exit 2, naming the option. Real moto resources and
the real CLI entry point (``replay.main``), as ``test_review21_replay``.
"""

from __future__ import annotations

import pytest
from runtime_support import SESSION, Sandbox, aws_calls
from session_expiry_runtime.recovery import replay
from test_replay import FailedBatch
from test_replay_trust import _settings


@pytest.fixture
def failed(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> FailedBatch:
    batch = FailedBatch(sandbox)
    _settings(monkeypatch, sandbox)
    return batch


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--queue-url", ""], "--queue-url"),
        (["--queue-url", "", "--max-messages", "1"], "--queue-url"),
        (["--bucket", "", "--key", "k"], "--bucket"),
        (["--kinesis-stream-arn", ""], "--kinesis-stream-arn"),
        (["--queue-url", "Q", "--stream-arn", ""], "--stream-arn"),
        (["--queue-url", "Q", "--env-from-function", ""], "--env-from-function"),
    ],
    ids=[
        "queue-url",
        "queue-url-max-messages",
        "bucket",
        "kinesis-stream-arn",
        "stream-arn",
        "env-from-function",
    ],
)
def test_fails_an_empty_option_value_before_any_call(
    failed: FailedBatch, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    argv = [failed.queue_url if a == "Q" else a for a in argv]
    with aws_calls() as calls, pytest.raises(SystemExit) as exited:
        replay.main(argv, session=SESSION)

    assert exited.value.code == replay.EXIT_COULD_NOT_RUN
    err = capsys.readouterr().err
    assert f"argument {named}" in err and "expected a non-empty value" in err
    assert calls == []  # refused before any AWS call
    assert failed.queued() == 1  # the message is still there
    assert failed.connections_open()  # nothing cleaned
