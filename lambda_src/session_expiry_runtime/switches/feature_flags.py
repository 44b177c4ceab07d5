"""Feature flags: the cleanup's levers, read from AWS AppConfig without a deploy (opt-in).

With the construct's ``feature_flags``, the cleanup reads a feature-flag configuration profile
(type ``AWS.AppConfig.FeatureFlags``) through the AppConfig Data API — boto3 ``appconfigdata``,
no Lambda layer: ``StartConfigurationSession`` once, then ``GetLatestConfiguration`` with the
token the previous call returned ("each token is valid for one call"; an empty body means
nothing changed). AppConfig answers a feature-flag profile as ``{flag: {"enabled": bool}}``.

The flags, each a lever of `Flags`:

* ``enabled`` — off: every record is deferred before any cleanup call (`deferred`), and
  done by the drain once it is on again;
* ``dryRun`` — on: the existing dry run (``SESSION_EXPIRY_DRY_RUN``): nothing is changed. A
  deploy-time dry run stays on whatever the flag says;
* one flag per step, named by its metric ``Action`` (``DeleteConnection``, ``RetireGrant``,
  ``DeleteScratch``, ``Archive``, the AgentCore steps, custom steps) — off: the step is reported
  ``disabled`` and its work is deferred; the other steps run.

A flag the document does not name keeps its deploy-time default (on; ``dryRun``: the deploy-time
dry run). **Caching**: the flags are read at most every ``SESSION_EXPIRY_FLAGS_POLL_SECONDS``
(default `DEFAULT_POLL_SECONDS`) per execution environment, the next token kept between
invocations. **Failure**: when AppConfig cannot be read (an error, a document that is not a flag
document), ``FeatureFlagsReadFailures`` is counted and the last good flags stay in force. An
execution environment that has never read them (a cold start while AppConfig is unreachable)
does not guess: until a read succeeds it holds every record as ``enabled`` off does — deferred,
no target called, done by the drain once the flags are read and on — so neither a lever the
operator pulled ("everything on by surprise") nor a record ("everything off") is lost. A
rejected token starts a new session at the next poll.

Environment: ``SESSION_EXPIRY_FLAGS_APPLICATION``, ``SESSION_EXPIRY_FLAGS_ENVIRONMENT``,
``SESSION_EXPIRY_FLAGS_PROFILE`` (ids; all three or none), ``SESSION_EXPIRY_FLAGS_POLL_SECONDS``.
IAM: ``appconfig:StartConfigurationSession`` and ``appconfig:GetLatestConfiguration`` on the
profile's configuration ARN (Service Authorization Reference, AWS AppConfig).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.config import (
    DEFAULT_FLAGS_POLL_SECONDS,
    ENV_FLAGS_APPLICATION,
    ENV_FLAGS_ENVIRONMENT,
    ENV_FLAGS_POLL_SECONDS,
    ENV_FLAGS_PROFILE,
    METRIC_FEATURE_FLAGS_READ_FAILURES,
)

LOGGER = logging.getLogger("session_expiry_runtime.switches.feature_flags")

DEFAULT_POLL_SECONDS = DEFAULT_FLAGS_POLL_SECONDS
#: AppConfig's own minimum poll interval (``RequiredMinimumPollIntervalInSeconds``).
MIN_POLL_SECONDS = 15

FLAG_ENABLED = "enabled"
FLAG_DRY_RUN = "dryRun"


@dataclass(frozen=True)
class Flags:
    """The levers in force for one invocation.

    Attributes:
        enabled: ``False``: defer every record, call nothing.
        dry_run: ``True``: the dry run (nothing changed).
        disabled_steps: step names (metric ``Action``) whose work is deferred.
        source: ``"appconfig"`` (a good read), ``"defaults"`` (not read yet), or
            ``"unreadable"`` (no read has succeeded in this execution environment: every
            record held, `UNREADABLE`).
    """

    enabled: bool = True
    dry_run: bool = False
    disabled_steps: frozenset[str] = field(default_factory=frozenset)
    source: str = "defaults"


#: The flags of an execution environment whose every read failed: hold every record.
UNREADABLE = Flags(enabled=False, source="unreadable")


def parse_flags(body: bytes, *, default_dry_run: bool) -> Flags:
    """The flags of a ``GetLatestConfiguration`` body of a feature-flag profile.

    Raises:
        ValueError: not a JSON object of ``{name: {"enabled": bool}}``.
    """
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise ValueError(f"feature flags: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise ValueError(f"feature flags: expected a JSON object, got {type(document).__name__}")
    values: dict[str, bool] = {}
    for name, value in document.items():
        on = value.get("enabled") if isinstance(value, dict) else None
        if not isinstance(on, bool):
            raise ValueError(f"feature flags: flag {name!r}: expected {{'enabled': true|false}}")
        values[name] = on
    steps = {n for n, on in values.items() if n not in (FLAG_ENABLED, FLAG_DRY_RUN) and not on}
    return Flags(
        enabled=values.get(FLAG_ENABLED, True),
        dry_run=default_dry_run or values.get(FLAG_DRY_RUN, False),
        disabled_steps=frozenset(steps),
        source="appconfig",
    )


@dataclass(frozen=True)
class FlagSource:
    """Where the flags live (the construct's environment variables)."""

    application: str
    environment: str
    profile: str
    poll_seconds: int = DEFAULT_POLL_SECONDS

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> FlagSource | None:
        """The source named by ``env``; ``None`` when flags are not configured.

        Raises:
            ValueError: only some of the three identifiers are set, or the poll interval is not
                an integer of at least `MIN_POLL_SECONDS`.
        """
        ids = [
            env.get(n) or ""
            for n in (ENV_FLAGS_APPLICATION, ENV_FLAGS_ENVIRONMENT, ENV_FLAGS_PROFILE)
        ]
        if not any(ids):
            return None
        if not all(ids):
            raise ValueError(
                f"{ENV_FLAGS_APPLICATION}, {ENV_FLAGS_ENVIRONMENT}, {ENV_FLAGS_PROFILE}: "
                f"expected all three AppConfig identifiers or none, got {ids}"
            )
        raw = env.get(ENV_FLAGS_POLL_SECONDS) or str(DEFAULT_POLL_SECONDS)
        if not raw.isdigit() or int(raw) < MIN_POLL_SECONDS:
            raise ValueError(
                f"{ENV_FLAGS_POLL_SECONDS}={raw!r}: expected whole seconds, at least "
                f"{MIN_POLL_SECONDS} (AppConfig's minimum poll interval)"
            )
        return cls(ids[0], ids[1], ids[2], int(raw))


class FlagReader:
    """The flags of one execution environment, read at most every ``poll_seconds``.

    Thread safe; one per process. Args: ``client`` (boto3 ``appconfigdata``), ``source``,
    ``default_dry_run`` (the deploy-time dry run), ``clock`` (monotonic seconds; tests).
    """

    def __init__(
        self,
        client: Any,
        source: FlagSource,
        *,
        default_dry_run: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.source = source
        self.default_dry_run = default_dry_run
        self.clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._next_poll: float | None = None
        self._flags = Flags(dry_run=default_dry_run)

    def current(self, metrics: Any) -> Flags:
        """The flags in force now; polls AppConfig when the interval has passed. A failed read
        is counted (``FeatureFlagsReadFailures`` on ``metrics``) and keeps the last good flags."""
        with self._lock:
            now = self.clock()
            if self._next_poll is not None and now < self._next_poll:
                return self._flags
            self._next_poll = now + self.source.poll_seconds
            try:
                self._poll()
            except Exception as exc:
                self._token = None  # a rejected or lost token: start a new session next time
                if self._flags.source != "appconfig":  # never read: hold, do not guess
                    self._flags = replace(UNREADABLE, dry_run=self.default_dry_run)
                metrics.count(METRIC_FEATURE_FLAGS_READ_FAILURES)
                LOGGER.warning(
                    "feature flags could not be read; keeping the %s flags in force: %s",
                    self._flags.source,
                    exc,
                )
            return self._flags

    def read_now(self) -> Flags:
        """Read AppConfig now, whatever the poll interval, and answer the flags it holds.

        For a tool run once by hand (replay, `replay_levers`): unlike `current`,
        a failed read is raised, never answered with earlier or held flags, so the caller can
        refuse to go on rather than guess.

        Raises:
            Exception: what the AppConfig Data API call raised (botocore's ``ClientError``,
                ``BotoCoreError``), or ``ValueError``: the body is not a flag document, or
                AppConfig answered no configuration at all.
        """
        with self._lock:
            self._next_poll = self.clock() + self.source.poll_seconds
            try:
                self._poll()
            except Exception:
                self._token = None  # as in current(): a new session at the next read
                raise
            if self._flags.source != "appconfig":
                raise ValueError(
                    "AppConfig answered an empty configuration: no flag document is deployed "
                    "to the environment"
                )
            return self._flags

    def _poll(self) -> None:
        if self._token is None:
            self._token = self.client.start_configuration_session(
                ApplicationIdentifier=self.source.application,
                EnvironmentIdentifier=self.source.environment,
                ConfigurationProfileIdentifier=self.source.profile,
                RequiredMinimumPollIntervalInSeconds=self.source.poll_seconds,
            )["InitialConfigurationToken"]
        answer = self.client.get_latest_configuration(ConfigurationToken=self._token)
        self._token = answer["NextPollConfigurationToken"]
        body = answer["Configuration"].read()
        if body:  # empty: unchanged since this session's last read
            self._flags = parse_flags(body, default_dry_run=self.default_dry_run)
