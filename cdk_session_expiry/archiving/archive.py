"""Archive bucket of cleaned sessions: prop rules, lifecycle rule, permissions, environment.

The cleanup writes each cleaned session's old image as one JSON object under the archive prefix
(layout and body: ``session_expiry_runtime.sinks.archive``), before any other cleanup step; one
``PutObject`` per session.

Lifecycle: one rule on the archive prefix of a bucket of this app, with the transition and
expiration props, aborting incomplete multipart uploads after 1 day. Noncurrent versions (a
retry overwrites the same key) expire with ``archive_expiration`` when it is set, never
earlier, so versioning still protects the archive against deletes. An imported bucket gets a
synth warning instead (the rule must be added where the bucket is defined), as for the scratch
backstop (``lifecycle.py``).

Cost notes: S3 does not transition objects smaller than 128 KB by default (bucket setting
``TransitionDefaultMinimumObjectSize``, Amazon S3 User Guide, "Transitioning objects using
Amazon S3 Lifecycle"), and archived sessions are typically 1-5 KB: ``archive_transition_after``
only moves larger objects unless the bucket's default is changed, and for small objects a
transition request plus the Glacier classes' per-object overhead costs more than it saves.
``archive_expiration`` is the lever that bounds the archive's cost.
"""

from __future__ import annotations

from aws_cdk import Annotations, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .. import _runtime_contract as contract
from .. import lifecycle, validation

#: Storage class of ``archive_transition_after`` unless ``archive_transition_storage_class``
#: names another: millisecond reads at archive prices, 90 day minimum storage.
DEFAULT_TRANSITION_STORAGE_CLASS = s3.StorageClass.GLACIER_INSTANT_RETRIEVAL
#: S3 refuses transitions to the infrequent access classes before 30 days.
_THIRTY_DAY_MINIMUM = {
    s3.StorageClass.INFREQUENT_ACCESS.value,
    s3.StorageClass.ONE_ZONE_INFREQUENT_ACCESS.value,
}
_MAX_DAYS = Duration.days(36_500)
WARNING_IMPORTED_BUCKET = "cdk-session-expiry:archiveBucketLifecycle"


def check_archive_props(
    *,
    archive_bucket: s3.IBucket | None,
    archive_prefix: str | None,
    archive_transition_after: Duration | None,
    archive_transition_storage_class: s3.StorageClass | None,
    archive_expiration: Duration | None,
    scratch_bucket: s3.IBucket | None,
    scratch_root: str,
) -> str:
    """Validate the archive props and return the archive prefix to use.

    Raises:
        ValueError: an archive prop without ``archive_bucket``; a prefix that breaks
            ``lifecycle.check_scratch_root``'s rules or overlaps the scratch root in the same
            bucket; a storage class without a transition; a transition or expiration that is
            not a whole number of days >= 1 (>= 30 for the infrequent access classes); an
            expiration not later than the transition.
    """
    if archive_bucket is None:
        _check_without_bucket(
            archive_prefix=archive_prefix,
            archive_transition_after=archive_transition_after,
            archive_transition_storage_class=archive_transition_storage_class,
            archive_expiration=archive_expiration,
        )
        return contract.DEFAULT_ARCHIVE_PREFIX
    prefix = contract.DEFAULT_ARCHIVE_PREFIX if archive_prefix is None else archive_prefix
    _check_prefix(prefix, archive_bucket, scratch_bucket, scratch_root)
    _check_lifecycle(archive_transition_after, archive_transition_storage_class, archive_expiration)
    return prefix


def _check_without_bucket(**archive_props: object) -> None:
    for name, value in archive_props.items():
        if value is not None:
            shown = value.to_human_string() if isinstance(value, Duration) else repr(value)
            raise ValueError(
                f"{name}={shown} is set without archive_bucket: expected an archive_bucket, "
                f"or no {name}"
            )


def _check_prefix(
    prefix: str, bucket: s3.IBucket, scratch_bucket: s3.IBucket | None, scratch_root: str
) -> None:
    lifecycle.check_scratch_root(prefix, "archive_prefix")
    if (
        scratch_bucket is not None
        and bucket is scratch_bucket
        and not validation.is_token(prefix)
        and not validation.is_token(scratch_root)
        and (prefix.startswith(scratch_root) or scratch_root.startswith(prefix))
    ):
        raise ValueError(
            f"archive_prefix={prefix!r} overlaps scratch_root={scratch_root!r} in the same bucket: "
            "the scratch cleanup and its lifecycle backstop would delete the archive; expected "
            "disjoint prefixes such as 'archive/' and 'sessions/'"
        )


