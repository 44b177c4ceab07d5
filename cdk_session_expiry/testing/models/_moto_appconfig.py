"""AWS AppConfig as feature flags use it, where moto (5.2.x) lacks it.

moto models AppConfig applications, configuration profiles and hosted configuration versions
only: no environments, deployment strategies or deployments, and no AppConfig Data API
(``appconfigdata``). `install` adds, on moto's AppConfig backend (so they reset with it
and answer both in-process ``mock_aws`` and the emulator's server):

* ``CreateEnvironment`` / ``GetEnvironment`` / ``ListEnvironments`` / ``DeleteEnvironment``
  (``Monitors`` kept and answered; nothing evaluates them: no rollback);
* ``CreateDeploymentStrategy`` / ``GetDeploymentStrategy`` / ``DeleteDeploymentStrategy``;
* ``StartDeployment`` / ``GetDeployment`` / ``ListDeployments``: a deployment is ``COMPLETE`` at
  once (no gradual rollout, no bake time). Before it completes, each ``JSON_SCHEMA`` validator of
  the profile checks the version (with ``jsonschema``): a failing document is refused with
  ``BadRequestException``, as AppConfig refuses it ("AWS AppConfig validates the configuration
  data ... before it deploys", AppConfig User Guide, "About validators"); ``LAMBDA`` validators
  are not run;
* the AppConfig Data API: ``StartConfigurationSession`` (identifiers by id or name; unknown ones
  ``ResourceNotFoundException``) returns a token; ``GetLatestConfiguration`` takes a token once
  (a used or unknown token is ``BadRequestException``), answers the next token and the
  environment's latest deployed version — an empty body when the session already received it,
  as AWS does. A profile of type ``AWS.AppConfig.FeatureFlags`` is answered in AppConfig's
  retrieval form: ``{flag: {"enabled": bool, ...attributes}}`` from the stored document's
  ``values``.

Not modelled: IAM, ``RequiredMinimumPollIntervalInSeconds`` enforcement (the interval is
answered, not enforced), token expiry (24 hours on AWS), ``StopDeployment``, extensions.
`install`/`uninstall` are counted like `_moto_transactions`; `check`
fails loudly if moto's shape changed.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, urlparse

_LOCK = threading.Lock()
_COUNT = 0
_ADDED_PATHS: dict[str, Any] = {}
_DATA_URL = r"https?://appconfigdata\.(.+)\.amazonaws\.com"
FEATURE_FLAGS_TYPE = "AWS.AppConfig.FeatureFlags"


def check() -> None:
    """Raise ``MotoInternalsChanged`` if moto's AppConfig lost what this module uses."""
    import moto.appconfig.urls as urls
    import moto.backend_index as backend_index
    from moto.appconfig.models import AppConfigBackend

    from cdk_session_expiry.testing.models._moto_internals import _fail

    if not isinstance(getattr(urls, "url_paths", None), dict):
        raise _fail("moto.appconfig.urls.url_paths", "is gone (see _moto_appconfig.py)")
    if not isinstance(getattr(backend_index, "backend_url_patterns", None), list):
        raise _fail("moto.backend_index.backend_url_patterns", "is gone (see _moto_appconfig.py)")
    for name in ("get_application", "get_configuration_profile"):
        if not callable(getattr(AppConfigBackend, name, None)):
            raise _fail(f"AppConfigBackend.{name}", "is gone (see _moto_appconfig.py)")


def install() -> None:
    """Add environments, strategies, deployments and the data API (idempotent, counted)."""
    global _COUNT
    import moto.appconfig.urls as urls
    import moto.backend_index as backend_index

    with _LOCK:
        _COUNT += 1
        if _COUNT > 1:
            return
        check()
        _ADDED_PATHS.clear()
        for path in _PATHS:
            _ADDED_PATHS["{0}" + path] = _dispatch
        urls.url_paths.update(_ADDED_PATHS)
        if _DATA_URL not in urls.url_bases:
            urls.url_bases.append(_DATA_URL)
        backend_index.backend_url_patterns.append(("appconfig", re.compile(_DATA_URL)))


def uninstall() -> None:
    """Undo one `install`; moto's own behaviour is back after the last one."""
    global _COUNT
    import moto.appconfig.urls as urls
    import moto.backend_index as backend_index

    with _LOCK:
        if _COUNT == 0:
            return
        _COUNT -= 1
        if _COUNT:
            return
        for path in _ADDED_PATHS:
            urls.url_paths.pop(path, None)
        if _DATA_URL in urls.url_bases:
            urls.url_bases.remove(_DATA_URL)
        backend_index.backend_url_patterns[:] = [
            p for p in backend_index.backend_url_patterns if p[1].pattern != _DATA_URL
        ]


