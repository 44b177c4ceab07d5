"""Is Node.js there? Checked before anything imports ``aws_cdk``.

The AWS CDK's Python packages run on the jsii runtime, a Node.js process that ``import aws_cdk``
starts (``JSII_NODE``, default ``node`` on ``PATH``). Without Node.js that import fails deep
inside jsii (``FileNotFoundError: ... 'node'`` and an ``AttributeError`` from its cleanup); the
testing plugin (``cdk_session_expiry.testing``) calls `require_node` first so the user
reads what is missing and which versions work instead. This module imports nothing of the CDK.
"""

from __future__ import annotations

import os
import shutil

#: Node.js versions the jsii runtime supports (its end-of-life banner lists ^22 and ^24);
#: Node.js 20 still runs, with that banner (support ended 2026-10-30).
SUPPORTED_NODE_VERSIONS = ("22", "24")


class NodeNotFoundError(RuntimeError):
    """Node.js is not on ``PATH`` (or ``JSII_NODE`` names no program)."""


def require_node() -> str:
    """The Node.js program the jsii runtime will start.

    Raises:
        NodeNotFoundError: none found; the message says which versions to install and how to
            point at one.
    """
    wanted = os.environ.get("JSII_NODE", "node")
    found = shutil.which(wanted)
    if found is None:
        where = f"JSII_NODE={wanted!r}" if "JSII_NODE" in os.environ else "'node' on PATH"
        raise NodeNotFoundError(
            f"Node.js not found ({where}): the AWS CDK's Python packages run on the jsii "
            f"runtime, which needs Node.js {' or '.join(SUPPORTED_NODE_VERSIONS)} (20 still "
            "works, with an end-of-life banner that JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"
            "=20 silences). Install one (https://nodejs.org, or your package manager) and put "
            "its bin directory on PATH, or set JSII_NODE to the node program; the CDK CLI "
            "(npm install aws-cdk) needs it too."
        )
    return found
