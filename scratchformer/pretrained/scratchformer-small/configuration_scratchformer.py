"""Configuration of the Scratchformer encoder-decoder; the defaults are the paper's base model (section 6.1, Table 3).

``save_pretrained`` copies this file next to the weights (remote code): it imports nothing from ``scratchformer``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import os
import re

import transformers

# Hub users run this file with their transformers: name the floor (5.4, pyproject.toml) before an import below fails
# with a bare "cannot import name ..." (4.x). Standard library and transformers.__version__ only.
if tuple(int(part) for part in re.findall(r"\d+", transformers.__version__)[:2]) < (5, 4):
    raise ImportError(f"Scratchformer's model code (configuration_scratchformer.py) needs transformers >= 5.4, but "
                      f"transformers {transformers.__version__} is installed: pip install -U \"transformers>=5.4\"")

from transformers import GenerationConfig, PreTrainedConfig
from transformers.utils import logging

logger = logging.get_logger(__name__)

ACTIVATIONS = ("relu", "gelu")
POSITION_EMBEDDING_TYPES = ("sinusoidal", "learned", "rope")
# Version of the checkpoint layout (config fields, weight names) this code reads. Bump it when a change makes
# checkpoints unreadable by older code: the older code then refuses them with a clear error instead of misloading.
CHECKPOINT_FORMAT = 1


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _probability(value: object) -> bool:
    return _number(value) and 0.0 <= value < 1.0


# field -> (whether a value is valid, the rule a refusal states); the rules across fields are in validate_values
_RULES = {
    **dict.fromkeys(("vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
                     "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings"),
                    (lambda v: _number(v) and isinstance(v, int) and v > 0, "must be a positive integer")),
    **dict.fromkeys(("pre_layer_norm", "scale_embedding", "tie_word_embeddings", "attention_bias", "bias", "use_cache"),
                    (lambda v: isinstance(v, bool), "must be true or false (a boolean, not a string)")),
    **dict.fromkeys(("dropout", "attention_dropout", "activation_dropout"),
                    (_probability, "must be a probability in [0, 1)")),
    "classifier_dropout": (lambda v: v is None or _probability(v), "must be a probability in [0, 1), or null to use "
                           "dropout"),
    **dict.fromkeys(("layer_norm_eps", "init_std", "rope_theta"),
                    (lambda v: _number(v) and v > 0, "must be a finite positive number")),
    "activation_function": (lambda v: v in ACTIVATIONS, f"must be one of {ACTIVATIONS}"),
    "position_embedding_type": (lambda v: v in POSITION_EMBEDDING_TYPES, f"must be one of {POSITION_EMBEDDING_TYPES}"),
}
_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")

# keys besides the fields that a config takes on purpose: the base class's own (labels, dtype, attention kernel, the
# names a saved config.json carries) and generation settings, which transformers moves to the generation config
_KNOWN_KEYS = frozenset({"auto_map", "model_type", "num_labels", "torch_dtype", "name_or_path", "output_attentions",
                         "attn_implementation", "experts_implementation", "rope_scaling", "rope_parameters",
                         "per_layer_config", "_commit_hash", "_name_or_path", "_attn_implementation_autoset"})


def checkpoint_format_problem(version: object) -> str | None:
    """Why a ``scratchformer_format`` value cannot be read by this code, or ``None`` if it can. The one place of the
    format-version rule: the config checks itself with it, and so does the Hub export's folder check."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        return "must be a positive integer (the checkpoint format of config.json)"
    if version > CHECKPOINT_FORMAT:
        return (f"this config.json was written by a newer, incompatible scratchformer (checkpoint format {version}; "
                f"this code reads formats up to {CHECKPOINT_FORMAT}). Upgrade scratchformer, or load it with "
                "trust_remote_code=True in a process that does not import scratchformer, so that the checkpoint's "
                "own code is used")
    return None


