"""The model: the paper's equations, HF integration (save/load, remote code, generate, cache), masks and bad input.

Numerical tolerances are stated at each check; everything runs in fp32 on tiny configs unless said otherwise.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch
from model_fixtures import run_without_scratchformer, tiny_config
from safetensors import safe_open
from torch import nn
from transformers import AutoModel, AutoModelForSeq2SeqLM

from scratchformer import (
    ScratchformerEncoderModel,
    ScratchformerForConditionalGeneration,
    ScratchformerForSequenceClassification,
    ScratchformerForTokenClassification,
    ScratchformerModel,
)
from scratchformer.models.modeling_scratchformer import CACHE_NAME
from scratchformer.models.paper_scratchformer import shift_tokens_right, sinusoidal_position_encoding

ATOL = 1e-5
POSITION_TYPES = ["sinusoidal", "learned", "rope"]


def make_model(cls=ScratchformerForConditionalGeneration, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    return cls(tiny_config(**overrides)).eval()


def random_batch(batch=3, length=9, vocab=61, seed=1):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, length), generator=generator)
    return ids


# ------------------------------------------------------------------------------------------------ positions


def test_sinusoidal_table_matches_the_paper_formula_exactly():
    d_model = 16
    table = sinusoidal_position_encoding(50, d_model)
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_table_handles_odd_widths():
    table = sinusoidal_position_encoding(4, 5)
    assert table.shape == (4, 5)
    assert torch.allclose(table[:, 4], torch.sin(torch.arange(4.0) / 10000 ** (4 / 5)), atol=1e-6)


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_every_position_type_runs_and_trains(position_type):
    model = make_model(position_embedding_type=position_type).train()
    ids = random_batch()
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    assert torch.isfinite(out.loss)
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("position_type", ["sinusoidal", "rope"])
def test_fixed_positions_work_past_the_maximum(position_type):
    model = make_model(position_embedding_type=position_type, max_position_embeddings=8)
    ids = random_batch(batch=1, length=20)
    out = model(input_ids=ids, decoder_input_ids=ids)
    assert out.logits.shape == (1, 20, 61)
    assert torch.isfinite(out.logits).all()


def test_learned_positions_past_the_maximum_raise_naming_the_limit():
    model = make_model(position_embedding_type="learned", max_position_embeddings=8)
    with pytest.raises(ValueError, match="max_position_embeddings=8"):
        model(input_ids=random_batch(batch=1, length=9), decoder_input_ids=random_batch(batch=1, length=2))
    with pytest.raises(ValueError, match="max_position_embeddings=8"):
        model(input_ids=random_batch(batch=1, length=4), decoder_input_ids=random_batch(batch=1, length=9))


# ------------------------------------------------------------------------------------------------ the paper, checked


def _copy_attention(ours, theirs: nn.MultiheadAttention):
    theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
    theirs.out_proj.weight.copy_(ours.out_proj.weight)
    theirs.out_proj.bias.copy_(ours.out_proj.bias)


def _copy_ffn_and_norms(ours, theirs, residual_names):
    theirs.linear1.load_state_dict(ours.feed_forward.fc1.state_dict())
    theirs.linear2.load_state_dict(ours.feed_forward.fc2.state_dict())
    for index, name in enumerate(residual_names, start=1):
        getattr(theirs, f"norm{index}").load_state_dict(getattr(ours, name).layer_norm.state_dict())


@pytest.mark.parametrize("pre_layer_norm", [False, True])
@torch.no_grad()
def test_layers_match_torch_nn_transformer(pre_layer_norm):
    """torch's reference nn.TransformerEncoder/Decoder with our weights copied in gives the same outputs (1e-5)."""
    model = make_model(ScratchformerModel, pre_layer_norm=pre_layer_norm, decoder_attention_heads=4,
                       decoder_ffn_dim=48)
    config = model.config
    kwargs = dict(d_model=config.d_model, dim_feedforward=48, dropout=0.0, batch_first=True,
                  norm_first=pre_layer_norm, layer_norm_eps=config.layer_norm_eps)
    encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(nhead=4, **kwargs), config.encoder_layers,
        norm=nn.LayerNorm(config.d_model) if pre_layer_norm else None, enable_nested_tensor=False).eval()
    decoder = nn.TransformerDecoder(
        nn.TransformerDecoderLayer(nhead=4, **kwargs), config.decoder_layers,
        norm=nn.LayerNorm(config.d_model) if pre_layer_norm else None).eval()
    for ours, theirs in zip(model.encoder.layers, encoder.layers):
        _copy_attention(ours.self_attn, theirs.self_attn)
        _copy_ffn_and_norms(ours, theirs, ["self_attn_residual", "feed_forward_residual"])
    for ours, theirs in zip(model.decoder.layers, decoder.layers):
        _copy_attention(ours.self_attn, theirs.self_attn)
        _copy_attention(ours.cross_attn, theirs.multihead_attn)
        _copy_ffn_and_norms(ours, theirs, ["self_attn_residual", "cross_attn_residual", "feed_forward_residual"])
    if pre_layer_norm:
        encoder.norm.load_state_dict(model.encoder.layer_norm.state_dict())
        decoder.norm.load_state_dict(model.decoder.layer_norm.state_dict())

    source, target = random_batch(2, 7), random_batch(2, 5, seed=2)
    out = model(input_ids=source, decoder_input_ids=target, output_hidden_states=True)
    memory = encoder(out.encoder_hidden_states[0])
    assert torch.allclose(memory, out.encoder_last_hidden_state, atol=ATOL)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    decoded = decoder(out.decoder_hidden_states[0], memory, tgt_mask=causal, tgt_is_causal=True)
    assert torch.allclose(decoded, out.last_hidden_state, atol=ATOL)


@torch.no_grad()
def test_embedding_layer_is_scaled_token_embedding_plus_positional_encoding():
    model = make_model(ScratchformerEncoderModel)
    ids = random_batch(1, 6)
    hidden0 = model(ids, output_hidden_states=True).hidden_states[0]
    expected = model.embeddings.word_embeddings(ids) * math.sqrt(32) + sinusoidal_position_encoding(6, 32)
    assert torch.allclose(hidden0, expected, atol=ATOL)


def test_hidden_states_and_attentions_follow_hf_conventions():
    model = make_model()  # default attention implementation: sdpa
    assert model.config._attn_implementation == "sdpa"
    ids = random_batch(2, 6)
    out = model(input_ids=ids, decoder_input_ids=ids[:, :4], output_hidden_states=True, output_attentions=True)
    assert len(out.encoder_hidden_states) == 2 + 1 and len(out.decoder_hidden_states) == 3 + 1
    assert torch.equal(out.encoder_hidden_states[-1], out.encoder_last_hidden_state)
    plain = model.model.decoder(input_ids=ids[:, :4], encoder_hidden_states=out.encoder_last_hidden_state)
    assert torch.allclose(out.decoder_hidden_states[-1], plain.last_hidden_state, atol=ATOL)  # eager vs sdpa
    # attentions are returned under sdpa too (eager fallback for the call): shapes (B, H, T, S), rows sum to 1
    assert [a.shape for a in out.encoder_attentions] == [(2, 4, 6, 6)] * 2
    assert [a.shape for a in out.decoder_attentions] == [(2, 2, 4, 4)] * 3
    assert [a.shape for a in out.cross_attentions] == [(2, 2, 4, 6)] * 3
    for weights in (*out.encoder_attentions, *out.decoder_attentions, *out.cross_attentions):
        assert torch.allclose(weights.sum(-1), torch.ones(()), atol=1e-5)
    # decoder self-attention is causal: nothing above the diagonal
    assert torch.all(out.decoder_attentions[0].triu(1) == 0)