def _check_lifecycle(
    transition_after: Duration | None,
    storage_class: s3.StorageClass | None,
    expiration: Duration | None,
) -> None:
    if storage_class is not None and transition_after is None:
        raise ValueError(
            f"archive_transition_storage_class={storage_class.value!r} is set "
            "without archive_transition_after: expected both, or neither"
        )
    if transition_after is not None:
        effective_class = storage_class or DEFAULT_TRANSITION_STORAGE_CLASS
        minimum = Duration.days(30 if effective_class.value in _THIRTY_DAY_MINIMUM else 1)
        validation.check_duration_range(
            "archive_transition_after",
            transition_after,
            minimum=minimum,
            maximum=_MAX_DAYS,
            whole="days",
        )
    if expiration is None:
        return
    validation.check_duration_range(
        "archive_expiration", expiration, minimum=Duration.days(1), maximum=_MAX_DAYS, whole="days"
    )
    if (
        transition_after is not None
        and not validation.is_token(transition_after)
        and not validation.is_token(expiration)
        and expiration.to_days() <= transition_after.to_days()
    ):
        raise ValueError(
            f"archive_expiration={expiration.to_human_string()}: expected later "
            f"than archive_transition_after={transition_after.to_human_string()}"
        )


def configure_archive(
    scope: Construct,
    function: lambda_.Function,
    *,
    bucket: s3.IBucket,
    prefix: str,
    transition_after: Duration | None,
    storage_class: s3.StorageClass | None,
    expiration: Duration | None,
) -> None:
    """Environment, least-privilege permissions and lifecycle rule of the archive.

    Grants ``s3:PutObject`` on ``<bucket>/<prefix>*`` only, and ``kms:GenerateDataKey`` /
    ``kms:Encrypt`` on the bucket's key when it has one (the runtime then writes with
    ``ServerSideEncryption=aws:kms`` and that key).
    """
    function.add_environment(contract.ENV_ARCHIVE_BUCKET, bucket.bucket_name)
    function.add_environment(contract.ENV_ARCHIVE_PREFIX, prefix)
    function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{prefix}*")]
        )
    )
    if bucket.encryption_key is not None:
        function.add_environment(contract.ENV_ARCHIVE_KMS_KEY_ARN, bucket.encryption_key.key_arn)
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["kms:GenerateDataKey", "kms:Encrypt"],
                resources=[bucket.encryption_key.key_arn],
            )
        )
    if transition_after is not None or expiration is not None:
        _add_lifecycle_rule(
            scope,
            bucket,
            prefix=prefix,
            transition_after=transition_after,
            storage_class=storage_class,
            expiration=expiration,
        )


def _add_lifecycle_rule(
    scope: Construct,
    bucket: s3.IBucket,
    *,
    prefix: str,
    transition_after: Duration | None,
    storage_class: s3.StorageClass | None,
    expiration: Duration | None,
) -> None:
    if not lifecycle.can_add_lifecycle_rule(bucket):
        Annotations.of(scope).add_warning_v2(
            WARNING_IMPORTED_BUCKET,
            f"archive_bucket {bucket.node.path} is imported: no lifecycle rule could be added "
            f"for {prefix!r}. Add one on that prefix (the transition/expiration you set, abort "
            "incomplete multipart uploads after 1 day) where the bucket is defined.",
        )
        return
    transitions = (
        [
            s3.Transition(
                storage_class=storage_class or DEFAULT_TRANSITION_STORAGE_CLASS,
                transition_after=transition_after,
            )
        ]
        if transition_after is not None
        else None
    )
    bucket.add_lifecycle_rule(  # type: ignore[attr-defined]  # narrowed by can_add_lifecycle_rule
        id=f"session-expiry-archive-{scope.node.addr}",
        enabled=True,
        prefix=prefix,
        transitions=transitions,
        expiration=expiration,
        noncurrent_version_expiration=expiration,
        abort_incomplete_multipart_upload_after=lifecycle.ABORT_INCOMPLETE_MULTIPART_AFTER,
    )
