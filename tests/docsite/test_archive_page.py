"""The Archive and audit page shows what the code does (issue 24): the archived record's fields
and types are the Glue table's columns, in order, with the format version the runtime writes;
each named query's SQL is on the page exactly as the construct deploys it."""

from __future__ import annotations

import re

from session_expiry_runtime.sinks.archive import FORMAT_VERSION

from cdk_session_expiry.archiving import archive_query

from .doc_examples import DOCS

PAGE = DOCS / "archive.md"
_ROW = re.compile(r"^\| `([a-z_]+)` \| ([a-z]+) \| (.*) \|$", re.MULTILINE)


def test_the_schema_table_lists_every_column_with_its_glue_type_in_order() -> None:
    text = PAGE.read_text()
    rows = [(name, kind) for name, kind, _ in _ROW.findall(text)]
    assert rows == list(archive_query.COLUMNS)
    assert f"## The archived record (format {FORMAT_VERSION})" in text
    (version_row,) = (what for name, _, what in _ROW.findall(text) if name == "format_version")
    assert version_row == f"`{FORMAT_VERSION}`"


def test_each_named_query_is_on_the_page_as_deployed() -> None:
    text = PAGE.read_text()
    queries = archive_query.named_queries('"<database>"."<table>"', tenant_partition=False)
    assert len(queries) == 3
    for query in queries:
        assert f"`{query.name}`" in text, query.name
        assert f"```sql\n{query.sql}\n```" in text, query.name
