"""The sandbox run drawn as the dashboard draws it (``SessionExpiry.widgets()``): one PNG with
the same figures, from the run's own report, so a user sees what the dashboard will show.

Panels: sessions cleaned by reason, cleanup failures by action, records skipped by cause,
scratch objects deleted, the stream (records read, filtered out, invocations, retries,
bisections, records sent to the on-failure destination) and the sweeper's expiry to clean
(maximum and p95 against the interval). Locally there is no TTL lag (moto deletes on request)
and no iterator age or alarm state (moto publishes no AWS metrics): those panels of the
dashboard have no local counterpart and are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _bars(axis: Any, title: str, values: Mapping[str, float], color: str) -> None:
    labels = list(values) or ["(none)"]
    heights = [float(values[k]) for k in values] or [0.0]
    axis.bar(labels, heights, color=color)
    axis.set_title(title, fontsize=10)
    axis.tick_params(axis="x", labelrotation=30, labelsize=8)
    for index, height in enumerate(heights):
        axis.annotate(f"{height:g}", (index, height), ha="center", va="bottom", fontsize=8)


def draw_report(summary: Mapping[str, Any], path: Path) -> Path:
    """Write the figures of a sandbox report (``python -m sandbox --report-json``) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(2, 3, figsize=(15, 8), constrained_layout=True)
    _bars(axes[0][0], "Sessions cleaned by reason", summary.get("cleaned_by_reason") or {}, "C0")
    _bars(axes[0][1], "Cleanup failures by action", summary.get("failures_by_action") or {}, "C3")
    skipped = summary.get("records_skipped_by_cause") or {}
    _bars(axes[0][2], "Records skipped by cause", skipped, "C1")
    _bars(
        axes[1][0],
        "Scratch objects deleted",
        {"objects deleted": float(summary.get("objects_deleted_metric") or 0)},
        "C2",
    )
    stream = dict(summary.get("stream") or {})
    stream["sent to on-failure"] = summary.get("records_sent_to_on_failure") or 0
    _bars(
        axes[1][1],
        "Stream and event source mapping",
        {k: float(v) for k, v in stream.items() if isinstance(v, (int, float))},
        "C4",
    )
    sweeper = summary.get("sweeper") or {}
    _bars(
        axes[1][2],
        "Expiry to clean, swept sessions (s)",
        {
            "interval": float(sweeper.get("interval_seconds") or 0),
            "p95": float(sweeper.get("expiry_to_clean_p95_seconds") or 0),
            "max": float(sweeper.get("expiry_to_clean_max_seconds") or 0),
        },
        "C5",
    )
    figure.suptitle("cdk-session-expiry sandbox run (the dashboard's figures, local)")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    pyplot.close(figure)
    return path
