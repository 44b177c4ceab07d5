"""Garbage-collector settings of the cleanup function's process (its Lambda execution environment).

CPython's cyclic garbage collector runs a young-generation collection every 700 net
allocations of container objects (``gc.get_threshold()[0]``), and each full collection walks
every tracked object, botocore's loaded service models and endpoint rules included. A full
``ListObjectsV2`` page becomes ~10,000 containers (an element tree, then a dict per object), so
a cleanup that lists and deletes thousands of objects per session spends a large share of its CPU
in collections that find nothing: its data holds no reference cycles. Measured by ``make bench``
(``BENCHMARKS.md``, "What brought CPU per session down"): about a fifth of the CPU per session at
2,500 objects on Python 3.11.

`tune_for_cleanup` does two things, once, after the execution environment's clients are
built (Python documentation, ``gc`` module: ``gc.freeze`` and ``gc.set_threshold``):

* ``gc.freeze()``: everything allocated so far (the imported modules, botocore's models, the
  clients) moves to the permanent generation, which no collection walks again;
* the young-generation threshold rises from 700 to `YOUNG_GENERATION_THRESHOLD`; the
  older generations' thresholds stay as they are. Cycles are still collected, just less often:
  memory held by garbage cycles grows by at most that many containers.

Only the cleanup handler calls it (`session_expiry_runtime.handler.get_cleaner`): importing
this package (``SessionStore`` in an application, the replay command) changes nothing.

`collection_paused` serves the execution environment's start (Lambda's init phase and the
first invocation's client creation): importing boto3 and the handler's modules and loading the
service models allocate some hundred thousand containers that live as long as the process, and
every young-generation collection among them promotes and walks them again (full collections
included), for no garbage at all. With collection paused while they are made — then frozen by
`tune_for_cleanup` — the handler's cold start (import plus clients) takes about a tenth less
(``make bench``, "Cold start"). The pause is scoped: the collector's state before the block is
restored after it, whatever the block raises.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_GENERATION_THRESHOLD", "collection_paused", "tune_for_cleanup"]

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


@contextmanager
def collection_paused() -> Iterator[None]:
    """No automatic cyclic collection inside the block (``gc.disable``); the collector enabled
    again after it only if it was enabled before. Objects made inside are collected as usual
    afterwards; an explicit ``gc.collect()`` still runs inside."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
