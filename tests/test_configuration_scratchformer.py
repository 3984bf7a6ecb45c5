"""The configuration: the paper's defaults, validation with clear messages, and the HF round trip."""

from __future__ import annotations

import pytest
from transformers import AutoConfig

from scratchformer import ScratchformerConfig


def test_defaults_are_the_paper_base_model():
    config = ScratchformerConfig()
    assert (config.encoder_layers, config.decoder_layers) == (6, 6)
    assert config.d_model == 512
    assert (config.encoder_attention_heads, config.decoder_attention_heads) == (8, 8)
    assert (config.encoder_ffn_dim, config.decoder_ffn_dim) == (2048, 2048)
    assert config.dropout == 0.1
    assert config.activation_function == "relu"
    assert config.position_embedding_type == "sinusoidal"
    assert config.pre_layer_norm is False  # post-LN, as in the paper
    assert config.scale_embedding is True
    assert config.tie_word_embeddings is True
    assert config.is_encoder_decoder is True


def test_attribute_map_lets_generic_code_find_the_sizes():
    config = ScratchformerConfig(d_model=64, encoder_attention_heads=4, encoder_layers=3)
    assert config.hidden_size == 64
    assert config.num_attention_heads == 4
    assert config.num_hidden_layers == 3


@pytest.mark.parametrize(
    "field, value, rule",
    [
        ("d_model", 100, "divisible"),  # 100 % 8 heads
        ("d_model", 0, "positive integer"),
        ("vocab_size", -5, "positive integer"),
        ("encoder_layers", 0, "positive integer"),
        ("decoder_ffn_dim", 2.5, "positive integer"),
        ("dropout", 1.0, "[0, 1)"),
        ("attention_dropout", -0.1, "[0, 1)"),
        ("activation_dropout", 1.5, "[0, 1)"),
        ("activation_function", "tanh", "relu"),
        ("position_embedding_type", "alibi", "sinusoidal"),
        ("pad_token_id", 37000, "vocab_size"),
        ("eos_token_id", -1, "vocab_size"),
        ("layer_norm_eps", 0.0, "positive number"),
        ("init_std", -1.0, "positive number"),
        ("max_position_embeddings", 0, "positive integer"),
        ("init_std", float("inf"), "finite positive number"),  # NaN weights
        ("layer_norm_eps", float("inf"), "finite positive number"),  # the same output for every input
        ("rope_theta", float("inf"), "finite positive number"),
        ("rope_theta", float("nan"), "finite positive number"),
    ],
)
def test_invalid_values_raise_a_value_error_naming_field_value_and_rule(field, value, rule):
    with pytest.raises(ValueError) as error:
        ScratchformerConfig(**{field: value})
    message = str(error.value)
    assert rule in message
    assert repr(value) in message or str(value) in message
    # the message names the offending field (for divisibility, the field is the head count it conflicts with)
    assert field in message or "attention_heads" in message


def test_rope_needs_an_even_head_size():
    with pytest.raises(ValueError, match="even head size"):
        ScratchformerConfig(d_model=24, encoder_attention_heads=8, decoder_attention_heads=8,
                            position_embedding_type="rope")


def test_positional_arguments_are_rejected():
    with pytest.raises((TypeError, ValueError)):
        ScratchformerConfig(100)


def test_save_and_load_round_trip(tmp_path):
    config = ScratchformerConfig(d_model=64, encoder_attention_heads=4, decoder_attention_heads=2,
                                 position_embedding_type="rope", pre_layer_norm=True, tie_word_embeddings=False)
    config.save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert type(loaded) is ScratchformerConfig
    for key in ("d_model", "encoder_attention_heads", "decoder_attention_heads", "position_embedding_type",
                "pre_layer_norm", "tie_word_embeddings"):
        assert getattr(loaded, key) == getattr(config, key)


def test_a_saved_invalid_config_fails_on_load(tmp_path):
    import json

    ScratchformerConfig().save_pretrained(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    data["dropout"] = 3
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="dropout"):
        AutoConfig.from_pretrained(tmp_path)


