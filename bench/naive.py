"""The baseline: session cleanup written the way the public guides show it.

One record after another, one call after another: DeleteConnection, RetireGrant, then
ListObjectsV2 page by page with one DeleteObjects per page (the S3 part is what
``bucket.objects.filter(Prefix=...).delete()`` does). It trusts the record's grant id, so it makes
one call a session fewer than the project's handler, which first proves the grant is the removed
session's own (``ListGrants``): the comparison measures concurrency, less that check. It reads
the same environment variables as the project's handler and creates its clients at import time,
as the guides recommend.
"""

from __future__ import annotations

import os
from typing import Any

import boto3

WEBSOCKET_ENDPOINT = os.environ["SESSION_EXPIRY_WEBSOCKET_ENDPOINT"]
KEY_ARN = os.environ["SESSION_EXPIRY_GRANT_KEY_ARN"]
BUCKET = os.environ["SESSION_EXPIRY_SCRATCH_BUCKET"]

s3 = boto3.client("s3")
kms = boto3.client("kms")
apigw = boto3.client("apigatewaymanagementapi", endpoint_url=WEBSOCKET_ENDPOINT)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    failures = []
    for record in event["Records"]:
        if record["eventName"] != "REMOVE":
            continue
        old = record["dynamodb"].get("OldImage", {})
        try:
            if "connectionId" in old:
                try:
                    apigw.delete_connection(ConnectionId=old["connectionId"]["S"])
                except apigw.exceptions.GoneException:
                    pass
            if "grantId" in old:
                kms.retire_grant(KeyId=KEY_ARN, GrantId=old["grantId"]["S"])
            if "scratchPrefix" in old:
                pages = s3.get_paginator("list_objects_v2").paginate(
                    Bucket=BUCKET, Prefix=old["scratchPrefix"]["S"]
                )
                for page in pages:
                    keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                    if keys:
                        s3.delete_objects(Bucket=BUCKET, Delete={"Objects": keys, "Quiet": True})
        except Exception:
            failures.append({"itemIdentifier": record["dynamodb"]["SequenceNumber"]})
    return {"batchItemFailures": failures}
