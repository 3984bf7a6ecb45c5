"""transformers' own common model tests, run against every Scratchformer model class.

The tests are transformers' ``ModelTesterMixin`` (``tests/test_modeling_common.py``), ``ConfigTester``
(``tests/test_configuration_common.py``) and ``TrainingTesterMixin`` (``tests/test_training_mixin.py``), taken from
the sdist of exactly the installed transformers version: scripts/setup.sh downloads it from the package index and
unpacks its ``tests/`` folder under ``.venv/transformers-sdist/<version>/`` (once per version; nothing here uses the
network). A new transformers release thus runs its own expectations against our models in our CI first. Without the
sdist this module is skipped, saying why; under CI (``CI=true``) its absence is an error.

Two test classes, as transformers tests T5 and its encoder-only model: ``ScratchformerModelTest`` for the
encoder-decoder classes (``ScratchformerModel``, ``ScratchformerForConditionalGeneration``), and
``ScratchformerEncoderOnlyModelTest`` for those built on the encoder alone (``ScratchformerEncoderModel``,
``ScratchformerForSequenceClassification``, ``ScratchformerForTokenClassification``, ``ScratchformerForMaskedLM``),
whose tester sets ``is_encoder_decoder=False`` so that the tests expect an encoder's outputs (``hidden_states``, not
``encoder_hidden_states`` and ``decoder_hidden_states``).

Stand-ins (tests/transformers_sdist_standins.py, which says why each is what it is) for what the sdist leaves out
but the common tests import: ``generation/test_utils.py`` (``GenerationTesterMixin``: the marker that a tester covers
a model that can generate, plus its cache comparison; our ``generate()`` tests are in
tests/test_modeling_scratchformer.py), ``exporters/test_export.py`` (``ExportTesterMixin``, the empty base class of
``ModelTesterMixin``), ``utils/test_configuration_utils.py`` (``config_common_kwargs``), and the empty
``tests/__init__.py`` that scripts/setup.sh writes.

Mixins of the sdist not used: ``PipelineTesterMixin``, which builds each task's pipeline from the tiny checkpoints
transformers keeps on the Hub for its own architectures (``tests/utils/tiny_model_summary.json`` and
``tests/pipelines/``, neither in the sdist; our pipelines are tested in tests/test_pipelines.py), and
``TrainingTesterMixin`` on the encoder-decoder: its check that the overfitted model generates the training sequence
from that sequence's first token assumes a decoder-only model (ours starts its output with the decoder start token).
The others are for images, audio, video, processors, tokenizers or multi-GPU runs.

Skipped: see :data:`SKIPPED` (this module skips nothing itself). The common tests skip some of their own, by their
own conditions (147 of the 368 with transformers 5.24 on a CPU): for hardware and packages this machine lacks (a GPU
or several, MPS, flash attention 2/3/4, the ``kernels`` library, deepspeed; the ``@slow`` compile test), and for
features Scratchformer does not have: RoPE scaling and partial rotary (``rope_parameters``), axial RoPE,
sliding-window attention, mixture-of-experts layers, tensor-parallel plans, ``_keep_in_fp32_modules``, composite
sub-configs, the ``capture_outputs`` output hooks (we collect outputs by hand), legacy-checkpoint weight conversions,
``resize_position_embeddings``, a decoder-only LM head; and a cache, for the encoder-only classes. ``pytest -rs``
lists each with its reason.
"""

from __future__ import annotations

import os
import unittest
from pathlib import Path

import pytest
import transformers

from scratchformer.models import ScratchformerConfig
from scratchformer.models import modeling_scratchformer as modeling

# where scripts/setup.sh unpacks the tests/ folder of the sdist of the installed transformers
SDIST_TESTS = Path(__file__).resolve().parents[1] / ".venv" / "transformers-sdist" / transformers.__version__
SDIST_TESTS = SDIST_TESTS / "tests"


def _unavailable(reason: str) -> None:
    reason = f"{reason}: run scripts/setup.sh (it fetches the sdist of the installed transformers)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)


if not (SDIST_TESTS / "__init__.py").is_file():
    _unavailable(f"transformers {transformers.__version__}'s common tests are not at {SDIST_TESTS}")

from transformers_sdist_standins import GenerationTesterMixin, load  # noqa: E402

try:
    common, config_common, training = load(SDIST_TESTS, "test_modeling_common", "test_configuration_common",
                                           "test_training_mixin")
except ModuleNotFoundError as error:  # a package the common tests import (parameterized) is not installed
    _unavailable(f"transformers' common tests cannot be imported ({error})")
ModelTesterMixin, ids_tensor = common.ModelTesterMixin, common.ids_tensor
ConfigTester = config_common.ConfigTester
TrainingTesterMixin = training.TrainingTesterMixin

# The tests this module skips, name -> reason (only for a feature Scratchformer does not have). None: the common
# tests' own skips (see the module docstring) are all it takes.
SKIPPED: dict[str, str] = {}