# --- state, kept on moto's backend (reset with it) ------------------------------------------
def _state(backend: Any) -> dict[str, dict[Any, Any]]:
    if not hasattr(backend, "appconfig_extras"):
        backend.appconfig_extras = {
            "environments": {},
            "strategies": {},
            "deployments": {},
            "tokens": {},
        }
    state: dict[str, dict[Any, Any]] = backend.appconfig_extras
    return state


def backend_for(account_id: str, region: str) -> Any:
    """moto's AppConfig backend of ``account_id`` and ``region``."""
    from moto.appconfig.models import appconfig_backends

    return appconfig_backends[account_id][region]


class AppConfigError(Exception):
    """An error answered in AppConfig's REST-JSON shape."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _not_found(what: str) -> AppConfigError:
    return AppConfigError(404, "ResourceNotFoundException", f"{what} not found")


def _bad(message: str) -> AppConfigError:
    return AppConfigError(400, "BadRequestException", message)


def _short_id() -> str:
    return uuid.uuid4().hex[:7]


# --- the model operations (also used by the CloudFormation models) ---------------------------
def create_environment(backend: Any, app_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """``CreateEnvironment``; the environment's JSON."""
    backend.get_application(app_id)
    env = {
        "ApplicationId": app_id,
        "Id": _short_id(),
        "Name": body.get("Name"),
        "Description": body.get("Description"),
        "State": "ReadyForDeployment",
        "Monitors": list(body.get("Monitors") or []),
    }
    _state(backend)["environments"][env["Id"]] = env
    return env


def create_deployment_strategy(backend: Any, body: dict[str, Any]) -> dict[str, Any]:
    """``CreateDeploymentStrategy``; the strategy's JSON."""
    strategy = {
        "Id": _short_id(),
        "Name": body.get("Name"),
        "Description": body.get("Description"),
        "DeploymentDurationInMinutes": body.get("DeploymentDurationInMinutes"),
        "GrowthType": body.get("GrowthType") or "LINEAR",
        "GrowthFactor": body.get("GrowthFactor"),
        "FinalBakeTimeInMinutes": body.get("FinalBakeTimeInMinutes") or 0,
        "ReplicateTo": body.get("ReplicateTo") or "NONE",
    }
    _state(backend)["strategies"][strategy["Id"]] = strategy
    return strategy


def _environment(backend: Any, app_id: str, ident: str) -> dict[str, Any]:
    for env in _state(backend)["environments"].values():
        if env["ApplicationId"] == app_id and ident in (env["Id"], env["Name"]):
            return dict(env)
    raise _not_found(f"Environment {ident}")


def _application_id(backend: Any, ident: str) -> str:
    for app in backend.applications.values():
        if ident in (app.id, app.name):
            return str(app.id)
    raise _not_found(f"Application {ident}")


def _profile(backend: Any, app_id: str, ident: str) -> Any:
    app = backend.get_application(app_id)
    for profile in app.config_profiles.values():
        if ident in (profile.id, profile.name):
            return profile
    raise _not_found(f"Configuration profile {ident}")


def validate_version(profile: Any, content: bytes | str) -> None:
    """Run the profile's ``JSON_SCHEMA`` validators on ``content``.

    Raises:
        AppConfigError: ``BadRequestException`` naming the first violation.
    """
    import jsonschema

    text = content.decode("utf-8") if isinstance(content, bytes) else content
    for validator in profile.validators or []:
        if validator.get("Type") != "JSON_SCHEMA":
            continue
        try:
            document = json.loads(text)
            jsonschema.validate(document, json.loads(validator["Content"]))
        except (ValueError, jsonschema.ValidationError) as exc:
            detail = getattr(exc, "message", str(exc))
            raise _bad(f"Configuration failed the JSON_SCHEMA validator: {detail}") from exc