# ------------------------------------------------------------------------------------------------ masks


@pytest.mark.parametrize("position_type", POSITION_TYPES)
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@torch.no_grad()
def test_padding_never_changes_the_real_tokens(position_type, side, implementation):
    model = make_model(position_embedding_type=position_type, attn_implementation=implementation)
    short, long = random_batch(1, 5), random_batch(1, 9, seed=7)
    pad = torch.zeros(1, 4, dtype=torch.long)
    padded_short = torch.cat([short, pad], 1) if side == "right" else torch.cat([pad, short], 1)
    mask = (padded_short != 0).long()
    batch = torch.cat([padded_short, long])
    batch_mask = torch.cat([mask, torch.ones_like(long)])
    real = slice(0, 5) if side == "right" else slice(4, 9)

    alone = model.model.encoder(input_ids=short).last_hidden_state
    batched = model.model.encoder(input_ids=batch, attention_mask=batch_mask).last_hidden_state
    assert torch.allclose(alone[0], batched[0, real], atol=ATOL)

    # the decoder's view of the source is unchanged too (cross-attention ignores the padding)
    target = random_batch(1, 4, seed=3)
    logits_alone = model(input_ids=short, decoder_input_ids=target).logits
    logits_batched = model(input_ids=batch, attention_mask=batch_mask,
                           decoder_input_ids=torch.cat([target, target])).logits
    assert torch.allclose(logits_alone[0], logits_batched[0], atol=ATOL)


@torch.no_grad()
def test_a_fully_padded_row_gives_finite_numbers():
    for implementation in ("eager", "sdpa"):
        model = make_model(attn_implementation=implementation)
        ids = random_batch(2, 6)
        mask = torch.ones_like(ids)
        mask[1] = 0
        out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids)
        assert torch.isfinite(out.logits).all()
        assert torch.isfinite(out.encoder_last_hidden_state).all()


@pytest.mark.parametrize("position_type", POSITION_TYPES)
@torch.no_grad()
def test_eager_and_sdpa_agree(position_type):
    eager = make_model(position_embedding_type=position_type, attn_implementation="eager")
    sdpa = make_model(position_embedding_type=position_type, attn_implementation="sdpa")
    ids = random_batch(2, 8)
    mask = torch.ones_like(ids)
    mask[0, 6:] = 0
    target = random_batch(2, 5, seed=4)
    a = eager(input_ids=ids, attention_mask=mask, decoder_input_ids=target)
    b = sdpa(input_ids=ids, attention_mask=mask, decoder_input_ids=target)
    assert torch.allclose(a.logits, b.logits, atol=ATOL)
    assert torch.allclose(a.encoder_last_hidden_state, b.encoder_last_hidden_state, atol=ATOL)


def test_encoder_self_attention_is_bidirectional_under_sdpa():
    """sdpa treats a module without a mask as causal unless it says otherwise: changing the last token must change
    the first token's encoder output."""
    model = make_model()
    ids = random_batch(1, 6)
    changed = ids.clone()
    changed[0, -1] = 5 if ids[0, -1] != 5 else 6
    with torch.no_grad():
        a = model.model.encoder(input_ids=ids).last_hidden_state
        b = model.model.encoder(input_ids=changed).last_hidden_state
    assert not torch.allclose(a[0, 0], b[0, 0], atol=1e-4)


@torch.no_grad()
def test_bf16_forward_is_finite():
    model = make_model().to(torch.bfloat16)
    ids = random_batch(2, 7)
    mask = torch.ones_like(ids)
    mask[1, 3:] = 0
    out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids)
    assert out.logits.dtype == torch.bfloat16
    assert torch.isfinite(out.logits).all()


# ------------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(input_ids=torch.tensor([[5, 61]])), "vocabulary has 61"),
        (dict(input_ids=torch.tensor([[5, -1]])), "span \\[-1, 5\\]"),
        (dict(input_ids=torch.tensor([5, 6, 7])), "shape \\(batch, sequence_length\\)"),
        (dict(input_ids=torch.ones(1, 2, 3, dtype=torch.long)), "shape \\(batch, sequence_length\\)"),
        (dict(input_ids=torch.zeros(0, 4, dtype=torch.long)), "empty"),
        (dict(input_ids=torch.zeros(2, 0, dtype=torch.long)), "empty"),
        (dict(input_ids=torch.ones(2, 4, dtype=torch.long) * 7, attention_mask=torch.ones(2, 5)), "attention_mask"),
        (dict(input_ids=torch.ones(2, 4, dtype=torch.long) * 7, attention_mask=torch.ones(4)), "attention_mask"),
        (dict(input_ids=[[5, 6]]), "torch.Tensor"),
    ],
)
def test_bad_inputs_raise_value_errors(kwargs, match):
    for model in (make_model(), make_model(ScratchformerEncoderModel)):
        with pytest.raises(ValueError, match=match):
            model(**kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bool])
def test_ids_of_another_dtype_get_torchs_error_naming_the_dtypes_it_takes(dtype):
    """Not checked by the model: torch's embedding names what it takes (Long, Int) and what it got."""
    for model in (make_model(), make_model(ScratchformerEncoderModel)):
        with pytest.raises(RuntimeError, match="'indices' to have one of the following scalar types: Long, Int"):
            model(input_ids=torch.ones(1, 3, dtype=dtype))


@pytest.mark.parametrize("settings, message", [
    ({"eos_token_id": [2, 10**6]}, r"eos_token_id=\[2, 1000000\] is outside the vocabulary: token ids are in "
                                   r"\[0, 61\)"),
    ({"forced_bos_token_id": 61}, r"forced_bos_token_id=61 is outside the vocabulary"),  # an IndexError in transformers
    ({"forced_bos_token_id": -5}, r"forced_bos_token_id=-5 is outside"),  # transformers would force token 56 instead
    ({"decoder_start_token_id": np.int64(99)}, r"decoder_start_token_id=.*99.* is outside the vocabulary"),
    ({"num_beams": 62}, "num_beams=62 is more than the 61 tokens of the vocabulary"),
])
def test_generate_settings_past_the_models_sizes_are_refused_before_any_work(settings, message):
    """The arithmetic only this model can do, on its vocabulary: refused before the encoder runs, given as
    arguments or in a GenerationConfig. As many beams as tokens is fine."""
    from transformers import GenerationConfig

    model = make_model()
    with pytest.raises(ValueError, match=message):
        model.generate(random_batch(1, 5), max_new_tokens=2, **settings)
    with pytest.raises(ValueError, match=message):
        model.generate(random_batch(1, 5), generation_config=GenerationConfig(max_new_tokens=2, **settings))
    assert model.generate(random_batch(1, 5), num_beams=61, max_new_tokens=2).shape[0] == 1


