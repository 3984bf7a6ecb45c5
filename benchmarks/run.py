"""Scratchformer against Hugging Face's own models, side by side in one process (issue 7).

    .venv/bin/python benchmarks/run.py            # full run, a few minutes on 2 cores
    .venv/bin/python benchmarks/run.py --quick    # tiny sizes, seconds (what tests/test_benchmarks.py runs)

Writes ``results.json`` and ``RESULTS.md`` to ``--out-dir`` (default: this folder for a full run, a temporary folder
for ``--quick``, so that a quick run never overwrites the committed results).

Method. Every comparison is a *pair* (A = ours, B = theirs) with identical dimensions, fp32 and sdpa attention unless
stated, timed in its own process (forked from this one before anything is computed) holding just the two models.
After ``warmup`` calls of each, the two are timed alternately A, B, A, B, ... so that both see the same
background load; we report the median wall time of each, the spread (min, max, interquartile range) and
``ratio = median(B) / median(A)`` = ours tokens/s over theirs (> 1: ours is faster). The per-round ratio B_i / A_i
(neighbouring calls) is reported too: it is the more robust one when other processes share the cores.

Peak memory: each (model, workload) runs in its own child process, forked before the parent has computed anything,
which builds the model, runs the workload twice and reports the kernel's peak resident set (``VmHWM``, reset with
``/proc/self/clear_refs`` at the start). "Increment" is that peak minus the resident set of the child at its start
(Python + torch + transformers, identical for every model), i.e. the weights, activations, caches and optimizer state.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import json
import math
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every model is built from a config with random weights
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    BartConfig,
    BartForConditionalGeneration,
    BertConfig,
    BertModel,
    DistilBertConfig,
    DistilBertModel,
    GenerationConfig,
)
from transformers.models.bart.modeling_bart import BartEncoder  # noqa: E402

import scratchformer  # noqa: E402
from scratchformer import (  # noqa: E402
    ScratchformerConfig,
    ScratchformerEncoderModel,
    ScratchformerForConditionalGeneration,
)

HERE = Path(__file__).resolve().parent
PAD, BOS, EOS = 0, 1, 2  # the same special ids for every model
SPEED_TARGET = 1.0  # ours/theirs tokens/s
MEMORY_TARGET = 1.0  # ours/theirs peak RSS increment
CACHE_TARGET = 3.0  # cached generation speed-up over recomputing everything
MATMUL_TARGET = 0.6  # encoder forward GFLOP/s as a fraction of a large fp32 matmul


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

    @property
    def long(self) -> int:
        return max(self.encoder_lengths)


SIZES = {
    # A small but realistic translation-sized model (the project's "small-sym" preset width with 4+4 layers and the
    # project tokenizer's 16k vocabulary); the paper's base size (512/8/2048, 6+6, 37k) would take far longer on 2
    # cores for no change in what is compared.
    "full": Size(d_model=256, layers=4, heads=4, ffn=1024, vocab=16000, encoder_batch=32, encoder_lengths=(32, 128),
                 s2s_batch=8, s2s_source=128, s2s_target=128, generate_source=32, generate_batches=(1, 8),
                 generate_new=64, cache_new=128, matmul_n=2048, warmup=2, repeats=7, slow_repeats=3),
    "quick": Size(d_model=32, layers=1, heads=2, ffn=64, vocab=128, encoder_batch=4, encoder_lengths=(8, 16),
                  s2s_batch=2, s2s_source=8, s2s_target=8, generate_source=4, generate_batches=(1, 2),
                  generate_new=4, cache_new=8, matmul_n=128, warmup=1, repeats=2, slow_repeats=2),
}

DIFFERENCES = """\
- **BART** is configured to match ours (ReLU, `scale_embedding=True`, post-LN, tied embeddings, same special ids,
  dropout 0.1 in the training step and none at inference). What cannot be switched off: BART adds a LayerNorm on
  the embeddings (`layernorm_embedding`) and a `final_logits_bias`, and its positions are a learned table
  (`max_position_embeddings + 2` rows per side) where ours are the paper's sinusoids, computed in each forward.
- **BERT** (`BertModel`, no pooler) and **DistilBERT** have the same width, depth, heads, FFN and vocabulary;
  they add learned positions and an embedding LayerNorm, BERT also token-type embeddings.
- For the encoder pairs ours is `ScratchformerEncoderModel` (what `AutoModel` gives) and BART's is a standalone
  `BartEncoder`; every model gets an all-ones `attention_mask`, as a tokenizer returns for unpadded text.
- Generation: greedy (`num_beams=1`, `do_sample=False`), the same `GenerationConfig` for both, with
  `min_new_tokens = max_new_tokens` so that random weights cannot stop early on `</s>`.
