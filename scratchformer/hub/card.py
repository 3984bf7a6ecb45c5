"""The model card of an export (``README.md``) and the measured scores it reports (``scores.json``): a hand-written
part that every export keeps and a generated part that it rewrites (docs/hub.md, "The model card").
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from .. import files
from ..errors import HubError
from ..models.card_scratchformer import PAPER_CITATION

SCORE_KEYS = {"task", "task_name", "dataset", "dataset_name", "split", "config", "metrics", "source", "source_url"}
REQUIRED_SCORE_KEYS = ("task", "dataset")
# transformers 5 serves this pipeline with AutoModel (our encoder); "text2text-generation" was removed in v5
DEFAULT_PIPELINE_TAG = "feature-extraction"
DEFAULT_LICENSE = "apache-2.0"
DEFAULT_TAGS = ("scratchformer", "transformer", "encoder-decoder", "attention-is-all-you-need", "custom_code",
                "feature-extraction", "sentence-transformers")
# tags an earlier card may carry that no longer describe the model: transformers 5 has no text2text pipeline
RETIRED_TAGS = ("text2text-generation",)
DEFAULT_EXAMPLE = "Attention is all you need."
DEFAULT_DESCRIPTION = (
    "An encoder-decoder Transformer in the architecture of Vaswani et al. (2017), *Attention Is All You Need*, "
    "written from scratch in PyTorch as a Hugging Face model (scratchformer).")
GENERATED_MARK = ("<!-- Written by `scratchformer export`: the sections below are rewritten by every export. Edit the "
                  "text above this line. -->")
POSITIONS = {"sinusoidal": "sinusoidal (as in the paper)", "learned": "learned", "rope": "rotary (RoPE)"}

USES = """## Uses

- **Intended**: studying the Transformer of *Attention Is All You Need* and what its layers learn (learned vs
  contextual embeddings, attention), teaching, and as a small starting point for fine-tuning: contextual token
  vectors (`AutoModel`, the encoder), sentence vectors (mean pooling, sentence-transformers), sentence and token
  classification heads (`AutoModelForSequenceClassification`, `AutoModelForTokenClassification`), and
  sequence-to-sequence generation (`AutoModelForSeq2SeqLM`).
- **Out of scope**: decisions about people, and any use that needs reliable facts, safe or unbiased text, or
  production-grade accuracy.

## Limitations

- A small model trained from scratch on little data: its vectors and generations are far weaker than those of
  models pre-trained on large corpora, and its sentence vectors were not trained for similarity search.
- It knows only the languages and styles of its training data, and it reproduces their biases (see the training
  data in this card).
- Inputs longer than the tokenizer's `model_max_length` are truncated when you pass `truncation=True`.
- Loading runs the model code shipped in this repository (`trust_remote_code=True`): read it first, and pin
  `revision=` to a commit you have reviewed.