def test_generating_past_learned_positions_is_refused_up_front():
    model = ScratchformerForConditionalGeneration(tiny_config(position_embedding_type="learned",
                                                              max_position_embeddings=8)).eval()
    with pytest.raises(ValueError, match="up to 9 decoder tokens, but learned positions stop at max_position_"):
        model.generate(random_batch(1, 5), max_new_tokens=8)
    with pytest.raises(ValueError, match="up to 9 decoder tokens, but learned positions stop at max_position_"):
        model.generate(random_batch(1, 5), max_new_tokens=None, max_length=9)
    assert model.generate(random_batch(1, 5), max_new_tokens=7, min_new_tokens=7).shape == (1, 8)


def _tiny_bart(max_position_embeddings: int = 64):
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(0)
    return BartForConditionalGeneration(BartConfig(
        vocab_size=61, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
        max_position_embeddings=max_position_embeddings)).eval()


@pytest.mark.parametrize("settings", [
    {"temperature": 0.0}, {"top_p": 0.0}, {"temperature": 0.0, "top_p": 0.0, "top_k": 0},
    {"max_new_tokens": np.int64(5)}, {"max_new_tokens": np.int32(3), "num_beams": np.int64(2)},
])
def test_generate_takes_what_transformers_takes_for_bart(settings, caplog):
    """Sampling settings in greedy decoding are warned about and ignored by transformers' GenerationConfig.validate,
    also from a GenerationConfig, and numpy integers count as integers: a tiny BART takes each, and so does ours,
    with the same output length and the same greedy tokens as without the ignored settings."""
    from transformers import GenerationConfig

    ids = random_batch(1, 5)
    plain = {key: value for key, value in settings.items() if key in ("max_new_tokens", "num_beams")}
    def run(model: nn.Module, given: dict, in_config: bool) -> torch.Tensor:
        given = {"max_new_tokens": 4, "eos_token_id": None, **given}
        if in_config:  # a GenerationConfig has none of the model's own defaults: both runs get the same
            return model.generate(ids, generation_config=GenerationConfig(**given))
        return model.generate(ids, **given)

    for model in (_tiny_bart(), make_model()):
        for in_config in (False, True):
            assert torch.equal(run(model, settings, in_config), run(model, plain, in_config)), (model, settings)


def test_a_huge_max_new_tokens_with_max_time_stops_at_max_time():
    """An explicit 10**7 new tokens is the caller's request, as in transformers' own models: with max_time=1 the
    generation stops there (transformers' MaxTimeCriteria), after at least one new token, with fewer than asked."""
    ids = random_batch(1, 5)
    # BART's learned table must outlast what a quiet machine generates in the time (64 positions did not)
    for model in (_tiny_bart(max_position_embeddings=100_000), make_model()):
        out = model.generate(ids, max_new_tokens=10**7, max_time=0.5, eos_token_id=None)
        assert 2 <= out.shape[1] < 10**7, type(model).__name__


def test_weights_that_are_not_floats_are_refused_in_one_line(tmp_path):
    """An int32 (or bool, uint8) tensor in model.safetensors, or in one shard of an index, would load silently
    converted; the folder is refused naming the file, a tensor and its dtype, before anything is read."""
    from safetensors.torch import load_file, save_file

    from scratchformer.models.modeling_scratchformer import safetensors_problem

    make_model().save_pretrained(tmp_path / "good")
    assert safetensors_problem(tmp_path / "good") is None
    tensors = load_file(tmp_path / "good" / "model.safetensors")
    save_file({**tensors, "step": torch.tensor([3])}, tmp_path / "good" / "model.safetensors")
    assert safetensors_problem(tmp_path / "good") is None  # not a weight (*.weight, *.bias): never loaded into one
    name = sorted(tensors)[0]
    for dtype, shown in ((torch.int32, "I32"), (torch.bool, "BOOL"), (torch.uint8, "U8")):
        folder = tmp_path / shown
        make_model().save_pretrained(folder)
        save_file({**tensors, name: tensors[name].to(dtype)}, folder / "model.safetensors", metadata={"format": "pt"})
        message = (f"{folder / 'model.safetensors'} holds weights that are not floating-point numbers ({name}: "
                   f"{shown}): ")
        assert safetensors_problem(folder).startswith(message)
        with pytest.raises(OSError, match=re.escape(message)):
            ScratchformerForConditionalGeneration.from_pretrained(folder)
    sharded = tmp_path / "sharded"
    make_model().save_pretrained(sharded, max_shard_size="20KB")
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    shard = sorted(set(index["weight_map"].values()))[-1]
    weights = load_file(sharded / shard)
    save_file({key: value.int() for key, value in weights.items()}, sharded / shard, metadata={"format": "pt"})
    assert f"{sharded / shard} holds weights that are not floating-point numbers" in safetensors_problem(sharded)


def test_embeddings_of_another_dtype_and_ids_without_values_are_refused():
    model = make_model()
    embeds = model.get_input_embeddings()(random_batch(2, 5))
    with pytest.raises(ValueError, match=r"inputs_embeds has dtype torch.float16 but the model computes in "
                                         r"torch.float32: convert them with inputs_embeds.to\(torch.float32\)"):
        model(inputs_embeds=embeds.half(), decoder_input_ids=random_batch(2, 3))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # under autocast any float is fine: it casts per op
        assert torch.isfinite(model(inputs_embeds=embeds.bfloat16(), decoder_input_ids=random_batch(2, 3)).logits).all()
    # ids without values (the meta device): torch's own message says it
    with pytest.raises(RuntimeError, match="Tensor on device meta is not on the expected device cpu"):
        model(input_ids=random_batch(2, 5).to("meta"), decoder_input_ids=random_batch(2, 3))


def test_bad_decoder_inputs_and_labels_raise_value_errors():
    model = make_model()
    ids = random_batch(2, 5)
    with pytest.raises(ValueError, match="decoder_input_ids"):
        model(input_ids=ids, decoder_input_ids=torch.tensor([[1, 99]] * 2))
    with pytest.raises(ValueError, match="batch size"):
        model(input_ids=ids, decoder_input_ids=random_batch(3, 2))
    with pytest.raises(ValueError, match="labels"):
        model(input_ids=ids, labels=torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="vocabulary"):
        model(input_ids=ids, labels=torch.tensor([[1, 200]] * 2))


# ------------------------------------------------------------------------------------------------ loss


