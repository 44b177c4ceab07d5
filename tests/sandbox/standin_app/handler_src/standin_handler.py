"""Stand-in cleanup handler: deletes the object named by the old image's ``scratchKey``,
closes its ``connectionId``, and reports records whose old image has ``poison`` as failed."""

import json
import os

import boto3

_s3 = boto3.client("s3")
_ws = boto3.client("apigatewaymanagementapi", endpoint_url=os.environ["WEBSOCKET_ENDPOINT"])


def handler(event, context):
    failures = []
    for record in event["Records"]:
        old = record["dynamodb"].get("OldImage", {})
        seq = record["dynamodb"]["SequenceNumber"]
        print(
            json.dumps(
                {
                    "seq": seq,
                    "userIdentity": record.get("userIdentity"),
                    "module": __file__,
                    "marker": os.environ.get("MARKER"),
                }
            )
        )
        if "poison" in old:
            failures.append({"itemIdentifier": seq})
            continue
        if "scratchKey" in old:
            _s3.delete_object(Bucket=os.environ["SCRATCH_BUCKET"], Key=old["scratchKey"]["S"])
        if "connectionId" in old:
            _ws.delete_connection(ConnectionId=old["connectionId"]["S"])
    return {"batchItemFailures": failures}