def start_deployment(
    backend: Any, app_id: str, env_id: str, body: dict[str, Any]
) -> dict[str, Any]:
    """``StartDeployment``: validated, then ``COMPLETE`` at once."""
    env = _environment(backend, app_id, env_id)
    strategy_id = body.get("DeploymentStrategyId")
    strategy = _state(backend)["strategies"].get(strategy_id)
    if strategy is None:
        raise _not_found(f"Deployment strategy {strategy_id}")
    profile = _profile(backend, app_id, body.get("ConfigurationProfileId") or "")
    version = str(body.get("ConfigurationVersion") or "")
    try:
        hosted = profile.get_version(int(version))
    except Exception as exc:
        raise _not_found(f"Hosted configuration version {version}") from exc
    validate_version(profile, hosted.content)
    deployments = _state(backend)["deployments"].setdefault((app_id, env["Id"]), [])
    now = datetime.now(timezone.utc).isoformat()
    deployment = {
        "ApplicationId": app_id,
        "EnvironmentId": env["Id"],
        "DeploymentStrategyId": strategy_id,
        "ConfigurationProfileId": profile.id,
        "ConfigurationName": profile.name,
        "ConfigurationVersion": version,
        "DeploymentNumber": len(deployments) + 1,
        "Description": body.get("Description"),
        "State": "COMPLETE",
        "PercentageComplete": 100.0,
        "StartedAt": now,
        "CompletedAt": now,
    }
    deployments.append(deployment)
    return deployment


def _deployed(backend: Any, app_id: str, env_id: str, profile_id: str) -> Any | None:
    """The hosted version last deployed to the environment for the profile, or ``None``."""
    for deployment in reversed(_state(backend)["deployments"].get((app_id, env_id), [])):
        if deployment["ConfigurationProfileId"] == profile_id:
            profile = _profile(backend, app_id, profile_id)
            return profile.get_version(int(deployment["ConfigurationVersion"]))
    return None


def retrieval_form(profile_type: str | None, content: bytes | str) -> bytes:
    """What ``GetLatestConfiguration`` answers for a stored version: a feature-flag document's
    ``values`` (each flag's ``enabled`` and attributes), else the content unchanged."""
    raw = content.encode("utf-8") if isinstance(content, str) else content
    if profile_type != FEATURE_FLAGS_TYPE:
        return raw
    document = json.loads(raw)
    values = document.get("values") or {}
    flags = {name: {"enabled": False, **values.get(name, {})} for name in document["flags"]}
    return json.dumps(flags).encode("utf-8")


# --- the data API -----------------------------------------------------------------------------
def _start_session(backend: Any, body: dict[str, Any]) -> dict[str, Any]:
    app_id = _application_id(backend, body.get("ApplicationIdentifier") or "")
    env = _environment(backend, app_id, body.get("EnvironmentIdentifier") or "")
    profile = _profile(backend, app_id, body.get("ConfigurationProfileIdentifier") or "")
    interval = int(body.get("RequiredMinimumPollIntervalInSeconds") or 60)
    token = _new_token(backend, (app_id, env["Id"], profile.id, interval, None))
    return {"InitialConfigurationToken": token}


def _new_token(backend: Any, session: tuple[Any, ...]) -> str:
    token = uuid.uuid4().hex + uuid.uuid4().hex
    _state(backend)["tokens"][token] = session
    return token


def _latest(backend: Any, token: str) -> tuple[dict[str, str], bytes]:
    session = _state(backend)["tokens"].pop(token, None)
    if session is None:
        raise _bad("Token is invalid or was already used")
    app_id, env_id, profile_id, interval, seen = session
    hosted = _deployed(backend, app_id, env_id, profile_id)
    version = None if hosted is None else hosted.version
    body = b""
    headers = {"Next-Poll-Interval-In-Seconds": str(interval)}
    if hosted is not None and version != seen:
        profile = _profile(backend, app_id, profile_id)
        body = retrieval_form(profile._type, hosted.content)
        headers["Content-Type"] = hosted.content_type or "application/json"
        if hosted.version_label:
            headers["Version-Label"] = hosted.version_label
    next_token = _new_token(backend, (app_id, env_id, profile_id, interval, version))
    headers["Next-Poll-Configuration-Token"] = next_token
    return headers, body


# --- HTTP dispatch ----------------------------------------------------------------------------
_APP = r"/applications/(?P<app>[^/]+)"
_ENVS = _APP + r"/environments"
_PATHS = (
    _ENVS + "$",
    _ENVS + r"/(?P<env>[^/]+)$",
    _ENVS + r"/(?P<env>[^/]+)/deployments$",
    _ENVS + r"/(?P<env>[^/]+)/deployments/(?P<number>[^/]+)$",
    r"/deploymentstrategies$",
    r"/deploymentstrategies/(?P<strategy>[^/]+)$",
    r"/deployementstrategies/(?P<strategy>[^/]+)$",  # sic: DeleteDeploymentStrategy's URI
    r"/configurationsessions$",
    r"/configuration$",
)
Route = Callable[[Any, dict[str, str], dict[str, Any], dict[str, list[str]]], Any]


