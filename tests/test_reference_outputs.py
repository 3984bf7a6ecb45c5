"""Bit for bit: the shipped checkpoint and folders saved by earlier code give exactly the outputs they gave then.

``tests/reference_outputs.json`` holds what the code gave when it was recorded (a SHA-256 of each float tensor's
bytes, a few values to show in a failure, and the generated tokens in full): for the shipped checkpoint, and for
three tiny models whose weights are set from their parameter names alone (so a folder saved by any earlier code with
these names loads into the same model). Each case runs with the default kernel (sdpa) and with the attention weights
asked for (the eager formula), with padding in the source; generation with a growing and a static cache.

Everything runs on one thread, so that the sums are made in one order. Bits also depend on torch's build and the
CPU's vector instructions: the file records both, and where they differ the test compares the recorded logits to
1e-5 and the tokens exactly instead. Refresh the file only for a change that is meant to change the numbers:
``python tests/test_reference_outputs.py --record``.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
REFERENCE = HERE / "reference_outputs.json"
sys.path.insert(0, str(HERE))

from model_fixtures import tiny_config  # noqa: E402

from scratchformer import ScratchformerForConditionalGeneration  # noqa: E402
from scratchformer.loading import pretrained_path  # noqa: E402

TINY_CASES = {
    "tiny-sinusoidal-post-ln": dict(position_embedding_type="sinusoidal"),
    "tiny-learned-pre-ln-untied": dict(position_embedding_type="learned", pre_layer_norm=True,
                                       tie_word_embeddings=False),
    "tiny-rope-gelu": dict(position_embedding_type="rope", activation_function="gelu"),
}
CASES = ["shipped", *TINY_CASES]


def _digest(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.detach().contiguous().cpu().numpy().tobytes()).hexdigest()


def _model(case: str) -> ScratchformerForConditionalGeneration:
    if case == "shipped":
        return ScratchformerForConditionalGeneration.from_pretrained(pretrained_path("small")).eval()
    model = ScratchformerForConditionalGeneration(tiny_config(**TINY_CASES[case])).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _name, tensor in sorted(model.state_dict().items()):  # by name: the weights a saved folder would hold
            tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.3)
    return model


def _inputs(vocab_size: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, vocab_size, (2, 7), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0  # right padding in the source
    ids[1, 5:] = 0
    target = torch.cat([torch.ones(2, 1, dtype=torch.long), torch.randint(5, vocab_size, (2, 4), generator=generator)],
                       1)
    return {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": target}


@torch.no_grad()
def outputs(case: str) -> dict:
    """What the model of ``case`` gives: digests of its float outputs, a few logits, and generated tokens."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = _model(case)
        inputs = _inputs(model.config.vocab_size)
        result = {}
        plain = model(**inputs)
        result["logits"] = _digest(plain.logits)
        result["logits_sample"] = plain.logits[:, :, :4].tolist()
        result["encoder"] = _digest(plain.encoder_last_hidden_state)
        weighed = model(**inputs, output_attentions=True, output_hidden_states=True)  # the eager formula
        result["eager_logits"] = _digest(weighed.logits)
        for name in ("encoder_attentions", "decoder_attentions", "cross_attentions", "encoder_hidden_states",
                     "decoder_hidden_states"):
            result[name] = [_digest(tensor) for tensor in getattr(weighed, name)]
        source = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}
        settings = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False)
        result["greedy"] = model.generate(**source, **settings).tolist()
        result["greedy_static"] = model.generate(**source, **settings, cache_implementation="static").tolist()
        result["beams"] = model.generate(**source, **settings, num_beams=2).tolist()
        return result
    finally:
        torch.set_num_threads(threads)


def environment() -> dict[str, str]:
    """What else decides the bits: torch's build, the CPU kernels it picks, and the processor they run on (oneDNN
    blocks its matrix products per processor model: an Intel and an AMD machine with the same AVX-512 capability
    give different last bits)."""
    return {"torch": torch.__version__, "cpu": torch.backends.cpu.get_cpu_capability(), "processor": _processor()}


def _processor() -> str:
    """The vendor and model of the CPU, as /proc/cpuinfo names them (``platform.processor()`` elsewhere)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    found = dict(line.split(":", 1) for line in lines if line.startswith(("vendor_id", "model name")) and ":" in line)
    return " / ".join(value.strip() for value in found.values()) or platform.processor()


@pytest.mark.parametrize("case", CASES)
def test_outputs_are_those_recorded_bit_for_bit(case):
    reference = json.loads(REFERENCE.read_text())
    expected, actual = reference[case], outputs(case)
    if reference["environment"] != environment():  # another torch or CPU: the same numbers, not the same bits
        assert torch.allclose(torch.tensor(actual["logits_sample"]), torch.tensor(expected["logits_sample"]), atol=1e-5)
        for key in ("greedy", "greedy_static", "beams"):
            assert actual[key] == expected[key], f"{case}: {key} is not what it was"
        pytest.skip(f"recorded with {reference['environment']}, running on {environment()}: compared to 1e-5")
    assert actual["logits_sample"] == expected["logits_sample"], "the logits changed"
    for key, value in expected.items():
        assert actual[key] == value, f"{case}: {key} is not what it was"


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit("usage: python tests/test_reference_outputs.py --record  (rewrites tests/reference_outputs.json)")
    REFERENCE.write_text(json.dumps({"environment": environment(), **{case: outputs(case) for case in CASES}},
                                    indent=1) + "\n")
    print(f"wrote {REFERENCE}")