def test_loss_is_cross_entropy_over_shifted_labels_ignoring_minus_100():
    model = make_model()
    ids = random_batch(2, 6)
    labels = random_batch(2, 5, seed=9)
    labels[0, 3:] = -100
    out = model(input_ids=ids, labels=labels)
    decoder_input_ids = shift_tokens_right(labels, 0, model.config.decoder_start_token_id)
    assert decoder_input_ids[0, 0] == model.config.decoder_start_token_id
    assert torch.equal(decoder_input_ids[1, 1:], labels[1, :-1])
    assert decoder_input_ids[0, 4] == 0  # a shifted -100 becomes padding
    logits = model(input_ids=ids, decoder_input_ids=decoder_input_ids).logits
    keep = labels != -100
    expected = nn.functional.cross_entropy(logits[keep], labels[keep])
    assert torch.allclose(out.loss, expected, atol=1e-6)


def test_all_labels_ignored_gives_a_zero_loss_not_nan():
    model = make_model()
    out = model(input_ids=random_batch(2, 6), labels=torch.full((2, 4), -100))
    assert out.loss.item() == 0.0
    out.loss.backward()  # still a graph: a training step on such a batch changes nothing
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


def test_a_mask_that_is_not_zeros_and_ones_is_refused():
    """0/1 (any dtype) and booleans mean the same; 0.5, 2 or -1 mean nothing and are refused, in either mask."""
    model = make_model()
    ids = random_batch(2, 6)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[0, :2] = 0
    ones = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :3]).logits
    for same in (mask.bool(), mask.float()):
        assert torch.equal(model(input_ids=ids, attention_mask=same, decoder_input_ids=ids[:, :3]).logits, ones)
    for bad in (mask * 2, mask * 0.5, mask - 2 * (1 - mask)):
        with pytest.raises(ValueError, match=r"attention_mask must hold only 1 \(a real token\) and 0"):
            model(input_ids=ids, attention_mask=bad, decoder_input_ids=ids[:, :3])
        with pytest.raises(ValueError, match=r"decoder_attention_mask must hold only 1"):
            model(input_ids=ids, decoder_input_ids=ids, decoder_attention_mask=bad)


# ------------------------------------------------------------------------------------------------ no host syncs


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_forward_and_cached_decoding_make_no_host_synchronisation(implementation):
    """On the meta device every host synchronisation (``.item()``, ``bool(t)``, ``int(t)``) raises, so a forward
    that completes there never makes the host wait for an accelerator: the CPU-side proof of what
    ``test_no_host_syncs_on_a_gpu`` checks with CUDA's sync debug mode."""
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    with torch.device("meta"):
        model = ScratchformerForConditionalGeneration(tiny_config()).eval()
    model.config._attn_implementation = implementation
    ids = torch.ones(2, 7, dtype=torch.long, device="meta")
    mask = torch.ones(2, 7, dtype=torch.long, device="meta")
    out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :3], labels=ids[:, :3])
    assert out.logits.shape == (2, 3, 61) and out.loss.shape == ()
    encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    for _ in range(3):
        step = model(encoder_outputs=encoder_outputs, attention_mask=mask, decoder_input_ids=ids[:, :1],
                     past_key_values=cache, use_cache=True)
        cache = getattr(step, CACHE_NAME)
    assert cache.get_seq_length() == 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_no_host_syncs_on_a_gpu():
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    model = make_model().cuda()
    ids = random_batch(2, 6).cuda()
    mask = torch.ones_like(ids)
    mask[0, :2] = 0
    model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :3])  # warm-up (lazy initialisation)
    encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :3], labels=ids[:, :3])
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        for _ in range(3):  # cached decoding, as generate() steps
            step = model(encoder_outputs=encoder_outputs, attention_mask=mask, decoder_input_ids=ids[:, :1],
                         past_key_values=cache, use_cache=True)
            cache = getattr(step, CACHE_NAME)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert cache.get_seq_length() == 3


# ------------------------------------------------------------------------------------------------ per-call costs
# A small model on a GPU is bound by what each call costs on the host (benchmarks/RESULTS.md, the overhead group).


def _count_dropout_calls(model: nn.Module) -> list[nn.Module]:
    calls: list[nn.Module] = []
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.register_forward_hook(lambda dropout, inputs, output: calls.append(dropout))
    return calls


def test_dropout_modules_are_skipped_where_dropout_is_the_identity():
    ids = random_batch(2, 6)
    model = make_model(dropout=0.5, activation_dropout=0.5)
    calls = _count_dropout_calls(model)
    with torch.no_grad():
        inference = model(input_ids=ids, decoder_input_ids=ids).logits
    assert calls == []  # eval: dropout is the identity, and no module is called
    model.train()
    torch.manual_seed(0)
    trained = model(input_ids=ids, decoder_input_ids=ids).logits
    # one per embedding sum, and per layer one per residual block and one after the FFN activation: 3 per encoder
    # layer, 4 per decoder layer
    config = model.config
    assert len(calls) == 2 + 3 * config.encoder_layers + 4 * config.decoder_layers
    assert not torch.allclose(trained, inference, atol=1e-3)
    # Monte Carlo dropout: the model in eval mode with its dropout modules switched back on still drops
    model.eval()
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.train()
    calls.clear()
    with torch.no_grad():
        sampled = model(input_ids=ids, decoder_input_ids=ids).logits
    assert calls and not torch.allclose(sampled, inference, atol=1e-3)


def test_dropout_of_zero_calls_no_module_and_changes_nothing_in_training():
    ids = random_batch(2, 6)
    model = make_model(dropout=0.0)
    calls = _count_dropout_calls(model)
    with torch.no_grad():
        inference = model(input_ids=ids, decoder_input_ids=ids).logits
        trained = model.train()(input_ids=ids, decoder_input_ids=ids).logits
    assert calls == [] and torch.equal(trained, inference)