def _routes() -> list[tuple[str, re.Pattern[str], Route]]:
    def envs(b: Any, m: dict[str, str], body: dict[str, Any], q: Any) -> Any:
        return [e for e in _state(b)["environments"].values() if e["ApplicationId"] == m["app"]]

    def deployments(b: Any, m: dict[str, str], body: dict[str, Any], q: Any) -> Any:
        env = _environment(b, m["app"], m["env"])
        return _state(b)["deployments"].get((m["app"], env["Id"]), [])

    def deployment(b: Any, m: dict[str, str], body: dict[str, Any], q: Any) -> Any:
        for item in deployments(b, m, body, q):
            if str(item["DeploymentNumber"]) == m["number"]:
                return item
        raise _not_found(f"Deployment {m['number']}")

    def strategy(b: Any, m: dict[str, str], body: dict[str, Any], q: Any) -> Any:
        found = _state(b)["strategies"].get(m["strategy"])
        if found is None:
            raise _not_found(f"Deployment strategy {m['strategy']}")
        return found

    def drop(kind: str, key: str) -> Route:
        def run(b: Any, m: dict[str, str], body: dict[str, Any], q: Any) -> Any:
            _state(b)[kind].pop(m[key], None)
            return None

        return run

    env, deps = _ENVS + r"/(?P<env>[^/]+)", _ENVS + r"/(?P<env>[^/]+)/deployments"
    strategies = r"/deploymentstrategies"
    table: list[tuple[str, str, Route]] = [
        ("POST", _ENVS + "$", lambda b, m, body, q: create_environment(b, m["app"], body)),
        ("GET", _ENVS + "$", lambda b, m, body, q: {"Items": envs(b, m, body, q)}),
        ("GET", env + "$", lambda b, m, body, q: _environment(b, m["app"], m["env"])),
        ("DELETE", env + "$", drop("environments", "env")),
        ("POST", deps + "$", lambda b, m, body, q: start_deployment(b, m["app"], m["env"], body)),
        ("GET", deps + "$", lambda b, m, body, q: {"Items": deployments(b, m, body, q)}),
        ("GET", deps + r"/(?P<number>[^/]+)$", deployment),
        ("POST", strategies + "$", lambda b, m, body, q: create_deployment_strategy(b, body)),
        ("GET", strategies + r"/(?P<strategy>[^/]+)$", strategy),
        ("DELETE", r"/deploye?mentstrategies/(?P<strategy>[^/]+)$", drop("strategies", "strategy")),
        ("POST", r"/configurationsessions$", lambda b, m, body, q: _start_session(b, body)),
    ]
    return [(verb, re.compile(path), route) for verb, path, route in table]


def _dispatch(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], Any]:
    """Answer one request of the added operations (moto calls it with the request, the URL and
    its headers, in-process and in the server alike)."""
    from moto.core.responses import BaseResponse

    response = BaseResponse(service_name="appconfig")
    response.setup_class(request, full_url, headers)
    path = urlparse(full_url).path
    method = str(request.method).upper()
    backend = backend_for(response.current_account, response.region)
    try:
        if method == "GET" and path.endswith("/configuration"):
            token = (parse_qs(urlparse(full_url).query).get("configuration_token") or [""])[0]
            answer_headers, payload = _latest(backend, token)
            return 200, answer_headers, payload
        body = json.loads(response.body) if response.body else {}
        for verb, pattern, route in _routes():
            found = pattern.search(path)
            if verb == method and found:
                result = route(backend, found.groupdict(), body, {})
                status = 201 if method == "POST" else (204 if result is None else 200)
                return status, {"Content-Type": "application/json"}, json.dumps(result or {})
        raise _bad(f"{method} {path}: not an operation the emulator knows")
    except AppConfigError as exc:
        error = {"Content-Type": "application/json", "x-amzn-ErrorType": exc.code}
        return exc.status, error, json.dumps({"Message": exc.message, "message": exc.message})
    except Exception as exc:  # moto's own not-found exceptions of applications and profiles
        code = getattr(exc, "code", None)
        if isinstance(code, int) and code == 404:
            error = {
                "Content-Type": "application/json",
                "x-amzn-ErrorType": "ResourceNotFoundException",
            }
            return 404, error, json.dumps({"Message": str(exc)})
        raise
