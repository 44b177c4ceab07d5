"""``make integ``: deploy the integration test, let its assertions run, report, destroy.

integ-runner cannot read the cloud assembly aws-cdk-lib 2.275 writes (schema 55; the newest
``@aws-cdk/integ-runner``, 2.197.10, reads up to 53), so the cycle is driven with the CDK CLI
the project pins (``node_modules/.bin/cdk``): ``cdk deploy --all`` of
``integ/integ_session_expiry.py`` (the stack under test, then the assertion stack whose
custom resources make the API calls and wait for the expected results), then the assertion
stack's ``AssertionResults*`` outputs are read (``{"status": "success"}`` or a failure
message), then ``cdk destroy --all``.

Needs AWS credentials for an account and Region bootstrapped with ``cdk bootstrap``; without
credentials it says so and exits 2. Exit 0 when every assertion succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
APP = f"{sys.executable} -m integ.integ_session_expiry"
EXIT_NO_CREDENTIALS = 2


def caller_identity() -> str | None:
    """The account of the credentials in the environment, or ``None`` without usable ones."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return str(boto3.client("sts").get_caller_identity()["Account"])
    except (BotoCoreError, ClientError):
        return None


def assertion_results(outputs: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, Any]]:
    """Each ``AssertionResults*`` output of the deployed stacks, parsed: ``status`` and
    ``message``. A value that is not JSON is a failure carrying that text."""
    results: dict[str, dict[str, Any]] = {}
    for stack_outputs in outputs.values():
        for name, value in stack_outputs.items():
            if not name.startswith("AssertionResults"):
                continue
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                parsed = {"status": "fail", "message": value}
            results[name] = (
                parsed if isinstance(parsed, dict) else {"status": "fail", "message": value}
            )
    return results


def report(results: Mapping[str, Mapping[str, Any]]) -> bool:
    """Print one line per assertion; ``True`` when there was at least one and all succeeded."""
    for name, result in sorted(results.items()):
        status = result.get("status", "fail")
        detail = f": {result.get('message')}" if status != "success" else ""
        print(f"{status:8} {name}{detail}")
    if not results:
        print("fail     no AssertionResults output found: the assertion stack did not run")
    return bool(results) and all(r.get("status") == "success" for r in results.values())


def _cdk(args: Sequence[str]) -> int:
    cdk = REPO / "node_modules" / ".bin" / "cdk"
    command = [str(cdk) if cdk.is_file() else "cdk", *args, "--app", APP, "--no-notices"]
    print("$", " ".join(command), flush=True)
    return subprocess.run(command, cwd=REPO, check=False).returncode  # noqa: S603


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m integ.run", description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="do not destroy the stacks afterwards")
    args = parser.parse_args(argv)
    account = caller_identity()
    if account is None:
        print(
            "make integ: no usable AWS credentials in the environment (AWS_PROFILE, "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, SSO, or an instance role). It deploys the "
            "stacks SessionExpiryInteg and SessionExpiryIntegTest/DefaultTest/DeployAssert into "
            "that account and Region (bootstrapped with 'cdk bootstrap'), checks the "
            "assertions and destroys them. Nothing was deployed.",
            file=sys.stderr,
        )
        return EXIT_NO_CREDENTIALS
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "(profile)"
    print(f"make integ: account {account}, Region {region}", flush=True)
    with tempfile.TemporaryDirectory(prefix="integ-") as work:
        outputs_file = Path(work) / "outputs.json"
        try:
            deployed = _cdk(
                [
                    "deploy",
                    "--all",
                    "--require-approval",
                    "never",
                    "--outputs-file",
                    str(outputs_file),
                ]
            )
            outputs = json.loads(outputs_file.read_text()) if outputs_file.is_file() else {}
            ok = report(assertion_results(outputs)) and deployed == 0
        finally:
            if not args.keep:
                _cdk(["destroy", "--all", "--force"])
    print("make integ:", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
