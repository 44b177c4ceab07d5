"""Alarms with one meaning each (issue 21): every alarm the construct creates, in stacks that
together turn every feature on, has a description of at most 1,024 characters ending in a link
to its runbook section, ``docs/operating.md#alarm-<name>``; each such section exists on the
operator's page (an explicit ``{#alarm-<name>}`` heading id, which the site's ``attr_list``
extension renders as the anchor), gives the meaning, likely causes and a first command, and is
listed in the page's alarm table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack, assertions

from cdk_session_expiry.monitoring import alarms

from .helpers import REPO, resources_of
from .test_nag import BUILDERS, ENV

PAGE = REPO / alarms.RUNBOOK_PAGE
_LINK = re.compile(r" Runbook: docs/operating\.md#(alarm-[a-z0-9-]+)$")
_HEADING = re.compile(r"^#{2,4} .*\{#(alarm-[a-z0-9-]+)\}\s*$", re.MULTILINE)
#: Every runbook anchor the construct knows (``alarms.RUNBOOK_*``).
ANCHORS = {
    getattr(alarms, n) for n in dir(alarms) if n.startswith("RUNBOOK_") and n != "RUNBOOK_PAGE"
}


@pytest.fixture(scope="module")
def construct_alarms(cdk_context: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every alarm of the construct (not of the test stacks' own fixtures), by stack/logical id."""
    found: dict[str, dict[str, Any]] = {}
    for name, builder in BUILDERS.items():
        stack = Stack(App(context=cdk_context), "Test", env=ENV)
        builder(stack)
        template = assertions.Template.from_stack(stack).to_json()
        for logical_id, alarm in resources_of(template, "AWS::CloudWatch::Alarm").items():
            if logical_id.startswith("Sessions"):
                found[f"{name}/{logical_id}"] = alarm["Properties"]
    return found


def _sections() -> dict[str, str]:
    text = PAGE.read_text()
    matches = list(_HEADING.finditer(text))
    return {
        m.group(1): text[m.end() : matches[i + 1].start() if i + 1 < len(matches) else None]
        for i, m in enumerate(matches)
    }


def test_every_alarm_links_to_a_runbook_section_that_exists(
    construct_alarms: dict[str, dict[str, Any]],
) -> None:
    sections = _sections()
    used = set()
    for where, alarm in construct_alarms.items():
        description = alarm.get("AlarmDescription")
        assert isinstance(description, str), where
        assert len(description) <= alarms.MAX_DESCRIPTION, where
        link = _LINK.search(description)
        assert link is not None, f"{where}: {description!r}"
        assert link.group(1) in sections, f"{where}: no section {{#{link.group(1)}}}"
        used.add(link.group(1))
    # The stacks together create every kind of alarm: each known anchor is used.
    assert used == ANCHORS


def test_the_alarms_of_the_full_option_stack_are_all_checked(
    construct_alarms: dict[str, dict[str, Any]],
) -> None:
    everything = [k for k in construct_alarms if k.startswith("everything/")]
    # iterator age, errors, throttles, failure queue, skipped records, TTL health, sweeper
    # errors, orphan grants, grant sweep incomplete and errors, cleanup paused, pause watch
    # errors, circuit breaker errors, archive delivery (Firehose freshness), the Kinesis change
    # stream's iterator age, feature-flag read failures, deferred work age, deferred work
    # refused, the claim registrar's refused requests and errors, the grant key's ceiling, the
    # tool-session sweep's orphan tool sessions and errors (issue 36).
    assert len(everything) == 23


@pytest.mark.parametrize("anchor", sorted(ANCHORS))
def test_each_runbook_section_gives_meaning_causes_and_a_first_command(anchor: str) -> None:
    section = _sections()[anchor]
    assert "*Meaning*" in section and "*Likely causes*" in section, anchor
    assert "*First command*" in section and "```bash" in section, anchor
    table = PAGE.read_text().split("### ", 1)[0]
    assert f"(#{anchor})" in table, f"{anchor} is missing from the alarm table"


def test_the_page_has_no_runbook_section_no_alarm_uses() -> None:
    assert set(_sections()) == ANCHORS


def test_fails_a_description_longer_than_cloudwatch_allows() -> None:
    with pytest.raises(
        ValueError,
        match=r"alarm description of 1\d\d\d characters for "
        r"#alarm-x: expected at most 1024 \(CloudWatch's limit\)",
    ):
        alarms.described("x" * 1000, "alarm-x")


@pytest.mark.slow
def test_each_anchor_exists_in_the_built_site(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    page = (tmp_path / "operating" / "index.html").read_text()
    assert {a for a in ANCHORS if f'id="{a}"' in page} == ANCHORS


# --- alarm_runbook_base_url (issue 39) ----------------------------------------------------------

#: A hosted page at the longest URL the prop accepts (100 characters).
BASE_URL = "https://docs.example.com/" + "s" * 64 + "/operating/"


def test_every_alarm_description_links_to_the_runbook_base_url(
    cdk_context: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import functools

    from cdk_session_expiry import SessionExpiry

    from . import test_nag

    assert len(BASE_URL) == alarms.MAX_RUNBOOK_BASE_URL
    monkeypatch.setattr(
        test_nag, "SessionExpiry", functools.partial(SessionExpiry, alarm_runbook_base_url=BASE_URL)
    )
    link = re.compile(" Runbook: " + re.escape(BASE_URL) + r"#(alarm-[a-z0-9-]+)$")
    used = set()
    for name, builder in BUILDERS.items():
        stack = Stack(App(context=cdk_context), "Test", env=ENV)
        builder(stack)
        template = dict(assertions.Template.from_stack(stack).to_json())
        for logical_id, alarm in resources_of(template, "AWS::CloudWatch::Alarm").items():
            if not logical_id.startswith("Sessions"):
                continue
            description = alarm["Properties"]["AlarmDescription"]
            found = link.search(description)
            assert found is not None, f"{name}/{logical_id}: {description[-120:]!r}"
            assert len(description) <= alarms.MAX_DESCRIPTION
            assert alarms.RUNBOOK_PAGE not in description
            used.add(found.group(1))
    assert used == ANCHORS


@pytest.mark.parametrize(
    "value",
    [
        "docs.example.com/operating/",
        "http://docs.example.com/operating/",
        "https:///operating/",
        "https://docs.example.com/operating/#alarms",
        "https://docs.example.com/operating page/",
        "https://docs.example.com/operating/\n",
        "",
        BASE_URL + "x",
    ],
)
def test_fails_an_alarm_runbook_base_url_no_one_can_open(value: str) -> None:
    from cdk_session_expiry import SessionExpiry

    with pytest.raises(ValueError) as raised:
        SessionExpiry(Stack(App(), "Validation"), "Sessions", alarm_runbook_base_url=value)
    assert str(raised.value) == (
        f"alarm_runbook_base_url={value!r}: expected an https:// URL of the operator's page, "
        "with a host, no '#' fragment (each alarm appends '#alarm-<name>'), no whitespace and "
        "at most 100 characters, e.g. 'https://docs.example.com/session-expiry/operating/'"
    )


def test_fails_an_alarm_runbook_base_url_that_is_not_a_str() -> None:
    from cdk_session_expiry import PropTypeError, SessionExpiry

    with pytest.raises(PropTypeError, match=r"^alarm_runbook_base_url=42: expected a str"):
        SessionExpiry(Stack(App(), "Validation"), "Sessions", alarm_runbook_base_url=42)  # type: ignore[arg-type]
