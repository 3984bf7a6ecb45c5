"""What a Hub user gets without our package: the tokenizer with no code at all, and every pipeline that fits one of
our heads (``text-classification``, ``token-classification``; ``feature-extraction`` is in test_hub.py) from a saved
folder, with the model's remote code, in a fresh process that cannot import scratchformer."""

from __future__ import annotations

import json

import torch
from model_fixtures import run_without_scratchformer, tiny_config

from scratchformer import (
    ScratchformerForSequenceClassification,
    ScratchformerForTokenClassification,
    ScratchformerTokenizer,
    pretrained_path,
)
from scratchformer.hub import export

TEXTS = ["The bank of the river.", "the <mask> sat on the mat", "naïve café 😀, zürich\nnew line", "",
         "A much longer sentence, with punctuation; numbers 1 2 3 and CAPITALS!"]
PROMPT_WORDS = ("[y/N]", "custom code", "trust_remote_code")


def tokenizer():
    return ScratchformerTokenizer.from_pretrained(pretrained_path("small"))


def encodings(tok) -> dict:
    """Everything a model reads from the tokenizer, for TEXTS: single texts, pairs, a padded batch, targets."""
    batch = tok(TEXTS, padding=True)
    return {"single": [tok(text)["input_ids"] for text in TEXTS],
            "pairs": tok(TEXTS[:2], TEXTS[2:4])["input_ids"],
            "batch": [batch["input_ids"], batch["attention_mask"], sorted(batch.keys())],
            "target": tok(TEXTS[0], text_target=TEXTS[1])["labels"],
            "decoded": [tok.decode(tok(text)["input_ids"], skip_special_tokens=True) for text in TEXTS],
            "special": [tok.pad_token_id, tok.eos_token_id, tok.mask_token_id, tok.model_max_length]}


def encodings_source() -> str:
    """The source of :func:`encodings`, to run it unchanged in the fresh process."""
    import inspect
    import textwrap

    return "TEXTS = " + repr(TEXTS) + "\n" + textwrap.dedent(inspect.getsource(encodings))