class ScratchformerConfig(PreTrainedConfig):
    """Hyper-parameters of a Scratchformer model, named as BART's; the defaults are the paper's base model. The
    fields are described in docs/architecture.md ("The configuration")."""

    model_type = "scratchformer"
    keys_to_ignore_at_inference = ["past_key_values", "cache"]  # the cache, before and from transformers 5.24
    attribute_map = {"hidden_size": "d_model", "num_attention_heads": "encoder_attention_heads",
                     "num_hidden_layers": "encoder_layers", "intermediate_size": "encoder_ffn_dim"}

    vocab_size: int = 37000
    d_model: int = 512
    encoder_layers: int = 6
    decoder_layers: int = 6
    encoder_attention_heads: int = 8
    decoder_attention_heads: int = 8
    encoder_ffn_dim: int = 2048
    decoder_ffn_dim: int = 2048
    activation_function: str = "relu"
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    classifier_dropout: float | None = None
    max_position_embeddings: int = 512
    position_embedding_type: str = "sinusoidal"
    rope_theta: float = 10000.0
    pre_layer_norm: bool = False
    layer_norm_eps: float = 1e-5
    scale_embedding: bool = True
    tie_word_embeddings: bool = True
    attention_bias: bool = True
    bias: bool = True
    init_std: float = 0.02
    pad_token_id: int | None = 0
    bos_token_id: int | None = 1
    eos_token_id: int | None = 2
    decoder_start_token_id: int | None = 1
    use_cache: bool = True
    is_encoder_decoder: bool = True
    scratchformer_format: int = CHECKPOINT_FORMAT

    def __post_init__(self, **kwargs):
        self._check_extra_keys(kwargs)
        super().__post_init__(**kwargs)  # sets the alias names (hidden_size=... -> d_model) and extra kwargs
        self.validate_values()  # after it, so that values given under an alias are checked too

    def _check_extra_keys(self, kwargs: dict) -> None:
        """Refuse an alias given beside its field with another value (``d_model=32, hidden_size=64``); warn about
        an unknown key (``encoder_layer`` would be kept silently), naming the closest field."""
        fields = {field.name: field.default for field in dataclasses.fields(self)}
        for alias, value in kwargs.items():
            target = self.attribute_map.get(alias)
            if target is not None and getattr(self, target) != fields[target] and getattr(self, target) != value:
                raise ValueError(f"ScratchformerConfig got {target}={getattr(self, target)!r} and its alias "
                                 f"{alias}={value!r}: give one of them")
        generation_keys = set(getattr(GenerationConfig, "_get_default_generation_params", dict)())
        for key in kwargs:
            if key in fields or key in self.attribute_map or key in _KNOWN_KEYS or key in generation_keys:
                continue
            close = difflib.get_close_matches(key, [*fields, *self.attribute_map], n=1, cutoff=0.75)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            logger.warning(f"ScratchformerConfig got an unknown key {key!r}: it is kept as an attribute, but no part "
                           f"of the model reads it.{hint}")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """Load as usual, but a local folder without ``config.json`` is an error (transformers gives defaults)."""
        folder = str(pretrained_model_name_or_path)
        if os.path.isdir(folder) and not os.path.isfile(os.path.join(folder, kwargs.get("subfolder", ""), "config.json")):
            raise OSError(f"{folder} has no config.json: it is not a saved model or checkpoint (or it is incomplete)")
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    def to_json_file(self, json_file_path, use_diff: bool = True) -> None:
        """Write the config as transformers does, but atomically (transformers writes in place, and a full disk left
        a truncated ``config.json``), with the permissions a plain write would leave."""
        folder = os.path.dirname(os.path.abspath(json_file_path))  # beside it: os.replace stays on one file system
        temporary = os.path.join(folder, f".config.{os.urandom(6).hex()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666 less the umask
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as writer:
                writer.write(self.to_json_string(use_diff=use_diff))
                writer.flush()
                os.fsync(writer.fileno())
            if os.path.exists(json_file_path):
                os.chmod(temporary, os.stat(json_file_path).st_mode & 0o7777)
            os.replace(temporary, json_file_path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)
            raise

    def update(self, config_dict: dict) -> None:
        """Set several values, then check them together (``d_model`` and the heads may change at once); a refused
        update changes nothing. A plain assignment is checked once, by the model built from the config."""
        before = dict(self.__dict__)
        super().update(config_dict)
        try:
            self.validate_values()
        except ValueError:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise

    def validate_values(self) -> None:
        """Raise ``ValueError`` naming the field, its value and the rule it breaks."""

        def check(field: str, ok: bool, rule: str) -> None:
            if not ok:
                raise ValueError(f"ScratchformerConfig.{field}={getattr(self, field)!r} is invalid: {rule}")

        for field, (valid, rule) in _RULES.items():
            check(field, valid(getattr(self, field)), rule)
        for side in ("encoder", "decoder"):
            heads = f"{side}_attention_heads"
            check(heads, self.d_model % getattr(self, heads) == 0,
                  f"d_model={self.d_model} must be divisible by the number of heads")
            if self.position_embedding_type == "rope":
                check(heads, (self.d_model // getattr(self, heads)) % 2 == 0,
                      "rotary positions need an even head size (d_model / heads)")
        for field in _TOKEN_IDS:  # the decoder needs a first input token: decoder_start_token_id may not be None
            value = getattr(self, field)
            check(field, (value is None and field != "decoder_start_token_id") or (
                _number(value) and isinstance(value, int) and 0 <= value < self.vocab_size),
                  f"must be a token id in [0, vocab_size={self.vocab_size})")
        check("num_labels", self.num_labels >= 1, "a task head needs at least one label")
        problem = checkpoint_format_problem(self.scratchformer_format)
        check("scratchformer_format", problem is None, problem or "")
