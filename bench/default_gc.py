"""The project's handler with CPython's default garbage-collector settings (bench only).

``session_expiry_runtime.handler.get_cleaner`` tunes the collector once per process
(:mod:`session_expiry_runtime.core.gc_settings`). This module runs the same handler and, after that
first use, puts the collector back as CPython starts it (nothing frozen, young-generation
threshold 700), so the bench can show in one run what the setting is worth.
"""

from __future__ import annotations

import gc
from typing import Any

from session_expiry_runtime import handler as cleanup

#: CPython's default young-generation threshold (``gc.get_threshold()[0]`` at start-up).
DEFAULT_YOUNG_GENERATION_THRESHOLD = 700


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``session_expiry_runtime.handler.handler`` under CPython's default collector settings."""
    cleanup.get_cleaner()
    gc.unfreeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(DEFAULT_YOUNG_GENERATION_THRESHOLD, older, oldest)
    return cleanup.handler(event, context)
