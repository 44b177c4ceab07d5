"""Custom cleanup steps (issue 10, infrastructure): the user's code beside the runtime in the
cleanup function's code asset, the step list in its environment, a grantable per step, and the
rejected inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk.assertions import Template

from cdk_session_expiry import CustomCleanupStep, SessionExpiry
from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.validation import PropTypeError

from .helpers import asset_dir

SECRETS_PY = """def delete_secret(old_image, reason):
    return None


def preview(old_image, reason):
    return {"secret": old_image.get("secretName")}
"""


@pytest.fixture
def step_dir(tmp_path: Path) -> Path:
    root = tmp_path / "steps_src"
    (root / "my_steps").mkdir(parents=True)
    (root / "my_steps" / "__init__.py").write_text("")
    (root / "my_steps" / "secrets.py").write_text(SECRETS_PY)
    (root / "my_steps" / "__pycache__").mkdir()
    (root / "my_steps" / "__pycache__" / "secrets.cpython-311.pyc").write_bytes(b"\0")
    (root / "helpers.py").write_text("VALUE = 1\n")
    return root


def _step(directory: Path, **overrides: Any) -> CustomCleanupStep:
    props: dict[str, Any] = {
        "name": "DeleteSessionSecret",
        "code": directory,
        "handler": "my_steps.secrets.delete_secret",
        "preview": "my_steps.secrets.preview",
        "attributes": ["secretName"],
        **overrides,
    }
    if "resource_attribute" not in props:
        props.setdefault("allow_acting_on_image_values", True)
    return CustomCleanupStep(**props)


def _synth(outdir: Path, steps: list[CustomCleanupStep]) -> tuple[SessionExpiry, Stack, Any]:
    app = App(outdir=str(outdir))
    stack = Stack(app, "Steps")
    sessions = SessionExpiry(stack, "Sessions", custom_steps=steps)
    template = Template.from_stack(stack).to_json()
    return sessions, stack, template


def _function_props(sessions: SessionExpiry, stack: Stack, template: Any) -> Any:
    logical_id = stack.get_logical_id(sessions.cleanup_function.node.default_child)
    return template["Resources"][logical_id]["Properties"]


def test_the_step_code_sits_beside_the_runtime_and_the_environment_lists_the_step(
    step_dir: Path, tmp_path: Path
) -> None:
    step = _step(step_dir)
    sessions, stack, template = _synth(tmp_path / "out", [step])
    props = _function_props(sessions, stack, template)

    staged = asset_dir(tmp_path / "out", props["Code"])
    assert (staged / "session_expiry_runtime" / "handler.py").is_file()
    assert (staged / "my_steps" / "secrets.py").read_text() == SECRETS_PY
    assert (staged / "helpers.py").is_file()
    assert not (staged / "my_steps" / "__pycache__").exists()
    variables = props["Environment"]["Variables"]
    assert json.loads(variables[contract.ENV_CUSTOM_STEPS]) == [
        {
            "name": "DeleteSessionSecret",
            "handler": "my_steps.secrets.delete_secret",
            "preview": "my_steps.secrets.preview",
            "attributes": ["secretName"],
        }
    ]
    assert sessions.custom_steps == (step,)
    assert sessions.custom_step("DeleteSessionSecret") is step


def test_without_steps_the_code_is_the_runtime_alone(tmp_path: Path) -> None:
    sessions, stack, template = _synth(tmp_path / "out", [])
    props = _function_props(sessions, stack, template)
    staged = asset_dir(tmp_path / "out", props["Code"])
    assert [p.name for p in staged.iterdir()] == ["session_expiry_runtime"]
    assert contract.ENV_CUSTOM_STEPS not in props["Environment"]["Variables"]


def test_two_steps_of_one_directory_stage_it_once_and_keep_their_order(
    step_dir: Path, tmp_path: Path
) -> None:
    first = _step(step_dir, name="First", preview=None, attributes=[])
    second = _step(step_dir, name="Second", handler="helpers.VALUE_fn")
    (step_dir / "helpers.py").write_text("def VALUE_fn(old_image, reason):\n    return None\n")
    sessions, stack, template = _synth(tmp_path / "out", [first, second])
    variables = _function_props(sessions, stack, template)["Environment"]["Variables"]
    listed = json.loads(variables[contract.ENV_CUSTOM_STEPS])
    assert [(s["name"], s["preview"], s["attributes"]) for s in listed] == [
        ("First", None, []),
        ("Second", "my_steps.secrets.preview", ["secretName"]),
    ]


def test_each_step_grants_to_the_cleanup_role(step_dir: Path, tmp_path: Path) -> None:
    step = _step(step_dir)
    app = App(outdir=str(tmp_path / "out"))
    stack = Stack(app, "Steps")
    sessions = SessionExpiry(stack, "Sessions", custom_steps=[step])
    secret = secretsmanager.Secret(stack, "SessionSecrets")
    secret.grant_read(step)
    iam.Grant.add_to_principal(
        grantee=sessions.custom_step("DeleteSessionSecret"),
        actions=["secretsmanager:DeleteSecret"],
        resource_arns=[secret.secret_arn],
    )
    template = Template.from_stack(stack).to_json()
    role_id = stack.get_logical_id(sessions.cleanup_role.node.default_child)
    statements = [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert {"secretsmanager:GetSecretValue", "secretsmanager:DeleteSecret"} <= actions
    assert step.grant_principal.policy_fragment.principal_json == (
        sessions.cleanup_role.grant_principal.policy_fragment.principal_json
    )


def test_metric_of_a_custom_step_uses_its_name(step_dir: Path, tmp_path: Path) -> None:
    sessions, _, _ = _synth(tmp_path / "out", [_step(step_dir)])
    metric = sessions.metric_cleanup_failures(action="DeleteSessionSecret")
    assert metric.dimensions == {contract.DIMENSION_ACTION: "DeleteSessionSecret"}


# --- rejected inputs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"name": "1st"}, r"custom step name='1st': expected a letter, then up to 63"),
        ({"name": "Delete Secret"}, r"name='Delete Secret': expected a letter"),
        ({"name": "x" * 65}, r"expected a letter, then up to 63"),
        ({"name": "DeleteConnection"}, r"name='DeleteConnection' is a built-in step's action"),
        (
            {"handler": "delete_secret"},
            r"handler='delete_secret': expected package.module.function",
        ),
        ({"handler": "my_steps.secrets."}, r"handler='my_steps.secrets.': expected package"),
        ({"handler": "my_steps.class.run"}, r"handler='my_steps.class.run': expected package"),
        (
            {"handler": "session_expiry_runtime.handler.handler"},
            r"expected a function of your own code, not of session_expiry_runtime",
        ),
        (
            {"handler": "my_steps.nothing.run"},
            r"handler='my_steps.nothing.run': expected module 'my_steps.nothing' in",
        ),
        ({"preview": "preview"}, r"preview='preview': expected package.module.function"),
        ({"attributes": ["secretName", ""]}, r"attribute=''"),
    ],
    ids=[
        "name-starts-with-digit",
        "name-with-space",
        "name-too-long",
        "name-built-in",
        "handler-no-module",
        "handler-empty-part",
        "handler-keyword",
        "handler-in-runtime",
        "handler-module-missing",
        "preview-no-module",
        "attribute-empty",
    ],
)
def test_fails_on_a_bad_step(step_dir: Path, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SessionExpiry(
            Stack(App(), "Steps"), "Sessions", custom_steps=[_step(step_dir, **overrides)]
        )


def test_fails_on_duplicate_names(step_dir: Path) -> None:
    steps = [_step(step_dir), _step(step_dir, handler="my_steps.secrets.preview")]
    with pytest.raises(ValueError, match=r"name='DeleteSessionSecret' is used twice"):
        SessionExpiry(Stack(App(), "Steps"), "Sessions", custom_steps=steps)


def test_fails_on_an_unknown_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"code='.*nowhere': expected an existing directory"):
        SessionExpiry(
            Stack(App(), "Steps"),
            "Sessions",
            custom_steps=[_step(tmp_path / "nowhere")],
        )


def test_fails_on_a_directory_with_its_own_runtime(step_dir: Path) -> None:
    (step_dir / "session_expiry_runtime").mkdir()
    with pytest.raises(ValueError, match=r"holds its own session_expiry_runtime"):
        SessionExpiry(Stack(App(), "Steps"), "Sessions", custom_steps=[_step(step_dir)])


def test_fails_on_two_directories_with_the_same_top_level_name(
    step_dir: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other_src" / "my_steps"
    other.mkdir(parents=True)
    (other / "jobs.py").write_text("def stop(old_image, reason):\n    return None\n")
    steps = [
        _step(step_dir),
        _step(other.parent, name="StopJob", handler="my_steps.jobs.stop", preview=None),
    ]
    with pytest.raises(ValueError, match=r"'my_steps' is in both .* expected distinct top-level"):
        SessionExpiry(Stack(App(), "Steps"), "Sessions", custom_steps=steps)


def test_fails_on_code_given_as_a_lambda_asset(step_dir: Path) -> None:
    step = _step(step_dir, code=lambda_.Code.from_asset(str(step_dir)))
    with pytest.raises(PropTypeError, match=r"code=.*: expected a directory path"):
        SessionExpiry(Stack(App(), "Steps"), "Sessions", custom_steps=[step])


def test_fails_on_attributes_given_as_one_string(step_dir: Path) -> None:
    step = _step(step_dir, attributes="secretName")
    with pytest.raises(PropTypeError, match=r"attributes='secretName': expected a list"):
        SessionExpiry(Stack(App(), "Steps"), "Sessions", custom_steps=[step])


def test_fails_on_custom_steps_that_are_not_steps() -> None:
    with pytest.raises(
        PropTypeError, match=r"custom_steps=.*: expected a list of CustomCleanupStep"
    ):
        SessionExpiry(Stack(App(), "Steps"), "Sessions", custom_steps=["my_steps.x.y"])  # type: ignore[list-item]


def test_fails_on_one_step_in_two_constructs(step_dir: Path) -> None:
    step = _step(step_dir)
    stack = Stack(App(), "Steps")
    SessionExpiry(stack, "First", custom_steps=[step])
    with pytest.raises(ValueError, match=r"'DeleteSessionSecret' is already used by another"):
        SessionExpiry(stack, "Second", custom_steps=[step])


def test_fails_to_grant_before_a_construct_took_the_step(step_dir: Path) -> None:
    step = _step(step_dir)
    with pytest.raises(ValueError, match=r"not used by a SessionExpiry yet"):
        _ = step.grant_principal


def test_fails_on_a_metric_of_an_unknown_step(step_dir: Path, tmp_path: Path) -> None:
    sessions, _, _ = _synth(tmp_path / "out", [_step(step_dir)])
    with pytest.raises(ValueError, match=r"action='DeleteOtherSecret': expected one of"):
        sessions.metric_cleanup_failures(action="DeleteOtherSecret")
    with pytest.raises(ValueError, match=r"custom step 'Nope': expected one of custom_steps"):
        sessions.custom_step("Nope")


_LOAD_FROM_THE_ASSET = """
import json, sys
import session_expiry_runtime
from session_expiry_runtime.steps.custom import import_function, parse_custom_steps