def _backward_node_names(tensor: torch.Tensor) -> set[str]:
    names, todo, seen = set(), [tensor.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        todo.extend(next_node for next_node, _ in node.next_functions)
    return names


def test_relu_is_in_place_at_inference_only():
    """In place at inference (no second (B, T, d_ff) tensor); under autograd an in-place op on the linear layer's
    output (a view) would make the backward copy the whole activation (CopySlices)."""
    model = make_model()
    ffn = model.model.encoder.layers[0].feed_forward
    seen = []
    ffn.fc1.register_forward_hook(lambda module, inputs, output: seen.append(output))
    x = torch.randn(2, 5, model.config.d_model)
    with torch.no_grad():
        out = ffn(x)
    assert seen[-1].min() >= 0  # fc1's own output was overwritten by the ReLU
    grad_out = ffn(x)
    assert torch.allclose(grad_out, out, atol=ATOL)
    assert seen[-1].min() < 0  # kept: the ReLU made a new tensor
    assert "CopySlices" not in _backward_node_names(grad_out)
    loss = make_model().train()(input_ids=random_batch(2, 6), labels=random_batch(2, 4)).loss
    assert {"CopySlices", "AsStridedBackward0"}.isdisjoint(_backward_node_names(loss))


def test_a_forward_with_a_cache_does_not_copy_the_config(monkeypatch):
    def refuse(config, memo):
        raise AssertionError("the config was deep-copied during a forward")

    model = make_model()
    ids = random_batch(2, 6)
    monkeypatch.setattr(type(model.config), "__deepcopy__", refuse, raising=False)
    with torch.no_grad():
        out = model(input_ids=ids, decoder_input_ids=ids[:, :3], use_cache=True)
        step = model(encoder_outputs=(out.encoder_last_hidden_state,), decoder_input_ids=ids[:, 3:4],
                     past_key_values=getattr(out, CACHE_NAME), use_cache=True)
        full = model(input_ids=ids, decoder_input_ids=ids[:, :4], use_cache=False)
    assert torch.allclose(step.logits[:, -1], full.logits[:, -1], atol=ATOL)


def test_the_signature_generate_reads_at_every_step_is_computed_once_and_true():
    import inspect

    forward = ScratchformerForConditionalGeneration.forward
    code = inspect.unwrap(forward).__code__  # under can_return_tuple
    assert "__signature__" in vars(forward)
    assert list(inspect.signature(forward).parameters) == list(
        code.co_varnames[:code.co_argcount + code.co_kwonlyargcount + 1])  # + **kwargs
    bound = inspect.signature(make_model().forward)  # what generate() reads
    assert list(bound.parameters) == list(inspect.signature(forward).parameters)[1:]  # without self


# ------------------------------------------------------------------------------------------------ tying, save/load


def _stored_tensor_names(folder):
    with safe_open(str(folder / "model.safetensors"), "pt") as handle:
        return set(handle.keys())


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("pre_layer_norm", [False, True])
def test_save_load_round_trip(tmp_path, tie, pre_layer_norm):
    model = make_model(tie_word_embeddings=tie, pre_layer_norm=pre_layer_norm, position_embedding_type="learned")
    ids = random_batch(2, 6)
    with torch.no_grad():
        before = model(input_ids=ids, decoder_input_ids=ids).logits
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists() and not list(tmp_path.glob("*.bin"))
    loaded, info = ScratchformerForConditionalGeneration.from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == set() and info["unexpected_keys"] == set()
    with torch.no_grad():
        after = loaded.eval()(input_ids=ids, decoder_input_ids=ids).logits
    assert torch.allclose(before, after, atol=0)

    tables = [loaded.model.encoder.embeddings.word_embeddings.weight,
              loaded.model.decoder.embeddings.word_embeddings.weight, loaded.lm_head.weight]
    stored = _stored_tensor_names(tmp_path)
    embedding_names = {n for n in stored if "word_embeddings" in n or "lm_head" in n}
    if tie:
        assert tables[0] is tables[1] is tables[2]  # one tensor, as in the paper
        assert embedding_names == {"model.encoder.embeddings.word_embeddings.weight"}
    else:
        assert len({t.data_ptr() for t in tables}) == 3
        assert len(embedding_names) == 3


def test_tied_weights_stay_tied_when_training():
    model = make_model().train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = random_batch()
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    assert model.lm_head.weight is model.model.encoder.embeddings.word_embeddings.weight


def _linear_bias_names(model: nn.Module) -> list[str]:
    """The names of the biases of the attention projections and feed-forward linears (LayerNorms excluded)."""
    return [f"{name}.bias" for name, module in model.named_modules()
            if isinstance(module, nn.Linear) and module.bias is not None
            and name.rsplit(".", 1)[-1] in ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2")]


def test_bias_false_drops_every_attention_and_feed_forward_bias_and_trains_saves_and_reloads(tmp_path):
    with_bias = make_model()
    assert len(_linear_bias_names(with_bias)) == 2 * (4 + 2) + 3 * (2 * 4 + 2)  # 2 encoder, 3 decoder layers
    model = make_model(bias=False).train()
    assert _linear_bias_names(model) == []
    assert all(module.bias is not None for module in model.modules() if isinstance(module, nn.LayerNorm))
    biases = dict(with_bias.named_parameters())
    dropped = sum(biases[name].numel() for name in _linear_bias_names(with_bias))
    assert model.num_parameters() == with_bias.num_parameters() - dropped

    ids = random_batch()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before_step = [parameter.detach().clone() for parameter in model.parameters()]
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    assert any(not torch.equal(old, new) for old, new in zip(before_step, model.parameters()))

    model.eval().save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["bias"] is False
    loaded, info = ScratchformerForConditionalGeneration.from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == set() and info["unexpected_keys"] == set()
    assert loaded.config.bias is False and _linear_bias_names(loaded) == []
    with torch.no_grad():
        expected = model(input_ids=ids, decoder_input_ids=ids).logits
        assert torch.equal(loaded.eval()(input_ids=ids, decoder_input_ids=ids).logits, expected)  # exact: tolerance 0


def test_encoder_model_loads_from_a_full_checkpoint_without_missing_keys(tmp_path):
    full = make_model()
    full.save_pretrained(tmp_path)
    encoder, info = ScratchformerEncoderModel.from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == set() and info["unexpected_keys"] == set()
    auto = AutoModel.from_pretrained(tmp_path)
    assert type(auto) is ScratchformerEncoderModel
    ids = random_batch(2, 5)
    with torch.no_grad():
        expected = full.model.encoder(input_ids=ids).last_hidden_state
        assert torch.allclose(encoder.eval()(ids).last_hidden_state, expected, atol=0)
    # DistilBERT's attribute path for the learned table
    assert torch.equal(encoder.embeddings.word_embeddings.weight, full.get_input_embeddings().weight)
    assert encoder.get_input_embeddings() is encoder.embeddings.word_embeddings


def test_auto_classes_and_auto_map(tmp_path):
    model = make_model()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_scratchformer.ScratchformerConfig",
        "AutoModel": "modeling_scratchformer.ScratchformerEncoderModel",
        "AutoModelForMaskedLM": "modeling_scratchformer.ScratchformerForMaskedLM",  # the encoder + its LM head
        "AutoModelForSeq2SeqLM": "modeling_scratchformer.ScratchformerForConditionalGeneration",
    }
    assert (tmp_path / "modeling_scratchformer.py").exists()
    assert (tmp_path / "configuration_scratchformer.py").exists()
    assert type(AutoModelForSeq2SeqLM.from_pretrained(tmp_path)) is ScratchformerForConditionalGeneration
    generation_config = json.loads((tmp_path / "generation_config.json").read_text())
    assert generation_config["decoder_start_token_id"] == 1 and generation_config["eos_token_id"] == 2


def test_remote_code_loads_where_scratchformer_is_not_installed(tmp_path):
    model = make_model(position_embedding_type="sinusoidal")
    folder = tmp_path / "checkpoint"
    model.save_pretrained(folder)
    ids = random_batch(2, 6)
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :3]).logits
        greedy = model.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False)
        encoded = model.model.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    torch.save({"ids": ids, "mask": mask, "logits": logits, "greedy": greedy, "encoded": encoded},
               tmp_path / "expected.pt")
    result = run_without_scratchformer(
        f"""
        import torch
        from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM
        folder = {str(folder)!r}
        expected = torch.load({str(tmp_path / "expected.pt")!r})
        config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
        assert type(config).__name__ == "ScratchformerConfig", type(config)
        assert "transformers_modules" in type(config).__module__, type(config).__module__
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
        assert model.lm_head.weight is model.model.encoder.embeddings.word_embeddings.weight
        ids, mask = expected["ids"], expected["mask"]
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :3]).logits
            greedy = model.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False)
            encoder = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
            encoded = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        assert torch.allclose(logits, expected["logits"], atol=1e-5), (logits - expected["logits"]).abs().max()
        assert torch.equal(greedy, expected["greedy"]), (greedy, expected["greedy"])
        assert torch.allclose(encoded, expected["encoded"], atol=1e-5)
        print("REMOTE-OK")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "REMOTE-OK" in result.stdout


# ------------------------------------------------------------------------------------------------ decoding


@pytest.mark.parametrize("position_type", POSITION_TYPES)
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@torch.no_grad()
def test_cached_decoding_equals_uncached_for_32_steps(position_type, implementation):
    model = make_model(position_embedding_type=position_type, attn_implementation=implementation)
    ids = random_batch(2, 7)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    encoder_outputs = model.model.encoder(input_ids=ids, attention_mask=mask)
    target = torch.cat([torch.ones(2, 1, dtype=torch.long), random_batch(2, 31, seed=5)], 1)  # 32 tokens
    full = model(attention_mask=mask, encoder_outputs=encoder_outputs, decoder_input_ids=target,
                 use_cache=False).logits
    cache = None
    for step in range(32):
        out = model(attention_mask=mask, encoder_outputs=encoder_outputs, decoder_input_ids=target[:, step:step + 1],
                    past_key_values=cache, use_cache=True)
        cache = getattr(out, CACHE_NAME)
        assert torch.allclose(out.logits[:, 0], full[:, step], atol=ATOL), step
    assert cache.get_seq_length() == 32
    # the cross-attention keys/values were computed once and kept: length = source length, not 32
    assert cache.cross_attention_cache.get_seq_length() == 7


@torch.no_grad()
def test_cross_attention_projections_run_once_per_generation():
    model = make_model()
    calls = []
    handle = model.model.decoder.layers[0].cross_attn.k_proj.register_forward_hook(lambda *a: calls.append(1))
    model.generate(random_batch(1, 5), max_new_tokens=10, min_new_tokens=10, do_sample=False)
    handle.remove()
    assert len(calls) == 1


@torch.no_grad()
def greedy_by_hand(model, ids, mask, steps):
    """Greedy decoding that recomputes everything at every step (no cache, no GenerationMixin)."""
    out = torch.full((ids.shape[0], 1), model.config.decoder_start_token_id)
    for _ in range(steps):
        logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=out, use_cache=False).logits
        out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], 1)
    return out


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_generate_greedy_equals_a_plain_greedy_loop(position_type):
    model = make_model(position_embedding_type=position_type, seed=3)
    ids = random_batch(2, 6)
    mask = torch.ones_like(ids)
    mask[0, 4:] = 0
    generated = model.generate(ids, attention_mask=mask, max_new_tokens=12, min_new_tokens=12, do_sample=False,
                               eos_token_id=None)
    assert torch.equal(generated, greedy_by_hand(model, ids, mask, 12))


def test_beam_search_and_sampling_run():
    model = make_model(seed=4)
    ids = random_batch(2, 6)
    beams = model.generate(ids, num_beams=4, num_return_sequences=2, max_new_tokens=6)
    assert beams.shape[0] == 4 and beams.shape[1] <= 7
    torch.manual_seed(0)
    sampled = model.generate(ids, do_sample=True, top_k=10, temperature=0.8, max_new_tokens=6)
    assert sampled.shape[0] == 2
    for out in (beams, sampled):
        assert out.min() >= 0 and out.max() < model.config.vocab_size
        assert torch.all(out[:, 0] == model.config.decoder_start_token_id)


# ------------------------------------------------------------------------------------------------ static cache, compile


@pytest.mark.parametrize("position_type", ["sinusoidal", "learned", "rope"])
@pytest.mark.parametrize("layers", [(2, 3), (3, 1)])
def test_static_cache_generation_equals_the_dynamic_cache(position_type, layers):
    """generate(cache_implementation="static") preallocates every key/value slot (fixed shapes for torch.compile);
    it must give exactly the tokens of the default growing cache, padded batches and beams included."""
    model = make_model(position_embedding_type=position_type, encoder_layers=layers[0], decoder_layers=layers[1],
                       seed=5)
    ids = random_batch(3, 7)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # left padding
    mask[2, 5:] = 0  # right padding
    for settings in (dict(do_sample=False), dict(num_beams=3, do_sample=False)):
        dynamic = model.generate(ids, attention_mask=mask, max_new_tokens=10, **settings)
        static = model.generate(ids, attention_mask=mask, max_new_tokens=10, cache_implementation="static",
                                **settings)
        assert torch.equal(dynamic, static), settings


@torch.no_grad()
def test_the_cache_is_taken_under_either_name_and_returned_under_this_versions_name():
    """transformers 5.24 renamed ``past_key_values`` to ``cache``; ``generate()`` then passes ``cache=`` and reads
    ``outputs["cache"]``. Before 5.24 both were ``past_key_values``. The model must take either and return the cache
    under the name that the installed ``generate()`` reads, or cached generation silently decodes without context."""
    model = make_model()
    ids = random_batch(2, 7)
    encoder_outputs = model.model.encoder(input_ids=ids)
    target = torch.cat([torch.ones(2, 1, dtype=torch.long), random_batch(2, 3, seed=5)], 1)  # 4 tokens
    full = model(encoder_outputs=encoder_outputs, decoder_input_ids=target, use_cache=False).logits
    for name in ("cache", "past_key_values"):
        cache = None
        for step in range(4):
            out = model(encoder_outputs=encoder_outputs, decoder_input_ids=target[:, step:step + 1], use_cache=True,
                        **{name: cache})
            assert CACHE_NAME in out.keys() and out[CACHE_NAME] is getattr(out, CACHE_NAME)
            cache = out[CACHE_NAME]
            assert torch.allclose(out.logits[:, 0], full[:, step], atol=ATOL), (name, step)
        assert cache.get_seq_length() == 4
    same = model(encoder_outputs=encoder_outputs, decoder_input_ids=target[:, :1], use_cache=True,
                 cache=None, past_key_values=None)
    assert same[CACHE_NAME].get_seq_length() == 1
    with pytest.raises(ValueError, match="pass the key/value cache once"):
        model(encoder_outputs=encoder_outputs, decoder_input_ids=target[:, 1:2], cache=cache,
              past_key_values=same[CACHE_NAME])
    for wrong in (cache.self_attention_cache, ((torch.zeros(1),),)):
        with pytest.raises(ValueError, match="must be a transformers EncoderDecoderCache"):
            model(encoder_outputs=encoder_outputs, decoder_input_ids=target[:, 1:2], **{CACHE_NAME: wrong})


@torch.no_grad()
def test_an_argument_forward_does_not_take_is_named_in_a_warning_not_dropped_in_silence():
    """``forward`` takes ``**kwargs`` (the Trainer passes ``num_items_in_batch``), so a misspelt or renamed argument
    would vanish: transformers 5.24's ``cache=`` did, and cached generation lost its context without a word."""
    from transformers.testing_utils import CaptureLogger

    from scratchformer.models import modeling_scratchformer

    ids = random_batch(2, 5)
    for model_class in (ScratchformerForConditionalGeneration, ScratchformerModel, ScratchformerEncoderModel):
        model = make_model(model_class)
        with CaptureLogger(modeling_scratchformer.logger) as captured:
            model(input_ids=ids, decoder_position_ids=ids, num_items_in_batch=7, cache_position=None)
        assert f"{model_class.__name__}.forward ignores decoder_position_ids" in captured.out, captured.out
        assert "num_items_in_batch" not in captured.out and "cache_position" not in captured.out
        with CaptureLogger(modeling_scratchformer.logger) as captured:
            model(input_ids=ids)
        assert captured.out == ""


def test_static_cache_generation_builds_no_decoder_mask_on_the_host(monkeypatch):
    """generate() would make a 4-D causal mask at every step, outside the compiled step; the decoder masks the empty
    slots and the future itself, so none is made unless a decoder mask is given (which still goes through)."""
    import transformers.generation.utils as generation_utils

    model = make_model()
    ids = random_batch(2, 5)
    expected = model.generate(ids, max_new_tokens=5, do_sample=False)
    made = []
    original = generation_utils.create_masks_for_generate
    monkeypatch.setattr(generation_utils, "create_masks_for_generate",
                        lambda *args, **kwargs: made.append(1) or original(*args, **kwargs))
    monkeypatch.setattr("transformers.masking_utils.create_masks_for_generate",
                        generation_utils.create_masks_for_generate)
    static = model.generate(ids, max_new_tokens=5, do_sample=False, cache_implementation="static")
    assert torch.equal(static, expected) and made == []
    start = torch.full((2, 1), model.config.decoder_start_token_id)
    masked = model.generate(ids, decoder_input_ids=start, decoder_attention_mask=torch.ones(2, 1, dtype=torch.long),
                            max_new_tokens=5, do_sample=False, cache_implementation="static")
    assert torch.equal(masked, expected) and len(made) == 5  # one per step


def test_static_cache_step_refuses_a_mask_of_the_wrong_size():
    from transformers.cache_utils import EncoderDecoderCache, StaticCache

    model = make_model()
    ids = random_batch(2, 5)
    cache = EncoderDecoderCache(StaticCache(config=model.config, max_cache_len=8),
                                StaticCache(config=model.config, max_cache_len=5))
    with pytest.raises(ValueError, match="static cache of 8 slots"):
        model(input_ids=ids, decoder_input_ids=ids[:, :1], past_key_values=cache, use_cache=True,
              decoder_attention_mask=torch.ones(2, 1, 1, 3, dtype=torch.bool))


@pytest.mark.slow
def test_compiled_static_generation_equals_eager_generation():
    """torch.compile of the decoding step with a static cache (what makes small-model generation fast on a GPU,
    where Python and kernel launches dominate) gives the same tokens as eager decoding, on the CPU too."""
    from transformers import CompileConfig

    model = make_model(seed=6)
    ids = random_batch(1, 9)
    compile_config = CompileConfig(fullgraph=True, dynamic=False)
    compile_config._compile_all_devices = True  # generate compiles on GPUs only unless told otherwise
    eager = model.generate(ids, max_new_tokens=12, do_sample=False)
    for _ in range(2):  # the second call reuses the compiled graph
        compiled = model.generate(ids, max_new_tokens=12, do_sample=False, cache_implementation="static",
                                  compile_config=compile_config)
        assert torch.equal(compiled, eager)


def test_flex_attention_is_given_block_masks_and_the_other_kernels_the_boolean_mask():
    from torch.nn.attention.flex_attention import BlockMask

    from scratchformer.models.modeling_scratchformer import _flex_block_mask, _render

    may_attend = torch.ones(1, 1, 1, 5, dtype=torch.bool)
    may_attend[..., 3:] = False  # the last two keys are padding, for every row
    block_mask = _render("flex_attention", may_attend, 2, 4).mask
    assert isinstance(block_mask, BlockMask)
    assert block_mask.shape == (2, 1, 4, 5)  # made for every row and query (see _flex_block_mask)
    assert torch.equal(block_mask.to_dense().bool()[..., 0, 0], torch.ones(2, 1, dtype=torch.bool))
    eager = _render("eager", may_attend, 2, 4)
    assert eager.kernel == "eager" and torch.equal(eager.mask[0, 0, 0], torch.tensor([True, True, True, False, False]))
    assert _render("flex_attention", None, 2, 4).mask is None
    sdpa = _render("sdpa", may_attend, 2, 4)
    assert sdpa.kernel == "sdpa" and torch.equal(sdpa.mask, eager.mask) and not sdpa.is_causal
    # made on the meta device, where every host synchronisation raises: building it never stalls a GPU
    assert _flex_block_mask(may_attend.to("meta"), 2, 4).shape == (2, 1, 4, 5)
    # asked for the attention weights, a flex model runs the paper's formula: only it makes them
    model = make_model()
    model.set_attn_implementation("flex_attention")
    with torch.no_grad():
        out = model(input_ids=random_batch(2, 5), decoder_input_ids=random_batch(2, 3), output_attentions=True)
    assert [tuple(weights.shape) for weights in out.encoder_attentions] == [(2, 4, 5, 5)] * 2
    assert all(torch.allclose(weights.sum(-1), torch.ones(2, 4, 5), atol=1e-5) for weights in out.encoder_attentions)


def test_flex_attention_with_heads_too_narrow_for_a_gpu_is_refused_before_it_runs():
    """torch's flex kernel on a GPU needs a head dimension of at least 16 and fails deep inside compilation
    otherwise (seen on an H100); the stacks refuse it first, with the numbers. The CPU's kernel takes any width."""
    from scratchformer.models.modeling_scratchformer import _check_kernel

    config = tiny_config()  # d_model 32: 4 encoder heads of 8, 2 decoder heads of 16
    with pytest.raises(ValueError, match=r"flex_attention on cuda needs a head dimension of at least 16.*"
                                         r"encoder has d_model 32 / 4 heads = 8"):
        _check_kernel(config, "encoder", "flex_attention", torch.device("cuda"))
    _check_kernel(config, "decoder", "flex_attention", torch.device("cuda"))  # 16: runs
    _check_kernel(config, "encoder", "sdpa", torch.device("cuda"))  # only flex has the limit
    _check_kernel(config, "encoder", "flex_attention", torch.device("cpu"))
    model = make_model()
    model.set_attn_implementation("flex_attention")
    with torch.no_grad():  # on the CPU the narrow heads run
        assert torch.isfinite(model(input_ids=random_batch(2, 5), decoder_input_ids=random_batch(2, 3)).logits).all()


FLEX_DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.slow
@pytest.mark.parametrize("device", FLEX_DEVICES)
def test_flex_attention_agrees_with_sdpa(device):
    """flex attention (compiled by transformers on first use) gives sdpa's logits and greedy tokens, with padding in
    the source, a causal decoder and a cache (growing and static); and one layer given a mask rendered for flex.
    Tolerance 1e-4 (fp32: the kernels sum in different orders). Two heads a side: a head dimension of 16, the least
    flex's GPU kernel takes (the tiny config's encoder has 8, which only the CPU's runs)."""
    from scratchformer.models.modeling_scratchformer import _render
    from scratchformer.models.paper_scratchformer import padding_mask

    model = make_model(seed=7, encoder_attention_heads=2, decoder_attention_heads=2).to(device)
    ids = random_batch(2, 9).to(device)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    layer = model.model.encoder.layers[0]
    hidden = torch.randn(2, 9, 32, device=device)
    with torch.no_grad():
        reference = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :5]).logits
        reference_tokens = model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False)
        reference_layer = layer(hidden, _render("sdpa", padding_mask(mask), 2, 9))
        model.set_attn_implementation("flex_attention")
        flex = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :5]).logits
        flex_tokens = model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False)
        flex_static_tokens = model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False,
                                            cache_implementation="static", disable_compile=True)
        flex_layer = layer(hidden, _render("flex_attention", padding_mask(mask), 2, 9))
    assert model.config._attn_implementation == "flex_attention"
    assert torch.allclose(flex, reference, atol=1e-4)
    assert torch.equal(flex_tokens, reference_tokens)
    assert torch.equal(flex_static_tokens, reference_tokens)
    assert torch.allclose(flex_layer, reference_layer, atol=1e-4)


