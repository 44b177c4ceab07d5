"""Stand-in command of the code asset (``python -m standin_cli ARGS``): prints what it got."""

import json
import os
import sys

if __name__ == "__main__":
    print(
        json.dumps(
            {"argv": sys.argv[1:], "bucket": os.environ.get("SCRATCH_BUCKET"), "module": __file__}
        )
    )
    sys.exit(0)