(spec,) = parse_custom_steps(sys.argv[1])
handler = import_function(spec.handler, spec.name)
preview = import_function(spec.preview, spec.name, "preview")
print(json.dumps({
    "runtime": session_expiry_runtime.__file__,
    "handler": handler.__module__ + "." + handler.__name__,
    "handler_file": sys.modules[handler.__module__].__file__,
    "returned": handler({"secretName": "s-1"}, "ttl"),
    "preview": preview({"secretName": "s-1"}, "ttl"),
}))
"""


def test_the_runtime_imports_the_step_from_the_staged_asset(step_dir: Path, tmp_path: Path) -> None:
    # What the cleanup function does at start, run from the staged asset as Lambda's task root
    # (first on sys.path): the runtime parses the variable and imports the step's functions.
    sessions, stack, template = _synth(tmp_path / "out", [_step(step_dir)])
    props = _function_props(sessions, stack, template)
    staged = asset_dir(tmp_path / "out", props["Code"]).resolve()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _LOAD_FROM_THE_ASSET,
            props["Environment"]["Variables"][contract.ENV_CUSTOM_STEPS],
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(staged)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert Path(loaded["runtime"]).is_relative_to(staged)
    assert loaded["handler"] == "my_steps.secrets.delete_secret"
    assert Path(loaded["handler_file"]) == staged / "my_steps" / "secrets.py"
    assert loaded["returned"] is None
    assert loaded["preview"] == {"secret": "s-1"}


def test_the_dashboard_graphs_the_failures_of_each_custom_step(
    step_dir: Path, tmp_path: Path
) -> None:
    app = App(outdir=str(tmp_path / "out"))
    stack = Stack(app, "Steps")
    sessions = SessionExpiry(stack, "Sessions", custom_steps=[_step(step_dir)])
    sessions.add_dashboard()
    (dashboard,) = Template.from_stack(stack).find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "DeleteSessionSecret" in body


def test_in_one_app_only_the_construct_with_steps_gets_their_code(
    step_dir: Path, tmp_path: Path
) -> None:
    # The bundling of the runtime's asset is cached per process by its options: the steps'
    # directories are part of them, or both functions would get one staged copy.
    app = App(outdir=str(tmp_path / "out"))
    stack = Stack(app, "Steps")
    plain = SessionExpiry(stack, "Plain")
    with_steps = SessionExpiry(
        stack,
        "WithSteps",
        custom_steps=[_step(step_dir)],
        expiry_sweep_interval=Duration.minutes(5),
    )
    template = Template.from_stack(stack).to_json()

    def staged(function: Any) -> set[str]:
        code = template["Resources"][stack.get_logical_id(function.node.default_child)]
        return {p.name for p in asset_dir(tmp_path / "out", code["Properties"]["Code"]).iterdir()}

    assert staged(plain.cleanup_function) == {"session_expiry_runtime"}
    assert staged(with_steps.cleanup_function) == {
        "session_expiry_runtime",
        "my_steps",
        "helpers.py",
    }
    assert with_steps.expiry_sweeper is not None
    assert staged(with_steps.expiry_sweeper.function) == {"session_expiry_runtime"}


# --- a custom step's own resource kind (issue 35, route 5) -------------------------------------


def test_a_step_with_its_own_kind_gets_ownership_records_and_the_registrar(
    step_dir: Path, tmp_path: Path
) -> None:
    step = _step(step_dir, attributes=[], preview=None, resource_attribute="secretArns")
    sessions, stack, template = _synth(tmp_path / "out", [step])
    props = _function_props(sessions, stack, template)

    (entry,) = json.loads(props["Environment"]["Variables"][contract.ENV_CUSTOM_STEPS])
    assert entry["resourceAttribute"] == "secretArns"
    assert sessions.ownership_table is not None and sessions.claim_registrar is not None
    environment = sessions.session_environment()
    assert json.loads(environment[contract.ENV_CUSTOM_KINDS]) == {
        "DeleteSessionSecret": "secretArns"
    }
    registrar = template["Resources"][
        stack.get_logical_id(sessions.claim_registrar.function.node.default_child)
    ]  # type: ignore[union-attr]
    variables = registrar["Properties"]["Environment"]["Variables"]
    assert json.loads(variables[contract.ENV_CUSTOM_KINDS]) == {"DeleteSessionSecret": "secretArns"}


def test_a_step_without_a_kind_creates_no_ownership_table(step_dir: Path, tmp_path: Path) -> None:
    sessions, _, _ = _synth(tmp_path / "out", [_step(step_dir)])
    assert sessions.ownership_table is None
    assert contract.ENV_CUSTOM_KINDS not in sessions.session_environment()


@pytest.mark.parametrize("value", ["", " padded ", "x" * 256])
def test_fails_a_resource_attribute_that_is_no_attribute_name(
    step_dir: Path, tmp_path: Path, value: str
) -> None:
    with pytest.raises(ValueError, match="resource_attribute"):
        _synth(tmp_path / "out", [_step(step_dir, resource_attribute=value)])


def test_fails_on_a_step_without_a_resource_kind_that_does_not_accept_image_values(
    step_dir: Path,
) -> None:
    """Issue 35, custom steps: a step without ``resource_attribute`` gets the old image, which
    any writer of the item chooses; it is refused unless its author accepts that."""
    step = _step(step_dir, allow_acting_on_image_values=False)
    with pytest.raises(
        ValueError,
        match=r"custom step 'DeleteSessionSecret' has no resource_attribute, so its handler would"
        r" get the removed item's old image.*expected resource_attribute=.*or "
        r"allow_acting_on_image_values=True",
    ):
        SessionExpiry(Stack(App(), "Steps"), "Sessions", custom_steps=[step])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"resource_attribute": "secretArns", "allow_acting_on_image_values": True},
            r"allow_acting_on_image_values=True with resource_attribute='secretArns'.*expected "
            r"allow_acting_on_image_values=False",
        ),
        (
            {"allow_acting_on_image_values": "yes"},
            r"allow_acting_on_image_values='yes'; expected True or False",
        ),
    ],
    ids=["both", "not-a-bool"],
)
def test_fails_on_a_bad_image_values_acknowledgement(
    step_dir: Path, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        SessionExpiry(
            Stack(App(), "Steps"), "Sessions", custom_steps=[_step(step_dir, **overrides)]
        )