- FLOPs of the encoder are counted analytically: `layers * (2*B*S*(4*d^2 + 2*d*ffn) + 4*B*S^2*d)` (the projections,
  the FFN and the two attention matmuls); LayerNorm, softmax and adds are not counted.
"""

# What profiling showed, per group, for a target that is missed (rendered into RESULTS.md only then).
_SAME_WORK = (
    "ours and theirs run the same aten operations on the same shapes (torch.profiler: the same matmuls, sdpa "
    "calls, LayerNorms and adds, within 1-2% per operator, ours without the embedding LayerNorm); with page faults "
    "out of the way the 32 x 128 encoders of ours, BART and BERT took 0.326, 0.326 and 0.327 s. A ratio this "
    "close to 1 is inside this run's noise: see the per-round min/max. Nothing of ours left to remove here.")
EXPLANATIONS: dict[str, str] = {
    "encoder": _SAME_WORK,
    "s2s_forward": _SAME_WORK,
    "train_step": _SAME_WORK + " (AdamW is torch's, the same for both).",
    "generate": (
        "per generated token both run the same kernels (torch.profiler over a whole generate(): the same operator "
        "counts, total operator time within 2%); at batch 1 the step is bound by reading the weights (the 16000 x "
        "256 LM head alone is 16 MB per token). Left on the table: transformers' generate() calls "
        "inspect.signature(model.forward) at every step for classes registered for remote code (a `cache_position` "
        "compatibility check; ours is registered, BART is not), about 50 us per token, ~1% at batch 1. Avoiding it "
        "would take setting `forward.__signature__` by hand, not worth the obscurity in a teaching model."),
    "cache": ("recomputing the prefix only costs more than the per-step overhead (the same in both paths) once the "
              "prefix and the model are large enough; a tiny model generating a few tokens shows no gain."),
    "memory": ("the whole difference is library code (column `code`): ours runs a few kernels the other does not "
               "(float64 pow/sin/cos for the position table, int64 min/max for the token-id check, cumsum for "
               "padding-aware positions), which page in about 2 MB more of libtorch; without that code ours holds "
               "less data (no position tables, no final_logits_bias). The code is file-backed and shared by every "
               "process that uses torch. Not removed: the float64 table is the paper-exact formula and the id "
               "check turns a wrong tokenizer into a clear error instead of garbage."),
    "matmul": ("the encoder's matmuls are as small as d_model x d_model; softmax, LayerNorm, adds and the "
               "embedding lookup are not counted as FLOPs but take time."),
}

PROFILING_NOTES = """\
Measured while working on issue 7 (1 thread, this machine, shared); reproduce with the commands given.

- **Page faults, not arithmetic, decided the first encoder comparisons.** With glibc's default allocator, freed
  tensors above its trim threshold go back to the OS and the next call faults them in again (about 1.2 us per
  4 KiB page). How many depends on the order in which the two models of a pair allocate and free in the same
  process: before the model changes below, ours took 19-45k faults per 32 x 128 encoder call and BART 10-36k,
  0.32-0.43 s and 0.32-0.39 s, varying from run to run and with the model run before. With trimming off
  (`MALLOC_TRIM_THRESHOLD_`, or `--allocator cached`, the default here) there are no faults after warm-up and
  the three encoders took 0.326 s each. The timings above therefore keep freed memory (what a caching allocator
  such as jemalloc or tcmalloc does): they compare the models' work, not the allocator's luck.
