"""Hub-ready export and upload: ``scratchformer export MODEL OUT`` and ``scratchformer push MODEL REPO_ID``.

:func:`export` writes a folder that loads for someone who has only ``torch`` and ``transformers``:

- ``model.safetensors`` (never a pickle), ``config.json`` whose ``auto_map`` names ``AutoConfig``, ``AutoModel`` (the
  encoder, for embeddings and ``pipeline("feature-extraction")``), ``AutoModelForSeq2SeqLM`` and ``AutoTokenizer``;
- the code files ``configuration_scratchformer.py``, ``modeling_scratchformer.py`` and
  ``tokenization_scratchformer.py``, flat, importing only torch, transformers, the standard library and each other
  (single-dot relative imports);
- ``tokenizer.json`` + ``tokenizer_config.json``, ``generation_config.json``;
- ``README.md``: a model card with YAML metadata (library, license, tags, pipeline tag, datasets, metrics and a
  ``model-index`` of the measured scores), usage snippets for generation and embeddings, and the scores table;
- ``scores.json`` when scores were given (so that re-exporting the folder keeps them).

Scores come from ``scores=`` or from ``scores.json`` in the source folder, in this form (see ``docs/hub.md``)::

    {"results": [{"task": "translation", "dataset": "kjv-web", "dataset_name": "KJV -> WEB", "split": "test",
                  "metrics": {"bleu": 21.4, "chrf": 48.9}, "source": "sacrebleu 2.5 (13a)"}]}

:func:`push` exports into a temporary folder and uploads it with ``huggingface_hub`` in one commit; the token and the
endpoint come from ``HF_TOKEN`` / ``HF_ENDPOINT`` (or the stored login) unless given. :func:`check_folder` is the
check that every export ends with; it also tells what is wrong with a folder made by hand.
"""

from __future__ import annotations

import ast
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import HubError
from ..loading import check_tokenizer_matches
from ..models.configuration_scratchformer import checkpoint_format_problem
from ..models.modeling_scratchformer import AUTO_MAP, PICKLE_SUFFIXES, safetensors_problem

SCORES_FILE = "scores.json"
CODE_FILES = ("configuration_scratchformer.py", "modeling_scratchformer.py", "tokenization_scratchformer.py")
REQUIRED_FILES = ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
                  "tokenizer_config.json", "README.md", *CODE_FILES)
TOKENIZER_AUTO_MAP = ["tokenization_scratchformer.ScratchformerTokenizer", None]
ALLOWED_IMPORTS = frozenset({"torch", "transformers", *sys.stdlib_module_names})
SCORE_KEYS = {"task", "task_name", "dataset", "dataset_name", "split", "config", "metrics", "source", "source_url"}
DEFAULT_TAGS = ("scratchformer", "transformer", "encoder-decoder", "attention-is-all-you-need", "custom_code",
                "text2text-generation", "feature-extraction")
DEFAULT_EXAMPLE = "Attention is all you need."


# ---------------------------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------------------------