def test_tokenizer_loads_without_remote_code_and_gives_our_ids(tmp_path):
    """The exported folder (config with the model's auto_map) and a tokenizer-only folder: transformers' built-in
    TokenizersBackend, the same ids as ScratchformerTokenizer, no prompt, no code from the folder."""
    tok = tokenizer()
    tok.save_pretrained(tmp_path / "tokenizer-only")
    folder = export(pretrained_path("small"), tmp_path / "export")
    expected = encodings(tok)
    result = run_without_scratchformer(
        f"""
        import json, os
        from transformers import AutoTokenizer
        exec({encodings_source()!r})  # defines encodings(tok) as above
        out = {{}}
        for name, folder, kwargs in [("tokenizer-only", {str(tmp_path / "tokenizer-only")!r}, {{}}),
                                     ("export, no code", {str(folder)!r}, {{"trust_remote_code": False}}),
                                     ("export, model code trusted", {str(folder)!r}, {{"trust_remote_code": True}})]:
            tok = AutoTokenizer.from_pretrained(folder, **kwargs)
            out[name] = [type(tok).__module__ + "." + type(tok).__name__, encodings(tok)]
        modules = os.path.join(os.environ["HF_HOME"], "modules", "transformers_modules")
        code = sorted(f for _, _, files in os.walk(modules) for f in files if f.endswith(".py"))
        print("RESULT", json.dumps([out, code]))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out, code = json.loads(result.stdout.split("RESULT ", 1)[1])
    for name, (cls, got) in out.items():
        assert cls == "transformers.tokenization_utils_tokenizers.TokenizersBackend", (name, cls)
        assert got == json.loads(json.dumps(expected)), name
    assert "tokenization_scratchformer.py" not in code  # only the trusted config's code ran
    head = result.stdout.split("RESULT ", 1)[0] + result.stderr
    assert not [word for word in PROMPT_WORDS if word in head], head[-2000:]


def test_the_silent_tokenizer_path_loads_our_ids_with_no_prompt_no_warning_and_no_code(tmp_path):
    """`PreTrainedTokenizerFast.from_pretrained(folder)`, as the README, the card and docs/hub.md say, in a process
    without our package: it reads tokenizer.json alone, never config.json's auto_map, so there is nothing to ask and
    nothing to warn about (AutoTokenizer reads the model config first). An exported folder and the shipped one."""
    folder = export(pretrained_path("small"), tmp_path / "export")
    expected = json.loads(json.dumps(encodings(tokenizer())))
    result = run_without_scratchformer(
        f"""
        import json, os, sys
        from transformers import PreTrainedTokenizerFast
        exec({encodings_source()!r})  # defines encodings(tok) as above
        out = [encodings(PreTrainedTokenizerFast.from_pretrained(folder))
               for folder in ({str(folder)!r}, {str(pretrained_path("small"))!r})]
        modules = os.path.join(os.environ["HF_HOME"], "modules")
        code = sorted(f for _, _, files in os.walk(modules) for f in files if f.endswith(".py"))
        print("RESULT", json.dumps([out, code, [m for m in sys.modules if m.startswith("transformers_modules")]]))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out, code, imported = json.loads(result.stdout.split("RESULT ", 1)[1])
    assert out == [expected, expected]
    assert code == [] and imported == []  # no code file copied, none imported
    assert result.stderr == "" and result.stdout.startswith("RESULT ")  # no prompt, no warning, no log line


def test_classification_pipelines_run_the_saved_heads_without_our_package(tmp_path):
    tok = tokenizer()
    torch.manual_seed(0)
    sentence_labels = {0: "NOUN", 1: "VERB", 2: "OTHER"}
    token_labels = {0: "B", 1: "I", 2: "X"}  # no "O": the pipeline then reports every token
    classifier = ScratchformerForSequenceClassification(tiny_config(
        vocab_size=len(tok), num_labels=3, id2label=sentence_labels,
        label2id={v: k for k, v in sentence_labels.items()})).eval()
    tagger = ScratchformerForTokenClassification(tiny_config(
        vocab_size=len(tok), num_labels=3, id2label=token_labels, label2id={v: k for k, v in token_labels.items()}))
    tagger.eval()
    for name, model in (("classifier", classifier), ("tagger", tagger)):
        model.save_pretrained(tmp_path / name)
        tok.save_pretrained(tmp_path / name)
    text = "The bank of the river flooded."
    inputs = tok(text, return_tensors="pt")
    with torch.no_grad():
        probabilities = classifier(**inputs).logits.softmax(-1)[0]
        token_probabilities = tagger(**inputs).logits.softmax(-1)[0]
    best = int(probabilities.argmax())
    ids = inputs["input_ids"][0]
    expected_tokens = [(tok.convert_ids_to_tokens(int(ids[i])), token_labels[int(p.argmax())], float(p.max()))
                       for i, p in enumerate(token_probabilities) if int(ids[i]) not in tok.all_special_ids]
    result = run_without_scratchformer(
        f"""
        import json
        from transformers import pipeline
        classify = pipeline("text-classification", model={str(tmp_path / "classifier")!r}, trust_remote_code=True)
        tag = pipeline("token-classification", model={str(tmp_path / "tagger")!r}, trust_remote_code=True)
        print("RESULT", json.dumps([type(classify.model).__name__, classify({text!r}), type(tag.model).__name__,
                                    [(e["word"], e["entity"], float(e["score"])) for e in tag({text!r})]]))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    classifier_class, classified, tagger_class, tagged = json.loads(result.stdout.split("RESULT ", 1)[1])
    assert classifier_class == "ScratchformerForSequenceClassification"
    assert tagger_class == "ScratchformerForTokenClassification"
    assert classified[0]["label"] == sentence_labels[best]
    assert abs(classified[0]["score"] - float(probabilities[best])) < 1e-5
    assert [(word, label) for word, label, _ in tagged] == [(word, label) for word, label, _ in expected_tokens]
    assert max(abs(a[2] - b[2]) for a, b in zip(tagged, expected_tokens)) < 1e-5


FILL_MASK_TEXT = "The fisherman sat on the <mask> of the river."


def test_fill_mask_on_the_shipped_checkpoint_in_process_and_through_remote_code(tmp_path):
    """`pipeline("fill-mask")` loads the shipped checkpoint as ScratchformerForMaskedLM (the encoder + the tied
    projection the masked-token loss trained), in-process and, without our package, through remote code: the same
    top-5 as the model's own logits at the mask (scores within 1e-5)."""
    from transformers import pipeline

    from scratchformer import ScratchformerForMaskedLM

    folder = str(pretrained_path("small"))
    fill = pipeline("fill-mask", model=folder)
    assert type(fill.model) is ScratchformerForMaskedLM
    top = fill(FILL_MASK_TEXT)
    tok = tokenizer()
    encoded = tok(FILL_MASK_TEXT, return_tensors="pt")
    with torch.no_grad():
        logits = ScratchformerForMaskedLM.from_pretrained(folder).eval()(**encoded).logits
    at_mask = logits[0, encoded["input_ids"][0].tolist().index(tok.mask_token_id)].float().softmax(-1)
    scores, ids = at_mask.topk(5)
    assert [r["token"] for r in top] == ids.tolist()
    assert torch.allclose(torch.tensor([r["score"] for r in top]), scores, atol=1e-5)
    result = run_without_scratchformer(
        f"""
        import json
        from transformers import pipeline
        fill = pipeline("fill-mask", model={folder!r}, trust_remote_code=True)
        print("RESULT", json.dumps([type(fill.model).__module__, fill({FILL_MASK_TEXT!r})]))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    module, remote = json.loads(result.stdout.split("RESULT ", 1)[1])
    assert module.startswith("transformers_modules.") and module.endswith("modeling_scratchformer")
    assert [r["token"] for r in remote] == [r["token"] for r in top]
    assert max(abs(a["score"] - b["score"]) for a, b in zip(remote, top, strict=True)) < 1e-5
    assert not [word for word in PROMPT_WORDS if word in result.stderr], result.stderr[-2000:]


def test_readme_shows_the_real_fill_mask_top_5():
    """The README's fill-mask example: its sentence and printed top-5 are what the shipped checkpoint gives
    (scores as printed, to 3 decimals)."""
    import re
    from pathlib import Path

    from transformers import pipeline

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    found = re.search(r'fill\("(?P<text>[^"]+)"\)\n# (?P<top>.+)\n', readme)
    assert found, "the README's fill-mask example is missing"
    shown = [item.rsplit(" ", 1) for item in found["top"].split(" | ")]
    got = pipeline("fill-mask", model=str(pretrained_path("small")))(found["text"])
    assert [(r["token_str"].strip(), f"{r['score']:.3f}") for r in got] == [(w, s) for w, s in shown]
