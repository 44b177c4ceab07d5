"""Scratch listings parsed for what the cleanup reads of them: the object keys.

A ``ListObjectsV2`` page holds up to 1,000 objects, each with its ``Key``, ``LastModified``,
``ETag``, ``Size``, ``StorageClass`` and checksum members (Amazon S3 API Reference,
"ListObjectsV2"), and botocore's ``rest-xml`` parser turns every member of every object into a
Python value by the S3 model's ``Object`` shape. The scratch step reads only ``Key``
(`steps.scratch`).

botocore reads its service models through the session's ``data_loader`` component, and a
session's components can be replaced (``botocore.session.Session.register_component``).
`use_keys_only_listings` replaces it with a loader that answers every model as botocore's
own loader does, except the S3 model, whose ``Object`` shape keeps only its ``Key`` member. The
parser is botocore's own, and so is the XML it reads; it only has fewer members to convert: about
half the CPU of a 1,000-key page (``python -m bench``, "parsing one 1,000-key listing").

What botocore's parser still did for each listed object was generic: name every child element of
``<Contents>`` (seven of them, each tag through a regular expression) to find the one member the
reduced shape has. `KeysOnlyXMLParser` is botocore's ``rest-xml`` parser with one
shortcut: a structure of the reduced ``Object`` shape is read from its one ``Key`` child
element — found by comparing tags, its text taken as botocore takes a string's text — and any
other element (or a ``<Contents>`` with no or several ``Key`` children) goes through botocore's
own code. The XML is still parsed by botocore (its ``ElementTree``); every other shape, and every
other protocol, is botocore's. Property-tested equal to botocore's parse
(``tests/runtime/test_listing_model.py``). The session's ``response_parser_factory`` component
(what botocore's documented parser settings already use: `timestamps`) makes it:
`KeysOnlyParserFactory`. About a quarter of the CPU of a 1,000-key page is left
(``python -m bench``, "parsing one 1,000-key listing").

What changes for the S3 clients made from such a session: the ``Contents`` entries of
``ListObjectsV2`` and ``ListObjects`` answers hold ``Key`` only; every other shape, operation and
service is botocore's own. The cleanup's session is the only one that uses it
(`session_expiry_runtime.core.clients.build_clients`): its scratch client lists and deletes, its
archive client only writes (``PutObject``), which the ``Object`` shape does not concern.
"""

from __future__ import annotations

from typing import Any

import botocore.session
from botocore.parsers import ResponseParserFactory, RestXMLParser

__all__ = [
    "KeysOnlyListingLoader",
    "KeysOnlyParserFactory",
    "KeysOnlyXMLParser",
    "keys_only_s3_model",
    "use_keys_only_listings",
]

#: The S3 model's shape of one listed object, and the one member the cleanup reads of it.
OBJECT_SHAPE = "Object"
KEY_MEMBER = "Key"


def keys_only_s3_model(model: dict[str, Any]) -> dict[str, Any]:
    """``model`` (botocore's S3 ``service-2`` data) with the ``Object`` shape reduced to ``Key``.

    The input is left as it is (botocore's loader caches it): the result shares every shape but
    a new ``Object``. A model without an ``Object`` shape with a ``Key`` member (a botocore
    that changed it) is returned unchanged: listings then parse in full, as without this module.
    """
    shapes = model.get("shapes")
    if not isinstance(shapes, dict) or not isinstance(shapes.get(OBJECT_SHAPE), dict):
        return model
    shape: dict[str, Any] = shapes[OBJECT_SHAPE]
    members = shape.get("members")
    if not isinstance(members, dict) or KEY_MEMBER not in members:
        return model
    reduced = {**shape, "members": {KEY_MEMBER: members[KEY_MEMBER]}}
    return {**model, "shapes": {**shapes, OBJECT_SHAPE: reduced}}


class KeysOnlyListingLoader:
    """A botocore ``data_loader`` that answers what ``loader`` answers, except the S3 model
    (`keys_only_s3_model`), made once per loader.

    Args:
        loader: the session's own loader (``session.get_component("data_loader")``).
    """

    def __init__(self, loader: Any) -> None:
        self._loader = loader
        self._s3: dict[Any, dict[str, Any]] = {}

    def load_service_model(
        self, service_name: str, type_name: str, api_version: str | None = None
    ) -> Any:
        """botocore's ``Loader.load_service_model``, with the S3 ``service-2`` model reduced."""
        model = self._loader.load_service_model(service_name, type_name, api_version)
        if service_name != "s3" or type_name != "service-2":
            return model
        if api_version not in self._s3:
            self._s3[api_version] = keys_only_s3_model(model)
        return self._s3[api_version]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class KeysOnlyXMLParser(RestXMLParser):  # type: ignore[misc]
    """botocore's ``rest-xml`` response parser, reading a listed object of the reduced ``Object``
    shape (`keys_only_s3_model`) from its ``Key`` child element alone; everything else as
    botocore parses it."""

    def _handle_structure(self, shape: Any, node: Any) -> Any:
        if shape.name == OBJECT_SHAPE and not isinstance(node, list):
            members = shape.members
            if len(members) == 1 and KEY_MEMBER in members:
                keys = [child for child in node if child.tag.rpartition("}")[2] == KEY_MEMBER]
                if len(keys) == 1:  # several: botocore's own answer (a list), below
                    return {KEY_MEMBER: self._handle_string(members[KEY_MEMBER], keys[0])}
                if not keys:
                    return {}
        return super()._handle_structure(shape, node)


class KeysOnlyParserFactory(ResponseParserFactory):  # type: ignore[misc]
    """botocore's response parser factory, making `KeysOnlyXMLParser` for ``rest-xml``.

    Args:
        defaults: parser settings to start from (``set_parser_defaults`` arguments), e.g. the
            ones the session's factory held before this one replaced it.
    """

    def __init__(self, defaults: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.set_parser_defaults(**(defaults or {}))

    def create_parser(self, protocol_name: str) -> Any:
        """botocore's parser for ``protocol_name``; `KeysOnlyXMLParser` for ``rest-xml``."""
        if protocol_name == "rest-xml":
            return KeysOnlyXMLParser(**self._defaults)
        return super().create_parser(protocol_name)


def use_keys_only_listings(core: botocore.session.Session) -> None:
    """Make the S3 clients created from ``core`` afterwards parse listed objects' keys only: the
    reduced model (`KeysOnlyListingLoader`) and its parser (`KeysOnlyParserFactory`,
    keeping the settings of the factory it replaces, such as `timestamps`')."""
    core.register_component("data_loader", KeysOnlyListingLoader(core.get_component("data_loader")))
    previous = core.get_component("response_parser_factory")
    defaults = dict(getattr(previous, "_defaults", {}))  # where botocore's factory keeps them
    core.register_component("response_parser_factory", KeysOnlyParserFactory(defaults))