def export(
    model_or_folder: Any,
    out_dir: str | os.PathLike,
    tokenizer: Any = None,
    *,
    scores: str | os.PathLike | Mapping | Sequence | None = None,
    repo_id: str | None = None,
    model_name: str | None = None,
    license: str = "apache-2.0",
    language: str | list[str] | None = None,
    datasets: list[str] | None = None,
    tags: Sequence[str] = (),
    pipeline_tag: str = "text2text-generation",
    description: str | None = None,
    example_text: str = DEFAULT_EXAMPLE,
    overwrite: bool = False,
) -> Path:
    """Write a self-contained, Hub-ready folder for a ``ScratchformerForConditionalGeneration``.

    Args:
        model_or_folder: the model, or a folder saved with ``save_pretrained`` (safetensors weights, optionally the
            tokenizer files and ``scores.json``).
        out_dir: the folder to write; it must not exist or be empty, unless ``overwrite``.
        tokenizer: a ``ScratchformerTokenizer`` or a folder holding one; by default the tokenizer of the source folder.
        scores: measured scores (a path to a JSON file, or its content, see the module docstring); by default
            ``scores.json`` of the source folder, if any.
        repo_id: the Hub repo the folder is meant for, used in the card's snippets (``push`` passes it).
        model_name / license / language / datasets / tags / pipeline_tag / description / example_text: model card
            contents. ``datasets`` defaults to the datasets named in the scores.
        overwrite: replace an existing non-empty ``out_dir``.

    Returns the folder. Raises :class:`HubError` when something is missing or inconsistent.
    """
    out_dir = Path(out_dir)
    source = Path(model_or_folder) if isinstance(model_or_folder, (str, os.PathLike)) else None
    if source is not None and out_dir.resolve() == source.resolve():
        raise HubError(f"the export folder {out_dir} is the source folder: choose another one")
    if out_dir.exists() and not out_dir.is_dir():
        raise HubError(f"{out_dir} exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise HubError(f"{out_dir} is not empty: choose a new folder or pass overwrite=True (--overwrite)")

    model = _load_model(source) if source is not None else model_or_folder
    if type(model).__name__ != "ScratchformerForConditionalGeneration":
        raise HubError(f"export needs a ScratchformerForConditionalGeneration (encoder + decoder + LM head), got "
                       f"{type(model).__name__}")
    tokenizer = _load_tokenizer(tokenizer, source)
    check_tokenizer_matches(tokenizer, model.config, error=HubError)
    if scores is None and source is not None and (source / SCORES_FILE).is_file():
        scores = source / SCORES_FILE
    results = load_scores(scores) if scores is not None else []

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        _add_tokenizer_to_auto_map(staging / "config.json")
        if results:
            (staging / SCORES_FILE).write_text(json.dumps({"results": results}, indent=2) + "\n", encoding="utf-8")
        card = model_card(
            model, results, repo_id=repo_id, model_name=model_name or _default_name(repo_id, out_dir),
            license=license, language=language, datasets=datasets, tags=tags, pipeline_tag=pipeline_tag,
            description=description, example_text=example_text,
        )
        card.save(staging / "README.md")
        check_folder(staging, where=out_dir)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return out_dir


def _load_model(source: Path) -> Any:
    from ..models import ScratchformerForConditionalGeneration

    if not source.is_dir():
        raise HubError(f"{source} is not a folder: pass a folder saved with save_pretrained, or the model itself")
    problem = safetensors_problem(source)
    if problem:
        raise HubError(problem)
    try:
        model, info = ScratchformerForConditionalGeneration.from_pretrained(source, output_loading_info=True)
    except (OSError, ValueError) as error:
        raise HubError(f"cannot load the model in {source}: {error}") from error
    if info.get("missing_keys"):
        raise HubError(f"{source}/model.safetensors lacks weights of the encoder-decoder: "
                       f"{sorted(info['missing_keys'])[:5]}... (an encoder-only checkpoint cannot be exported)")
    return model.eval()


def _load_tokenizer(tokenizer: Any, source: Path | None) -> Any:
    from ..models import ScratchformerTokenizer

    if tokenizer is None and source is not None and (source / "tokenizer.json").is_file():
        tokenizer = source
    if tokenizer is None:
        raise HubError("no tokenizer: pass tokenizer= (--tokenizer) or put tokenizer.json in the model folder; the "
                       "exported folder must hold one for Hub users")
    if isinstance(tokenizer, (str, os.PathLike)):
        if not (Path(tokenizer) / "tokenizer.json").is_file():
            raise HubError(f"{tokenizer} has no tokenizer.json")
        return ScratchformerTokenizer.from_pretrained(tokenizer)
    if type(tokenizer).__name__ != "ScratchformerTokenizer":
        raise HubError(f"the tokenizer must be a ScratchformerTokenizer (Hub users load it through its auto_map), got "
                       f"{type(tokenizer).__name__}")
    return tokenizer


def _add_tokenizer_to_auto_map(config_path: Path) -> None:
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["auto_map"] = {**config.get("auto_map", {}), **AUTO_MAP, "AutoTokenizer": TOKENIZER_AUTO_MAP}
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _default_name(repo_id: str | None, out_dir: Path) -> str:
    return repo_id.split("/")[-1] if repo_id else out_dir.name


# ---------------------------------------------------------------------------------------------------------------
# Scores and model card
# ---------------------------------------------------------------------------------------------------------------


def load_scores(scores: str | os.PathLike | Mapping | Sequence) -> list[dict]:
    """Read and validate measured scores: ``{"results": [...]}`` or the list itself, from a JSON file or in memory.

    Each result: ``task`` (Hub task id, e.g. ``"translation"``), ``dataset`` (dataset id), ``metrics``
    (``{"bleu": 21.4, ...}``) and optionally ``task_name``, ``dataset_name``, ``split``, ``config``, ``source``
    (how it was measured), ``source_url``.
    """
    where = "scores"
    if isinstance(scores, (str, os.PathLike)):
        where = str(scores)
        try:
            scores = json.loads(Path(scores).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise HubError(f"the scores file {where} does not exist") from None
        except json.JSONDecodeError as error:
            raise HubError(f"the scores file {where} is not valid JSON: {error}") from None
    results = scores.get("results") if isinstance(scores, Mapping) else scores
    if not isinstance(results, Sequence) or isinstance(results, str):
        raise HubError(f"{where}: expected {{\"results\": [...]}} or a list of results")
    normalized = []
    for i, result in enumerate(results):
        at = f"{where}: results[{i}]"
        if not isinstance(result, Mapping):
            raise HubError(f"{at} must be an object")
        if unknown := sorted(set(result) - SCORE_KEYS):
            raise HubError(f"{at} has unknown keys {unknown}; allowed: {sorted(SCORE_KEYS)}")
        for key in sorted(SCORE_KEYS - {"metrics"}):
            if key in ("task", "dataset") and not result.get(key):
                raise HubError(f"{at} needs {key!r}")
            if result.get(key) is not None and not isinstance(result[key], str):
                raise HubError(f"{at}.{key} must be a string, got {result[key]!r}")
        metrics = result.get("metrics")
        if not isinstance(metrics, Mapping) or not metrics:
            raise HubError(f"{at} needs 'metrics', an object like {{\"bleu\": 21.4}}")
        for name, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise HubError(f"{at}.metrics.{name} must be a finite number, got {value!r}")
        normalized.append({key: result[key] for key in sorted(result) if result[key] is not None})
    return normalized


def model_card(
    model: Any,
    results: list[dict],
    *,
    repo_id: str | None,
    model_name: str,
    license: str,
    language: str | list[str] | None,
    datasets: list[str] | None,
    tags: Sequence[str],
    pipeline_tag: str,
    description: str | None,
    example_text: str,
) -> Any:
    """The ``README.md`` of an export, as a ``huggingface_hub.ModelCard`` (YAML metadata + markdown)."""
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    eval_results = [
        EvalResult(
            task_type=result["task"], task_name=result.get("task_name"), dataset_type=result["dataset"],
            dataset_name=result.get("dataset_name", result["dataset"]), dataset_split=result.get("split"),
            dataset_config=result.get("config"), metric_type=metric, metric_name=metric, metric_value=value,
            # the Hub wants a source name only together with a URL; without one, "source" stays in the table
            source_name=result.get("source") if result.get("source_url") else None, source_url=result.get("source_url"),
        )
        for result in results
        for metric, value in result["metrics"].items()
    ]
    if datasets is None:
        datasets = sorted({result["dataset"] for result in results}) or None
    data = ModelCardData(
        model_name=model_name,
        license=license,
        language=language,
        library_name="transformers",
        pipeline_tag=pipeline_tag,
        tags=list(dict.fromkeys([*DEFAULT_TAGS, *tags])),
        datasets=datasets,
        metrics=sorted({metric for result in results for metric in result["metrics"]}) or None,
        eval_results=eval_results or None,
    )
    body = _card_body(model, results, repo_id or "path/to/this/folder", model_name, description, example_text)
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def _card_body(model: Any, results: list[dict], where: str, name: str, description: str | None,
               example_text: str) -> str:
    c = model.config
    positions = {"sinusoidal": "sinusoidal (as in the paper)", "learned": "learned", "rope": "rotary (RoPE)"}
    norm = "pre-LayerNorm" if c.pre_layer_norm else "post-LayerNorm (as in the paper)"
    millions = model.num_parameters() / 1e6
    text = json.dumps(example_text)
    intro = description or (
        "An encoder-decoder Transformer in the architecture of Vaswani et al. (2017), *Attention Is All You Need*, "
        "written from scratch in PyTorch as a Hugging Face model (scratchformer).")
    lines = [
        f"# {name}",
        "",
        intro,
        "",
        "| | |",
        "|---|---|",
        f"| parameters | {millions:.2f} M |",
        f"| layers (encoder / decoder) | {c.encoder_layers} / {c.decoder_layers} |",
        f"| d_model / heads / d_ff | {c.d_model} / {c.encoder_attention_heads} / {c.encoder_ffn_dim} |",
        f"| positions | {positions.get(c.position_embedding_type, c.position_embedding_type)} |",
        f"| normalisation | {norm} |",
        f"| shared embeddings | {'yes' if c.tie_word_embeddings else 'no'} |",
        f"| vocabulary | {c.vocab_size} tokens (BPE, `tokenizer.json`) |",
        "",
        "The code ships with the weights (`configuration_scratchformer.py`, `modeling_scratchformer.py`, "
        "`tokenization_scratchformer.py`): loading needs only `torch` and `transformers` and "
        "`trust_remote_code=True`, which runs that code. Read it first, and pin `revision=` to a commit you have "
        "reviewed. The weights are in safetensors only.",
        "",
        "## Generation",
        "",
        "```python",
        "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer",
        "",
        f'tokenizer = AutoTokenizer.from_pretrained("{where}", trust_remote_code=True)',
        f'model = AutoModelForSeq2SeqLM.from_pretrained("{where}", trust_remote_code=True)',
        f"inputs = tokenizer([{text}], return_tensors=\"pt\")",
        "output = model.generate(**inputs, max_new_tokens=64, num_beams=4)",
        "print(tokenizer.batch_decode(output, skip_special_tokens=True))",
        "```",
        "",
        "## Embeddings",
        "",
        "`AutoModel` is the encoder alone: its output is the contextual embedding of every token.",
        "",
        "```python",
        "import torch",
        "from transformers import AutoModel, AutoTokenizer",
        "",
        f'tokenizer = AutoTokenizer.from_pretrained("{where}", trust_remote_code=True)',
        f'encoder = AutoModel.from_pretrained("{where}", trust_remote_code=True)',
        f'batch = tokenizer([{text}, "Another sentence."], padding=True, return_tensors="pt")',
        "with torch.no_grad():",
        "    states = encoder(**batch).last_hidden_state  # (batch, tokens, d_model)",
        'mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)',
        "sentence_embeddings = (states * mask).sum(1) / mask.sum(1)  # mean over the real tokens",
        "```",
        "",
        "The same vectors through a pipeline, or as sentence embeddings with `sentence-transformers` (mean pooling):",
        "",
        "```python",
        "from transformers import pipeline",
        "",
        f'extractor = pipeline("feature-extraction", model="{where}", trust_remote_code=True)',
        f"token_vectors = extractor({text})[0]  # one vector per token",
        "",
        "from sentence_transformers import SentenceTransformer",
        "",
        f'sentences = SentenceTransformer("{where}", trust_remote_code=True)',
        f"vectors = sentences.encode([{text}])",
        "```",
        "",
        "## Evaluation",
        "",
    ]
    if results:
        lines += ["| task | dataset | split | metric | value | how |", "|---|---|---|---|---|---|"]
        for result in results:
            for metric, value in result["metrics"].items():
                lines.append(
                    f"| {result.get('task_name', result['task'])} | {result.get('dataset_name', result['dataset'])} "
                    f"| {result.get('split', '')} | {metric} | {value:g} | {result.get('source', '')} |")
    else:
        lines.append("No measured scores were provided for this checkpoint.")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# Checking a folder
# ---------------------------------------------------------------------------------------------------------------


def check_folder(folder: str | os.PathLike, where: str | os.PathLike | None = None) -> None:
    """Raise :class:`HubError` listing every reason ``folder`` would not load for a Hub user.

    Checks: the required files; no pickled files; ``config.json`` and ``tokenizer_config.json`` parse, name
    ``scratchformer`` and carry the auto_map entries, whose code files exist; the checkpoint format is one this code
    reads; every ``*.safetensors`` file has a valid header and size; the code files import only torch, transformers,
    the standard library and sibling files (single-dot). ``where`` is the name used in the message.
    """

    folder = Path(folder)
    problems = [f"{name} is missing" for name in REQUIRED_FILES if not (folder / name).is_file()]
    problems += [f"{path.relative_to(folder)} is a pickle-based file: only safetensors may be shipped"
                 for path in sorted(folder.rglob("*")) if path.suffix in PICKLE_SUFFIXES]
    config = _read_json(folder / "config.json", problems)
    if config is not None:
        if config.get("model_type") != "scratchformer":
            problems.append(f"config.json: model_type is {config.get('model_type')!r}, not 'scratchformer'")
        fmt = config.get("scratchformer_format", 1)
        if checkpoint_format_problem(fmt):
            problems.append(f"config.json: scratchformer_format={fmt!r}: {checkpoint_format_problem(fmt)}")
        auto_map = config.get("auto_map") or {}
        for auto_class, target in {**AUTO_MAP, "AutoTokenizer": TOKENIZER_AUTO_MAP}.items():
            if auto_map.get(auto_class) != target:
                problems.append(f"config.json: auto_map[{auto_class!r}] is {auto_map.get(auto_class)!r}, "
                                f"expected {target!r}")
    tokenizer_config = _read_json(folder / "tokenizer_config.json", problems)
    if tokenizer_config is not None:
        entry = (tokenizer_config.get("auto_map") or {}).get("AutoTokenizer")
        if entry != TOKENIZER_AUTO_MAP:
            problems.append(f"tokenizer_config.json: auto_map['AutoTokenizer'] is {entry!r}, "
                            f"expected {TOKENIZER_AUTO_MAP!r}")
    for path in sorted(folder.glob("*.safetensors")):
        problems += _safetensors_problems(path)
    siblings = {path.stem for path in folder.glob("*.py")}
    for path in sorted(folder.glob("*.py")):
        problems += _import_problems(path, siblings)
    if problems:
        raise HubError(f"{where or folder} would not load for Hub users:\n  - " + "\n  - ".join(problems))


def _read_json(path: Path, problems: list[str]) -> dict | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        problems.append(f"{path.name} is not valid JSON: {error}")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path.name} must hold a JSON object")
        return None
    return data


def _safetensors_problems(path: Path) -> list[str]:
    """Header and size check (the whole data area must be described): catches truncated and garbled files."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            handle.keys()
    except Exception as error:  # SafetensorError, OSError
        return [f"{path.name} cannot be read (truncated or corrupted?): {error}"]
    return []


def _import_problems(path: Path, siblings: set[str]) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=path.name)
    except SyntaxError as error:
        return [f"{path.name} does not parse: {error}"]
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        elif isinstance(node, ast.ImportFrom):
            if node.level != 1 or not node.module or "." in node.module:
                problems.append(f"{path.name}:{node.lineno}: only `from .sibling import name` loads as remote code")
            elif node.module not in siblings:
                problems.append(f"{path.name}:{node.lineno}: imports .{node.module}, but {node.module}.py is missing")
            continue
        else:
            continue
        for module in modules:
            if module.split(".")[0] not in ALLOWED_IMPORTS:
                problems.append(f"{path.name}:{node.lineno}: imports {module!r}, which Hub users may not have "
                                "(allowed: torch, transformers, the standard library)")
    return problems


# ---------------------------------------------------------------------------------------------------------------
# Upload
# ---------------------------------------------------------------------------------------------------------------


def push(
    model_or_folder: Any,
    repo_id: str,
    tokenizer: Any = None,
    *,
    private: bool = False,
    commit_message: str | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    **export_options: Any,
) -> Any:
    """Export ``model_or_folder`` (see :func:`export`) and upload the folder to ``repo_id`` in one commit.

    The token defaults to ``HF_TOKEN`` (or the stored ``hf auth login``) and the endpoint to ``HF_ENDPOINT`` (or
    https://huggingface.co). The repo is created if needed (``private`` applies only then). Returns the
    ``huggingface_hub.CommitInfo`` (``.commit_url``, ``.oid``). Raises :class:`HubError` for a missing token, a
    refused request or an unreachable Hub.
    """
    from huggingface_hub import HfApi, constants, get_token
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    endpoint = endpoint or constants.ENDPOINT
    token = token or get_token()
    if not token:
        raise HubError("no Hugging Face token: set HF_TOKEN to a token with write access "
                       "(https://huggingface.co/settings/tokens) or run `hf auth login`")
    from .. import __version__

    commit_message = commit_message or f"Upload Scratchformer model, code and tokenizer (scratchformer {__version__})"
    with tempfile.TemporaryDirectory(prefix="scratchformer-push-") as tmp:
        folder = export(model_or_folder, Path(tmp) / repo_id.split("/")[-1], tokenizer, repo_id=repo_id,
                        **export_options)
        api = HfApi(endpoint=endpoint, token=token)
        step = f"creating the repository {repo_id}"
        try:
            repo = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
            step = f"uploading to {repo.repo_id} (the repository exists; nothing was committed)"
            return api.upload_folder(repo_id=repo.repo_id, folder_path=folder, repo_type="model",
                                     commit_message=commit_message)
        except OfflineModeIsEnabled as error:
            raise HubError("HF_HUB_OFFLINE is set, so uploads are disabled: unset it to push") from error
        except HfHubHTTPError as error:
            status = error.response.status_code if error.response is not None else "?"
            hint = {401: "the token was rejected: check HF_TOKEN",
                    403: "the token may not write there: use a token with write access to that namespace"}.get(
                status, "see the server message")
            server = f": {error.server_message}" if error.server_message else ""
            raise HubError(f"the Hub at {endpoint} refused {step} (HTTP {status}{server}); {hint}") from error
        except Exception as error:
            if not _is_network_error(error):
                raise
            raise HubError(f"cannot reach the Hub at {endpoint} while {step}: {error}. Check the network "
                           "connection, proxy settings and HF_ENDPOINT") from error


def _is_network_error(error: BaseException) -> bool:
    """Connection refused, DNS failure, timeouts: OSError, or the http client's transport errors (by class name, so
    this does not depend on which http library huggingface_hub uses)."""
    names = {cls.__name__ for cls in type(error).__mro__}
    return isinstance(error, OSError) or bool(names & {"TransportError", "ConnectionError", "TimeoutException"})
