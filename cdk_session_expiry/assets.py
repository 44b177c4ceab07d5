"""The runtime's code assets and the functions that run them, built without Docker.

Both assets are copies of the runtime package (located by ``runtime_package_dir()`` from this
file, so an installed wheel and an editable checkout both work), placed where Lambda looks:
- function code: ``session_expiry_runtime/`` at the asset root, so the handler
  ``session_expiry_runtime.handler.handler`` resolves;
- layer: ``python/session_expiry_runtime/``, which Lambda puts on ``sys.path`` for Python
  runtimes (Lambda developer guide, "Packaging your layer content").
The runtime needs only the standard library and boto3, which the Lambda Python runtime ships,
so the copy is the whole build. Bundling always succeeds locally; the Docker image named below
is never pulled.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, Duration, ILocalBundling
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from . import _runtime_contract as contract
from .validation import staged_entries

#: Bundling variable listing the custom steps' directories (never read: it keys the cache).
_ENV_STEP_DIRS = "SESSION_EXPIRY_CUSTOM_STEP_DIRS"
#: A name that makes it obvious in any error output that Docker was never meant to run.
_NO_DOCKER_IMAGE = "local-bundling-only"
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")

#: The newest Python runtime aws-cdk-lib offers (a test fails when a newer one appears).
CLEANUP_RUNTIME = lambda_.Runtime.PYTHON_3_14
CLEANUP_ARCHITECTURE = lambda_.Architecture.ARM_64
#: Runtimes the runtime layer declares: every Python the session runtime supports (>= 3.10),
#: so application functions need not move to the cleanup function's runtime.
LAYER_RUNTIMES = (
    lambda_.Runtime.PYTHON_3_10,
    lambda_.Runtime.PYTHON_3_11,
    lambda_.Runtime.PYTHON_3_12,
    lambda_.Runtime.PYTHON_3_13,
    CLEANUP_RUNTIME,
)

#: Layer directory that Lambda adds to ``sys.path`` for every Python runtime.
LAYER_PYTHON_DIR = "python"


@jsii.implements(ILocalBundling)
class _CopyPackage:
    """Local bundling that copies a package directory to ``<output>/<target>``."""

    def __init__(self, source: Path, target: str, beside: Sequence[Path] = ()) -> None:
        self._source = source
        self._target = target
        self._beside = tuple(beside)

    # jsii passes the bundling options positionally; the copy does not need them.
    def try_bundle(self, output_dir: str, *_options: Any, **_kw_options: Any) -> bool:
        output = Path(output_dir)
        shutil.copytree(self._source, output / self._target, ignore=_IGNORED)
        for directory in self._beside:
            for entry in staged_entries(directory):
                if entry.is_dir():
                    shutil.copytree(entry, output / entry.name, ignore=_IGNORED)
                else:
                    shutil.copy2(entry, output / entry.name)
        return True


def _package_code(target: str, beside: Sequence[Path] = ()) -> lambda_.Code:
    source = contract.runtime_package_dir()
    return lambda_.Code.from_asset(
        str(source),
        exclude=["__pycache__", "*.pyc", "*.pyo"],
        # The function and the layer copy the same source to different places: hash the
        # output, or both would share one staged asset.
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            image=DockerImage.from_registry(_NO_DOCKER_IMAGE),
            # What Docker would run, were it ever used. It also keys CDK's bundling cache,
            # which would otherwise hand the layer the function's staged output.
            command=["cp", "-R", "/asset-input/.", f"/asset-output/{target}"],
            # Keys the bundling cache too: code with custom steps is not the plain runtime's.
            environment={_ENV_STEP_DIRS: os.pathsep.join(map(str, beside))} if beside else None,
            local=_CopyPackage(source, target, beside),
        ),
    )


def cleanup_function_code(beside: Sequence[Path] = ()) -> lambda_.Code:
    """Code asset of the cleanup function: ``session_expiry_runtime/`` at its root, and the
    contents of each directory of ``beside`` (custom steps' code) next to it.

    Raises:
        FileNotFoundError: the runtime package is missing (a broken install).
    """
    return _package_code(contract.RUNTIME_PACKAGE, beside)


def runtime_layer_code() -> lambda_.Code:
    """Code asset of the runtime layer: ``python/session_expiry_runtime/`` inside.

    Raises:
        FileNotFoundError: the runtime package is missing (a broken install).
    """
    return _package_code(f"{LAYER_PYTHON_DIR}/{contract.RUNTIME_PACKAGE}")


def runtime_function(
    scope: Construct,
    id: str,
    *,
    description: str,
    handler: str,
    role: iam.IRole,
    log_group: logs.ILogGroup,
    timeout: Duration,
    memory_size: int,
    environment: dict[str, str],
    code: lambda_.Code | None = None,
    **extra: Any,
) -> lambda_.Function:
    """A function that runs a handler of the runtime package (the cleanup, the sweeper).

    Every such function has [`CLEANUP_RUNTIME`][cdk_session_expiry.CLEANUP_RUNTIME] on
    `CLEANUP_ARCHITECTURE`, the code
    asset of `cleanup_function_code` (or ``code``), and Lambda's JSON log format at INFO:
    the runtime logs one structured INFO line per session through stdlib ``logging``, which
    Lambda keeps only when the application log level is set. ``extra`` goes to ``lambda_.Function``.
    """
    return lambda_.Function(
        scope,
        id,
        description=description,
        runtime=CLEANUP_RUNTIME,
        architecture=CLEANUP_ARCHITECTURE,
        handler=handler,
        code=code or cleanup_function_code(),
        role=role,
        timeout=timeout,
        memory_size=memory_size,
        logging_format=lambda_.LoggingFormat.JSON,
        application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
        system_log_level_v2=lambda_.SystemLogLevel.WARN,
        log_group=log_group,
        environment=environment,
        **extra,
    )
