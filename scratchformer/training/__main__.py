"""``python -m scratchformer.training ARGS`` = ``scratchformer train ARGS`` (handy under ``torchrun``)."""

import sys

from ..cli import main

sys.exit(main(["train", *sys.argv[1:]]))
