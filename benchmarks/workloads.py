"""What the benchmark compares: the size groups, the models (ours and Hugging Face's, from configs with random
weights), the workloads that run them, the pairs of a group and the target each pair is held to. How a pair is
timed is ``harness.py``; how the results are reported is ``report.py``.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable
from dataclasses import dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every model is built from a config with random weights
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from harness import Pair, Unsupported  # noqa: E402
from transformers import (  # noqa: E402
    BartConfig,
    BartForConditionalGeneration,
    BertConfig,
    BertModel,
    CompileConfig,
    DistilBertConfig,
    DistilBertModel,
    GenerationConfig,
)
from transformers.models.bart.modeling_bart import BartEncoder  # noqa: E402

from scratchformer import (  # noqa: E402
    ScratchformerConfig,
    ScratchformerEncoderModel,
    ScratchformerForConditionalGeneration,
)

PAD, BOS, EOS = 0, 1, 2  # the same special ids for every model
SPEED_TARGET = 1.0  # ours/theirs tokens/s
MEMORY_TARGET = 1.0  # ours/theirs peak RSS increment
CACHE_TARGET = 3.0  # cached generation speed-up over recomputing everything
MATMUL_TARGET = 0.6  # CPU encoder forward GFLOP/s as a fraction of a large fp32 matmul
COMPILED_VS_BART_TARGET = 2.0  # CUDA: ours compiled generation over BART's default generate()
COMPILED_EAGER_TARGET = 1.0  # the compiled path must never be slower than our eager path
DEVICES = ("cpu", "cuda")
DTYPES: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16}  # None: no autocast
DTYPE_TITLES = {"fp32": "fp32", "bf16": "bf16 autocast"}


@dataclass(frozen=True)
class Size:
    """Model dimensions (identical for every model) and workload shapes."""

    d_model: int
    layers: int  # encoder layers = decoder layers
    heads: int
    ffn: int
    vocab: int
    encoder_batch: int
    encoder_lengths: tuple[int, ...]
    s2s_batch: int  # full encoder-decoder forward and training step
    s2s_source: int
    s2s_target: int
    generate_source: int
    generate_batches: tuple[int, ...]
    generate_new: int
    cache_new: int  # cache vs no cache
    matmul_n: int
    warmup: int
    repeats: int
    slow_repeats: int  # for the no-cache generation pairs
    encoder_pad_half: bool = False  # rows B/2.. of the encoder batch: the second half of each row is padding
    compiled_batches: tuple[int, ...] = ()  # greedy generation with static cache + torch.compile
    # A model so small that its calls cost Python and operator dispatch, not arithmetic: no matmul-throughput target.
    overhead_bound: bool = False

    @property
    def long(self) -> int:
        return max(self.encoder_lengths)


def describe_size(size: dict) -> str:
    return (f"d_model {size['d_model']}, {size['layers']}+{size['layers']} layers, {size['heads']} heads, "
            f"FFN {size['ffn']}, vocabulary {size['vocab']:,}")


# The project's "small-sym" preset width with 4+4 layers and the project tokenizer's 16k vocabulary.
_D256 = dict(d_model=256, layers=4, heads=4, ffn=1024, vocab=16000)
# The paper's base model (Vaswani et al. 2017, table 3): 512/8/2048, 6+6 layers, a shared 37k BPE vocabulary.
_BASE = dict(d_model=512, layers=6, heads=8, ffn=2048, vocab=37000)
_CPU_SHAPES = dict(encoder_batch=32, encoder_lengths=(32, 128), s2s_batch=8, s2s_source=128, s2s_target=128,
                   generate_source=32, generate_batches=(1, 8), generate_new=64, cache_new=128, matmul_n=2048,
                   warmup=2, repeats=7, slow_repeats=3, compiled_batches=(1,))
# The workloads of the GPU issue: encoder 64 x 128 with half the rows padded, training step 64 x 128, greedy
# generation at batch 1 and 32 with 64 new tokens (from 32 source tokens).
_GPU_SHAPES = dict(encoder_batch=64, encoder_lengths=(128,), s2s_batch=64, s2s_source=128, s2s_target=128,
                   generate_source=32, generate_batches=(1, 32), generate_new=64, cache_new=128, matmul_n=8192,
                   warmup=3, repeats=20, slow_repeats=5, encoder_pad_half=True, compiled_batches=(1, 32))
# A tiny model (d64, 4+4 layers): each call costs what the code does per layer and per token (Python, module calls,
# operator dispatch) rather than arithmetic, as a small model's calls cost kernel launches on a GPU. The same pairs
# at the same shapes as d256 (except fewer tokens per call), more rounds: each call is short.
_OVERHEAD = dict(d_model=64, layers=4, heads=4, ffn=256, vocab=1000, encoder_batch=8, encoder_lengths=(32,),
                 s2s_batch=8, s2s_source=32, s2s_target=32, generate_source=32, generate_batches=(1, 8),
                 generate_new=64, cache_new=128, matmul_n=2048, warmup=3, repeats=15, slow_repeats=7,
                 compiled_batches=(1,), overhead_bound=True)
_QUICK = dict(d_model=32, layers=1, heads=2, ffn=64, vocab=128, encoder_batch=4, encoder_lengths=(8, 16),
              s2s_batch=2, s2s_source=8, s2s_target=8, generate_source=4, generate_batches=(1, 2), generate_new=4,
              cache_new=8, matmul_n=128, warmup=1, repeats=2, slow_repeats=2)
SIZES: dict[str, dict[str, Size]] = {
    "cpu": {
        "d256": Size(**_D256, **_CPU_SHAPES),
        # Same pairs and shapes; fewer rounds and a shorter no-cache generation, or the group alone would take
        # over half an hour on one core (one training step is ~7 s, a batch-8 no-cache generation of 128 tokens
        # ~56 s).
        "base": Size(**_BASE, **{**_CPU_SHAPES, "warmup": 1, "repeats": 5, "cache_new": 64}),
        "overhead": Size(**_OVERHEAD),
        # No compiled pair here: compiling takes tens of seconds on 2 cores.
        "quick": Size(**_QUICK),
    },
    "cuda": {
        "d256": Size(**_D256, **_GPU_SHAPES),
        "base": Size(**_BASE, **_GPU_SHAPES),
        "quick": Size(**{**_QUICK, "encoder_lengths": (16,)}, encoder_pad_half=True, compiled_batches=(1,)),
    },
}


def default_sizes(device: str) -> tuple[str, ...]:
    return tuple(name for name in SIZES[device] if name != "quick")


def default_dtypes(device: str) -> tuple[str, ...]:
    return ("fp32", "bf16") if device == "cuda" else ("fp32",)


# How the models of the pairs differ, as build_model makes them (the report's "What is compared").
DIFFERENCES = """\
- **BART** is configured to match ours (ReLU, `scale_embedding=True`, post-LN, tied embeddings, same special ids,
  dropout 0.1 in the training step and none at inference). What cannot be switched off: BART adds a LayerNorm on
  the embeddings (`layernorm_embedding`) and a `final_logits_bias`, and its positions are a learned table
  (`max_position_embeddings + 2` rows per side) where ours are the paper's sinusoids, computed in each forward.
