"""User-defined cleanup steps (``SESSION_EXPIRY_CUSTOM_STEPS``).

The construct stages the user's code beside ``session_expiry_runtime/`` in the cleanup
function's code asset and sets ``SESSION_EXPIRY_CUSTOM_STEPS`` to a JSON list::

    [{"name": "DeleteSecret",                      # the metric's Action; letters, digits, - _
      "handler": "my_steps.secrets.delete_secret",  # package.module.function
      "preview": "my_steps.secrets.preview",        # optional (null): the dry run's look
      "attributes": ["secretName"],                 # session attributes it needs
      "resourceAttribute": "secretArns"}]           # optional: its own resource kind

**A step with its own resource kind** (``resourceAttribute``, recommended: the only form that
acts on nothing the image alone names): the attribute (a String, or a String Set) holds the ids
of the step's resources, each recorded by ``SessionStore.attach_resource(session_id, "<name>",
id)`` with an ownership record of kind ``custom:<name>`` (`ownership.custom_kind`),
exactly like a connection or an AgentCore session. The runner checks every id against its
record before the step runs (`base`), and the handler is called **once per owned id**:
``handler(resource_id: str, session: CustomSession) -> None | "already-done"``, where
`CustomSession` carries the record's ``keys`` (never the image's), the ``incarnation``,
the ``reason`` and a copy of the ``image``. An id owned by another session, another tenant or a
later incarnation is refused (``ResourcesRefused``, alarmed when only a forgery can produce it)
and never reaches the handler. ``preview(resource_id, session)`` likewise, per owned id.

**The contract** (the same as a built-in step's, `base`):

* ``handler(old_image: dict, reason: str) -> None`` is called **once per session**, side by
  side with the other steps, with a deep copy of the decoded old image (numbers are
  ``decimal.Decimal``, sets are ``set``, binary is ``bytes``) and the reason (``"ttl"``,
  ``"deleted-after-expiry"`` or ``"explicit"``).
* It must be **idempotent** (a failed record is redelivered, and a batch may hold a record
  twice: the second call must succeed when the resource is already gone) and **bounded in
  time** (set timeouts and retries on its clients; the cleanup function's timeout covers the
  whole batch).
* **Done**: it returned normally (``"done"``); returning the string ``"already-done"`` reports
  that there was nothing left to remove. **Failure**: anything it raises — any
  ``BaseException``: ``SystemExit`` (a library calling ``sys.exit()``), ``KeyboardInterrupt``,
  ``asyncio.CancelledError`` and ``GeneratorExit`` too. Only that session's record fails: it is
  reported by sequence number in the partial batch response, metered as ``CleanupFailures``
  with ``Action`` = the step's name, and its error is in the log line; the session's other
  steps and the batch's other records still run, and the metrics are flushed. The runner
  catches it, once (`session_expiry_runtime.cleanup.runner`, *User code*, which also says what is
  never caught and why).
* A session without one of the ``attributes`` gives the step nothing to do (the missing names
  are logged like a built-in's ``missingAttributes``); the handler is not called.
* Dry run: the handler is never called. ``preview(old_image, reason)``, if given, is called
  instead and may return a mapping of (JSON-ready) log fields, logged under
  ``previews.<name>``.

Bad configuration — JSON that does not parse, an entry without ``name``/``handler``, an unknown
key, a duplicate or built-in name, a handler that cannot be imported or is not callable — raises
``ValueError`` naming the value when the cleanup starts (the function's errors alarm fires), not
later per record.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core import config as contract
from ..core.config import ENV_CUSTOM_STEPS, RuntimeConfig
from ..core.decode import to_json_value
from ..core.kinds import DECLARED_KINDS
from ..core.ownership import custom_kind
from ..owners.claims import ClaimRef
from ..owners.outcomes import STEP_ALREADY_DONE, STEP_DONE, STEP_DRY_RUN, StepFailed, error_text
from .base import CleanupStep, Plan, Session, StepContext

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
#: The built-in actions; a custom step may not take one of their names.
RESERVED_NAMES = frozenset(
    value for key, value in vars(contract).items() if key.startswith("ACTION_")
) | frozenset(kind.action for kind in DECLARED_KINDS if kind.action)
_KEYS = {"name", "handler", "preview", "attributes", "resourceAttribute"}


@dataclass(frozen=True)
class CustomStepSpec:
    """One entry of ``SESSION_EXPIRY_CUSTOM_STEPS``."""

    name: str
    handler: str
    preview: str | None = None
    attributes: tuple[str, ...] = ()
    #: The attribute holding the ids of the step's own resource kind (``custom:<name>``);
    #: ``None``: the step gets the old image (``handler(old_image, reason)``).
    resource_attribute: str | None = None


def _fail(detail: str) -> ValueError:
    return ValueError(f"{ENV_CUSTOM_STEPS}: {detail}")


def _spec(entry: object, index: int) -> CustomStepSpec:
    if not isinstance(entry, Mapping):
        raise _fail(f"entry {index} is {entry!r}; expected an object with name and handler")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise _fail(f"entry {index} has unknown key(s) {unknown}; expected {sorted(_KEYS)}")
    name, handler = entry.get("name"), entry.get("handler")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise _fail(f"entry {index}: name {name!r}; expected 1-64 letters, digits, '-' or '_'")
    preview, attributes = entry.get("preview"), entry.get("attributes", [])
    for what, value in (("handler", handler), ("preview", preview)):
        if not (value is None and what == "preview") and not _is_dotted(value):
            raise _fail(f"step {name!r}: {what} {value!r}; expected 'package.module.function'")
    if not isinstance(attributes, list) or not all(isinstance(a, str) and a for a in attributes):
        raise _fail(f"step {name!r}: attributes {attributes!r}; expected a list of names")
    resource_attribute = entry.get("resourceAttribute")
    if resource_attribute is not None and not (
        isinstance(resource_attribute, str) and resource_attribute
    ):
        raise _fail(
            f"step {name!r}: resourceAttribute {resource_attribute!r}; expected an attribute name"
        )
    return CustomStepSpec(name, str(handler), preview, tuple(attributes), resource_attribute)


def _is_dotted(value: object) -> bool:
    return (
        isinstance(value, str) and "." in value and all(p.isidentifier() for p in value.split("."))
    )


def parse_custom_steps(raw: str | None) -> tuple[CustomStepSpec, ...]:
    """Parse ``SESSION_EXPIRY_CUSTOM_STEPS`` (``None`` or empty: no custom steps).

    Raises:
        ValueError: not JSON, not a list, or an entry that breaks the rules above; the message
            names the variable and the value.
    """
    if not raw:
        return ()
    try:
        entries = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _fail(f"{raw!r} is not JSON ({exc})") from None
    if not isinstance(entries, list):
        raise _fail(f"{raw!r}: expected a JSON list of steps")
    specs = tuple(_spec(entry, index) for index, entry in enumerate(entries))
    names = [s.name for s in specs]
    for name in names:
        if name in RESERVED_NAMES or names.count(name) > 1:
            why = "a built-in step's" if name in RESERVED_NAMES else "used twice"
            raise _fail(f"step name {name!r} is {why}; each step needs its own name")
    return specs


def import_function(path: str, step: str, what: str = "handler") -> Callable[..., Any]:
    """Import ``package.module.function``.

    Raises:
        ValueError: the module cannot be imported, has no such attribute, or it is not callable.
    """
    module_name, _, attribute = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise _fail(
            f"step {step!r}: {what} {path!r}: cannot import {module_name!r}: {error_text(exc)}"
        ) from exc
    function: Callable[..., Any] | None = getattr(module, attribute, None)
    if function is None or not callable(function):
        raise _fail(
            f"step {step!r}: {what} {path!r}: {module_name!r} has no function {attribute!r}"
        )
    return function


class CustomStep(CleanupStep):
    """A user-defined step (see the module docstring for its contract)."""

    name = "Custom"  # replaced per instance by the configured name

    def __init__(self, spec: CustomStepSpec) -> None:
        self.name = spec.name
        self.attributes = spec.attributes
        self.handler = import_function(spec.handler, spec.name)
        self.preview_function = (
            import_function(spec.preview, spec.name, "preview") if spec.preview else None
        )

    @classmethod
    def build(cls, config: RuntimeConfig, clients: Any) -> CustomStep | None:
        """``None``: custom steps are many per configuration; see `load_custom_steps`."""
        return None

    def plan(self, session: Session) -> Plan:
        missing = [name for name in self.attributes if name not in session.image]
        if missing:
            return Plan.missing_attributes(missing=missing)
        return Plan.run()

    def run(self, plan: Plan, ctx: StepContext) -> str:
        # Whatever the user's code raises is caught by the runner, once (module docstring).
        answer = self.handler(copy.deepcopy(dict(ctx.session.image)), ctx.session.reason)
        return STEP_ALREADY_DONE if answer == STEP_ALREADY_DONE else STEP_DONE

    def preview(self, plan: Plan, ctx: StepContext) -> str:
        if self.preview_function is None:
            return STEP_DRY_RUN
        fields = self.preview_function(copy.deepcopy(dict(ctx.session.image)), ctx.session.reason)
        if fields is not None and not isinstance(fields, Mapping):
            raise StepFailed(self.name, f"preview returned {fields!r}; expected a mapping or None")
        if fields:
            ctx.note_in("previews", self.name, to_json_value(dict(fields)))
        return STEP_DRY_RUN


@dataclass(frozen=True)
class CustomSession:
    """What a step with its own resource kind learns of the removed session.

    Attributes:
        keys: the REMOVE record's ``Keys``, decoded (never the image's key values).
        incarnation: the removed session incarnation (``None`` for an item written before
            ownership records; such an item's ids are never owned).
        reason: ``"ttl"``, ``"deleted-after-expiry"`` or ``"explicit"``.
        image: a deep copy of the decoded old image (for context only: the id to act on is the
            handler's first argument, already checked against its ownership record).
    """

    keys: Mapping[str, Any]
    incarnation: str | None
    reason: str
    image: Mapping[str, Any]


class OwnedCustomStep(CustomStep):
    """A custom step with its own resource kind (module docstring): plans its ids as claims of
    kind ``custom:<name>``, acts only on those the ownership check found owned."""

    claims_ownership = True

    def __init__(self, spec: CustomStepSpec) -> None:
        super().__init__(spec)
        assert spec.resource_attribute is not None
        self.kind = custom_kind(spec.name)
        self.resource_attribute = spec.resource_attribute
        self.attributes = tuple(dict.fromkeys((*spec.attributes, spec.resource_attribute)))

    def plan(self, session: Session) -> Plan:
        missing = [name for name in self.attributes if name not in session.image]
        if missing:
            return Plan.missing_attributes(missing=missing)
        value = session.image[self.resource_attribute]
        members = {value} if isinstance(value, str) else value
        if not isinstance(members, (set, frozenset)) or not members:
            return Plan.missing_attributes(invalid=(self.resource_attribute,))
        ids = sorted(m for m in members if isinstance(m, str) and m)
        if len(ids) != len(members):
            return Plan.missing_attributes(invalid=(self.resource_attribute,))
        return Plan.run(
            log={self.resource_attribute: ids},
            claims=[ClaimRef(self.kind, resource_id) for resource_id in ids],
        )

    def run(self, plan: Plan, ctx: StepContext) -> str:
        # Whatever the user's code raises is caught by the runner, once (module docstring).
        answers = [self.handler(ref.resource_id, _session(ctx)) for ref in plan.owned]
        done = any(answer != STEP_ALREADY_DONE for answer in answers)
        return STEP_DONE if done else STEP_ALREADY_DONE

    def preview(self, plan: Plan, ctx: StepContext) -> str:
        if self.preview_function is None:
            return STEP_DRY_RUN
        for ref in plan.owned:
            fields = self.preview_function(ref.resource_id, _session(ctx))
            if fields is not None and not isinstance(fields, Mapping):
                raise StepFailed(self.name, f"preview returned {fields!r}; expected a mapping")
            if fields:
                ctx.note_in(
                    "previews", f"{self.name}:{ref.resource_id}", to_json_value(dict(fields))
                )
        return STEP_DRY_RUN


def _session(ctx: StepContext) -> CustomSession:
    session = ctx.session
    return CustomSession(
        keys=copy.deepcopy(dict(session.keys)),
        incarnation=session.incarnation,
        reason=session.reason,
        image=copy.deepcopy(dict(session.image)),
    )


def load_custom_steps(config: RuntimeConfig) -> list[CustomStep]:
    """The configured custom steps, their functions imported (once, at cold start).

    Raises:
        ValueError: see `parse_custom_steps` and `import_function`.
    """
    return [
        OwnedCustomStep(spec) if spec.resource_attribute else CustomStep(spec)
        for spec in parse_custom_steps(config.custom_steps)
    ]
