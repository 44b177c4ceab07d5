"""Helpers shared by the template tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def cdk_json_context() -> dict[str, Any]:
    """The feature flags and context of ``cdk.json``, as the CDK CLI would pass them."""
    return dict(json.loads((REPO / "cdk.json").read_text())["context"])


def asset_dir(outdir: str | Path, code: dict[str, Any]) -> Path:
    """The staged asset directory in a cloud assembly for a Lambda ``Code``/``Content``."""
    key = code["S3Key"]
    return Path(outdir) / f"asset.{key.removesuffix('.zip')}"


def resources_of(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
    }


class StackTemplate:
    """Lookups by construct in a synthesized stack's template.

    Subclasses synthesize in ``__init__`` and set ``stack`` and ``json`` (the template as a
    dict); these methods find a construct's resource by its logical ID.
    """

    stack: Any
    json: dict[str, Any]

    def id(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)  # type: ignore[no-any-return]

    def resource(self, construct: Any) -> dict[str, Any]:
        return self.json["Resources"][self.id(construct)]  # type: ignore[no-any-return]

    def props(self, construct: Any) -> dict[str, Any]:
        return self.resource(construct)["Properties"]  # type: ignore[no-any-return]
