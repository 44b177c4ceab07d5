"""Run the deployed shape of a session-expiry stack locally, without an AWS account.

``pip install 'cdk-session-expiry[testing]'`` (moto's server and boto3) and Node.js with the
CDK CLI are needed; nothing here is imported by the construct itself.

* :class:`LocalEmulator` — moto's server on ``http://localhost:{port}`` in this process, with
  moto's internal DynamoDB-to-Lambda delivery switched off so stream records stay readable.
* :class:`CdkCli` — the real CDK CLI (``cdk bootstrap``, ``cdk deploy``) pointed at it.
* :class:`LocalPipeline` — reads back what was deployed (table, stream, event source mapping,
  function configuration and code asset), runs the function's handler from its code asset, and
  delivers the stream to it with the mapping's semantics (:class:`EventSourceMappingPoller`).
* The stack's other functions (e.g. the expiry sweeper) run from their own code assets
  (:meth:`LocalPipeline.local_function`), commands of the code asset run with the function's
  settings (:meth:`LocalPipeline.run_module`, e.g. the replay CLI).
* pytest fixtures in :mod:`cdk_session_expiry.testing.pytest_plugin`.

What differs from AWS
---------------------
* Timing: the poller runs when called (:meth:`LocalPipeline.run_cleanup`), or continuously on
  its own thread (:meth:`LocalPipeline.start_cleanup`, every 0.25 s by default: Lambda polls a
  stream's shards about four times a second); ``MaximumBatchingWindowInSeconds``,
  ``ParallelizationFactor`` and ``TumblingWindowInSeconds`` are ignored (one batch at a time
  per shard, in order); the 6 MB payload limit is not enforced.
* Retries happen immediately, without back-off. With unbounded retries
  (``MaximumRetryAttempts=-1``) a batch that keeps failing raises :class:`ShardBlocked` after a
  number of attempts instead of blocking the shard for up to 24 hours.
* Retry accounting: bisecting a failing batch does not consume a retry (as documented); the
  halves inherit the retry count of the batch they came from. A valid partial batch response
  re-delivers from the lowest reported record and counts as one retry. An ``itemIdentifier``
  that is not a sequence number of the batch fails the whole batch (AWS documents this only for
  empty/null identifiers and wrong key names). A response that is not a JSON object fails the
  whole batch.
* On-failure messages follow the documented shape (``DDBStreamBatchInfo``, ``requestContext``
  with condition ``RetryAttemptsExhausted``/``RecordAgeExceeded``); ids and timestamps are local.
* TTL: moto never expires items. :meth:`LocalPipeline.ttl_delete` / :meth:`LocalPipeline.expire_due`
  delete expired items on request and give their REMOVE records the TTL service's
  ``userIdentity`` by editing the record moto stored, so GetRecords returns it. AWS's TTL lag
  (minutes to days) does not exist locally; global-table replicas are not emulated.
* The handler runs in a local Python process from the deployed code asset with the function's
  environment, not in the Lambda runtime: the local interpreter's version (not the function's
  ``Runtime``) and the locally installed boto3 are used, layers are not mounted, memory size and
  architecture are not enforced; the timeout is (the process is restarted, as a new execution
  environment). IAM is not evaluated: the function's role does not limit what it can call.
* moto's models are not all thread-safe (e.g. listing a bucket while keys are deleted
  concurrently); such requests fail with HTTP 500, which the SDK retries. They are counted in
  :attr:`LocalEmulator.internal_errors`.
* API Gateway Management API: moto serves it at the emulator's root (``/@connections/{id}``)
  without api id or stage, so a function variable holding an ``execute-api`` endpoint is pointed
  at the emulator. moto's GetConnection/PostToConnection create unknown connections, and
  DeleteConnection of an unknown connection succeeds (AWS answers GoneException), so open
  connections are read from moto's registry (:meth:`LocalEmulator.open_connection_ids`).
* KMS: moto's RetireGrant of an already retired grant succeeds (AWS: NotFoundException) and
  moto does not check who may retire a grant.
* moto ignores TTL settings, S3 lifecycle rules, alarms and IAM policies of the deployed stack.
  CloudWatch alarms (``AWS::CloudWatch::Alarm``) and Lambda's asynchronous invoke settings
  (``AWS::Lambda::EventInvokeConfig``) are not created at all; nothing publishes AWS metrics
  (e.g. ``TimeToLiveDeletedItemCount``), so no alarm could fire anyway.
* Schedules: moto creates EventBridge rules with a ``ScheduleExpression`` but never fires them.
  :meth:`LocalPipeline.schedule_of` reads the rule back and :meth:`Schedule.scheduled_event`
  builds the event a scheduled target receives; invoke the target yourself
  (:meth:`LocalPipeline.local_function`), on whatever simulated timeline the test needs, or in
  real time with :meth:`LocalPipeline.start_schedule` (:class:`ScheduleRunner`: one run at a
  time, as reserved concurrency 1 enforces; EventBridge's own delivery delay is not modelled).
* EventBridge: moto's ``PutEvents`` matches rules on custom buses and delivers to SQS targets
  synchronously (AWS: asynchronously, at least once, with retries).
* Settings changed after deploy (``UpdateEventSourceMapping``, ``UpdateFunctionConfiguration``)
  take effect at the next :meth:`LocalPipeline.run_cleanup` after :meth:`LocalPipeline.refresh`;
  a disabled mapping delivers nothing and keeps its position, like AWS's.
* Faults: :meth:`LocalEmulator.inject_fault` answers chosen requests (method and path) with an
  AWS-shaped REST-JSON error before moto sees them, e.g. one connection's ``DeleteConnection``.
"""

from cdk_session_expiry.testing._moto_internals import MotoInternalsChanged, check_moto_internals
from cdk_session_expiry.testing.agentcore import AgentCoreCall
from cdk_session_expiry.testing.cdk_cli import CdkAppNotFoundError, CdkCli, CdkCliError
from cdk_session_expiry.testing.deployment import (
    DeployedFunction,
    DeployedStack,
    FunctionError,
    FunctionTimeout,
    LocalLambda,
)
from cdk_session_expiry.testing.emulator import Fault, LocalEmulator
from cdk_session_expiry.testing.pipeline import (
    EmfMetrics,
    LocalPipeline,
    Schedule,
    ScheduledRun,
    ScheduleRunner,
)
from cdk_session_expiry.testing.poller import (
    EventSourceMappingConfig,
    EventSourceMappingPoller,
    Invocation,
    PollReport,
    ShardBlocked,
    interpret_partial_batch_response,
    on_failure_record,
)
from cdk_session_expiry.testing.stream_records import to_lambda_record

__all__ = [
    "AgentCoreCall",
    "CdkAppNotFoundError",
    "CdkCli",
    "CdkCliError",
    "DeployedFunction",
    "DeployedStack",
    "EmfMetrics",
    "EventSourceMappingConfig",
    "EventSourceMappingPoller",
    "Fault",
    "FunctionError",
    "FunctionTimeout",
    "Invocation",
    "LocalEmulator",
    "LocalLambda",
    "LocalPipeline",
    "MotoInternalsChanged",
    "PollReport",
    "Schedule",
    "ScheduleRunner",
    "ScheduledRun",
    "ShardBlocked",
    "check_moto_internals",
    "interpret_partial_batch_response",
    "on_failure_record",
    "to_lambda_record",
]