- **BERT** (`BertModel`, no pooler) and **DistilBERT** have the same width, depth, heads, FFN and vocabulary;
  they add learned positions and an embedding LayerNorm, BERT also token-type embeddings.
- For the encoder pairs ours is `ScratchformerEncoderModel` (what `AutoModel` gives) and BART's is a standalone
  `BartEncoder`; on CPU every model gets an all-ones `attention_mask`, as a tokenizer returns for unpadded text;
  on GPU (the issue's workload) the second half of the batch is padded to half its length.
- Generation: greedy (`num_beams=1`, `do_sample=False`), the same `GenerationConfig` for both, with
  `min_new_tokens = max_new_tokens` so that random weights cannot stop early on `</s>`.
- FLOPs of the encoder are counted analytically: `layers * (2*B*S*(4*d^2 + 2*d*ffn) + 4*B*S^2*d)` (the projections,
  the FFN and the two attention matmuls); LayerNorm, softmax and adds are not counted.
"""

# --------------------------------------------------------------------------------------------------------------------
# Models and workloads
# --------------------------------------------------------------------------------------------------------------------


def ours_config(size: Size, attn: str = "sdpa") -> ScratchformerConfig:
    return ScratchformerConfig(
        vocab_size=size.vocab, d_model=size.d_model, encoder_layers=size.layers, decoder_layers=size.layers,
        encoder_attention_heads=size.heads, decoder_attention_heads=size.heads, encoder_ffn_dim=size.ffn,
        decoder_ffn_dim=size.ffn, max_position_embeddings=512, dropout=0.1, pad_token_id=PAD, bos_token_id=BOS,
        eos_token_id=EOS, decoder_start_token_id=BOS, attn_implementation=attn)


def bart_config(size: Size) -> BartConfig:
    return BartConfig(
        vocab_size=size.vocab, d_model=size.d_model, encoder_layers=size.layers, decoder_layers=size.layers,
        encoder_attention_heads=size.heads, decoder_attention_heads=size.heads, encoder_ffn_dim=size.ffn,
        decoder_ffn_dim=size.ffn, max_position_embeddings=512, dropout=0.1, attention_dropout=0.0,
        activation_dropout=0.0, activation_function="relu", scale_embedding=True, pad_token_id=PAD,
        bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=BOS, forced_eos_token_id=None,
        attn_implementation="sdpa")


_ATTENTION = {"eager": "eager", "flex": "flex_attention"}  # the model-key suffix -> attn_implementation


def build_model(key: str, size: Size) -> torch.nn.Module:
    """Every model, from a config with random weights (seeded). ``*_train`` models are in train mode."""
    torch.manual_seed(0)
    if key == "ours_encoder":
        return ScratchformerEncoderModel(ours_config(size)).eval()
    if key in ("ours_encoder_eager", "ours_encoder_flex"):
        return ScratchformerEncoderModel(ours_config(size, _ATTENTION[key.split("_")[-1]])).eval()
    if key == "bart_encoder":
        return BartEncoder(bart_config(size)).eval()
    if key == "bert":
        return BertModel(BertConfig(
            vocab_size=size.vocab, hidden_size=size.d_model, num_hidden_layers=size.layers,
            num_attention_heads=size.heads, intermediate_size=size.ffn, hidden_act="relu", hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.0, max_position_embeddings=512, pad_token_id=PAD,
            attn_implementation="sdpa"), add_pooling_layer=False).eval()
    if key == "distilbert":
        return DistilBertModel(DistilBertConfig(
            vocab_size=size.vocab, dim=size.d_model, n_layers=size.layers, n_heads=size.heads, hidden_dim=size.ffn,
            activation="relu", dropout=0.1, attention_dropout=0.0, max_position_embeddings=512, pad_token_id=PAD,
            attn_implementation="sdpa")).eval()
    if key in ("ours_s2s", "ours_train"):
        return ScratchformerForConditionalGeneration(ours_config(size)).train(key.endswith("train"))
    if key in ("ours_train_eager", "ours_train_flex"):
        return ScratchformerForConditionalGeneration(ours_config(size, _ATTENTION[key.split("_")[-1]])).train()
    if key in ("bart_s2s", "bart_train"):
        return BartForConditionalGeneration(bart_config(size)).train(key.endswith("train"))
    raise KeyError(key)


def token_ids(batch: int, length: int, vocab: int, seed: int) -> torch.Tensor:
    """Random ordinary tokens (ids >= 5: no special token)."""
    return torch.randint(5, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def compile_config(device_type: str) -> CompileConfig:
    """What ``generate(..., cache_implementation="static", compile_config=...)`` compiles the decoding step with:
    transformers' own default on CUDA (inductor, ``reduce-overhead`` = CUDA graphs); on CPU the ``default`` mode
    (there are no CUDA graphs) and the flag without which generate() only auto-compiles on accelerators."""
    if device_type == "cuda":
        return CompileConfig()
    config = CompileConfig(mode="default")
    config._compile_all_devices = True  # private in transformers 5.x, documented there "for testing purposes"
    return config


def static_cache_problem(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> tuple[str | None, str]:
    """The feature check before compiled generation: ``generate(cache_implementation="static")``, not compiled,
    3 tokens. Returns (why it cannot run, or None; a note when its tokens differ from the default dynamic-cache
    path's: not fatal, as random weights give near-ties that rounding can flip, and the work is the same)."""
    common = dict(max_new_tokens=3, min_new_tokens=3, do_sample=False, num_beams=1, pad_token_id=PAD,
                  bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=BOS)
    static_config = GenerationConfig(**common, cache_implementation="static", disable_compile=True)
    try:
        with torch.inference_mode():
            expected = model.generate(input_ids=ids, attention_mask=mask, generation_config=GenerationConfig(**common))
            static = model.generate(input_ids=ids, attention_mask=mask, generation_config=static_config)
    except Exception as error:  # whatever the model raises: the benchmark reports it instead of crashing
        return f"generate(cache_implementation='static') fails: {type(error).__name__}: {str(error)[:300]}", ""
    if not torch.equal(expected, static):
        return None, (f"{type(model).__name__}: generate(cache_implementation='static') gave other tokens than the "
                      f"default dynamic cache ({static[0].tolist()} vs {expected[0].tolist()}, first row)")
    return None, ""


class Workloads:
    """Builds models on first use (on ``device``) and returns zero-argument callables that run one workload once,
    under bf16 autocast when ``dtype`` is ``"bf16"``."""

    def __init__(self, size: Size, device: str = "cpu", dtype: str = "fp32"):
        self.size, self.device, self.dtype = size, torch.device(device), dtype
        self.models: dict[str, torch.nn.Module] = {}
        self.notes: list[str] = []  # findings worth reporting that do not stop a measurement

    def model(self, key: str) -> torch.nn.Module:
        if key not in self.models:
            self.models[key] = build_model(key, self.size).to(self.device)
        return self.models[key]

    def autocast(self) -> contextlib.AbstractContextManager:
        dtype = DTYPES[self.dtype]
        return contextlib.nullcontext() if dtype is None else torch.autocast(self.device.type, dtype=dtype)

    def _inference(self, key: str, **inputs: torch.Tensor) -> Callable[[], object]:
        model = self.model(key)
        inputs = {name: tensor.to(self.device) for name, tensor in inputs.items()}

        def run():
            with torch.inference_mode(), self.autocast():
                return model(**inputs)
        return run

    def encoder_inputs(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, attention_mask); with ``encoder_pad_half`` the rows of the second half of the batch end in
        ``length // 2`` padding tokens (as in a batch of mixed lengths)."""
        ids = token_ids(self.size.encoder_batch, length, self.size.vocab, seed=1)
        mask = torch.ones_like(ids)
        if self.size.encoder_pad_half:
            half = self.size.encoder_batch // 2
            ids[half:, length // 2:] = PAD
            mask[half:, length // 2:] = 0
        return ids, mask

    def encoder(self, key: str, length: int) -> Callable[[], object]:
        ids, mask = self.encoder_inputs(length)
        return self._inference(key, input_ids=ids, attention_mask=mask)

    def s2s_forward(self, key: str) -> Callable[[], object]:
        s = self.size
        ids = token_ids(s.s2s_batch, s.s2s_source, s.vocab, seed=2)
        decoder_ids = token_ids(s.s2s_batch, s.s2s_target, s.vocab, seed=3)
        decoder_ids[:, 0] = BOS
        return self._inference(key, input_ids=ids, attention_mask=torch.ones_like(ids), decoder_input_ids=decoder_ids)

    def train_step(self, key: str) -> Callable[[], object]:
        """Forward with labels (teacher forcing, cross-entropy), backward and an AdamW step."""
        model = self.model(key)
        s = self.size
        ids = token_ids(s.s2s_batch, s.s2s_source, s.vocab, seed=2).to(self.device)
        labels = token_ids(s.s2s_batch, s.s2s_target, s.vocab, seed=4).to(self.device)
        mask = torch.ones_like(ids)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def run():
            optimizer.zero_grad(set_to_none=True)
            with self.autocast():
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            optimizer.step()
            return loss
        return run

    def _generation(self, key: str, batch: int, new_tokens: int, **options) -> Callable[[], object]:
        model = self.model(key)
        ids = token_ids(batch, self.size.generate_source, self.size.vocab, seed=5).to(self.device)
        mask = torch.ones_like(ids)
        config = GenerationConfig(
            max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, num_beams=1, pad_token_id=PAD,
            bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=BOS, **options)

        def run():
            with self.autocast():
                out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
            if out.shape != (batch, new_tokens + 1):  # + the decoder start token
                raise RuntimeError(f"{key} generated shape {tuple(out.shape)}, expected {(batch, new_tokens + 1)}")
            return out
        return run

    def generate(self, key: str, batch: int, new_tokens: int, use_cache: bool = True) -> Callable[[], object]:
        """Greedy generation with the default ``generate()``: eager, dynamic cache (or none)."""
        return self._generation(key, batch, new_tokens, use_cache=use_cache)

    def compiled_generate(self, key: str, batch: int, new_tokens: int) -> Callable[[], object]:
        """Greedy generation with a static cache and the decoding step compiled by generate() itself. Raises
        ``Unsupported`` when the model fails the feature check or generate() did not compile."""
        model = self.model(key)
        ids = token_ids(batch, self.size.generate_source, self.size.vocab, seed=5).to(self.device)
        problem, note = static_cache_problem(model, ids, torch.ones_like(ids))
        if problem:
            raise Unsupported(problem)
        if note:
            self.notes.append(note)
        run = self._generation(key, batch, new_tokens, cache_implementation="static",
                               compile_config=compile_config(self.device.type))

        def checked():
            out = run()
            if not hasattr(model, "_compiled_call"):  # set by PreTrainedModel.get_compiled_call (transformers 5.x)
                raise Unsupported("generate() ran without compiling (its auto-compile criteria were not met)")
            return out
        return checked

    def matmul(self) -> Callable[[], object]:
        """A square matmul in the group's compute precision (bf16 inputs for bf16: what autocast hands the
        kernel, without timing the casts)."""
        n = self.size.matmul_n
        generator = torch.Generator().manual_seed(6)
        dtype = DTYPES[self.dtype] or torch.float32
        a, b = (torch.randn(n, n, generator=generator).to(self.device, dtype) for _ in range(2))
        return lambda: torch.mm(a, b)

    def get(self, workload: str, key: str) -> Callable[[], object]:
        """A workload by name (used by the memory probes): encoder_<S>, s2s_forward, train_step, generate_b<B>."""
        if workload.startswith("encoder_"):
            return self.encoder(key, int(workload.split("_")[1]))
        if workload == "s2s_forward":
            return self.s2s_forward(key)
        if workload == "train_step":
            return self.train_step(key)
        if workload.startswith("generate_b"):
            return self.generate(key, int(workload[len("generate_b"):]), self.size.generate_new)
        raise KeyError(workload)

    def release(self) -> None:
        """Drop every model (CUDA: and the allocator's cache, and torch.compile's graphs)."""
        self.models.clear()
        if self.device.type == "cuda":
            torch._dynamo.reset()  # its caches hold the compiled models
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def encoder_flops(size: Size, batch: int, length: int) -> float:
    """Every position is counted, padding included (sdpa computes it under the mask)."""
    d, tokens = size.d_model, batch * length
    per_layer = 2 * tokens * (4 * d * d + 2 * d * size.ffn) + 4 * batch * length * length * d
    return float(size.layers * per_layer)


# --------------------------------------------------------------------------------------------------------------------
# The pairs of a group
# --------------------------------------------------------------------------------------------------------------------


def _encoder_pairs(w: Workloads) -> list[Pair]:
    s = w.size
    pairs = []
    for length in s.encoder_lengths:
        padded = f", half the rows padded to {length // 2}" if s.encoder_pad_half else ""
        for key, name in (("bart_encoder", "BartEncoder"), ("bert", "BertModel"), ("distilbert", "DistilBertModel")):
            pairs.append(Pair(
                f"encoder_b{s.encoder_batch}_s{length}_vs_{key.split('_')[0]}", "encoder",
                f"encoder forward, batch {s.encoder_batch} x {length}{padded}", "ScratchformerEncoderModel", name,
                lambda length=length: w.encoder("ours_encoder", length),
                lambda key=key, length=length: w.encoder(key, length), s.encoder_batch * length, SPEED_TARGET,
                s.repeats))
    return pairs


def _s2s_shape(s: Size) -> str:
    return f"batch {s.s2s_batch}, source {s.s2s_source} + target {s.s2s_target}"


def _s2s_pairs(w: Workloads) -> list[Pair]:
    s = w.size
    tokens, shape = s.s2s_batch * (s.s2s_source + s.s2s_target), _s2s_shape(s)
    names = ("ScratchformerForConditionalGeneration", "BartForConditionalGeneration")
    return [Pair("s2s_forward_vs_bart", "s2s_forward", f"encoder-decoder forward, {shape}", *names,
                 lambda: w.s2s_forward("ours_s2s"), lambda: w.s2s_forward("bart_s2s"), tokens, SPEED_TARGET,
                 s.repeats),
            Pair("train_step_vs_bart", "train_step", f"training step (fwd + bwd + AdamW), {shape}", *names,
                 lambda: w.train_step("ours_train"), lambda: w.train_step("bart_train"), tokens, SPEED_TARGET,
                 s.repeats)]


def _generate_pairs(w: Workloads) -> list[Pair]:
    s = w.size
    pairs = [Pair(
        f"generate_b{batch}_vs_bart", "generate",
        f"greedy generation with KV cache, batch {batch}, {s.generate_new} new tokens",
        "ScratchformerForConditionalGeneration", "BartForConditionalGeneration",
        lambda batch=batch: w.generate("ours_s2s", batch, s.generate_new),
        lambda batch=batch: w.generate("bart_s2s", batch, s.generate_new),
        batch * s.generate_new, SPEED_TARGET, s.repeats) for batch in s.generate_batches]
    pairs += [Pair(
        f"cache_b{batch}", "cache", f"ours, greedy generation, batch {batch}, {s.cache_new} new tokens",
        "with KV cache", "without cache (use_cache=False)",
        lambda batch=batch: w.generate("ours_s2s", batch, s.cache_new),
        lambda batch=batch: w.generate("ours_s2s", batch, s.cache_new, use_cache=False),
        batch * s.cache_new, CACHE_TARGET, s.slow_repeats, ratio_name="cache speed-up")
        for batch in s.generate_batches]
    return pairs


def _compiled_pairs(w: Workloads) -> list[Pair]:
    """Static cache + torch.compile (generate()'s own compiled decoding step) against our eager generate() (the
    rule: never slower), and on CUDA against BART's default generate() (the >= 2x target) and BART compiled."""
    s = w.size
    pairs = []
    for batch in s.compiled_batches:
        title = f"greedy generation, batch {batch}, {s.generate_new} new tokens"
        tokens = batch * s.generate_new

        def ours(batch=batch):
            return w.compiled_generate("ours_s2s", batch, s.generate_new)
        pairs.append(Pair(
            f"compiled_b{batch}_vs_eager", "compiled", f"ours, {title}", "compiled (static cache + torch.compile)",
            "eager (default generate())", ours, lambda batch=batch: w.generate("ours_s2s", batch, s.generate_new),
            tokens, COMPILED_EAGER_TARGET, s.repeats, ratio_name="compiled/eager tokens/s", optional=True))
        if w.device.type != "cuda":
            continue
        pairs.append(Pair(
            f"compiled_b{batch}_vs_bart", "compiled", f"{title}, ours compiled vs BART's default generate()",
            "Scratchformer compiled (static cache + torch.compile)", "BART eager (default generate())", ours,
            lambda batch=batch: w.generate("bart_s2s", batch, s.generate_new), tokens, COMPILED_VS_BART_TARGET,
            s.repeats, optional=True))
        pairs.append(Pair(
            f"compiled_b{batch}_vs_bart_compiled", "compiled", f"{title}, both compiled",
            "Scratchformer compiled (static cache + torch.compile)", "BART compiled (static cache + torch.compile)",
            ours, lambda batch=batch: w.compiled_generate("bart_s2s", batch, s.generate_new), tokens, None,
            s.repeats, optional=True))
    return pairs


def _attention_pairs(w: Workloads) -> list[Pair]:
    s = w.size
    tokens = s.s2s_batch * (s.s2s_source + s.s2s_target)
    padded = f", half the rows padded to {s.long // 2}" if s.encoder_pad_half else ""
    pairs = [
        Pair(f"attention_encoder_b{s.encoder_batch}_s{s.long}", "attention",
             f"ours, encoder forward, batch {s.encoder_batch} x {s.long}{padded}", "sdpa", "eager",
             lambda: w.encoder("ours_encoder", s.long), lambda: w.encoder("ours_encoder_eager", s.long),
             s.encoder_batch * s.long, None, s.repeats, ratio_name="sdpa/eager tokens/s"),
        Pair("attention_train_step", "attention", f"ours, training step, {_s2s_shape(s)}", "sdpa", "eager",
             lambda: w.train_step("ours_train"), lambda: w.train_step("ours_train_eager"), tokens, None, s.repeats,
             ratio_name="sdpa/eager tokens/s"),
    ]
    if w.device.type == "cuda":  # flex: compiled by transformers on first use (the warm-up); CPU flex has no backward
        pairs += [
            Pair(f"attention_encoder_b{s.encoder_batch}_s{s.long}_flex", "attention",
                 f"ours, encoder forward, batch {s.encoder_batch} x {s.long}{padded}", "sdpa", "flex_attention",
                 lambda: w.encoder("ours_encoder", s.long), lambda: w.encoder("ours_encoder_flex", s.long),
                 s.encoder_batch * s.long, None, s.repeats, ratio_name="sdpa/flex tokens/s", optional=True),
            Pair("attention_train_step_flex", "attention", f"ours, training step, {_s2s_shape(s)}", "sdpa",
                 "flex_attention", lambda: w.train_step("ours_train"), lambda: w.train_step("ours_train_flex"),
                 tokens, None, s.repeats, ratio_name="sdpa/flex tokens/s", optional=True),
        ]
    return pairs


def _matmul_pair(w: Workloads) -> Pair:
    s = w.size
    precision = "bf16 (autocast)" if w.dtype == "bf16" else "fp32"
    return Pair(
        "matmul", "matmul", f"ours, encoder forward {s.encoder_batch} x {s.long} vs {precision} matmul {s.matmul_n}^3",
        "ScratchformerEncoderModel", f"torch.mm {s.matmul_n}x{s.matmul_n}",
        lambda: w.encoder("ours_encoder", s.long), w.matmul, s.encoder_batch * s.long, None, s.repeats,
        ratio_name="time(matmul) / time(encoder)")


def make_pairs(w: Workloads) -> list[Pair]:
    """Every pair; nothing is built until a pair's ``make_a`` / ``make_b`` is called."""
    return [*_encoder_pairs(w), *_s2s_pairs(w), *_generate_pairs(w), *_compiled_pairs(w), *_attention_pairs(w),
            _matmul_pair(w)]


def select_pairs(pairs: list[Pair], only: str | None) -> list[Pair]:
    return [p for p in pairs if not only or any(part in p.id for part in only.split(","))]


def plan(device: str) -> list[dict]:
    """Every measurement a default run of ``device`` makes (nothing is built)."""
    return [{"size_name": name, "dtype": dtype, "id": p.id, "title": p.title, "a": p.a, "b": p.b}
            for name in default_sizes(device) for dtype in default_dtypes(device)
            for p in make_pairs(Workloads(SIZES[device][name], device, dtype))]


def memory_probes(size: Size) -> list[tuple[str, str, str]]:
    """(workload, ours, theirs) comparisons; each model is measured once per workload."""
    long = f"encoder_{size.long}"
    probes = [(long, "ours_encoder", other) for other in ("bart_encoder", "bert", "distilbert")]
    probes += [(long, "ours_encoder", "ours_encoder_eager"), ("s2s_forward", "ours_s2s", "bart_s2s"),
               ("train_step", "ours_train", "bart_train"), ("train_step", "ours_train", "ours_train_eager")]
    probes += [(f"generate_b{max(size.generate_batches)}", "ours_s2s", "bart_s2s")]
    return probes
