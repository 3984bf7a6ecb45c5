"""ONNX export of the encoder (dynamo exporter, dynamic batch and length) and int8 dynamic quantization.

The ONNX graph must match PyTorch on shapes it was not traced with: another batch size, and a length past the 64
rows the sinusoidal position table starts with (where a graph traced with fixed shapes breaks). The int8 model
(``torch.ao.quantization.quantize_dynamic`` of every ``nn.Linear``) must keep the shipped checkpoint's sentence
vectors close to float32: docs/hub.md states the bound this test holds.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest
import torch

from scratchformer import load_pretrained
from scratchformer.hub import check_folder, export
from scratchformer.hub.layout import ONNX_FILE
from scratchformer.hub.onnx import export_onnx
from scratchformer.loading import pretrained_path
from scratchformer.models.modeling_scratchformer import mean_over_tokens

needs_onnx = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("onnx", "onnxscript", "onnxruntime")),
    reason="needs onnx, onnxscript and onnxruntime")
UNSEEN = ["word " * 90, "A short one.", "The bank of the river flooded in the spring."]  # batch 3, ~91 tokens
SENTENCES = ["The bank of the river flooded.", "She deposited her money at the bank.",
             "Attention is all you need.", "A cat sat on the mat and looked out of the window for a long time.",
             "Transformers replace recurrence with attention.", "The weather was cold and the roads were icy."]
INT8_COSINE_BOUND = 0.999  # sentence vectors; measured on the shipped checkpoint: min 0.9998 (see docs/hub.md)
INT8_TOKEN_COSINE_BOUND = 0.999  # every token vector; measured: min 0.9996


@pytest.fixture(scope="module")
def small():
    return load_pretrained("small")


def run_onnx(path, batch) -> torch.Tensor:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [node.name for node in session.get_inputs()]
    assert names == ["input_ids", "attention_mask"]
    (states,) = session.run(None, {name: batch[name].numpy() for name in names})
    return torch.from_numpy(states)


@needs_onnx
def test_exported_encoder_matches_pytorch_on_an_unseen_shape(small, tmp_path):
    model, tokenizer = small
    traced_with = tokenizer(["Attention is all you need.", "Hello"], padding=True, return_tensors="pt")
    with torch.no_grad():  # the model has been used: its cached position table has 64 rows
        model.get_encoder()(**traced_with)
    path = export_onnx(model, tmp_path / "model.onnx", dict(traced_with))
    batch = tokenizer(UNSEEN, padding=True, return_tensors="pt")
    assert batch["input_ids"].shape[0] != traced_with["input_ids"].shape[0] and batch["input_ids"].shape[1] > 64
    with torch.no_grad():
        expected = model.get_encoder()(**batch).last_hidden_state
    difference = (run_onnx(path, batch) - expected).abs().max().item()
    print(f"ONNX vs PyTorch on {tuple(batch['input_ids'].shape)}: max |difference| {difference:.2e}")
    assert difference < 1e-4
    assert list(tmp_path.iterdir()) == [path]  # one self-contained file, no external data


@needs_onnx
def test_export_onnx_option_writes_a_checked_folder(small, tmp_path):
    """From the shipped folder, whose weights are stored in float16 (and stay so): the graph is float32 and gives
    what the float32 model gives."""
    folder = export(pretrained_path("small"), tmp_path / "export", onnx=True)
    check_folder(folder)
    assert (folder / ONNX_FILE).is_file()
    assert "onnx" in (folder / "README.md").read_text().split("tags:")[1].split("---")[0]
    model, tokenizer = small
    batch = tokenizer(SENTENCES[:2], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model.get_encoder()(**batch).last_hidden_state
    states = run_onnx(folder / ONNX_FILE, batch)
    assert states.dtype == torch.float32 and (states - expected).abs().max().item() < 1e-4


@pytest.mark.parametrize("missing", ["onnxscript", "onnxruntime"])
def test_onnx_export_names_the_extra_before_loading_or_writing_anything(tmp_path, monkeypatch, capsys, missing):
    """--onnx without its packages: one line naming the extra, before the model is loaded or OUT is made."""
    from scratchformer.cli import main as cli_main
    from scratchformer.errors import MissingDependencyError
    from scratchformer.hub import push

    monkeypatch.setitem(sys.modules, missing, None)  # find_spec treats a None entry as not installed
    export_module = importlib.import_module("scratchformer.hub.export")  # the module: hub.export is the function
    monkeypatch.setattr(export_module, "model_and_tokenizer", lambda *args, **kwargs: pytest.fail("loaded a model"))
    out = tmp_path / "out"
    assert cli_main(["export", str(pretrained_path("small")), str(out), "--onnx"]) == 2
    assert capsys.readouterr().err == (f"scratchformer export: error: the ONNX export (--onnx) needs {missing}, which "
                                       'is not installed: pip install "scratchformer[onnx]"\n')
    assert not out.exists() and list(tmp_path.iterdir()) == []
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(MissingDependencyError, match=r'pip install "scratchformer\[onnx\]"'):
        push(pretrained_path("small"), "alice/tiny", onnx=True, token=None)  # before the token is looked for
    with pytest.raises(MissingDependencyError, match=missing):
        export_onnx(object(), tmp_path / "model.onnx")


@needs_onnx
def test_only_the_dynamo_exporter_is_used(small, tmp_path, monkeypatch):
    """The legacy exporter records the example's shapes; export_onnx always asks for the dynamo exporter."""
    calls = []
    monkeypatch.setattr(torch.onnx, "export", lambda *args, **kwargs: calls.append(kwargs))
    export_onnx(small[0], tmp_path / "model.onnx")
    assert calls and calls[0]["dynamo"] is True and set(calls[0]["dynamic_shapes"]) == {"input_ids", "attention_mask"}


def test_int8_dynamic_quantization_keeps_sentence_vectors_close(small):
    model, tokenizer = small
    encoder = load_pretrained("small", encoder_only=True)[0]
    int8 = torch.ao.quantization.quantize_dynamic(encoder, {torch.nn.Linear}, dtype=torch.qint8)
    assert sum(type(m).__module__.startswith("torch.ao.nn.quantized.dynamic") for m in int8.modules()) == 6 * 6
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        reference = model.get_encoder()(**batch).last_hidden_state
        quantized = int8(**batch).last_hidden_state
    tokens = torch.nn.functional.cosine_similarity(reference[real], quantized[real], dim=-1)
    sentences = torch.nn.functional.cosine_similarity(mean_over_tokens(reference, batch["attention_mask"]),
                                                      mean_over_tokens(quantized, batch["attention_mask"]), dim=-1)
    print(f"int8 vs float32: sentence vectors cosine mean {sentences.mean():.5f}, min {sentences.min():.5f}; "
          f"token vectors cosine mean {tokens.mean():.5f}, min {tokens.min():.5f}")
    assert sentences.min() > INT8_COSINE_BOUND and tokens.min() > INT8_TOKEN_COSINE_BOUND
