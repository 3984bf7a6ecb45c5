"""Figure 1 in the paper file: ``paper_scratchformer.Transformer`` is the same model as the transformers adapter.

It loads a checkpoint's weights by name, gives the logits of ``ScratchformerForConditionalGeneration`` (within 1e-5
with the adapter's eager kernel, the paper's formula, and with sdpa) and the tokens of greedy ``generate()``.
``ScratchformerConfig`` has every field of the file's ``TransformerConfig``, with the same types.
"""

from __future__ import annotations

import ast
import types

import pytest
import torch
from model_fixtures import tiny_config
from safetensors.torch import load_file

from scratchformer import ScratchformerConfig, ScratchformerForConditionalGeneration
from scratchformer.loading import pretrained_path
from scratchformer.models import paper_scratchformer
from scratchformer.models.paper_scratchformer import Transformer, TransformerConfig

SDPA_ATOL = 1e-5  # sdpa sums in another order than the paper's formula
# The same formula in float32, summed in whatever order the CPU's kernels choose for the batch: measured 4e-6 on the
# shipped model's logits (|logit| <= 8.3) and 7e-9 to 2e-7 on the tiny ones (AMD EPYC, AVX2, 1 and 2 threads)
FORMULA_ATOL = 1e-5
TIED_COPIES = {"decoder.embeddings.word_embeddings.weight", "lm_head.weight"}  # the same tensor as the encoder's table
TINY_CASES = {
    "sinusoidal-post-ln": dict(position_embedding_type="sinusoidal"),
    "learned-pre-ln-untied": dict(position_embedding_type="learned", pre_layer_norm=True, tie_word_embeddings=False),
    "rope-gelu-no-bias": dict(position_embedding_type="rope", activation_function="gelu", bias=False),
}


def _paper_copy(model: ScratchformerForConditionalGeneration) -> Transformer:
    """A paper ``Transformer`` holding ``model``'s weights, loaded by name (every name, so strictly)."""
    paper = Transformer(model.config).eval()
    paper.load_state_dict({name.removeprefix("model."): weight for name, weight in model.state_dict().items()})
    return paper


