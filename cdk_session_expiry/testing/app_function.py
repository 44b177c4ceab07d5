"""Which deployed function's environment the application's tests run with.

Application code under test reads its settings the way the deployed function does
(``SessionStore.from_env()``, ``os.environ[...]``), so a test runs with one function's
environment as deployed (``LocalPipeline.application_env``, the plugin's
``session_expiry_app_env``).
Which function is never left to chance:

1. **Chosen**: a construct path (``"MyStack/Connect"``, or its end ``"Connect"``), a logical id
   or a function name (the plugin's ``session_expiry_app_function`` fixture). That function's
   environment, exactly as deployed, whatever it holds.
2. **Otherwise, the one function given** ``SessionExpiry.grant_session_access`` (or
   ``grant_tenant_session_access``): it has the
   session environment (``SESSION_EXPIRY_TABLE_NAME`` naming the session table, and the retiring
   principal), and is none of the construct's own functions (cleanup, expiry sweeper, grant
   sweep). Several such functions with the same environment count as one; several with
   different environments are ambiguous:
   [`AppFunctionError`][cdk_session_expiry.testing.app_function.AppFunctionError] names them.
3. **None given access**: the environment ``SessionExpiry.session_environment()`` describes,
   rebuilt from what was deployed: the table's name, the attribute and target settings of the
   cleanup function, the expiry sweeper's shard settings, the claim registrar's name, and the
   cleanup role as retiring principal. ``SESSION_EXPIRY_MAX_SESSION_LIFETIME_SECONDS`` is not
   taken over, so the session runtime's default (8 hours, the construct's default too) applies.

Whichever rule applies, a test also gets where the cleanup archives (``archive_bucket``):
``SESSION_EXPIRY_ARCHIVE_BUCKET`` and ``SESSION_EXPIRY_ARCHIVE_PREFIX`` of the cleanup function,
unless the chosen function has its own (`archive_environment`), so a test can read the archive
(``cdk_session_expiry.testing.athena``) without looking the bucket up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.testing.deployment import DeployedStack

#: The construct's own functions: never the application's.
CONSTRUCT_HANDLERS = frozenset(
    {
        contract.CLEANUP_HANDLER,
        contract.SWEEPER_HANDLER,
        contract.GRANT_SWEEPER_HANDLER,
        contract.CLAIM_REGISTRAR_HANDLER,
    }
)
#: Variables of ``session_environment()`` that the cleanup function carries with the same value.
FROM_CLEANUP = (
    contract.ENV_PARTITION_KEY,
    contract.ENV_SORT_KEY,
    contract.ENV_TTL_ATTRIBUTE,
    contract.ENV_CONNECTION_ID_ATTRIBUTE,
    contract.ENV_GRANT_ID_ATTRIBUTE,
    contract.ENV_GRANT_TOKEN_ATTRIBUTE,
    contract.ENV_SCRATCH_PREFIX_ATTRIBUTE,
    contract.ENV_TENANT_ATTRIBUTE,
    contract.ENV_SCRATCH_ROOT,
    contract.ENV_SCRATCH_BUCKET,
    contract.ENV_TENANT_SCOPED_SCRATCH,
    contract.ENV_GRANT_KEY_ARN,
    contract.ENV_WEBSOCKET_ENDPOINT,
    contract.ENV_AGENT_RUNTIME_SESSION_ATTRIBUTE,
    contract.ENV_CODE_INTERPRETER_SESSION_ATTRIBUTE,
    contract.ENV_BROWSER_SESSION_ATTRIBUTE,
    # Ownership (docs/ownership.md): the store claims what it records in this table.
    contract.ENV_OWNERSHIP_TABLE_NAME,
    contract.ENV_INCARNATION_ATTRIBUTE,
    contract.ENV_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE,
    contract.ENV_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE,
    contract.ENV_BROWSER_SESSION_IDS_ATTRIBUTE,
    # attach_agent_session stops the sessions it replaces: it needs the targets too.
    contract.ENV_AGENT_RUNTIME_ARN,
    contract.ENV_CODE_INTERPRETER_ID,
    contract.ENV_BROWSER_ID,
)
#: The cleanup's own variables a test gets too: where it archives (not session variables).
ARCHIVE_FOR_TESTS = (contract.ENV_ARCHIVE_BUCKET, contract.ENV_ARCHIVE_PREFIX)
#: Variables of ``session_environment()`` that the expiry sweeper carries with the same value.
FROM_SWEEPER = (
    contract.ENV_SWEEP_SHARD_ATTRIBUTE,
    contract.ENV_SWEEP_SHARDS,
    contract.ENV_SWEEP_INDEX_NAME,
)
_FIXTURE = "session_expiry_app_function"


class AppFunctionError(LookupError):
    """The function for the application's environment is unknown or ambiguous; the message
    names the candidates and how to choose one (the ``session_expiry_app_function`` fixture,
    or ``function=``)."""


@dataclass(frozen=True)
class StackFunction:
    """A Lambda function of the deployed stack, as the rule above sees it.

    Attributes:
        logical_id: its logical id in the template.
        name: the function's name.
        path: its construct path (``aws:cdk:path`` without ``/Resource``), or ``None`` when the
            template has no path metadata.
        handler: its ``Handler``.
        role_arn: its execution role.
        environment: its variables, as deployed.
    """

    logical_id: str
    name: str
    path: str | None
    handler: str
    role_arn: str
    environment: dict[str, str]

    @property
    def label(self) -> str:
        """The construct path, else the logical id."""
        return self.path or self.logical_id

    def matches(self, selector: str) -> bool:
        """``selector`` is its construct path or the path's end, its logical id or its name."""
        if selector in (self.logical_id, self.name, self.path):
            return True
        return self.path is not None and self.path.endswith("/" + selector.strip("/"))


