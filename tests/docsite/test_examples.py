"""The README's and the site's examples run as written, so the docs cannot drift from the code.

Each fenced ``python`` block says how it is checked (``doc_examples``): ``run`` blocks are executed
here, in page order, beside the ``file`` blocks of the same page written to a temporary project;
CDK examples given a stack are synthesized afterwards, so a prop the construct rejects at synth
fails the test too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from moto import mock_aws

from cdk_session_expiry import CLEANUP_RUNTIME

from .doc_examples import Example, all_examples, examples, markdown_files

KINDS = ("run", "file", "fragment")
ACCOUNT, REGION = "123456789012", "us-east-1"
RUNTIME_ARN = f"arn:aws:bedrock-agentcore:{REGION}:{ACCOUNT}:runtime/my_agent-a1B2c3D4e5"
WEBSOCKET_ENDPOINT = f"https://abc123.execute-api.{REGION}.amazonaws.com/live"
CLEANUP_ROLE = f"arn:aws:iam::{ACCOUNT}:role/session-cleanup"


def problems(blocks: list[Example]) -> list[str]:
    """What is wrong with the markers of ``blocks``: a python block without one, an unknown
    kind, a fragment without its reason, a given nobody provides, a run block not in python."""
    found = []
    for block in blocks:
        if block.language == "python" and block.marker is None:
            found.append(f"{block.where}: python block without an <!-- example: ... --> marker")
        elif block.marker is not None and block.kind not in KINDS:
            found.append(f"{block.where}: unknown example kind {block.kind!r}")
        elif block.kind == "fragment" and len((block.marker or "").split()) < 2:
            found.append(f"{block.where}: a fragment must say what runs it instead")
        elif block.kind == "run" and (unknown := set(block.given.values()) - set(GIVEN)):
            found.append(f"{block.where}: no given for {sorted(unknown)}")
        elif block.kind == "run" and block.language != "python":
            found.append(f"{block.where}: only python blocks can run")
    return found


# --- what a ``given:`` name is bound to -------------------------------------------------------


class Given:
    """Real objects for the names an example assumes: CDK constructs in one stack of one app,
    and the session runtime's settings pointing at a moto table (``os.environ``, as
    ``grant_session_access`` sets them in Lambda)."""

    def __init__(self, outdir: Path, exits: ExitStack, monkeypatch: pytest.MonkeyPatch) -> None:
        self.app = App(outdir=str(outdir))
        self.stack = Stack(self.app, "Docs", env=Environment(account=ACCOUNT, region=REGION))
        self.exits = exits
        self.monkeypatch = monkeypatch
        self._env_ready = False

    def bind(self, names: dict[str, str]) -> dict[str, Any]:
        return {name: GIVEN[provider](self) for name, provider in names.items()}

    def session_env(self, *, sort_key: str | None = None) -> None:
        """A moto session table (and grant key), its settings in ``os.environ``."""
        if self._env_ready:
            return
        self._env_ready = True
        self.exits.enter_context(mock_aws())
        ddb = boto3.client("dynamodb", region_name=REGION)
        keys = [("pk", "HASH"), *([(sort_key, "RANGE")] if sort_key else [])]
        ddb.create_table(
            TableName="sessions",
            AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k, _ in keys],
            KeySchema=[{"AttributeName": k, "KeyType": t} for k, t in keys],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        # The ownership table, as the construct creates it (cdk_session_expiry.ownership).
        ddb.create_table(
            TableName="ownership",
            AttributeDefinitions=[{"AttributeName": "resource", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "resource", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        key_arn = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
        env = {
            "SESSION_EXPIRY_OWNERSHIP_TABLE_NAME": "ownership",
            # The AgentCore targets grant_session_access sets (attach_agent_session stops the
            # sessions it replaces there; the examples replace none, so nothing is called).
            "SESSION_EXPIRY_AGENT_RUNTIME_ARN": RUNTIME_ARN,
            "SESSION_EXPIRY_CODE_INTERPRETER_ID": "coder-Q1w2E3r4T5",
            "SESSION_EXPIRY_BROWSER_ID": "web-Q1w2E3r4T5",
            "SESSION_EXPIRY_TABLE_NAME": "sessions",
            "SESSION_EXPIRY_PARTITION_KEY": "pk",
            "SESSION_EXPIRY_GRANT_KEY_ARN": key_arn,
            "SESSION_EXPIRY_RETIRING_PRINCIPAL": CLEANUP_ROLE,
            "SESSION_EXPIRY_WEBSOCKET_ENDPOINT": WEBSOCKET_ENDPOINT,
        }
        if sort_key:
            env["SESSION_EXPIRY_SORT_KEY"] = sort_key
        for name, value in env.items():
            self.monkeypatch.setenv(name, value)


def _store(given: Given, *, sort_key: str | None = None) -> Any:
    from session_expiry_runtime.store import SessionStore

    given.session_env(sort_key=sort_key)
    return SessionStore.from_env()


def _function(given: Given) -> lambda_.Function:
    return lambda_.Function(
        given.stack,
        "Connect",
        runtime=CLEANUP_RUNTIME,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )


GIVEN: dict[str, Callable[[Given], Any]] = {
    # CDK objects (one stack, env us-east-1 / 123456789012)
    "stack": lambda g: g.stack,
    "stage": lambda g: apigwv2.WebSocketStage(
        g.stack, "Stage", web_socket_api=apigwv2.WebSocketApi(g.stack, "Api"), stage_name="live"
    ),
    "session_key": lambda g: kms.Key(g.stack, "SessionKey"),
    "scratch_bucket": lambda g: s3.Bucket(g.stack, "Scratch"),
    "topic": lambda g: sns.Topic(g.stack, "Alarms"),
    "connect_function": _function,
    "runtime": lambda g: RUNTIME_ARN,
    # the session runtime against moto
    "session_env": lambda g: g.session_env(),
    "store": _store,
    "sorted_store": lambda g: _store(g, sort_key="sessionId"),
    "cid": lambda g: "conn-1",
    "new_cid": lambda g: "conn-2",
    "role_arn": lambda g: f"arn:aws:iam::{ACCOUNT}:role/app",
    "rsid": lambda g: "agent-runtime-session-0000000000000001",  # 33-256 characters
    "ci": lambda g: "ci1",
    "br": lambda g: "br1",
}


# --- the markers ------------------------------------------------------------------------------


def test_every_python_block_of_the_readme_and_the_site_says_how_it_is_checked() -> None:
    blocks = all_examples()
    assert problems(blocks) == []
    assert sum(b.kind == "run" for b in blocks) >= 5


def test_fails_a_python_block_without_a_marker(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n```python\nx = 1\n```\n\n<!-- example: run -->\n```python\ny = 2\n```\n"
    )
    blocks = examples(page)
    assert [b.marker for b in blocks] == [None, "run"]
    assert problems(blocks) == ["page.md:3: python block without an <!-- example: ... --> marker"]


def test_fails_a_fragment_without_its_reason_an_unknown_given_and_an_unknown_kind(
    tmp_path: Path,
) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- example: fragment -->\n```python\nx = 1\n```\n\n"
        "<!-- example: run, given: stack wormhole -->\n```python\ny = 2\n```\n\n"
        "<!-- example: execute -->\n```python\nz = 3\n```\n"
    )
    assert problems(examples(page)) == [
        "page.md:2: a fragment must say what runs it instead",
        "page.md:7: no given for ['wormhole']",
        "page.md:12: unknown example kind 'execute'",
    ]


def test_an_indented_block_and_a_renamed_given_are_read(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "* A list item:\n\n  <!-- example: run, given: store=sorted_store -->\n"
        "  ```python\n  store.list('user-42')\n  ```\n"
    )
    (block,) = examples(page)
    assert block.code == "store.list('user-42')\n"
    assert block.given == {"store": "sorted_store"}
    assert problems([block]) == []


# --- running them -----------------------------------------------------------------------------


def _pages_with_runnable_examples() -> list[Path]:
    return [p for p in markdown_files() if any(b.kind == "run" for b in examples(p))]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path


@pytest.mark.slow
@pytest.mark.parametrize(
    "page", _pages_with_runnable_examples(), ids=lambda p: p.name.removesuffix(".md")
)
def test_the_examples_of_the_page_run_as_written(
    page: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = 0
    for number, block in enumerate(examples(page)):
        if block.kind == "file":
            target = project / block.target
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code)
            if target.suffix == ".py":  # the packages its path names (my_steps/, ...)
                for parent in list(target.relative_to(project).parents)[:-2]:
                    (project / parent / "__init__.py").touch()
        elif block.kind == "run":
            with ExitStack() as exits, monkeypatch.context() as env:
                given = Given(project / f"cdk.out.{number}", exits, env)
                namespace: dict[str, Any] = {
                    "__file__": str(project / "app.py"),
                    "__name__": "__example__",
                    **given.bind(block.given),
                }
                exec(compile(block.code, block.where, "exec"), namespace)
                if "stack" in block.given.values():
                    given.app.synth()
            ran += 1
    assert ran > 0
    assert os.getcwd() == str(project)
