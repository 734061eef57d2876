"""``python -m bridge.cli``: the same as the ``ask-bridge`` command."""

import sys

from bridge.cli import main

sys.exit(main())
