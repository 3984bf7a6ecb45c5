"""Bit for bit: the shipped checkpoint and folders saved by earlier code give exactly the outputs they gave then.

``tests/reference_outputs.json`` holds the environment it was recorded in and, per case, what the code gave then: a
SHA-256 of every float tensor the model returns (with the default kernel, sdpa: logits and encoder output; with the
attention weights asked for, the eager formula: logits, encoder output, and every layer's attentions and hidden
states) and the tokens of three generations in full. ``tests/reference_logits.safetensors`` holds each case's whole
sdpa logits. The cases: the shipped checkpoint, and three tiny models whose weights are set from their parameter names
alone (so a folder saved by any earlier code with these names loads into the same model); padding in the source;
generation greedy with a growing and a static cache, and with 2 beams.

Everything runs on one thread, so that the sums are made in one order. Bits also depend on torch's build, the CPU
kernels it picks and the processor (:func:`environment`). Where all of them are those recorded, every digest must
match. Everywhere, the whole logits must equal the recorded ones to ``LOGITS_TOLERANCE`` and the tokens exactly; in
another environment the bit-for-bit test skips and its reason names the environment it needs. Refresh the files only
for a change that is meant to change the numbers, or on a new machine to compare bits there:
``python tests/test_reference_outputs.py --record``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import re
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

HERE = Path(__file__).resolve().parent
REFERENCE = HERE / "reference_outputs.json"
REFERENCE_LOGITS = HERE / "reference_logits.safetensors"
sys.path.insert(0, str(HERE))

from model_fixtures import tiny_config  # noqa: E402

from scratchformer import ScratchformerConfig, ScratchformerForConditionalGeneration  # noqa: E402
from scratchformer.loading import pretrained_path  # noqa: E402

TINY_CASES = {
    "tiny-sinusoidal-post-ln": dict(position_embedding_type="sinusoidal"),
    "tiny-learned-pre-ln-untied": dict(position_embedding_type="learned", pre_layer_norm=True,
                                       tie_word_embeddings=False),
    "tiny-rope-gelu": dict(position_embedding_type="rope", activation_function="gelu"),
}
CASES = ["shipped", *TINY_CASES]
GENERATIONS = {"greedy": {}, "greedy_static": {"cache_implementation": "static"}, "beams": {"num_beams": 2}}
# Another processor or torch build: the same numbers, not the same bits. Measured here: one thread against two, or
# sdpa against eager, moves the shipped model's logits (|logit| <= 8.3) by up to 4e-6; AVX2 against AVX-512 moved
# a tiny model's by 3e-7.
LOGITS_TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def _digest(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.detach().contiguous().cpu().numpy().tobytes()).hexdigest()


def _digests(output) -> dict[str, str | list[str]]:
    """A digest of every tensor a model output holds (a list of them for a tuple, one per layer); the cache, which is
    no tensor, is left out."""
    found = {}
    for name, value in output.items():
        if isinstance(value, torch.Tensor):
            found[name] = _digest(value)
        elif isinstance(value, tuple) and value and all(isinstance(item, torch.Tensor) for item in value):
            found[name] = [_digest(item) for item in value]
    return found


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


@functools.cache
@torch.no_grad()
def outputs(case: str) -> tuple[dict, torch.Tensor]:
    """What the model of ``case`` gives: the digests of its outputs and its generated tokens, and its whole logits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = _model(case)
        inputs = _inputs(model.config.vocab_size)
        plain = model(**inputs)
        weighed = model(**inputs, output_attentions=True, output_hidden_states=True)  # the eager formula
        source = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}
        settings = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False)
        tokens = {name: model.generate(**source, **settings, **extra).tolist() for name, extra in GENERATIONS.items()}
        return {"sdpa": _digests(plain), "eager": _digests(weighed), "tokens": tokens}, plain.logits
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


def _reference() -> dict:
    return json.loads(REFERENCE.read_text())


def test_the_recording_names_everything_that_decides_the_bits():
    """The recorded environment has every key :func:`environment` compares (a key added later and not recorded
    made every environment differ, and the digests went uncompared), and the logits file was recorded with it."""
    recorded = _reference()["environment"]
    assert set(recorded) == set(environment()), "re-record: python tests/test_reference_outputs.py --record"
    from safetensors import safe_open

    with safe_open(str(REFERENCE_LOGITS), "pt") as f:
        assert json.loads(f.metadata()["environment"]) == recorded
        assert set(f.keys()) == set(CASES)


