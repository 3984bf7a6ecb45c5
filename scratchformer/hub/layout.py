"""What an exported folder holds, described once for :func:`~scratchformer.hub.export` and
:func:`~scratchformer.hub.check_folder`: file names, the sentence-transformers files, and what may name code.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from ..errors import require
from ..integrity import CHECKSUMS
from ..models import CODE_FILES
from ..models.modeling_scratchformer import AUTO_MAP

SCORES_FILE = "scores.json"
README = "README.md"
# sentence-transformers reads these: module 0 = the transformers model (AutoModel, the encoder), module 1 = pooling
POOLING_FOLDER = "1_Pooling"
SENTENCE_TRANSFORMERS_FILES = ("modules.json", "config_sentence_transformers.json", "sentence_bert_config.json",
                               f"{POOLING_FOLDER}/config.json")
# the encoder as ONNX (``--onnx``), where transformers.js and Optimum look for it
ONNX_FILE = "onnx/model.onnx"
# what ``--onnx`` needs: the exporter, its dynamo backend, and the runtime of the card's snippet
ONNX_MODULES = ("onnx", "onnxscript", "onnxruntime")
REQUIRED_FILES = ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
                  "tokenizer_config.json", README, *CODE_FILES, *SENTENCE_TRANSFORMERS_FILES)
# Every name an export writes besides card assets: what --overwrite may replace or remove, and its only subfolders.
EXPORT_FILES = frozenset({*REQUIRED_FILES, SCORES_FILE, ONNX_FILE, CHECKSUMS})  # + the weights' sha256
EXPORT_FOLDERS = frozenset(str(PurePosixPath(name).parent) for name in EXPORT_FILES if "/" in name)
# Files that earlier versions of the export wrote and this one does not: --overwrite removes them.
RETIRED_FILES = frozenset({"tokenization_scratchformer.py"})
# What every export, of any version, has written: a folder with all of these looks like an earlier export.
EXPORT_SIGNATURE = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", README,
                    *sorted({target.split(".")[0] + ".py" for target in AUTO_MAP.values()}))

# Keys other than auto_map through which a config can name code to run (a config loaded from someone else's folder
# may carry them, and trust_remote_code=True would run that code for Hub users): an export never writes them.
DROPPED_CODE_KEYS = ("custom_pipelines",)

# Files of a source folder that travel with its model card (docs/hub.md, "Export"); what libraries keep stays behind.
CARD_ASSET_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".json")
NOT_CARD_ASSETS = frozenset({*EXPORT_FILES, "special_tokens_map.json", "added_tokens.json", "chat_template.json",
                             "model.safetensors.index.json", "trainer_state.json", "train_results.json",
                             "eval_results.json", "all_results.json", "training_args.json", "preprocessor_config.json",
                             "processor_config.json", "adapter_config.json"})


def require_onnx() -> None:
    """Raise ``MissingDependencyError`` naming ``scratchformer[onnx]`` unless the ONNX export's packages are there."""
    require(*ONNX_MODULES, extra="onnx", for_what="the ONNX export (--onnx)")


def is_card_asset(name: str) -> bool:
    """Whether a top-level file of the source folder travels with the export's model card (see above)."""
    if name in NOT_CARD_ASSETS or name.startswith("."):
        return False
    stem = name.upper()
    return name.lower().endswith(CARD_ASSET_SUFFIXES) or stem.startswith(("LICENSE", "LICENCE", "NOTICE")) or (
        stem.endswith(("_LICENSE", "_LICENCE")))


def sentence_transformers_files(d_model: int, max_seq_length: int) -> dict[str, object]:
    """The content of :data:`SENTENCE_TRANSFORMERS_FILES` (encoder and mean pooling, as all-MiniLM-L6-v2 has it)."""
    return {
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": POOLING_FOLDER, "type": "sentence_transformers.models.Pooling"},
        ],
        "config_sentence_transformers.json": {"model_type": "SentenceTransformer", "prompts": {},
                                              "default_prompt_name": None, "similarity_fn_name": "cosine"},
        "sentence_bert_config.json": {"max_seq_length": max_seq_length, "do_lower_case": False},
        f"{POOLING_FOLDER}/config.json": {
            "word_embedding_dimension": d_model, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
            "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False, "include_prompt": True},
    }