# ------------------------------------------------------------------------------------------------ training utilities


def _padded_batch(rows: list[dict]) -> dict:
    """Right-pad ``input_ids`` (with 0) and per-token ``labels`` (with -100); per-text labels are stacked."""
    length = max(len(row["input_ids"]) for row in rows)
    ids = torch.zeros(len(rows), length, dtype=torch.long)
    mask = torch.zeros(len(rows), length, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, :len(row["input_ids"])] = row["input_ids"]
        mask[i, :len(row["input_ids"])] = 1
    if rows[0]["labels"].dim() == 0:
        labels = torch.stack([row["labels"] for row in rows])
    else:
        labels = torch.full((len(rows), length), -100)
        for i, row in enumerate(rows):
            labels[i, :len(row["labels"])] = row["labels"]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _one_trainer_step(model_class, batch_size: int, accumulation: int, tmp_path) -> dict[str, torch.Tensor]:
    """The parameter change of one plain-SGD step of the Hugging Face Trainer (no loss function of ours) on four
    texts of 4, 7, 10 and 13 tokens: as ``batch_size`` x ``accumulation`` micro-batches."""
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)
    model = model_class(tiny_config(num_labels=3))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    generator = torch.Generator().manual_seed(3)
    rows = []
    for length in (4, 7, 10, 13):
        ids = torch.randint(5, 61, (length,), generator=generator)
        labels = {ScratchformerForConditionalGeneration: ids.clone(),
                  ScratchformerForTokenClassification: ids % 3,
                  ScratchformerForSequenceClassification: ids[0] % 3}[model_class]
        rows.append({"input_ids": ids, "labels": labels})
    args = TrainingArguments(tmp_path / f"{batch_size}x{accumulation}", per_device_train_batch_size=batch_size,
                             gradient_accumulation_steps=accumulation, max_steps=1, learning_rate=0.1, optim="sgd",
                             lr_scheduler_type="constant", max_grad_norm=1e9, report_to=[], use_cpu=True,
                             save_strategy="no", logging_strategy="no", disable_tqdm=True, seed=0)
    Trainer(model=model, args=args, train_dataset=rows, data_collator=_padded_batch).train()
    return {name: p.detach() - before[name] for name, p in model.named_parameters()}


