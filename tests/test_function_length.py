"""No function on the runtime or construct path is longer than a screen: 80 lines, decorators
and docstring included (issue 20; ``../shared/STYLE.md``: small units, no method that needs
scrolling).

One exception, by name: ``SessionExpiry.__init__``, whose lines are its keyword parameters — the
construct's public props, one per line as the formatter writes them — and whose body is six lines
handing them to :mod:`cdk_session_expiry.props` and the composition steps. Its body is held to
the rule instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PATHS = (REPO / "cdk_session_expiry", REPO / "lambda_src" / "session_expiry_runtime")
MAX_LINES = 80
#: (file relative to the repository, function name): its body is measured, not its signature
SIGNATURE_EXEMPT = {("cdk_session_expiry/construct.py", "__init__")}


def _functions() -> list[tuple[str, str, int, int]]:
    """(file, name, lines in all, lines of the body) of every function under :data:`PATHS`."""
    found = []
    for root in PATHS:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                    end = node.end_lineno or node.lineno
                    body = end - node.body[0].lineno + 1
                    rel = str(path.relative_to(REPO))
                    found.append((rel, node.name, end - first + 1, body))
    return found


def test_no_function_is_longer_than_80_lines() -> None:
    functions = _functions()
    assert len(functions) > 500  # the walk found the code
    too_long = [
        f"{file} {name}: {lines} lines"
        for file, name, lines, body in functions
        if (body if (file, name) in SIGNATURE_EXEMPT else lines) > MAX_LINES
    ]
    assert too_long == []


def test_the_exempt_signature_is_still_there_and_its_body_is_short() -> None:
    """The exemption names a real function (a rename would otherwise leave it silently
    unused) whose body is short."""
    measured = {(file, name): body for file, name, _, body in _functions()}
    for key in SIGNATURE_EXEMPT:
        assert measured[key] <= 10, key