def test_the_digests_cover_every_tensor_the_model_returns_and_what_readme_promises():
    """Every float tensor of the output is recorded (logits, encoder output, attentions and hidden states of every
    layer, none dropped from the file), and README's "bit for bit" sentence names this file and what it holds."""
    model = ScratchformerForConditionalGeneration(tiny_config()).eval()
    inputs = _inputs(model.config.vocab_size)
    with torch.no_grad():
        plain, weighed = model(**inputs), model(**inputs, output_attentions=True, output_hidden_states=True)
    expected = {"sdpa": _digests(plain), "eager": _digests(weighed)}
    assert {"logits", "encoder_last_hidden_state"} <= set(expected["sdpa"])
    assert {"encoder_attentions", "decoder_attentions", "cross_attentions", "encoder_hidden_states",
            "decoder_hidden_states"} <= set(expected["eager"])
    reference = _reference()
    for case in CASES:
        recorded = reference[case]
        assert set(recorded) == {"sdpa", "eager", "tokens"}, case
        assert set(recorded["tokens"]) == set(GENERATIONS), case
        for kernel, fields in expected.items():
            assert set(recorded[kernel]) == set(fields), (case, kernel)
            for name, digest in recorded[kernel].items():
                assert isinstance(digest, str) == isinstance(fields[name], str), (case, kernel, name)
                assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in ([digest] if isinstance(digest, str) else digest))
    shipped = reference["shipped"]["eager"]
    config = ScratchformerConfig.from_pretrained(pretrained_path("small"))
    assert len(shipped["encoder_attentions"]) == config.encoder_layers  # one digest per layer
    assert len(shipped["decoder_hidden_states"]) == config.decoder_layers + 1  # and the embedding output
    readme = (HERE.parent / "README.md").read_text()
    promise = re.search(r"bit for bit,([^(]*)\(`tests/test_reference_outputs\.py`\)", readme)
    assert promise and "logits and tokens" in " ".join(promise[1].split()), "README's bit-for-bit sentence changed"


@pytest.mark.parametrize("case", CASES)
def test_outputs_equal_those_recorded_within_tolerance(case):
    """In any environment: the whole logits to ``LOGITS_TOLERANCE``, the generated tokens exactly."""
    recorded, actual = _reference()[case], outputs(case)
    expected_logits = load_file(REFERENCE_LOGITS)[case]
    torch.testing.assert_close(actual[1], expected_logits, **LOGITS_TOLERANCE, msg=lambda m: f"{case}: {m}")
    for name, tokens in recorded["tokens"].items():
        assert actual[0]["tokens"][name] == tokens, f"{case}: the {name} tokens are not those recorded"


@pytest.mark.parametrize("case", CASES)
def test_outputs_are_those_recorded_bit_for_bit(case):
    """Where the environment is the recorded one, every digest matches; elsewhere no bit can be compared, and the
    skip says which environment this needs (the tolerance test above runs there)."""
    reference = _reference()
    if reference["environment"] != environment():
        pytest.skip(f"bits are compared on {reference['environment']} only (running on {environment()}); the whole "
                    "logits and the tokens were compared to the tolerance by the test above")
    recorded, actual = reference[case], outputs(case)[0]
    changed = sorted(dict(_named_digests(recorded)).items() - dict(_named_digests(actual)).items())
    assert not changed, f"{case}: not the recorded bits: {[name for name, _ in changed]}"
    assert actual == recorded, f"{case}: not the recorded outputs"


def _named_digests(recorded: dict) -> list[tuple[str, str]]:
    """``("eager.encoder_attentions[3]", digest)`` for every digest of a case."""
    named = []
    for kernel in ("sdpa", "eager"):
        for name, digest in recorded[kernel].items():
            if isinstance(digest, str):
                named.append((f"{kernel}.{name}", digest))
            else:
                named += [(f"{kernel}.{name}[{i}]", item) for i, item in enumerate(digest)]
    return named


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit("usage: python tests/test_reference_outputs.py --record  (rewrites tests/reference_outputs.json "
                         "and tests/reference_logits.safetensors)")
    results = {case: outputs(case) for case in CASES}
    REFERENCE.write_text(json.dumps({"environment": environment(), **{case: r[0] for case, r in results.items()}},
                                    indent=1) + "\n")
    save_file({case: r[1].contiguous() for case, r in results.items()}, str(REFERENCE_LOGITS),
              metadata={"environment": json.dumps(environment())})
    print(f"wrote {REFERENCE} and {REFERENCE_LOGITS}")