# transformers' tests tell a base model from a head, and choose a head's labels, by the class's name in the tables of
# transformers' own models (MODEL_MAPPING_NAMES and the like; AutoModel.register adds nothing to them). The tests'
# module gets copies of those tables that list ours, as they list each model of transformers.
for _table, _names in {
    "MODEL_MAPPING_NAMES": ("ScratchformerModel", "ScratchformerEncoderModel"),
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES": ("ScratchformerForConditionalGeneration",),
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES": ("ScratchformerForSequenceClassification",),
    "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES": ("ScratchformerForTokenClassification",),
    "MODEL_FOR_MASKED_LM_MAPPING_NAMES": ("ScratchformerForMaskedLM",),
}.items():
    setattr(common, _table, {**getattr(common, _table), ScratchformerConfig.model_type: _names})


class ScratchformerModelTester:
    """Tiny configs and random inputs, in the shape of transformers' ``BartModelTester`` (13 sequences of 7 tokens,
    width 16, 2 layers per stack, 4 heads, dropout 0.1)."""

    def __init__(self, parent, batch_size=13, seq_length=7, is_training=True, vocab_size=99, hidden_size=16,
                 num_hidden_layers=2, num_attention_heads=4, intermediate_size=8, max_position_embeddings=50,
                 is_encoder_decoder=True):
        self.parent = parent
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.is_training = is_training
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.is_encoder_decoder = is_encoder_decoder
        self.pad_token_id, self.bos_token_id, self.eos_token_id = 0, 1, 2
        self.num_labels = 3

    def get_config(self) -> ScratchformerConfig:
        return ScratchformerConfig(
            vocab_size=self.vocab_size, d_model=self.hidden_size, encoder_layers=self.num_hidden_layers,
            decoder_layers=self.num_hidden_layers, encoder_attention_heads=self.num_attention_heads,
            decoder_attention_heads=self.num_attention_heads, encoder_ffn_dim=self.intermediate_size,
            decoder_ffn_dim=self.intermediate_size, dropout=0.1, attention_dropout=0.1,
            max_position_embeddings=self.max_position_embeddings, pad_token_id=self.pad_token_id,
            bos_token_id=self.bos_token_id, eos_token_id=self.eos_token_id, decoder_start_token_id=self.bos_token_id,
            is_encoder_decoder=self.is_encoder_decoder, num_labels=self.num_labels,
        )

    def prepare_config_and_inputs(self):
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)  # no special token
        input_ids[:, -1] = self.eos_token_id
        inputs = {"input_ids": input_ids, "attention_mask": input_ids.ne(self.pad_token_id).long()}
        if self.is_encoder_decoder:
            decoder_input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)
            inputs["decoder_input_ids"] = decoder_input_ids
            inputs["decoder_attention_mask"] = decoder_input_ids.ne(self.pad_token_id).long()
        return self.get_config(), inputs

    def prepare_config_and_inputs_for_common(self):
        return self.prepare_config_and_inputs()


class ScratchformerModelTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    all_model_classes = (modeling.ScratchformerModel, modeling.ScratchformerForConditionalGeneration)
    is_encoder_decoder = True
    # The test skips models whose configuration file has no "# Copyright <year>" line of 2023 or later (ours has no
    # such line): our _init_weights is meant to initialise every weight, so it runs.
    test_can_init_all_missing_weights_before_2023 = True

    def setUp(self):
        self.model_tester = ScratchformerModelTester(self)
        self.config_tester = ConfigTester(self, config_class=ScratchformerConfig, d_model=16)

    def test_config(self):
        self.config_tester.run_common_tests()


class ScratchformerEncoderOnlyModelTest(ModelTesterMixin, TrainingTesterMixin, unittest.TestCase):
    all_model_classes = (modeling.ScratchformerEncoderModel, modeling.ScratchformerForSequenceClassification,
                         modeling.ScratchformerForTokenClassification, modeling.ScratchformerForMaskedLM)
    is_encoder_decoder = False
    test_can_init_all_missing_weights_before_2023 = True
    # The tester's model is 16 wide with dropout 0.1: in the mixin's 300 steps its loss falls by 96% but its gradient
    # norm by only 87% (the test asks for 90% of each); in 600, by 99% and 96%.
    training_overfit_steps = 600

    def setUp(self):
        self.model_tester = ScratchformerModelTester(self, is_encoder_decoder=False)

    def _get_trainable_model_class(self):
        """The class ``test_training_overfit`` trains on its batch (``input_ids`` = ``labels``): the mixin knows
        causal LMs and sequence classifiers; an encoder's language-model head is the masked one."""
        return modeling.ScratchformerForMaskedLM


for _name, _reason in SKIPPED.items():
    for _test_class in (ScratchformerModelTest, ScratchformerEncoderOnlyModelTest):
        if hasattr(_test_class, _name):
            setattr(_test_class, _name, unittest.skip(_reason)(getattr(_test_class, _name)))
