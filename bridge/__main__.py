"""``python -m bridge``: the ``ask-bridge`` command, for an environment whose scripts directory is
not on ``PATH`` (the same entry point as ``python -m bridge.cli``)."""

import sys

from bridge.cli import main

sys.exit(main())
