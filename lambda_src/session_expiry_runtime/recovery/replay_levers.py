"""Replay obeys the levers the cleanup function obeys: its feature flags (`feature_flags`).

With feature flags configured (``SESSION_EXPIRY_FLAGS_*`` in the settings replay runs with: its
environment, or the cleanup function's with ``--env-from-function``), `replay_levers`
reads them once, with the function's own reader (`feature_flags.FlagReader.read_now`),
before replay reads a message or changes anything, and:

* ``enabled`` off — replay refuses to start (`LeverRefusal`, exit 2): while it is off
  the cleanup calls nothing, so replay calls nothing either (``--dry-run`` included: the
  cleanup's previews read the targets);
* ``dryRun`` on — replay runs as a dry run: nothing is changed, every message is kept, its
  status is ``dry-run``, never ``replayed``;
* a step's flag off — that step is **held back**, as the cleanup holds it back: the other steps
  run, the step's work is deferred for the drain (`deferred`), and a message with a record
  the step would have acted on is kept (``held-back``; ``held_back`` names each step and its
  flag). Held back rather than refused: the other steps (closing a connection, retiring a
  grant) are the security work an operator replays for, and a step switched off for a reason of
  its own (a throttled bucket, a migration) should not stop them — nor be run by an override;
* a read that fails — replay refuses to start (exit 2): flags it could not read are not "all on"
  (a kill switch may be pulled), nor are they guessed;
* ``--ignore-feature-flags`` (`OVERRIDE`) — replay runs as without flags, and says so on
  stderr, with the levers it ignores when they could be read.

Without flags configured nothing changes, and AppConfig is not called. The deploy-time dry run
(``SESSION_EXPIRY_DRY_RUN``) is the cleanup's configuration, not a flag: the override does not
lift it. Credentials: ``appconfig:StartConfigurationSession`` and
``appconfig:GetLatestConfiguration`` on the profile, as the cleanup role has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..switches.feature_flags import FLAG_DRY_RUN, FLAG_ENABLED, FlagReader, Flags, FlagSource

#: The option that replays regardless of the feature flags.
OVERRIDE = "--ignore-feature-flags"
_FLAGS_SET = "python -m session_expiry_runtime.kill_switch flags set"


class LeverRefusal(ValueError):
    """A feature flag replay cannot honour (``enabled`` off), or flags it could not read:
    replay does not start, nothing was read or changed (exit 2)."""


@dataclass(frozen=True)
class ReplayLevers:
    """The feature flags' levers for one replay run.

    Attributes:
        dry_run: ``dryRun`` is on: replay runs as a dry run.
        disabled_steps: steps (metric ``Action``) whose flag is off: held back.
        said: the one stderr line about the flags (``None``: no flags configured).
    """

    dry_run: bool = False
    disabled_steps: frozenset[str] = field(default_factory=frozenset)
    said: str | None = None


def held_back_why(step: str) -> str:
    """Why replay held ``step`` back, as a ``held_back`` entry says it."""
    return f"feature flag {step} is off"


def replay_levers(env: Mapping[str, str], session: Any, *, ignore: bool) -> ReplayLevers:
    """The levers replay obeys, read from AppConfig as the cleanup reads them.

    Args:
        env: the settings replay runs with (``SESSION_EXPIRY_FLAGS_*`` name the flags).
        session: the boto3 session replay runs with (its ``appconfigdata`` client).
        ignore: `OVERRIDE` was given: replay as without flags.

    Raises:
        LeverRefusal: ``enabled`` is off, or the flags could not be read (without ``ignore``).
        ValueError: the ``SESSION_EXPIRY_FLAGS_*`` settings are invalid
            (`feature_flags.FlagSource.from_env`).
    """
    source = FlagSource.from_env(env)
    if source is None:
        if ignore:
            return ReplayLevers(said=f"{OVERRIDE}: no feature flags are configured: none ignored")
        return ReplayLevers()
    where = (
        f"AppConfig application {source.application}, environment {source.environment}, "
        f"profile {source.profile}"
    )
    reader = FlagReader(session.client("appconfigdata"), source)
    try:
        flags = reader.read_now()
    except Exception as exc:  # whatever the read raised: refused, never taken for "all on"
        read_error = f"{type(exc).__name__}: {exc}"
        if ignore:
            return ReplayLevers(
                said=f"{OVERRIDE}: the feature flags ({where}) could not be read "
                f"({read_error}); replaying regardless of them"
            )
        raise LeverRefusal(
            f"the feature flags could not be read ({where}: {read_error}); a lever may be "
            "pulled, so replay does not start (nothing was read or changed): fix the read "
            "(appconfig:StartConfigurationSession and GetLatestConfiguration on the profile), "
            f"or pass {OVERRIDE} to replay regardless of them"
        ) from exc
    if ignore:
        return ReplayLevers(
            said=f"{OVERRIDE}: replaying regardless of the feature flags ({where}), which "
            f"say {_pulled(flags) or 'nothing is switched off'}"
        )
    if not flags.enabled:
        raise LeverRefusal(
            f"the feature flag {FLAG_ENABLED} is off ({where}): the cleanup calls nothing while "
            "it is off, so replay does not start (nothing was read or changed): switch it on "
            f"({_FLAGS_SET} {FLAG_ENABLED}=on --function CLEANUP_FN), or pass {OVERRIDE} to "
            "replay regardless"
        )
    said = []
    if flags.dry_run:
        said.append(
            f"{FLAG_DRY_RUN} is on: replaying as a dry run (nothing is changed, every message "
            "is kept, status dry-run)"
        )
    if flags.disabled_steps:
        said.append(
            f"{', '.join(sorted(flags.disabled_steps))} off: held back (deferred for the drain; "
            "a message with a record they would act on is kept, status held-back)"
        )
    obeyed = f"{'; '.join(said)}; {OVERRIDE} replays regardless" if said else "none is pulled"
    return ReplayLevers(
        dry_run=flags.dry_run,
        disabled_steps=flags.disabled_steps,
        said=f"obeying the feature flags ({where}): {obeyed}",
    )


def _pulled(flags: Flags) -> str:
    """The levers ``flags`` pull, as ``flags set`` writes them (``enabled=off, dryRun=on``)."""
    pulled = [f"{FLAG_ENABLED}=off"] if not flags.enabled else []
    pulled += [f"{FLAG_DRY_RUN}=on"] if flags.dry_run else []
    return ", ".join(pulled + [f"{step}=off" for step in sorted(flags.disabled_steps)])
