"""A custom cleanup step: delete the object the session names."""

import boto3

_s3 = boto3.client("s3")


def delete_note(old_image: dict, reason: str) -> None:
    _s3.delete_object(Bucket=old_image["noteBucket"], Key=old_image["noteKey"])