def test_values_given_under_their_hugging_face_alias_are_checked_too():
    config = ScratchformerConfig(hidden_size=64, num_attention_heads=4)
    assert (config.d_model, config.encoder_attention_heads) == (64, 4)
    with pytest.raises(ValueError, match="divisible by the number of heads"):
        ScratchformerConfig(hidden_size=30, num_attention_heads=4)


@pytest.mark.parametrize("field", ["pre_layer_norm", "bias"])
@pytest.mark.parametrize("value", ["false", "no", 0, 1, None])
def test_flags_must_be_booleans_not_strings(field, value):
    with pytest.raises(ValueError, match=f"{field}=.* must be true or false"):
        ScratchformerConfig(**{field: value})


def test_a_string_boolean_in_config_json_is_refused_not_read_as_true(tmp_path):
    import json

    ScratchformerConfig().save_pretrained(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    data["pre_layer_norm"] = "false"
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="pre_layer_norm='false' is invalid"):
        AutoConfig.from_pretrained(tmp_path)


def test_an_assigned_value_is_checked_when_a_model_is_built_from_the_config():
    """A plain assignment is not checked (transformers copies and renames fields one by one); the model checks its
    config once, before a layer is built, naming the field and the rule."""
    from scratchformer import ScratchformerModel

    config = ScratchformerConfig(vocab_size=61, d_model=32, encoder_layers=1, decoder_layers=1)
    config.d_model = 30
    with pytest.raises(ValueError, match=r"encoder_attention_heads=8 is invalid: d_model=30 must be divisible"):
        ScratchformerModel(config)
    config.hidden_size = 64  # an alias name, set the same way
    config.pre_layer_norm = "no"
    with pytest.raises(ValueError, match="pre_layer_norm='no' is invalid: must be true or false"):
        ScratchformerModel(config)
    config.pre_layer_norm = True
    assert ScratchformerModel(config).config.d_model == 64


def test_update_checks_the_values_together_and_is_all_or_nothing():
    config = ScratchformerConfig()
    config.update({"d_model": 30, "encoder_attention_heads": 5, "decoder_attention_heads": 3})
    assert (config.d_model, config.encoder_attention_heads, config.decoder_attention_heads) == (30, 5, 3)
    before = config.to_dict()
    with pytest.raises(ValueError, match="decoder_attention_heads"):
        config.update({"dropout": 0.3, "decoder_attention_heads": 4})
    assert config.to_dict() == before


def test_a_folder_without_config_json_is_an_error_not_the_defaults(tmp_path):
    with pytest.raises(OSError, match="has no config.json"):
        ScratchformerConfig.from_pretrained(tmp_path)


def test_an_alias_beside_its_field_with_another_value_is_refused():
    with pytest.raises(ValueError, match="d_model=32 and its alias hidden_size=64"):
        ScratchformerConfig(d_model=32, hidden_size=64, encoder_attention_heads=4, decoder_attention_heads=4)
    agreeing = ScratchformerConfig(d_model=64, hidden_size=64, encoder_attention_heads=4, decoder_attention_heads=4)
    assert agreeing.d_model == 64
    assert ScratchformerConfig(hidden_size=64, encoder_attention_heads=4, decoder_attention_heads=4).d_model == 64


def test_an_unknown_key_is_warned_about_naming_the_closest_field():
    from transformers.testing_utils import CaptureLogger
    from transformers.utils import logging

    logger = logging.get_logger("scratchformer.models.configuration_scratchformer")
    with CaptureLogger(logger) as captured:
        config = ScratchformerConfig(encoder_layer=3)
    assert "unknown key 'encoder_layer'" in captured.out and "Did you mean 'encoder_layers'?" in captured.out
    assert config.encoder_layers == 6  # kept as it was: the warning is the point
    with CaptureLogger(logger) as captured:  # the base class's keys and generation settings are not unknown
        ScratchformerConfig(num_labels=3, max_length=20, num_beams=2, hidden_size=64, encoder_attention_heads=4,
                            decoder_attention_heads=4)
    assert "unknown key" not in captured.out, captured.out
