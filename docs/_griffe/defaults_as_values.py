"""A griffe extension for the reference: a parameter whose default is a named constant shows the
constant's value (``connection_id_attribute: str = 'connectionId'``), not its name
(``contract.DEFAULT_CONNECTION_ID_ATTRIBUTE``), which a reader of the site cannot look up.

mkdocs.yml loads it (``extensions:`` of the python handler). A default is replaced when its name
resolves to a module-level attribute of the loaded packages whose value is a literal or an
expression
(``timedelta(hours=1)``, ``logs.RetentionDays.THREE_MONTHS``); sentinels (``object()``) keep their
name, which is what their docstrings talk about, and so do enum members
(``CleanupEventFilter.ALL_REMOVES``).
"""

from __future__ import annotations

from typing import Any

import griffe

#: How many names a default may go through (``_DEFAULT_X = contract.DEFAULT_X = 'x'``).
_MAX_HOPS = 5


def _value_of(default: Any, collection: Any) -> Any:
    for _ in range(_MAX_HOPS):
        if not isinstance(default, griffe.ExprName | griffe.ExprAttribute):
            return default
        try:
            target = collection[default.canonical_path]
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return default
        if not isinstance(target, griffe.Attribute) or target.value is None:
            return default
        if not isinstance(target.parent, griffe.Module):
            return default  # an enum member or class attribute: its name is what to pass
        value = target.value
        if isinstance(value, griffe.ExprCall) and str(value.function) == "object":
            return default  # a sentinel: its name is its meaning
        default = value
    return default


class DefaultsAsValues(griffe.Extension):
    """Replace named-constant defaults of every function's parameters by their values."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        del kwargs
        self._visit(pkg, pkg.modules_collection)

    def _visit(self, obj: griffe.Object, collection: Any) -> None:
        for member in obj.members.values():
            if member.is_alias:
                continue
            if isinstance(member, griffe.Function):
                for parameter in member.parameters:
                    if parameter.default is not None:
                        parameter.default = _value_of(parameter.default, collection)
            elif isinstance(member, griffe.Module | griffe.Class):
                self._visit(member, collection)