def stack_functions(stack: DeployedStack) -> list[StackFunction]:
    """Every Lambda function of ``stack``, read from the emulator, sorted by construct path."""
    lam = stack.emulator.client("lambda")
    resources = stack.template.get("Resources", {})
    found = []
    for logical_id, name in stack.physical_ids("AWS::Lambda::Function").items():
        config = lam.get_function_configuration(FunctionName=name)
        path = (resources.get(logical_id, {}).get("Metadata") or {}).get("aws:cdk:path")
        found.append(
            StackFunction(
                logical_id=logical_id,
                name=str(config["FunctionName"]),
                path=str(path).removesuffix("/Resource") if path else None,
                handler=str(config.get("Handler", "")),
                role_arn=str(config.get("Role", "")),
                environment=dict((config.get("Environment") or {}).get("Variables") or {}),
            )
        )
    return sorted(found, key=lambda f: f.label)


def choose(
    functions: Sequence[StackFunction], *, table_name: str, selector: str | None
) -> StackFunction | None:
    """The function whose environment the tests use (rules 1 and 2 of the module docstring);
    ``None`` when no function was given session access (rule 3 applies).

    Raises:
        AppFunctionError: ``selector`` matches no function or several; or several functions
            given session access have different environments.
    """
    labels = [f.label for f in functions]
    if selector is not None:
        chosen = [f for f in functions if f.matches(selector)]
        if len(chosen) != 1:
            which = "no function" if not chosen else f"{len(chosen)} functions"
            raise AppFunctionError(
                f"{_FIXTURE}={selector!r} matches {which} of the stack "
                f"({[f.label for f in chosen] or labels}): expected a construct path (or its "
                "end), a logical id or a function name that names one of them"
            )
        return chosen[0]
    granted = [
        f
        for f in functions
        if f.handler not in CONSTRUCT_HANDLERS
        and f.environment.get(contract.ENV_TABLE_NAME) == table_name
        and contract.ENV_RETIRING_PRINCIPAL in f.environment
    ]
    if len({_frozen(f.environment) for f in granted}) > 1:
        raise AppFunctionError(
            f"{len(granted)} functions were given grant_session_access, with different "
            f"environments: {[f.label for f in granted]}; the tests would run with one of them "
            f"by accident. Choose one: override the fixture {_FIXTURE} (e.g. "
            f"return {granted[0].label!r}), or pass function= to application_env()"
        )
    return granted[0] if granted else None


def derived_session_environment(
    functions: Sequence[StackFunction], *, table_name: str, cleanup: StackFunction
) -> dict[str, str]:
    """Rule 3: the variables of ``session_environment()``, from the cleanup function, the
    expiry sweeper (if any) and the cleanup role (see the module docstring)."""
    env = {contract.ENV_TABLE_NAME: table_name}
    env.update({k: cleanup.environment[k] for k in FROM_CLEANUP if k in cleanup.environment})
    env[contract.ENV_RETIRING_PRINCIPAL] = cleanup.role_arn
    sweepers = [f for f in functions if f.handler == contract.SWEEPER_HANDLER]
    for sweeper in sweepers[:1]:
        env.update({k: sweeper.environment[k] for k in FROM_SWEEPER if k in sweeper.environment})
    # The store asks the claim registrar to write ownership records (the emulator answers its
    # Invoke with the deployed code: cdk_session_expiry.testing._local_invoke).
    registrars = [f for f in functions if f.handler == contract.CLAIM_REGISTRAR_HANDLER]
    for registrar in registrars[:1]:
        env[contract.ENV_CLAIM_REGISTRAR_FUNCTION] = registrar.name
    return env


def archive_environment(cleanup: StackFunction) -> dict[str, str]:
    """Where the cleanup archives, for a test to read it: ``SESSION_EXPIRY_ARCHIVE_BUCKET``
    (the bucket's name) and ``SESSION_EXPIRY_ARCHIVE_PREFIX`` of the cleanup function; empty
    without ``archive_bucket``."""
    return {k: cleanup.environment[k] for k in ARCHIVE_FOR_TESTS if k in cleanup.environment}


def _frozen(environment: dict[str, str]) -> Any:
    return frozenset(environment.items())
