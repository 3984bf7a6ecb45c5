"""The model card of an export (``README.md``) and the measured scores it reports.

Scores come from ``scores=`` or from ``scores.json`` in the source folder, in this form (see ``docs/hub.md``)::

    {"results": [{"task": "translation", "dataset": "kjv-web", "dataset_name": "KJV -> WEB", "split": "test",
                  "metrics": {"bleu": 21.4, "chrf": 48.9}, "source": "sacrebleu 2.5 (13a)"}]}

The card is YAML metadata (library, license, tags, pipeline tag, datasets, metrics and a ``model-index`` of the
scores) followed by the architecture, usage snippets for generation and embeddings, and the scores table.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from string import Template
from typing import Any

from ..errors import HubError

SCORE_KEYS = {"task", "task_name", "dataset", "dataset_name", "split", "config", "metrics", "source", "source_url"}
REQUIRED_SCORE_KEYS = ("task", "dataset")
DEFAULT_TAGS = ("scratchformer", "transformer", "encoder-decoder", "attention-is-all-you-need", "custom_code",
                "text2text-generation", "feature-extraction")
DEFAULT_EXAMPLE = "Attention is all you need."
DEFAULT_DESCRIPTION = (
    "An encoder-decoder Transformer in the architecture of Vaswani et al. (2017), *Attention Is All You Need*, "
    "written from scratch in PyTorch as a Hugging Face model (scratchformer).")
POSITIONS = {"sinusoidal": "sinusoidal (as in the paper)", "learned": "learned", "rope": "rotary (RoPE)"}

# The usage sections of the card; $where is the repo id (or a placeholder), $text the example text as a literal.
USAGE = Template('''\
The code ships with the weights (`configuration_scratchformer.py`, `modeling_scratchformer.py`, \
`tokenization_scratchformer.py`): loading needs only `torch` and `transformers` and `trust_remote_code=True`, which \
runs that code. Read it first, and pin `revision=` to a commit you have reviewed. The weights are in safetensors only.

## Generation

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("$where", trust_remote_code=True)
model = AutoModelForSeq2SeqLM.from_pretrained("$where", trust_remote_code=True)
inputs = tokenizer([$text], return_tensors="pt")
output = model.generate(**inputs, max_new_tokens=64, num_beams=4)
print(tokenizer.batch_decode(output, skip_special_tokens=True))
```

## Embeddings

`AutoModel` is the encoder alone: its output is the contextual embedding of every token.

```python
import torch
from transformers import AutoModel, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("$where", trust_remote_code=True)
encoder = AutoModel.from_pretrained("$where", trust_remote_code=True)
batch = tokenizer([$text, "Another sentence."], padding=True, return_tensors="pt")
with torch.no_grad():
    states = encoder(**batch).last_hidden_state  # (batch, tokens, d_model)
mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
sentence_embeddings = (states * mask).sum(1) / mask.sum(1)  # mean over the real tokens
```

The same vectors through a pipeline, or as sentence embeddings with `sentence-transformers` (mean pooling):

```python
from transformers import pipeline

extractor = pipeline("feature-extraction", model="$where", trust_remote_code=True)
token_vectors = extractor($text)[0]  # one vector per token

from sentence_transformers import SentenceTransformer

sentences = SentenceTransformer("$where", trust_remote_code=True)
vectors = sentences.encode([$text])
```
''')


# ---------------------------------------------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------------------------------------------


def load_scores(scores: str | os.PathLike | Mapping | Sequence) -> list[dict]:
    """Read and validate measured scores: ``{"results": [...]}`` or the list itself, from a JSON file or in memory.

    Each result: ``task`` (Hub task id, e.g. ``"translation"``), ``dataset`` (dataset id), ``metrics``
    (``{"bleu": 21.4, ...}``) and optionally ``task_name``, ``dataset_name``, ``split``, ``config``, ``source``
    (how it was measured), ``source_url``. Raises :class:`HubError` naming the first bad field.
    """
    where = "scores"
    if isinstance(scores, (str, os.PathLike)):
        where, scores = str(scores), _read_scores_file(Path(scores))
    results = scores.get("results") if isinstance(scores, Mapping) else scores
    if not isinstance(results, Sequence) or isinstance(results, str):
        raise HubError(f"{where}: expected {{\"results\": [...]}} or a list of results")
    return [_checked_result(result, f"{where}: results[{i}]") for i, result in enumerate(results)]


def _read_scores_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HubError(f"the scores file {path} does not exist") from None
    except OSError as error:
        raise HubError(f"cannot read the scores file {path}: {error}") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise HubError(f"the scores file {path} is not valid JSON: {error}") from None


def _checked_result(result: Any, at: str) -> dict:
    """One result, validated, without its ``None`` values and with sorted keys."""
    if not isinstance(result, Mapping):
        raise HubError(f"{at} must be an object")
    if unknown := sorted(set(result) - SCORE_KEYS):
        raise HubError(f"{at} has unknown keys {unknown}; allowed: {sorted(SCORE_KEYS)}")
    for key in REQUIRED_SCORE_KEYS:
        if not result.get(key):
            raise HubError(f"{at} needs {key!r}")
    for key in sorted(SCORE_KEYS - {"metrics"}):
        if result.get(key) is not None and not isinstance(result[key], str):
            raise HubError(f"{at}.{key} must be a string, got {result[key]!r}")
    _check_metrics(result.get("metrics"), at)
    return {key: result[key] for key in sorted(result) if result[key] is not None}


def _check_metrics(metrics: Any, at: str) -> None:
    if not isinstance(metrics, Mapping) or not metrics:
        raise HubError(f"{at} needs 'metrics', an object like {{\"bleu\": 21.4}}")
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise HubError(f"{at}.metrics.{name} must be a finite number, got {value!r}")


# ---------------------------------------------------------------------------------------------------------------
# The card
# ---------------------------------------------------------------------------------------------------------------


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
    from huggingface_hub import ModelCard, ModelCardData

    data = ModelCardData(
        model_name=model_name,
        license=license,
        language=language,
        library_name="transformers",
        pipeline_tag=pipeline_tag,
        tags=list(dict.fromkeys([*DEFAULT_TAGS, *tags])),
        datasets=datasets if datasets is not None else sorted({result["dataset"] for result in results}) or None,
        metrics=sorted({metric for result in results for metric in result["metrics"]}) or None,
        eval_results=_eval_results(results) or None,
    )
    body = "\n".join([
        f"# {model_name}", "", description or DEFAULT_DESCRIPTION, "",
        _architecture_table(model),
        USAGE.substitute(where=repo_id or "path/to/this/folder", text=json.dumps(example_text)),
        _scores_section(results),
    ])
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def _eval_results(results: list[dict]) -> list[Any]:
    """One ``EvalResult`` (a ``model-index`` entry) per metric of every result."""
    from huggingface_hub import EvalResult

    return [
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


def _architecture_table(model: Any) -> str:
    c = model.config
    norm = "pre-LayerNorm" if c.pre_layer_norm else "post-LayerNorm (as in the paper)"
    return "\n".join([
        "| | |",
        "|---|---|",
        f"| parameters | {model.num_parameters() / 1e6:.2f} M |",
        f"| layers (encoder / decoder) | {c.encoder_layers} / {c.decoder_layers} |",
        f"| d_model / heads / d_ff | {c.d_model} / {c.encoder_attention_heads} / {c.encoder_ffn_dim} |",
        f"| positions | {POSITIONS.get(c.position_embedding_type, c.position_embedding_type)} |",
        f"| normalisation | {norm} |",
        f"| shared embeddings | {'yes' if c.tie_word_embeddings else 'no'} |",
        f"| vocabulary | {c.vocab_size} tokens (BPE, `tokenizer.json`) |",
        "",
    ])


def _scores_section(results: list[dict]) -> str:
    if not results:
        return "## Evaluation\n\nNo measured scores were provided for this checkpoint.\n"
    rows = [
        f"| {result.get('task_name', result['task'])} | {result.get('dataset_name', result['dataset'])} "
        f"| {result.get('split', '')} | {metric} | {value:g} | {result.get('source', '')} |"
        for result in results
        for metric, value in result["metrics"].items()
    ]
    return "\n".join(["## Evaluation", "", "| task | dataset | split | metric | value | how |",
                      "|---|---|---|---|---|---|", *rows]) + "\n"
