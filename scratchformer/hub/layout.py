"""What an exported folder holds: the file names and the remote-code entries that :func:`~scratchformer.hub.export`
writes and :func:`~scratchformer.hub.check_folder` verifies, described once.

The ``auto_map`` of the model classes is the model core's (:data:`~scratchformer.models.modeling_scratchformer.
AUTO_MAP`); the export adds the tokenizer's entry. Nothing else that names code may travel with an export: a config
loaded from someone else's folder can carry foreign ``auto_map`` entries or ``custom_pipelines`` (e.g.
``"attacker/repo--modeling_evil.EvilModel"``), which ``trust_remote_code=True`` would run for Hub users.
"""

from __future__ import annotations

from ..models.modeling_scratchformer import AUTO_MAP

SCORES_FILE = "scores.json"
CODE_FILES = ("configuration_scratchformer.py", "modeling_scratchformer.py", "tokenization_scratchformer.py")
REQUIRED_FILES = ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
                  "tokenizer_config.json", "README.md", *CODE_FILES)
# Every name an export writes, and nothing else: the files that --overwrite may replace or remove.
EXPORT_FILES = frozenset({*REQUIRED_FILES, SCORES_FILE})

TOKENIZER_AUTO_MAP = ["tokenization_scratchformer.ScratchformerTokenizer", None]
# Keys other than auto_map through which a config can name code to run: an export never writes them.
DROPPED_CODE_KEYS = ("custom_pipelines",)


def config_auto_map() -> dict:
    """The exact ``auto_map`` of an exported ``config.json``: the model classes and the tokenizer."""
    return {**AUTO_MAP, "AutoTokenizer": TOKENIZER_AUTO_MAP}


def tokenizer_auto_map() -> dict:
    """The exact ``auto_map`` of an exported ``tokenizer_config.json``."""
    return {"AutoTokenizer": TOKENIZER_AUTO_MAP}