- **Model changes** (each its own commit in scratchformer/modeling_scratchformer.py, gains measured A/B in one
  process): the sinusoidal table is computed once and grown instead of rebuilt at every forward (greedy
  generation +6.8% tokens/s at batch 1, +3.2% at batch 8); each sub-layer output is freed once it is in the
  residual stream (encoder peak increment -4 MB); the FFN's ReLU is in place (encoder peak increment 119 -> 107
  MB). With glibc's default allocator, the lower footprint also means fewer page faults: `--allocator default
  --only encoder,s2s,train_step_vs` then gave ours 4,064 faults per 32 x 128 encoder call against 16-23k for
  BART/BERT/DistilBERT, ratios 1.06 / 1.14 / 1.10, s2s forward 1.14, training step 1.05.
- **One process per pair.** Timed one after the other in a single process, the training-step pair gave 0.979
  in a full run and 1.005-1.014 run alone, every call alike (the heap left by earlier pairs decides where the
  tensors land). Each pair now runs in a fresh child process, so a result does not depend on what ran before.
- **Threads.** With 2 intra-op threads and other jobs on the 2 cores (load average 4-6), OpenMP barriers wait
  for descheduled threads: the same 32 x 32 encoder call took 0.26-0.9 s instead of 0.07 s. Runs on a shared
  machine therefore use `--threads 1`, which keeps the A/B comparison meaningful; on an idle machine the default
  (all cores) applies.
- **sdpa vs eager.** At 128 tokens and head size 64, PyTorch's CPU flash kernel is at most a few per cent faster
  than the written-out softmax(QK^T)V; its gain is memory (no (B, H, T, S) weights tensor), see the memory table.
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


def build_model(key: str, size: Size) -> torch.nn.Module:
    """Every model, from a config with random weights (seeded). ``*_train`` models are in train mode."""
    torch.manual_seed(0)
    if key == "ours_encoder":
        return ScratchformerEncoderModel(ours_config(size)).eval()
    if key == "ours_encoder_eager":
        return ScratchformerEncoderModel(ours_config(size, "eager")).eval()
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
    if key == "ours_train_eager":
        return ScratchformerForConditionalGeneration(ours_config(size, "eager")).train()
    if key in ("bart_s2s", "bart_train"):
        return BartForConditionalGeneration(bart_config(size)).train(key.endswith("train"))
    raise KeyError(key)


def token_ids(batch: int, length: int, vocab: int, seed: int) -> torch.Tensor:
    """Random ordinary tokens (ids >= 5: no special token)."""
    return torch.randint(5, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


class Workloads:
    """Builds models on first use and returns zero-argument callables that run one workload once."""

    def __init__(self, size: Size):
        self.size = size
        self.models: dict[str, torch.nn.Module] = {}

    def model(self, key: str) -> torch.nn.Module:
        if key not in self.models:
            self.models[key] = build_model(key, self.size)
        return self.models[key]

    def _inference(self, key: str, **inputs: torch.Tensor) -> Callable[[], object]:
        model = self.model(key)

        def run():
            with torch.inference_mode():
                return model(**inputs)
        return run

    def encoder(self, key: str, length: int) -> Callable[[], object]:
        ids = token_ids(self.size.encoder_batch, length, self.size.vocab, seed=1)
        return self._inference(key, input_ids=ids, attention_mask=torch.ones_like(ids))

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
        ids = token_ids(s.s2s_batch, s.s2s_source, s.vocab, seed=2)
        labels = token_ids(s.s2s_batch, s.s2s_target, s.vocab, seed=4)
        mask = torch.ones_like(ids)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def run():
            optimizer.zero_grad(set_to_none=True)
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            optimizer.step()
            return loss
        return run

    def generate(self, key: str, batch: int, new_tokens: int, use_cache: bool = True) -> Callable[[], object]:
        model = self.model(key)
        ids = token_ids(batch, self.size.generate_source, self.size.vocab, seed=5)
        mask = torch.ones_like(ids)
        config = GenerationConfig(
            max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, num_beams=1, use_cache=use_cache,
            pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=BOS)

        def run():
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
            if out.shape != (batch, new_tokens + 1):  # + the decoder start token
                raise RuntimeError(f"{key} generated shape {tuple(out.shape)}, expected {(batch, new_tokens + 1)}")
            return out
        return run

    def matmul(self) -> Callable[[], object]:
        n = self.size.matmul_n
        generator = torch.Generator().manual_seed(6)
        a, b = torch.randn(n, n, generator=generator), torch.randn(n, n, generator=generator)
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


def encoder_flops(size: Size, batch: int, length: int) -> float:
    d, tokens = size.d_model, batch * length
    per_layer = 2 * tokens * (4 * d * d + 2 * d * size.ffn) + 4 * batch * length * length * d
    return float(size.layers * per_layer)


# --------------------------------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class Pair:
    id: str
    group: str  # encoder | s2s_forward | train_step | generate | cache | attention | matmul
    title: str
    a: str  # label of A (ours)
    b: str  # label of B (theirs, or the alternative)
    make_a: Callable[[], Callable[[], object]] = field(repr=False)  # builds the model, returns the call to time
    make_b: Callable[[], Callable[[], object]] = field(repr=False)
    tokens: int  # tokens per call, for tokens/s
    target: float | None  # the minimum of median(B) / median(A), None when informative only
    repeats: int
    ratio_name: str = "ours/theirs tokens/s"


def summarise(times: list[float], tokens: int) -> dict:
    ordered = sorted(times)
    median = statistics.median(ordered)
    q1, q3 = (statistics.quantiles(ordered, n=4) if len(ordered) > 1 else (median, median))[0::2]
    return {"median_s": median, "min_s": ordered[0], "max_s": ordered[-1], "iqr_s": q3 - q1,
            "spread_pct": 100 * (q3 - q1) / median, "tokens_per_s": tokens / median if tokens else None,
            "times_s": times}


def time_pair(pair: Pair, warmup: int) -> dict:
    run_a, run_b = pair.make_a(), pair.make_b()
    for _ in range(warmup):
        run_a()
        run_b()
    a_times, b_times, a_faults, b_faults = [], [], [], []
    for _ in range(pair.repeats):
        for run, times, faults in ((run_a, a_times, a_faults), (run_b, b_times, b_faults)):
            faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before)
    a, b = summarise(a_times, pair.tokens), summarise(b_times, pair.tokens)
    a["page_faults_per_call"], b["page_faults_per_call"] = statistics.median(a_faults), statistics.median(b_faults)
    rounds = [tb / ta for ta, tb in zip(a_times, b_times)]
    ratio = b["median_s"] / a["median_s"]
    return {
        "id": pair.id, "group": pair.group, "title": pair.title, "tokens_per_call": pair.tokens,
        "a": {"label": pair.a, **a}, "b": {"label": pair.b, **b},
        "ratio_name": pair.ratio_name, "ratio": ratio, "round_ratio_median": statistics.median(rounds),
        "round_ratio_min": min(rounds), "round_ratio_max": max(rounds),
        "target": pair.target, "met": None if pair.target is None else ratio >= pair.target,
    }


def _pair_child(size: Size, pair_id: str, allocator: str) -> dict:
    kept = allocator == "cached" and keep_freed_memory()
    pair = next(p for p in make_pairs(Workloads(size)) if p.id == pair_id)
    return {**time_pair(pair, size.warmup), "freed_memory_kept": kept}


def make_pairs(w: Workloads) -> list[Pair]:
    """Every pair; nothing is built until a pair's ``make_a`` / ``make_b`` is called."""
    s = w.size
    r, slow = s.repeats, s.slow_repeats
    pairs = []
    for length in s.encoder_lengths:
        tokens = s.encoder_batch * length
        for key, name in (("bart_encoder", "BartEncoder"), ("bert", "BertModel"), ("distilbert", "DistilBertModel")):
            pairs.append(Pair(
                f"encoder_b{s.encoder_batch}_s{length}_vs_{key.split('_')[0]}", "encoder",
                f"encoder forward, batch {s.encoder_batch} x {length}", "ScratchformerEncoderModel", name,
                lambda length=length: w.encoder("ours_encoder", length),
                lambda key=key, length=length: w.encoder(key, length), tokens, SPEED_TARGET, r))
    s2s_tokens = s.s2s_batch * (s.s2s_source + s.s2s_target)
    shape = f"batch {s.s2s_batch}, source {s.s2s_source} + target {s.s2s_target}"
    pairs.append(Pair("s2s_forward_vs_bart", "s2s_forward", f"encoder-decoder forward, {shape}",
                      "ScratchformerForConditionalGeneration", "BartForConditionalGeneration",
                      lambda: w.s2s_forward("ours_s2s"), lambda: w.s2s_forward("bart_s2s"), s2s_tokens,
                      SPEED_TARGET, r))
    pairs.append(Pair("train_step_vs_bart", "train_step", f"training step (fwd + bwd + AdamW), {shape}",
                      "ScratchformerForConditionalGeneration", "BartForConditionalGeneration",
                      lambda: w.train_step("ours_train"), lambda: w.train_step("bart_train"), s2s_tokens,
                      SPEED_TARGET, r))
    for batch in s.generate_batches:
        pairs.append(Pair(
            f"generate_b{batch}_vs_bart", "generate",
            f"greedy generation with KV cache, batch {batch}, {s.generate_new} new tokens",
            "ScratchformerForConditionalGeneration", "BartForConditionalGeneration",
            lambda batch=batch: w.generate("ours_s2s", batch, s.generate_new),
            lambda batch=batch: w.generate("bart_s2s", batch, s.generate_new),
            batch * s.generate_new, SPEED_TARGET, r))
    for batch in s.generate_batches:
        pairs.append(Pair(
            f"cache_b{batch}", "cache", f"ours, greedy generation, batch {batch}, {s.cache_new} new tokens",
            "with KV cache", "without cache (use_cache=False)",
            lambda batch=batch: w.generate("ours_s2s", batch, s.cache_new),
            lambda batch=batch: w.generate("ours_s2s", batch, s.cache_new, use_cache=False),
            batch * s.cache_new, CACHE_TARGET, slow, ratio_name="cache speed-up"))
    pairs.append(Pair(
        f"attention_encoder_b{s.encoder_batch}_s{s.long}", "attention",
        f"ours, encoder forward, batch {s.encoder_batch} x {s.long}", "sdpa", "eager",
        lambda: w.encoder("ours_encoder", s.long), lambda: w.encoder("ours_encoder_eager", s.long),
        s.encoder_batch * s.long, None, r, ratio_name="sdpa/eager tokens/s"))
    pairs.append(Pair(
        "attention_train_step", "attention", f"ours, training step, {shape}", "sdpa", "eager",
        lambda: w.train_step("ours_train"), lambda: w.train_step("ours_train_eager"), s2s_tokens, None, r,
        ratio_name="sdpa/eager tokens/s"))
    pairs.append(Pair(
        "matmul", "matmul", f"ours, encoder forward {s.encoder_batch} x {s.long} vs fp32 matmul {s.matmul_n}^3",
        "ScratchformerEncoderModel", f"torch.mm {s.matmul_n}x{s.matmul_n}",
        lambda: w.encoder("ours_encoder", s.long), w.matmul, s.encoder_batch * s.long, None, r,
        ratio_name="time(matmul) / time(encoder)"))
    return pairs


# --------------------------------------------------------------------------------------------------------------------
# Peak memory, one forked child per (workload, model)
# --------------------------------------------------------------------------------------------------------------------


def memory_probes(size: Size) -> list[tuple[str, str, str]]:
    """(workload, ours, theirs) comparisons; each model is measured once per workload."""
    long = f"encoder_{size.long}"
    probes = [(long, "ours_encoder", other) for other in ("bart_encoder", "bert", "distilbert")]
    probes += [(long, "ours_encoder", "ours_encoder_eager"), ("s2s_forward", "ours_s2s", "bart_s2s"),
               ("train_step", "ours_train", "bart_train"), ("train_step", "ours_train", "ours_train_eager")]
    probes += [(f"generate_b{max(size.generate_batches)}", "ours_s2s", "bart_s2s")]
    return probes


def _proc_kb(path: str, name: str) -> int:
    """A ``Name:  1234 kB`` field of /proc/self/status or /proc/meminfo."""
    for line in Path(path).read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise KeyError(name)


def _pin_malloc_to_live_memory() -> None:
    """glibc only: map every allocation of 128 KiB or more on its own and unmap it on free (fixed threshold, no
    dynamic raise), and give the free heap back to the OS now, so that the resident set follows the live tensors
    instead of what the allocator happens to keep cached (which otherwise varies by +-15% between identical runs)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _memory_child(size: Size, workload: str, key: str) -> dict:
    _pin_malloc_to_live_memory()
    status = "/proc/self/status"
    start = {name: _proc_kb(status, name) for name in ("VmRSS", "RssAnon", "RssFile")}
    run = Workloads(size).get(workload, key)  # builds the model (random init: its transients are not counted)
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current resident set
    run()
    run()
    peak_kb = _proc_kb(status, "VmHWM")
    return {"workload": workload, "model": key, "peak_rss_mb": peak_kb / 1024, "start_rss_mb": start["VmRSS"] / 1024,
            "increment_mb": (peak_kb - start["VmRSS"]) / 1024,
            # what the resident set gained by the end, split into data and library code paged in on first use
            "anon_gain_mb": (_proc_kb(status, "RssAnon") - start["RssAnon"]) / 1024,
            "file_gain_mb": (_proc_kb(status, "RssFile") - start["RssFile"]) / 1024}


def keep_freed_memory() -> bool:
    """glibc only: never give freed memory back to the OS (no trimming, no per-allocation mmap), as a caching
    allocator does. Without it, which calls pay for page faults depends on the order in which the two models of a
    pair allocated and freed their tensors (+-10% per call here, see RESULTS.md). Returns whether it was applied."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(-1, 2**31 - 1) and libc.mallopt(-4, 0))  # M_TRIM_THRESHOLD, M_MMAP_MAX
    except (OSError, AttributeError):
        return False


def _child_main(conn, threads: int, function: Callable[..., dict], args: tuple) -> None:
    try:
        torch.set_num_threads(threads)
        conn.send(function(*args))
    except BaseException as error:  # report it, do not leave the parent waiting
        conn.send({"error": f"{type(error).__name__}: {error}"})
    finally:
        conn.close()


def in_child(threads: int, function: Callable[..., dict], *args, timeout: float = 1200) -> dict:
    """``function(*args)`` in a forked child process, which starts from the parent's state (libraries imported,
    no model built, nothing computed: a child forked after its parent used OpenMP threads can hang)."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(send, threads, function, args))
    child.start()
    send.close()
    result = receive.recv() if receive.poll(timeout) else {"error": f"no answer within {timeout:.0f} s"}
    child.join(30)
    if "error" in result:
        raise RuntimeError(f"{function.__name__}{args[1:]} failed in the child process: {result['error']}")
    return result


def measure_memory(size: Size, threads: int) -> tuple[list[dict], list[dict]]:
    """One child process per (workload, model)."""
    if not Path("/proc/self/clear_refs").exists():
        return [], []
    measured: dict[tuple[str, str], dict] = {}
    for workload, *keys in memory_probes(size):
        for key in keys:
            if (workload, key) not in measured:
                measured[workload, key] = in_child(threads, _memory_child, size, workload, key)
    comparisons = []
    for workload, ours, theirs in memory_probes(size):
        a, b = measured[workload, ours], measured[workload, theirs]
        ratio = a["increment_mb"] / b["increment_mb"]
        is_target = not theirs.startswith("ours")
        comparisons.append({"workload": workload, "ours": ours, "theirs": theirs, "ours_increment_mb": a["increment_mb"],
                            "theirs_increment_mb": b["increment_mb"], "ours_peak_mb": a["peak_rss_mb"],
                            "theirs_peak_mb": b["peak_rss_mb"], "ratio": ratio,
                            "ours_code_mb": a["file_gain_mb"], "theirs_code_mb": b["file_gain_mb"],
                            "target": MEMORY_TARGET if is_target else None,
                            "met": (ratio <= MEMORY_TARGET) if is_target else None})
    return list(measured.values()), comparisons


# --------------------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------------------


def machine() -> dict:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        ram_gb = _proc_kb("/proc/meminfo", "MemTotal") / 2**20
    except OSError:
        ram_gb = None
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "ram_gb": ram_gb, "platform": platform.platform()}


def git_state() -> dict:
    def git(*args):
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, timeout=30).stdout.strip()
    try:
        return {"commit": git("rev-parse", "--short", "HEAD"),
                "model_file_modified": bool(git("status", "--porcelain", "--", "../scratchformer/modeling_scratchformer.py"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "model_file_modified": None}


def parameter_counts(w: Workloads) -> dict[str, int]:
    keys = ("ours_encoder", "bart_encoder", "bert", "distilbert", "ours_s2s", "bart_s2s")
    # Tied matrices are counted once (parameters() deduplicates).
    return {key: sum(p.numel() for p in w.model(key).parameters()) for key in keys}


def _fmt_time(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.2f} s"


def _fmt_rate(rate: float | None) -> str:
    return "" if rate is None else f"{rate:,.0f}"


def _mark(met: bool | None, noise_reaches: bool = False) -> str:
    if met is None:
        return ""
    return "met" if met else "**missed**" + (" (within noise: per-round max >= target)" if noise_reaches else "")


def render_markdown(results: dict) -> str:
    meta, size = results["meta"], results["meta"]["size"]
    load = meta["load_average"]
    lines = [
        "# Scratchformer vs Hugging Face models: benchmark results",
        "",
        f"Generated by `{meta['command']}` on {meta['date']} ({meta['mode']} mode, {meta['duration_s']:.0f} s). "
        "Do not edit by hand: rerun the command.",
        "",
        "## Machine and versions",
        "",
        f"- CPU: {meta['machine']['cpu']}, {meta['machine']['logical_cpus']} logical CPUs, "
        f"{meta['machine']['ram_gb']:.0f} GB RAM; {meta['machine']['platform']}",
        f"- torch {meta['versions']['torch']} ({meta['threads']} intra-op threads), transformers "
        f"{meta['versions']['transformers']}, Python {meta['versions']['python']}, scratchformer "
        f"{meta['versions']['scratchformer']} at commit {meta['git']['commit']}"
        + (" (model file modified)" if meta["git"]["model_file_modified"] else ""),
        f"- Load average (1 min) before / after the run: {load['before'][0]:.2f} / {load['after'][0]:.2f} on "
        f"{meta['machine']['logical_cpus']} CPUs. {meta['shared_note']}",
        "",
        "## What is compared",
        "",
        f"Every model: d_model {size['d_model']}, {size['layers']} layers (encoder; and decoder for encoder-decoders), "
        f"{size['heads']} heads, FFN {size['ffn']}, vocabulary {size['vocab']}, fp32, sdpa attention unless "
        f"stated, ReLU. Warm-up {size['warmup']} calls each, then {size['repeats']} rounds A/B/A/B "
        f"({size['slow_repeats']} for the no-cache generation). Memory allocator during the timings: "
        f"{meta['allocator']} (see the profiling notes). Parameters: "
        + ", ".join(f"{k} {v / 1e6:.2f} M" for k, v in meta["parameters"].items()) + ".",
        "",
        DIFFERENCES,
        "## Speed",
        "",
        "`ratio` = median time of B / median time of A = A tokens/s over B tokens/s (> 1: A faster). "
        "`per-round` = median [min, max] of B_i / A_i over neighbouring calls. `spread` = interquartile range "
        "/ median.",
        "",
        "| pair | A | B | A median | B median | A tokens/s | B tokens/s | ratio | per-round | spread A / B | target |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in results["pairs"]:
        a, b = p["a"], p["b"]
        target = "" if p["target"] is None else (
            f">= {p['target']:g} {_mark(p['met'], p['round_ratio_max'] >= p['target'])}")
        lines.append(
            f"| {p['title']} | {a['label']} | {b['label']} | {_fmt_time(a['median_s'])} | {_fmt_time(b['median_s'])} "
            f"| {_fmt_rate(a['tokens_per_s'])} | {_fmt_rate(b['tokens_per_s'])} | **{p['ratio']:.3f}** "
            f"| {p['round_ratio_median']:.3f} [{p['round_ratio_min']:.2f}, {p['round_ratio_max']:.2f}] "
            f"| {a['spread_pct']:.1f}% / {b['spread_pct']:.1f}% | {target} |")
    m = results["matmul"]
    lines += [
        "",
        "## Against the machine's matmul throughput",
        "",
        f"fp32 `torch.mm` {m['n']}x{m['n']}: **{m['matmul_gflops']:.1f} GFLOP/s** (median, timed alternately with "
        f"the encoder). Our encoder forward at batch {m['batch']} x {m['length']} ({m['encoder_gflop']:.1f} GFLOP "
        f"per call): {m['encoder_gflops']:.1f} GFLOP/s = **{100 * m['fraction']:.0f}%** of it (target >= "
        f"{100 * m['target']:.0f}%: {_mark(m['met'])}).",
        "",
        "Encoder throughput of every encoder at that shape (same FLOP count; medians from the encoder pairs): "
        + ", ".join(f"{k} {v:.1f} GFLOP/s ({100 * v / m['matmul_gflops']:.0f}%)"
                    for k, v in m["encoders_gflops"].items()) + ".",
        "",
        "## Peak memory (RSS)",
        "",
        "One forked child process per (workload, model) builds the model, then runs the workload twice; `increment` "
        "= peak resident set (VmHWM) while running minus the child's resident set before the model was built (the "
        "interpreter and libraries, the same for all): weights, activations, caches, optimizer state. The "
        "transients of building a model from random weights are not counted. In the children glibc maps every "
        "allocation of 128 KiB or more on its own and unmaps it on free, so the resident set follows the live "
        "tensors (with its defaults the same child varied by +-15% between runs). `code` = library code paged in "
        "on first use (file-backed, shared between processes), part of the increment. Target: ours <= theirs.",
        "",
        "| workload | ours | theirs | ours increment | theirs increment | ratio | ours / theirs code | ours peak "
        "| theirs peak | target |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in results["memory"]:
        lines.append(
            f"| {c['workload']} | {c['ours']} | {c['theirs']} | {c['ours_increment_mb']:.1f} MB "
            f"| {c['theirs_increment_mb']:.1f} MB | **{c['ratio']:.3f}** "
            f"| {c['ours_code_mb']:.1f} / {c['theirs_code_mb']:.1f} MB | {c['ours_peak_mb']:.0f} MB "
            f"| {c['theirs_peak_mb']:.0f} MB | {'' if c['target'] is None else _mark(c['met'])} |")
    if not results["memory"]:
        lines.append("| (not measured: needs Linux /proc/self/clear_refs) | | | | | | | | | |")
    missed = [t for t in results["targets"] if not t["met"]]
    lines += ["", "## Targets", ""]
    for t in results["targets"]:
        lines.append(f"- {t['name']}: {t['value']:.3f} (target {t['op']} {t['target']:g}) {_mark(t['met'])}")
    if missed:
        lines += ["", "## Missed targets: what remains and why", ""]
        for t in missed:
            lines.append(f"- **{t['name']}**: " + EXPLANATIONS[t["group"]])
    lines += ["", "## Profiling notes", "", PROFILING_NOTES]
    return "\n".join(lines) + "\n"


def collect_targets(pairs: list[dict], memory: list[dict], matmul: dict) -> list[dict]:
    targets = [{"name": f"{p['title']}: {p['a']['label']} vs {p['b']['label']}", "group": p["group"],
                "value": p["ratio"], "op": ">=", "target": p["target"], "met": p["met"]}
               for p in pairs if p["target"] is not None]
    targets += [{"name": f"peak memory {c['workload']}: {c['ours']} / {c['theirs']}", "group": "memory",
                 "value": c["ratio"], "op": "<=", "target": c["target"], "met": c["met"]}
                for c in memory if c["target"] is not None]
    targets.append({"name": "encoder forward / fp32 matmul throughput", "group": "matmul",
                    "value": matmul["fraction"], "op": ">=", "target": matmul["target"], "met": matmul["met"]})
    return targets


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds (for the test)")
    parser.add_argument("--out-dir", type=Path, default=None, help="where to write results.json and RESULTS.md")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's, i.e. all cores; 1 with --quick)")
    parser.add_argument("--repeats", type=int, default=None, help="A/B rounds per pair")
    parser.add_argument("--only", default=None, help="run only pairs whose id contains one of these comma-separated texts (no memory)")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory children")
    parser.add_argument("--allocator", choices=("cached", "default"), default="cached",
                        help="for the timings: 'cached' keeps freed memory (no page faults after warm-up, see "
                             "keep_freed_memory); 'default' leaves glibc as it is")
    args = parser.parse_args(argv)

    mode = "quick" if args.quick else "full"
    size = SIZES[mode]
    if args.repeats:
        size = Size(**{**asdict(size), "repeats": args.repeats})
    out_dir = args.out_dir or (Path(tempfile.mkdtemp(prefix="scratchformer-bench-")) if args.quick else HERE)
    if args.threads or args.quick:  # quick: one thread, so that a busy machine cannot stall OpenMP barriers
        torch.set_num_threads(args.threads or 1)
    threads = torch.get_num_threads()
    transformers.logging.set_verbosity_error()
    started, load_before = time.perf_counter(), os.getloadavg()

    # Every measurement runs in a child forked from this process, which computes nothing itself until the end.
    memory_raw, memory = ([], []) if (args.no_memory or args.only) else measure_memory(size, threads)
    print(f"memory: {len(memory_raw)} children", flush=True)

    pairs = []
    for pair in make_pairs(Workloads(size)):
        if args.only and not any(part in pair.id for part in args.only.split(",")):
            continue
        # Each pair in a fresh process: what earlier pairs left in the heap changed a ratio by up to 3%.
        result = in_child(threads, _pair_child, size, pair.id, args.allocator)
        pairs.append(result)
        print(f"{pair.id:32s} A {_fmt_time(result['a']['median_s']):>10s}  B {_fmt_time(result['b']['median_s']):>10s}"
              f"  ratio {result['ratio']:.3f} (per-round {result['round_ratio_median']:.3f})  page faults/call "
              f"{result['a']['page_faults_per_call']:.0f} / {result['b']['page_faults_per_call']:.0f}", flush=True)

    by_id = {p["id"]: p for p in pairs}
    matmul = {"n": size.matmul_n, "batch": size.encoder_batch, "length": size.long, "target": MATMUL_TARGET,
              "fraction": math.nan, "met": None, "encoders_gflops": {}}
    if "matmul" in by_id:
        flop = encoder_flops(size, size.encoder_batch, size.long)
        mm = by_id["matmul"]
        matmul.update(encoder_gflop=flop / 1e9, matmul_gflops=2 * size.matmul_n**3 / mm["b"]["median_s"] / 1e9,
                      encoder_gflops=flop / mm["a"]["median_s"] / 1e9)
        matmul["fraction"] = matmul["encoder_gflops"] / matmul["matmul_gflops"]
        matmul["met"] = matmul["fraction"] >= MATMUL_TARGET
        for p in pairs:
            if p["group"] == "encoder" and p["id"].startswith(f"encoder_b{size.encoder_batch}_s{size.long}_"):
                matmul["encoders_gflops"].setdefault(p["a"]["label"], flop / p["a"]["median_s"] / 1e9)
                matmul["encoders_gflops"][p["b"]["label"]] = flop / p["b"]["median_s"] / 1e9

    kept = bool(pairs) and all(p["freed_memory_kept"] for p in pairs)
    allocator = "glibc, freed memory kept" if kept else "default"
    load_after = os.getloadavg()
    busy = max(load_before[0], load_after[0]) > 0.5 * (os.cpu_count() or 1)
    results = {
        "meta": {
            "command": "python benchmarks/run.py" + (" --quick" if args.quick else "")
                       + (f" --threads {args.threads}" if args.threads else "")
                       + (" --allocator default" if args.allocator == "default" else ""),
            "mode": mode, "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "duration_s": time.perf_counter() - started, "machine": machine(), "threads": threads,
            "allocator": allocator,
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__, "scratchformer": scratchformer.__version__},
            "git": git_state(), "load_average": {"before": load_before, "after": load_after},
            "shared_note": ("The machine was shared with other jobs during the run (load above half the CPUs): "
                            "absolute times are noisy, ratios of neighbouring A/B calls less so." if busy else
                            "The machine was otherwise idle."),
            "size": asdict(size), "parameters": parameter_counts(Workloads(size)),
        },
        "pairs": pairs, "matmul": matmul, "memory": memory, "memory_children": memory_raw,
    }
    results["targets"] = collect_targets(pairs, memory, matmul) if "matmul" in by_id else []
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    if "matmul" in by_id:
        (out_dir / "RESULTS.md").write_text(render_markdown(results))
    print(f"wrote {out_dir / 'results.json'}" + (f" and {out_dir / 'RESULTS.md'}" if "matmul" in by_id else ""))
    return results


if __name__ == "__main__":
    main()
