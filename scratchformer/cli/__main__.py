"""``python -m scratchformer.cli`` = ``scratchformer``."""

import sys

from . import main

sys.exit(main())
