"""`python -m session_expiry_runtime.replay`, the documented command, and the old import path.

The code lives in `session_expiry_runtime.recovery.replay` since the runtime was grouped into
subpackages (issue 37). Importing this module gives that module itself (the same object, so
monkeypatching either patches both); running it runs its `main`. The re-export modules are
listed in `tests/test_layout.py` (`REEXPORTS`).
"""

from __future__ import annotations

import sys

from .recovery import replay as _moved
from .recovery.replay import *  # noqa: F403 - the old path names what the moved module names

if __name__ == "__main__":  # pragma: no cover - run through python -m in tests/test_layout.py
    sys.exit(_moved.main())
else:
    sys.modules[__name__] = _moved
