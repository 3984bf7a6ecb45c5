"""The order of the training examples: ``--train-sampling-strategy`` with the run's ``--seed`` (``batch_rebalance``
makes ``--batch-size 32 --gradient-accumulation-steps 4`` the same run as ``--batch-size 128``; docs/training.md)."""

from __future__ import annotations

import transformers

from ..errors import TrainingSetupError

try:
    from transformers.trainer_pt_utils import BatchRebalanceSampler
except ImportError:  # transformers before 5.17
    BatchRebalanceSampler = None

# strategies that need every example's length before training, so not a stream's
LENGTH_AWARE = ("group_by_length", "batch_rebalance")


def check_sampling(strategy: str, streaming: bool) -> None:
    """A strategy this transformers cannot give, or one a stream cannot have, is refused before any data is read
    (the Trainer would otherwise fall back to its random order with at most a log line)."""
    if strategy == "batch_rebalance" and BatchRebalanceSampler is None:
        raise TrainingSetupError(f"--train-sampling-strategy batch_rebalance needs transformers 5.17 or newer (this "
                                 f"is {transformers.__version__}): pip install -U 'transformers>=5.17'")
    if streaming and strategy in LENGTH_AWARE:
        raise TrainingSetupError(f"--streaming reads the examples in the stream's order; --train-sampling-strategy "
                                 f"{strategy} needs the lengths of all examples first: leave it out, or drop "
                                 f"--streaming")


class SeededSampling:
    """Trainer mixin: the ``batch_rebalance`` sampler shuffles with ``--data-seed`` (else ``--seed``), like the
    ``random`` one; transformers builds it with its own default seed (42) whatever the run's seed."""

    def _get_train_sampler(self, train_dataset=None):
        sampler = super()._get_train_sampler(train_dataset)
        if BatchRebalanceSampler is not None and isinstance(sampler, BatchRebalanceSampler):
            sampler.seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        return sampler
