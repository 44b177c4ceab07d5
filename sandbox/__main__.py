"""Entry point of ``python -m sandbox`` (``make sandbox``)."""

from __future__ import annotations

import sys

from sandbox.scenario import main

if __name__ == "__main__":
    sys.exit(main())
