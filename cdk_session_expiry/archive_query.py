"""The old import path of `cdk_session_expiry.archiving.archive_query`.

The archive's named queries moved with the archive into `cdk_session_expiry.archiving` (issue
37). Importing this module gives that module itself (the same object). The re-export modules are
listed in `tests/test_layout.py` (`REEXPORTS`).
"""

from __future__ import annotations

import sys

from .archiving import archive_query as _moved
from .archiving.archive_query import *  # noqa: F403 - the old path names what the moved module names

sys.modules[__name__] = _moved
