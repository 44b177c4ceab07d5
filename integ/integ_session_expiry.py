"""Integration test app: deploy SessionExpiry to a real account and assert what moto cannot.

A session with a scratch object and a KMS grant (retiring principal: the cleanup role; ``Name``
naming the session's key, as ``SessionStore.create_grant`` writes it) is
written to the table and ended (DeleteItem); the deployed cleanup, fed by the real stream and
event source mapping, must delete the object and retire the grant — which checks IAM, the
stream filter and KMS's rule on who may retire a grant, none of which the local sandbox
checks. Assertions use ``aws-cdk.integ-tests-alpha`` (``IntegTest``, ``AwsApiCall``,
``ExpectedResult``, retried with ``wait_for_assertions``).

Run with ``make integ`` (deploy, wait for the assertions, report, destroy). The app's synthesized
templates are a snapshot in ``integ/snapshots/``, compared offline by ``make test``.
"""

from __future__ import annotations

from aws_cdk import App, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.integ_tests_alpha import ExpectedResult, IntegTest
from session_expiry_runtime.core.grant_names import grant_name

from cdk_session_expiry import SessionExpiry

STACK_NAME = "SessionExpiryInteg"
TEST_NAME = "SessionExpiryIntegTest"
SESSION_ID = "integ-session-1"
INCARNATION = "incarnation-1"
SCRATCH_PREFIX = f"sessions/{SESSION_ID}/{INCARNATION}/"
SCRATCH_KEY = f"{SCRATCH_PREFIX}notes.txt"
#: Time to live far in the future: the session is ended explicitly, not expired.
TTL_EPOCH_SECONDS = "4102444800"  # 2100-01-01
#: How long the assertions wait for the cleanup (stream delivery is about a second; retries).
ASSERTION_TIMEOUT = Duration.minutes(5)
ASSERTION_INTERVAL = Duration.seconds(15)


def build(app: App) -> IntegTest:
    """The stack under test and its assertions."""
    stack = Stack(app, STACK_NAME)
    grant_key = kms.Key(
        stack,
        "GrantKey",
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.DESTROY,
        pending_window=Duration.days(7),  # the shortest KMS allows
    )
    scratch = s3.Bucket(
        stack,
        "Scratch",
        enforce_ssl=True,
        removal_policy=RemovalPolicy.DESTROY,
        auto_delete_objects=True,
    )
    sessions = SessionExpiry(
        stack,
        "Sessions",
        grant_key=grant_key,
        scratch_bucket=scratch,
        removal_policy=RemovalPolicy.DESTROY,
    )
    # The grantee of the session's grant: a role that can do nothing else.
    grantee = iam.Role(stack, "Grantee", assumed_by=iam.AccountRootPrincipal())

    integ = IntegTest(app, TEST_NAME, test_cases=[stack])
    assertions = integ.assertions
    grant = assertions.aws_api_call(
        "KMS",
        "createGrant",
        {
            "KeyId": grant_key.key_arn,
            "GranteePrincipal": grantee.role_arn,
            "Operations": ["Decrypt"],
            "RetiringPrincipal": sessions.retiring_principal_arn,
            # Named as SessionStore.create_grant names it: the cleanup retires only a grant
            # whose Name names the removed item's key.
            "Name": grant_name({"pk": SESSION_ID}, INCARNATION),
        },
    )
    put_object = assertions.aws_api_call(
        "S3", "putObject", {"Bucket": scratch.bucket_name, "Key": SCRATCH_KEY, "Body": "scratch"}
    )
    put_session = assertions.aws_api_call(
        "DynamoDB",
        "putItem",
        {
            "TableName": sessions.table.table_name,
            "Item": {
                "pk": {"S": SESSION_ID},
                "expiresAt": {"N": TTL_EPOCH_SECONDS},
                "scratchPrefix": {"S": SCRATCH_PREFIX},
                "grantId": {"S": grant.get_att_string("GrantId")},
            },
        },
    )
    end_session = assertions.aws_api_call(
        "DynamoDB",
        "deleteItem",
        {"TableName": sessions.table.table_name, "Key": {"pk": {"S": SESSION_ID}}},
    )
    object_gone = (
        assertions.aws_api_call(
            "S3", "listObjectsV2", {"Bucket": scratch.bucket_name, "Prefix": SCRATCH_PREFIX}
        )
        .expect(ExpectedResult.object_like({"KeyCount": 0}))
        .wait_for_assertions(total_timeout=ASSERTION_TIMEOUT, interval=ASSERTION_INTERVAL)
    )
    grant_retired = (
        assertions.aws_api_call(
            "KMS",
            "listGrants",
            {"KeyId": grant_key.key_arn, "GrantId": grant.get_att_string("GrantId")},
        )
        .expect(ExpectedResult.object_like({"Grants": []}))
        .wait_for_assertions(total_timeout=ASSERTION_TIMEOUT, interval=ASSERTION_INTERVAL)
    )
    grant.next(put_object).next(put_session).next(end_session).next(object_gone).next(grant_retired)
    return integ


def main() -> None:
    app = App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
