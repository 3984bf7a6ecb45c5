"""The entry point of the ``scratchformer`` command, kept outside the package so that ``--help`` stays fast.

``import scratchformer`` registers the model classes with transformers' ``Auto*`` factories, which imports torch and
transformers (seconds on a small machine). This module is imported first by the command, and while it is loaded
the package defers that registration to the first use of a model class: the subcommands that load a model do it
then, and ``scratchformer --help`` answers without torch.
"""

from __future__ import annotations

import sys

DEFER_REGISTRATION = True  # read by scratchformer/__init__.py


def main() -> int:
    """Run the ``scratchformer`` command (:func:`scratchformer.cli.main`)."""
    from scratchformer.cli import main as run

    return run()


if __name__ == "__main__":
    sys.exit(main())