@pytest.mark.parametrize("model_class", [ScratchformerForConditionalGeneration, ScratchformerForTokenClassification,
                                         ScratchformerForSequenceClassification])
def test_the_hf_trainer_with_gradient_accumulation_takes_the_big_batch_step(model_class, tmp_path):
    """Our forward takes ``**kwargs``, so the Trainer passes ``num_items_in_batch`` and stops dividing by the number
    of micro-batches itself: the token losses must use that count, or 2 micro-batches take a step twice as large.
    The sentence classifier has no token count and says so (``accepts_loss_kwargs = False``)."""
    one_batch = _one_trainer_step(model_class, 4, 1, tmp_path)
    accumulated = _one_trainer_step(model_class, 2, 2, tmp_path)
    largest = max(change.abs().max() for change in one_batch.values())
    assert largest > 1e-3  # the step moved the weights
    for name, change in one_batch.items():
        # float32 sums in another order: 1e-6, against changes up to ~1e-2 (a wrong scale differs by ~1e-2)
        assert torch.allclose(accumulated[name], change, atol=1e-6), name



@pytest.mark.parametrize("cached", [False, True], ids=["labels", "use_cache"])
def test_gradient_checkpointing_gives_the_same_gradients(cached):
    """With ``use_cache=True`` in training, checkpointing turns the cache off: it runs each layer again in the backward
    pass, which would fill a cache twice (whichever name this transformers version gives the cache)."""
    ids = random_batch()
    grads = []
    for checkpointing in (False, True):
        model = make_model().train()
        if checkpointing:
            model.activation_checkpointing_enable()
            assert model.model.encoder.layers[0].gradient_checkpointing
        if cached:
            out = model(input_ids=ids, decoder_input_ids=ids[:, :4], use_cache=True)
            cache = getattr(out, CACHE_NAME)
            assert cache is None if checkpointing else cache.get_seq_length() == 4
            out.logits.logsumexp(-1).mean().backward()
        else:
            model(input_ids=ids, labels=ids).loss.backward()
        grads.append([model.model.encoder.layers[0].self_attn.q_proj.weight.grad.clone(),
                      model.model.decoder.layers[0].self_attn.q_proj.weight.grad.clone()])
    for plain, checkpointed in zip(*grads):
        assert torch.allclose(plain, checkpointed, atol=1e-6)


@pytest.mark.slow
def test_torch_compile_of_the_forward(tmp_path):
    model = make_model()
    ids = random_batch(2, 6)
    with torch.no_grad():
        expected = model(input_ids=ids, decoder_input_ids=ids).logits
        compiled = torch.compile(model)
        actual = compiled(input_ids=ids, decoder_input_ids=ids).logits
    assert torch.allclose(actual, expected, atol=1e-4)