def _batch(vocab_size: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two sources, the second right-padded, and a decoder input starting with the start token."""
    generator = torch.Generator().manual_seed(seed)
    source = torch.randint(5, vocab_size, (2, 9), generator=generator)
    mask = torch.ones_like(source)
    mask[1, 6:] = 0
    source[1, 6:] = 0
    target = torch.cat([torch.ones(2, 1, dtype=torch.long), torch.randint(5, vocab_size, (2, 6), generator=generator)],
                       1)
    return source, mask, target


@pytest.fixture(scope="module")
def shipped() -> ScratchformerForConditionalGeneration:
    return ScratchformerForConditionalGeneration.from_pretrained(pretrained_path("small")).eval()


def test_the_shipped_checkpoint_loads_into_the_paper_transformer_by_name(shipped):
    stored = load_file(pretrained_path("small") / "model.safetensors")  # float16, names "model.encoder...", "lm_head"
    paper = Transformer(shipped.config)
    missing, unexpected = paper.load_state_dict(
        {name.removeprefix("model."): weight for name, weight in stored.items()}, strict=False)
    assert unexpected == [] and set(missing) == TIED_COPIES
    assert paper.lm_head.weight is paper.encoder.embeddings.word_embeddings.weight  # the tie, one tensor
    assert paper.decoder.embeddings.word_embeddings.weight is paper.lm_head.weight
    for name, weight in stored.items():  # float16 widened to float32: exact
        assert torch.equal(paper.get_parameter(name.removeprefix("model.")), weight.float()), name


@torch.no_grad()
def test_the_paper_transformer_gives_the_shipped_models_logits(shipped):
    paper = _paper_copy(shipped)
    source, mask, target = _batch(shipped.config.vocab_size)
    logits = paper(source, target, mask)
    assert logits.shape == (2, target.shape[1], shipped.config.vocab_size)
    by_sdpa = shipped(input_ids=source, attention_mask=mask, decoder_input_ids=target).logits
    assert torch.allclose(logits, by_sdpa, atol=SDPA_ATOL), (logits - by_sdpa).abs().max()
    shipped.set_attn_implementation("eager")
    try:
        by_formula = shipped(input_ids=source, attention_mask=mask, decoder_input_ids=target).logits
    finally:
        shipped.set_attn_implementation("sdpa")
    # the same modules and formula; the bits may differ where the CPU's kernels group a batch differently
    torch.testing.assert_close(logits, by_formula, rtol=0, atol=FORMULA_ATOL)


@torch.no_grad()
def test_greedy_decode_writes_the_tokens_of_generate_on_the_shipped_checkpoint(shipped):
    from scratchformer.loading import load

    _, tokenizer = load("small", task="seq2seq")
    texts = ["The bank of the river was covered in snow.", "She opened the door."]
    source = tokenizer(texts, return_tensors="pt", padding=True)
    by_generate = shipped.generate(**source, max_new_tokens=24, do_sample=False, num_beams=1)
    by_paper = _paper_copy(shipped).greedy_decode(source["input_ids"], source["attention_mask"], max_new_tokens=24)
    assert by_paper.tolist() == by_generate.tolist()
    eos, pad = shipped.config.eos_token_id, shipped.config.pad_token_id
    ended_early = [row for row in by_paper.tolist() if eos in row and row.index(eos) < len(row) - 1]
    assert ended_early and all(set(row[row.index(eos) + 1:]) == {pad} for row in ended_early)  # padded after </s>


@pytest.mark.parametrize("case", TINY_CASES)
@torch.no_grad()
def test_the_paper_transformer_equals_the_adapter_for_every_kind_of_model(case):
    torch.manual_seed(0)
    model = ScratchformerForConditionalGeneration(tiny_config(**TINY_CASES[case], attn_implementation="eager")).eval()
    paper = _paper_copy(model)
    tied = model.config.tie_word_embeddings
    assert (paper.lm_head.weight is paper.encoder.embeddings.word_embeddings.weight) == tied
    source, mask, target = _batch(model.config.vocab_size)
    expected = model(input_ids=source, attention_mask=mask, decoder_input_ids=target).logits
    torch.testing.assert_close(paper(source, target, mask), expected, rtol=0, atol=FORMULA_ATOL)
    by_generate = model.generate(input_ids=source, attention_mask=mask, max_new_tokens=8, do_sample=False,
                                 num_beams=1)
    assert paper.greedy_decode(source, mask, max_new_tokens=8).tolist() == by_generate.tolist()


def _fields_the_paper_file_reads() -> set[str]:
    """Every ``config.<name>`` in ``paper_scratchformer.py``."""
    tree = ast.parse(open(paper_scratchformer.__file__).read())
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "config"}


def test_scratchformer_config_satisfies_the_paper_files_config_protocol():
    listed = TransformerConfig.__annotations__
    assert set(listed) == _fields_the_paper_file_reads()  # listed once, and nothing read that is not listed
    config = ScratchformerConfig()
    assert isinstance(config, TransformerConfig)
    for name, declared in listed.items():  # the same declared type (both files write annotations as text)
        assert ScratchformerConfig.__annotations__[name] == declared, name
    assert not isinstance(types.SimpleNamespace(d_model=512), TransformerConfig)

    # any object with those fields will do: the paper file needs no transformers
    small = tiny_config()
    plain = types.SimpleNamespace(**{name: getattr(small, name) for name in listed})
    assert isinstance(plain, TransformerConfig)
    torch.manual_seed(0)
    from_plain = Transformer(plain).eval()
    torch.manual_seed(0)
    from_config = Transformer(small).eval()
    source, mask, target = _batch(small.vocab_size)
    with torch.no_grad():
        assert torch.equal(from_plain(source, target, mask), from_config(source, target, mask))
