"""Test helper: ``scratchformer`` with accelerate's FSDP allowed on CPU (run under torchrun / accelerate launch).

accelerate runs FSDP only on accelerators: on a CPU-only machine its state is ``MULTI_CPU`` and an FSDP plugin
(from ``--fsdp`` or an ``accelerate launch`` FSDP config) is dropped without a word, so the run is plain data
parallel. torch's FSDP2 (``fully_shard``) itself works on CPU with gloo. This helper changes that one decision -
after accelerate has built its state, an FSDP plugin it was given makes the state ``FSDP`` - and then runs the
``scratchformer`` command line unchanged, so the Trainer's own FSDP2 path (accelerate's ``fsdp2_prepare_model``,
the FULL_STATE_DICT saves, FSDP optimizer checkpoints, resume) runs here on CPU. Nothing else is patched.
"""

from __future__ import annotations

import sys

from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import DistributedType

_init = AcceleratorState.__init__


def _init_allowing_fsdp_on_cpu(self, *args, fsdp_plugin=None, **kwargs):
    _init(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
    if fsdp_plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
        # both shared states: a later AcceleratorState() copies PartialState's distributed type over its own
        PartialState._shared_state["distributed_type"] = DistributedType.FSDP
        self.distributed_type = DistributedType.FSDP
        self.fsdp_plugin = fsdp_plugin


AcceleratorState.__init__ = _init_allowing_fsdp_on_cpu

if __name__ == "__main__":
    from scratchformer.cli import main

    sys.exit(main(sys.argv[1:]))
