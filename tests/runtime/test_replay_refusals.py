"""Replay never counts a REMOVE record whose cleanup step refused what its image names as cleaned.

The ownership check refuses a grant (or connection, AgentCore session) id whose ownership record
is missing or names another session (``ResourcesRefused`` ``Unclaimed``/``NotOwned``, alarmed),
the scratch step a prefix that is not the session's own (``ScratchPrefixesRefused``). In a CLI
replay those metrics go only to stderr: the JSON line and the exit status must say it, and the
on-failure object (the session's last trace) must be kept, even with ``--delete``. Ownership
refusals of normal operation (``Superseded``: a later session holds the id now) are not
refusals of the record: it is replayed and the object deleted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from runtime_support import SESSION, Sandbox, Session, event
from session_expiry_runtime.core.ownership import KIND_CONNECTION, former_owner, owner_token
from session_expiry_runtime.recovery import replay
from test_replay import failure_record, trusted

BUCKET = "failures"
KEY = "aws/lambda/esm-uuid/shard/2026/01/01/refused"


class Gone:
    """A session whose item is deleted; its image may name a grant without a session-expiry
    ``Name`` and without an ownership record (made outside ``SessionStore``) or a prefix without
    an incarnation."""

    def __init__(
        self, sandbox: Sandbox, session_id: str, *, named_grant: bool, own_prefix: bool
    ) -> None:
        self.session: Session = sandbox.create_session(session_id)
        self.grant_id = self.session.grant_id
        values: dict[str, Any] = {}
        if not named_grant:
            self.grant_id = sandbox.create_grant({"pk": session_id}, "")["GrantId"]
            values[":g"] = {"S": self.grant_id}
        if not own_prefix:
            values[":p"] = {"S": f"sessions/{session_id}/"}
        if values:
            sets = {":g": "grantId = :g", ":p": "scratchPrefix = :p"}
            sandbox.ddb.update_item(
                TableName="sessions",
                Key={"pk": {"S": session_id}},
                UpdateExpression="SET " + ", ".join(sets[k] for k in values),
                ExpressionAttributeValues=values,
            )


def _put_failure_object(sandbox: Sandbox, gone: list[Gone]) -> list[str]:
    """Delete the sessions and write the S3 on-failure object of their REMOVE batch."""
    sandbox.read_stream()  # the INSERT/MODIFY records are not part of the failed batch
    for g in gone:
        sandbox.delete(g.session.session_id)
    records = sandbox.removes()
    body = failure_record(sandbox, records)
    body["payload"] = json.dumps(event(*records))
    sandbox.s3.create_bucket(Bucket=BUCKET)
    sandbox.s3.put_object(Bucket=BUCKET, Key=KEY, Body=json.dumps(body).encode())
    return [r["dynamodb"]["SequenceNumber"] for r in records]


def _replay(sandbox: Sandbox, *, dry_run: bool = False) -> replay.ReplayOutcome:
    return replay.replay_s3_object(
        sandbox.s3,
        BUCKET,
        KEY,
        streams=sandbox.streams,
        cleaner=sandbox.cleaner(),
        trusted=trusted(sandbox),
        tables=sandbox.ddb,
        dry_run=dry_run,
        delete=True,
    )


def _object_kept(sandbox: Sandbox) -> bool:
    return "Contents" in sandbox.s3.list_objects_v2(Bucket=BUCKET, Prefix=KEY)


def test_fails_to_count_a_refused_grant_as_cleaned_and_keeps_the_object(sandbox: Sandbox) -> None:
    gone = Gone(sandbox, "s-1", named_grant=False, own_prefix=True)
    (number,) = _put_failure_object(sandbox, [gone])

    outcome = _replay(sandbox)

    assert outcome.status == "nothing-cleaned" and not outcome.deleted and outcome.cleaned == 0
    assert outcome.not_cleaned == {number: "refused"}
    assert list(outcome.refused) == [number]
    assert list(outcome.refused[number]) == ["RetireGrant"]
    assert outcome.refused[number]["RetireGrant"] == f"ownership: {gone.grant_id} Unclaimed"
    assert "refused" in (outcome.error or "")
    assert _object_kept(sandbox)
    assert gone.grant_id in sandbox.grant_ids()  # left in place: not provably the session's
    assert not sandbox.keys_under(gone.session.prefix)  # the steps that could run, did


def test_fails_to_count_a_refused_scratch_prefix_as_cleaned_and_keeps_the_object(
    sandbox: Sandbox,
) -> None:
    gone = Gone(sandbox, "s-1", named_grant=True, own_prefix=False)
    (number,) = _put_failure_object(sandbox, [gone])

    outcome = _replay(sandbox)

    assert outcome.status == "nothing-cleaned" and not outcome.deleted
    assert outcome.not_cleaned == {number: "refused"}
    assert list(outcome.refused[number]) == ["DeleteScratch"]
    assert "sessions/s-1/" in outcome.refused[number]["DeleteScratch"]
    assert _object_kept(sandbox)
    assert sorted(sandbox.keys_under(gone.session.prefix)) == sorted(gone.session.keys)
    assert gone.grant_id not in sandbox.grant_ids()


def test_fails_to_count_a_record_with_both_steps_refused_as_cleaned(sandbox: Sandbox) -> None:
    # The reviewer's case: a gone session whose grant has no session-expiry Name and whose
    # prefix has no incarnation; before, this was "replayed" and the object deleted.
    gone = Gone(sandbox, "s-1", named_grant=False, own_prefix=False)
    (number,) = _put_failure_object(sandbox, [gone])

    outcome = _replay(sandbox)

    assert outcome.status == "nothing-cleaned" and not outcome.deleted
    assert sorted(outcome.refused[number]) == ["DeleteScratch", "RetireGrant"]
    assert _object_kept(sandbox)
    assert gone.grant_id in sandbox.grant_ids() and sandbox.keys_under(gone.session.prefix)


def test_fails_to_delete_a_batch_where_one_record_had_a_step_refused(sandbox: Sandbox) -> None:
    clean = Gone(sandbox, "s-0", named_grant=True, own_prefix=True)
    refused = Gone(sandbox, "s-1", named_grant=False, own_prefix=True)
    _, second = _put_failure_object(sandbox, [clean, refused])

    outcome = _replay(sandbox)

    assert outcome.status == "partly-cleaned" and not outcome.deleted
    assert outcome.removes == 2 and outcome.cleaned == 1
    assert outcome.not_cleaned == {second: "refused"} and list(outcome.refused) == [second]
    assert sandbox.is_clean(clean.session)
    assert _object_kept(sandbox)


def test_fails_a_dry_run_of_a_record_whose_grant_would_be_refused(sandbox: Sandbox) -> None:
    gone = Gone(sandbox, "s-1", named_grant=False, own_prefix=True)
    (number,) = _put_failure_object(sandbox, [gone])

    outcome = _replay(sandbox, dry_run=True)

    assert outcome.status == "nothing-cleaned" and not outcome.deleted
    assert list(outcome.refused[number]) == ["RetireGrant"]
    assert sandbox.is_intact(gone.session)  # the dry run changed nothing


def test_a_record_with_no_refused_step_is_still_replayed_and_deleted(sandbox: Sandbox) -> None:
    gone = Gone(sandbox, "s-1", named_grant=True, own_prefix=True)
    _put_failure_object(sandbox, [gone])

    outcome = _replay(sandbox)

    assert outcome.status == "replayed" and outcome.deleted, outcome.error
    assert outcome.refused == {} and outcome.not_cleaned == {}
    assert sandbox.is_clean(gone.session)
    assert not _object_kept(sandbox)


def test_fails_cli_with_exit_1_and_a_line_naming_the_refused_steps(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    gone = Gone(sandbox, "s-1", named_grant=False, own_prefix=False)
    (number,) = _put_failure_object(sandbox, [gone])

    status = replay.main(
        ["--bucket", BUCKET, "--key", KEY, "--delete", "--stream-arn", sandbox.stream_arn],
        session=SESSION,
    )

    assert status == replay.EXIT_SOME_KEPT == 1
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert line["status"] == "nothing-cleaned" and line["deleted"] is False
    assert line["not_cleaned"] == {number: "refused"}
    assert sorted(line["refused"][number]) == ["DeleteScratch", "RetireGrant"]
    assert _object_kept(sandbox)


def test_a_superseded_connection_is_not_a_refusal_and_the_object_is_deleted(
    sandbox: Sandbox,
) -> None:
    # The session's connection id was taken over by a later session after this one ended
    # (reuse of an id is normal operation; the record names its former holder): the record is
    # cleaned, the connection left to its owner.
    gone = Gone(sandbox, "s-1", named_grant=True, own_prefix=True)
    former = former_owner(owner_token({"pk": "s-1"}), gone.session.incarnation)
    sandbox.claim(
        KIND_CONNECTION, gone.session.connection_id, "s-9", "inc9", former_owners=(former,)
    )
    _put_failure_object(sandbox, [gone])

    outcome = _replay(sandbox)

    assert outcome.status == "replayed" and outcome.deleted, outcome.error
    assert outcome.refused == {} and outcome.not_cleaned == {}
    assert sandbox.connection_exists(gone.session.connection_id)  # the later owner's
    assert gone.grant_id not in sandbox.grant_ids()
    assert not _object_kept(sandbox)
