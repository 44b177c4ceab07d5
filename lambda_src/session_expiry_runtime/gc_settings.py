"""Garbage-collector settings of the cleanup function's process (its Lambda execution environment).

CPython's cyclic garbage collector runs a young-generation collection every 700 net
allocations of container objects (``gc.get_threshold()[0]``), and each full collection walks
every tracked object, botocore's loaded service models and endpoint rules included. A full
``ListObjectsV2`` page becomes ~10,000 containers (an element tree, then a dict per object), so
a cleanup that lists and deletes thousands of objects per session spends a large share of its CPU
in collections that find nothing: its data holds no reference cycles. Measured by ``make bench``
(``BENCHMARKS.md``, "What brought CPU per session down"): about a fifth of the CPU per session at
2,500 objects on Python 3.11.

:func:`tune_for_cleanup` does two things, once, after the execution environment's clients are
built (Python documentation, ``gc`` module: ``gc.freeze`` and ``gc.set_threshold``):

* ``gc.freeze()``: everything allocated so far (the imported modules, botocore's models, the
  clients) moves to the permanent generation, which no collection walks again;
* the young-generation threshold rises from 700 to :data:`YOUNG_GENERATION_THRESHOLD`; the
  older generations' thresholds stay as they are. Cycles are still collected, just less often:
  memory held by garbage cycles grows by at most that many containers.

Only the cleanup handler calls it (:func:`session_expiry_runtime.handler.get_cleaner`): importing
this package (``SessionStore`` in an application, the replay command) changes nothing.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_GENERATION_THRESHOLD", "tune_for_cleanup"]

#: Net allocations of container objects between two young-generation collections (CPython's
#: default: 700). At 10,000 a 1,000-key listing triggers about one collection instead of ~15.
YOUNG_GENERATION_THRESHOLD = 10_000


def tune_for_cleanup() -> None:
    """Freeze what the process holds so far and raise the young-generation threshold.

    Call once per process, after the long-lived objects (clients, configuration) exist. Calling
    it again freezes what was allocated since and sets the same threshold: harmless.
    """
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, older, oldest)