"""

# The usage section: $where is the repo id (or a placeholder), $text the example text, $onnx the ONNX snippet.
USAGE = Template('''\
## How to use

The model code ships with the weights (`paper_scratchformer.py`, the Transformer of the paper in plain PyTorch; \
`modeling_scratchformer.py`, its transformers adapter; `configuration_scratchformer.py`; `card_scratchformer.py`): \
loading the model needs only `torch` and `transformers`, and `trust_remote_code=True`, which runs that code. \
`config.json` maps `AutoConfig`, `AutoModel` (the encoder), `AutoModelForSeq2SeqLM`, `AutoModelForMaskedLM`, \
`AutoModelForSequenceClassification` and `AutoModelForTokenClassification` to that code. The weights are in \
safetensors only.

The tokenizer has no code: `tokenizer.json` loads with the built-in fast tokenizer. \
`PreTrainedTokenizerFast.from_pretrained("$where")` gives the same tokens with no prompt, no warning and no code \
(it reads only the tokenizer files); `AutoTokenizer` reads `config.json` first, so give it `trust_remote_code=True` \
as for the model.

### Embeddings

`AutoModel` is the encoder alone: its output is the contextual embedding of every token. Sentence vectors are the \
mean over the real tokens.

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

The same vectors through the `feature-extraction` pipeline, or as sentence embeddings with `sentence-transformers` \
(this folder is a sentence-transformers model: Transformer + mean pooling):

```python
from transformers import pipeline

extractor = pipeline("feature-extraction", model="$where", trust_remote_code=True)
token_vectors = extractor($text)[0]  # one vector per token

from sentence_transformers import SentenceTransformer

sentences = SentenceTransformer("$where", trust_remote_code=True)
vectors = sentences.encode([$text])
```

### Fine-tuning a classifier

The encoder with a head: the mean over the real tokens and a classifier for `text-classification`, a linear layer \
on every token for `token-classification`. The heads start from random values; train them with `Trainer`.

```python
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

classifier = AutoModelForSequenceClassification.from_pretrained(
    "$where", trust_remote_code=True, num_labels=2, id2label={0: "negative", 1: "positive"})
tagger = AutoModelForTokenClassification.from_pretrained("$where", trust_remote_code=True, num_labels=3)
```

### Filling in a masked token

`AutoModelForMaskedLM` is the encoder with the tied output projection: it predicts a masked token where the model \
was pre-trained with the masked-token loss (`scratchformer train --encoder-mlm-weight`); elsewhere its guesses mean \
little.

```python
from transformers import pipeline

fill = pipeline("fill-mask", model="$where", trust_remote_code=True)
fill(f"She opened the {fill.tokenizer.mask_token} and walked into the room.")  # the top 5: token_str, score
```

### Generation

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("$where", trust_remote_code=True)
model = AutoModelForSeq2SeqLM.from_pretrained("$where", trust_remote_code=True)
inputs = tokenizer([$text], return_tensors="pt")
output = model.generate(**inputs, max_new_tokens=64, num_beams=4)
print(tokenizer.batch_decode(output, skip_special_tokens=True))
```
$onnx''')

ONNX_USAGE = Template('''
### ONNX

`onnx/model.onnx` is the encoder (inputs `input_ids`, `attention_mask`; output `last_hidden_state`), with dynamic \
batch size and length:

```python
import onnxruntime
from transformers import PreTrainedTokenizerFast

tokenizer = PreTrainedTokenizerFast.from_pretrained("$where")  # the tokenizer alone: no code, no prompt
session = onnxruntime.InferenceSession("onnx/model.onnx")  # hf_hub_download("$where", "onnx/model.onnx") from the Hub
batch = tokenizer([$text], padding=True, return_tensors="np")
(states,) = session.run(None, {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]})
```
''')


def load_scores(scores: str | os.PathLike | Mapping | Sequence) -> list[dict]:
    """Measured scores (``{"results": [...]}`` or the list, in a JSON file or not), each checked (:class:`HubError`)."""
    where = "scores"
    if isinstance(scores, (str, os.PathLike)):
        where, path = str(scores), Path(scores)
        files.check_file(path, HubError)  # a named pipe would block the read
        try:
            scores = json.loads(path.read_text(encoding="utf-8"))
        except OSError as error:  # "[Errno 2] No such file or directory", ...
            raise HubError(f"cannot read the scores file {path}: {error}") from None
        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
            raise HubError(f"the scores file {path} is not valid JSON: {error}") from None
    results = scores.get("results") if isinstance(scores, Mapping) else scores
    if not isinstance(results, Sequence) or isinstance(results, str):
        raise HubError(f"{where}: expected {{\"results\": [...]}} or a list of results")
    return [_checked_result(result, f"{where}: results[{i}]") for i, result in enumerate(results)]


def _checked_result(result: Any, at: str) -> dict:
    """One result, validated, without its ``None`` values and with sorted keys."""
    if not isinstance(result, Mapping):
        raise HubError(f"{at} must be an object")
    if unknown := sorted(set(result) - SCORE_KEYS):
        raise HubError(f"{at} has unknown keys {unknown}; allowed: {sorted(SCORE_KEYS)}")
    for key in REQUIRED_SCORE_KEYS:
        if not result.get(key):
            raise HubError(f"{at} needs {key!r}")
    if not isinstance(metrics := result.get("metrics"), Mapping) or not metrics:
        raise HubError(f"{at} needs 'metrics', an object like {{\"bleu\": 21.4}}")
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise HubError(f"{at}.metrics.{name} must be a finite number, got {value!r}")
    return {key: result[key] for key in sorted(result) if result[key] is not None}


@dataclass(frozen=True)
class CardOptions:
    """The card keyword arguments of :func:`model_card`, ``export`` and ``push``, listed once. ``datasets`` are Hub
    dataset ids; ``data_sources`` lines such as ``"Wikipedia article summaries (CC BY-SA 4.0)"``."""

    model_name: str | None = None  # the card's title; export's default is the repo's or the folder's name
    license: str | None = None
    language: str | list[str] | None = None
    datasets: list[str] | None = None
    tags: Sequence[str] = ()
    pipeline_tag: str = DEFAULT_PIPELINE_TAG
    description: str | None = None
    example_text: str = DEFAULT_EXAMPLE
    data_sources: Sequence[str] = ()


def model_card(model: Any, results: list[dict], *, repo_id: str | None, source_card: str | None = None,
               onnx: bool = False, **card: Any) -> Any:
    """The ``README.md`` of an export, a ``huggingface_hub.ModelCard``; ``card`` holds :class:`CardOptions`' fields."""
    from huggingface_hub import ModelCard, ModelCardData

    options = CardOptions(**card)
    source = ModelCard(source_card) if source_card is not None else None
    data = source.data if source is not None else ModelCardData()
    data.model_name = options.model_name
    data.library_name = "transformers"
    data.pipeline_tag = options.pipeline_tag
    kept_tags = [tag for tag in data.tags or [] if tag not in RETIRED_TAGS]
    data.tags = list(dict.fromkeys([*kept_tags, *DEFAULT_TAGS, *(["onnx"] if onnx else []), *options.tags]))
    data.license = options.license or data.license or DEFAULT_LICENSE
    data.language = options.language if options.language is not None else data.language
    data.datasets = options.datasets if options.datasets is not None else data.datasets
    if results:
        data.metrics = sorted({metric for result in results for metric in result["metrics"]})
        data.eval_results = _eval_results(results)
    body = "\n".join([
        _hand_written_part(source.text if source is not None else None, options.description, options.model_name),
        "", GENERATED_MARK, "",
        _generated_part(model, results, repo_id, options.example_text, options.data_sources, onnx),
    ])
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def _hand_written_part(source_text: str | None, description: str | None, model_name: str) -> str:
    """The text an export keeps: ``description``, else the source card's text (above the mark), else the default
    paragraph; with a ``# model_name`` title unless it has a title of its own."""
    text = description
    if text is None and source_text is not None:
        text = source_text.split(GENERATED_MARK)[0]
    text = (text or DEFAULT_DESCRIPTION).strip()
    return text if text.startswith("# ") else f"# {model_name}\n\n{text}"


def _generated_part(model: Any, results: list[dict], repo_id: str | None, example_text: str,
                    data_sources: Sequence[str], onnx: bool) -> str:
    where, text = repo_id or "path/to/this/folder", json.dumps(example_text)
    sections = ["## Model", "", _architecture_table(model), USES]
    if data_sources:
        sections += ["## Data and licences", "", *[f"- {source}" for source in data_sources], ""]
    sections += [
        USAGE.substitute(where=where, text=text, onnx=ONNX_USAGE.substitute(where=where, text=text) if onnx else ""),
        _scores_section(results),
        "## Citation", "", "The architecture is that of:", "", "```bibtex", PAPER_CITATION.strip(), "```", "",
    ]
    return "\n".join(sections)


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
