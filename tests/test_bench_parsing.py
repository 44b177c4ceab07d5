"""The parsing bench's empty-listing measurement (``bench/parsing.py``) and its row in
BENCHMARKS.md's "What brought CPU per session down" (``bench/report.py``)."""

from __future__ import annotations

import math

from bench import parsing, report


def test_empty_listing_is_measured_through_the_paginator_and_the_steps_page_loop() -> None:
    # Both ways list the stubbed empty page (each asserts KeyCount 0 on what it got back);
    # botocore's Stubber raises if either made a call it was not given an answer for.
    measured = parsing._empty_listing_ms(rounds=1, calls=3)

    assert set(measured) == {"paginator_ms", "page_loop_ms"}
    assert all(math.isfinite(v) and v >= 0 for v in measured.values())


def test_cpu_work_table_shows_the_page_loop_against_the_paginator() -> None:
    data = {
        "parsing": {
            "botocore_default_ms": 50.0,
            "fromisoformat_ms": 17.0,
            "empty_listing_paginator_ms": 0.134,
            "empty_listing_page_loop_ms": 0.075,
        },
        "throughput": [],
    }

    (row,) = [line for line in report.cpu_work_table(data).splitlines() if "page loop" in line]

    assert row.endswith("| 0.134 ms | 0.075 ms |")
    assert "`ScratchStep._pages`" in row
