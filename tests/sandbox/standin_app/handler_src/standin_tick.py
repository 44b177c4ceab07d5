"""Stand-in scheduled function: answers with what it was given and where it runs from."""

import os


def handler(event, context):
    return {
        "detailType": event.get("detail-type"),
        "resources": event.get("resources"),
        "tickName": os.environ.get("TICK_NAME"),
        "module": __file__,
    }
