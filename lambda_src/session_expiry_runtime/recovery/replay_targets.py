"""No cleanup target, no run: the settings that name a cleanup target
(`CLEANUP_TARGET_SETTINGS`) and the check that refuses to replay without any of them
(every record would be skipped as ``MissingAttributes`` and its failure lost).
"""

from __future__ import annotations

from ..core.config import (
    ENV_AGENT_RUNTIME_ARN,
    ENV_BROWSER_ID,
    ENV_CODE_INTERPRETER_ID,
    ENV_CUSTOM_STEPS,
    ENV_GRANT_KEY_ARN,
    ENV_SCRATCH_BUCKET,
    ENV_WEBSOCKET_ENDPOINT,
    RuntimeConfig,
)

#: The settings that name a cleanup target; without any of them replay refuses to run.
CLEANUP_TARGET_SETTINGS = (
    ENV_WEBSOCKET_ENDPOINT,
    ENV_GRANT_KEY_ARN,
    ENV_SCRATCH_BUCKET,
    ENV_AGENT_RUNTIME_ARN,
    ENV_CODE_INTERPRETER_ID,
    ENV_BROWSER_ID,
    ENV_CUSTOM_STEPS,
)


class NoCleanupTarget(ValueError):
    """No cleanup target is configured: every record would be skipped, so replay refuses."""


def configured_targets(config: RuntimeConfig) -> list[str]:
    """The settings of ``config`` that name a cleanup target (`CLEANUP_TARGET_SETTINGS`)."""
    values = {
        ENV_WEBSOCKET_ENDPOINT: config.websocket_endpoint,
        ENV_GRANT_KEY_ARN: config.grant_key_arn,
        ENV_SCRATCH_BUCKET: config.scratch_bucket,
        ENV_AGENT_RUNTIME_ARN: config.agent_runtime_arn,
        ENV_CODE_INTERPRETER_ID: config.code_interpreter_id,
        ENV_BROWSER_ID: config.browser_id,
        ENV_CUSTOM_STEPS: config.custom_steps,
    }
    return [name for name, value in values.items() if value]


def require_cleanup_target(config: RuntimeConfig) -> None:
    """Refuse to replay with a configuration that can clean nothing.

    Raises:
        NoCleanupTarget: none of `CLEANUP_TARGET_SETTINGS` is set.
    """
    if not configured_targets(config):
        raise NoCleanupTarget(
            f"no cleanup target is configured ({', '.join(CLEANUP_TARGET_SETTINGS)} are all "
            "unset): every record would be skipped and its failure lost. Run with the cleanup "
            "function's environment, or pass --env-from-function CLEANUP_FUNCTION_NAME"
        )
