"""The grant sweep's acting rules that `make mutation` found unpinned (issue 40), each named for
the rule: how a grant of this store is judged by its ownership record (`GrantSweeper.ownership`,
`_recorded_owner`, `_pending`), kept, retired and released (`_act`, `_release`), and what each
decision logs and counts (`_one`, `_account`). The rules of the rest of the module are in
``test_grant_sweep_mutation_rules.py``.

Real boto3 calls against moto, with the stand-ins of `test_grant_sweeper` (``CreationDate``
added to moto's ``ListGrants`` answer).
"""

from __future__ import annotations

import logging

import pytest
from ownership_support import raw_claim
from session_expiry_runtime.core.ownership import ATTR_GONE_SINCE, KIND_GRANT
from test_grant_sweep_ownership import PENDING, ended_with_claim, held_by_another, set_gone_since
from test_grant_sweeper import NOW, Grants, grants

__all__ = ["grants"]  # the fixture, shared with test_grant_sweeper.py

LOGGER = "session_expiry_runtime.sweeps.grant_sweeper"
WHOLE = NOW.replace(microsecond=0)  # a whole second: a sighting exactly the bound ago
NOW_S = int(WHOLE.timestamp())


@pytest.fixture(autouse=True)
def _info_logs(caplog: pytest.LogCaptureFixture) -> None:
    """The sweep's INFO lines (a pending grant, a grant judged by its record) in ``caplog``."""
    caplog.set_level(logging.INFO, logger=LOGGER)


def sweep_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def test_rule_the_pending_bound_ends_exactly_at_its_length(grants: Grants) -> None:
    at_bound = ended_with_claim(grants, "s-1")
    within = ended_with_claim(grants, "s-2")
    set_gone_since(grants, at_bound, NOW_S - PENDING)
    set_gone_since(grants, within, NOW_S - PENDING + 1)

    report = grants.sweeper(now=WHOLE).sweep()

    assert (report.orphans_retired, report.kept_pending) == (1, 1)
    assert at_bound not in grants.alive() and within in grants.alive()


def test_rule_a_grant_judged_by_its_record_is_logged_with_both_sessions(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    grant_id = held_by_another(grants)

    assert grants.sweeper().sweep().kept_live == 1

    (line,) = [r for r in sweep_lines(caplog) if "judged by the record" in r.getMessage()]
    assert line.levelno == logging.INFO
    assert line.getMessage() == (
        f"grant {grant_id}: its name gives session {{'pk': 's-named'}} (incarnation inc1), "
        "its ownership record {'pk': 's-holder'} (incarnation inc2): judged by the record"
    )
    assert line.grantSweep == {  # type: ignore[attr-defined]
        "grantId": grant_id,
        "namedKey": {"pk": "s-named"},
        "key": {"pk": "s-holder"},
    }


def test_rule_a_grant_recorded_for_its_own_key_is_logged_in_the_records_incarnation(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    grant_id = grants.grant("s-1", "inc-name")
    grants.sandbox.claim(KIND_GRANT, grant_id, "s-1", "inc-record")  # s-1 gone (never was)

    assert grants.sweeper().sweep().kept_pending == 1

    (line,) = [r for r in sweep_lines(caplog) if r.getMessage().startswith(f"grant {grant_id} ")]
    assert "(incarnation inc-record): session pending" in line.getMessage()
    stored = raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert stored is not None and ATTR_GONE_SINCE in stored
