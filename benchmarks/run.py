"""Scratchformer against Hugging Face's own models, side by side in one run (issues 7 and "Performance on the
hardware users train on").

    .venv/bin/python benchmarks/run.py                  # CPU, sizes d256, base, overhead: tens of minutes on 2 cores
    .venv/bin/python benchmarks/run.py --sizes base     # one size group; the others in results.json are kept
    .venv/bin/python benchmarks/run.py --sizes overhead # a tiny model: per-call costs, as small models on a GPU
    .venv/bin/python benchmarks/run.py --quick          # tiny sizes, seconds (what tests/test_benchmarks.py runs)
    .venv/bin/python benchmarks/run.py --device cuda    # one GPU: fp32 and bf16 autocast, sizes d256 and base

Writes ``results.json`` and ``RESULTS.md`` (CPU) or ``results_cuda.json`` and ``RESULTS_cuda.md`` (GPU) to
``--out-dir`` (default: this folder; a temporary folder for ``--quick`` and ``--only``, so that a partial run never
overwrites the committed results). A run replaces the (size, dtype) groups it measured and keeps the others, each
group naming the command, date and commit of its own run. ``--render-only`` rewrites the Markdown from the JSON.

Method. Every comparison is a *pair* (A = ours, B = theirs or an alternative) with identical dimensions, sdpa
attention unless stated. After ``warmup`` calls of each, the two are timed alternately A, B, A, B, ... so that both
see the same background load; we report the median time of each, the spread (min, max, interquartile range) and
``ratio = median(B) / median(A)`` = A tokens/s over B tokens/s (> 1: A is faster). The per-round ratio B_i / A_i
(neighbouring calls) is reported too: it is the more robust one when other processes share the machine.

Timers share one interface (``CpuTimer``, ``CudaEventTimer``: ``time(fn) -> seconds``, ``peak_memory_mb(fn)``):

- CPU: wall clock (``time.perf_counter``). Each pair runs in its own process forked from this one before anything
  is computed (the heap left by earlier pairs changed ratios by up to 3%), and peak memory is the kernel's peak
  resident set of one forked child per (workload, model): ``VmHWM``, reset with ``/proc/self/clear_refs``.
- CUDA: ``torch.cuda.Event(enable_timing=True)`` recorded around each call, with ``torch.cuda.synchronize()``
  before the start event (the GPU is idle, so the host overhead of launching a call is inside the interval, as
  it is for a user) and after the end event, nowhere else. Pairs run in this process one after the other, not in
  children: a process cannot fork after CUDA is initialised, a spawned child would pay a fresh interpreter and CUDA
  context per pair (seconds, tens of times), and what the forks are for on CPU is absent on a GPU (the caching
  allocator keeps freed blocks, so no page faults and no heap-layout luck; RSS cannot be reset per model, but
  ``torch.cuda.reset_peak_memory_stats`` can). Between pairs every model is dropped, the allocator's cache emptied
  and torch.compile's caches reset (``torch._dynamo.reset()``), so that one pair's compiled graphs and blocks
  cannot leak into the next. Peak memory per pair and side: ``torch.cuda.max_memory_allocated`` during one extra,
  untimed call after the warm-up, minus what was allocated before it.

Precision: ``fp32`` runs the models in float32 (on CUDA with torch's default, i.e. no TF32 for matmuls);
``bf16`` keeps float32 weights and runs each call under ``torch.autocast(device, dtype=torch.bfloat16)`` (the
backward of the training step outside autocast, as recommended; no gradient scaler is needed for bf16).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime as dt
import gc
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
from dataclasses import asdict, dataclass, field, replace
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
    CompileConfig,
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
MATMUL_TARGET = 0.6  # CPU encoder forward GFLOP/s as a fraction of a large fp32 matmul
COMPILED_VS_BART_TARGET = 2.0  # CUDA: ours compiled generation over BART's default generate()
COMPILED_EAGER_TARGET = 1.0  # the compiled path must never be slower than our eager path
DEVICES = ("cpu", "cuda")
DTYPES: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16}  # None: no autocast
DTYPE_TITLES = {"fp32": "fp32", "bf16": "bf16 autocast"}
RESULT_FILES = {"cpu": ("results.json", "RESULTS.md"), "cuda": ("results_cuda.json", "RESULTS_cuda.md")}
GPU_COMMAND = "python benchmarks/run.py --device cuda"
SCHEMA = 2


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


def parse_choices(text: str | None, allowed: tuple[str, ...], default: tuple[str, ...], what: str) -> tuple[str, ...]:
    """``"a,b"`` -> ``("a", "b")`` (order kept, duplicates dropped); None -> ``default``; ValueError otherwise."""
    if text is None:
        return default
    items = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [item for item in items if item not in allowed]
    if unknown or not items:
        raise ValueError(f"{what}: {'unknown ' + ', '.join(unknown) if unknown else 'nothing given'} "
                         f"(choose from {', '.join(allowed)}, comma-separated)")
    return items


def parse_dtypes(text: str | None, device: str) -> tuple[str, ...]:
    return parse_choices(text, tuple(DTYPES), default_dtypes(device), "--dtype")


def parse_sizes(text: str | None, device: str) -> tuple[str, ...]:
    return parse_choices(text, default_sizes(device), default_sizes(device), "--sizes")


def result_files(device: str) -> tuple[str, str]:
    """(JSON, Markdown) file names of a device: CPU and GPU results never overwrite each other."""
    return RESULT_FILES[device]


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
        "per generated token both run the same kernels (torch.profiler over a whole generate(): the same matmuls; "
        "in the overhead group ours runs 192 computing operators per token, BART 199); at batch 1 the step is bound "
        "by reading the weights (the 16000 x 256 LM head alone is 16 MB per token). The ratio moves by a few per "
        "cent between runs of the same code: two full runs of this group on 2026-11-25 gave 1.016 / 1.008 and "
        "1.017 / 1.000 (batch 1 / batch 8). The per-call costs the overhead group found in ours (generate() "
        "rebuilding forward's signature at every step, dropout modules called at inference) are gone since then "
        "(docs/performance.md, \"Per-call costs\")."),
    "cache": ("recomputing the prefix only costs more than the per-step overhead (the same in both paths) once the "
              "prefix and the model are large enough; a tiny model generating a few tokens shows no gain."),
    "memory": ("the whole difference is library code (column `code`): ours runs a few kernels the other does not "
               "(float64 pow/sin/cos for the position table, the comparisons and all() of the token-id check, cumsum for "
               "padding-aware positions), which page in about 2 MB more of libtorch; without that code ours holds "
               "less data (no position tables, no final_logits_bias). The code is file-backed and shared by every "
               "process that uses torch. Not removed: the float64 table is the paper-exact formula and the id "
               "check turns a wrong tokenizer into a clear error instead of garbage."),
    "matmul": ("the encoder's matmuls are as small as d_model x d_model; softmax, LayerNorm, adds and the "
               "embedding lookup are not counted as FLOPs but take time."),
}
# Explanations of other groups, by (device, size, dtype, target group); anything else reads "not profiled yet".
GROUP_EXPLANATIONS: dict[tuple[str, str, str, str], str] = {
    ("cpu", "base", "fp32", "cache"): (
        "a shorter workload by design, not profiled: this group generates 64 new tokens in the cache pairs, not "
        "128 (a batch-8 no-cache generation of 128 tokens takes about a minute per call at this size on one "
        "core). Recomputing the prefix costs about the square of the length and the cached path about the "
        "length, so half the length gives roughly half the speed-up of the 128-token pairs the target was set "
        "for."),
    ("cpu", "base", "fp32", "generate"): (
        "the same kernels as BART at this size too. `python benchmarks/profile_generate.py --size base --batch 8` "
        "(one process, one thread): 84,201 operator calls for ours and 85,798 for BART per generate(), operator self "
        "time 2.84 s and 3.05 s; the tied LM head (8 x 512 by 512 x 37,000 per token, 20 ms, reading 76 MB of "
        "weights) is 43-46% of it for both and the other linear layers 31-35%. Timed alternately in that process "
        "the two took 3011 and 3015 ms (ratio 1.00), the pair alone in run.py gave 1.004, and two full group runs "
        "of the same code gave 0.878 and 0.980: the spread between runs is larger than the difference between "
        "the models."),
    ("cpu", "base", "fp32", "s2s_forward"): (
        "the same operations as BART (see the d256 notes), inside this run's noise: per-round 0.999, and the "
        "run before it on the same machine and code (2026-11-25) gave 1.011."),
    ("cpu", "base", "fp32", "memory"): (
        "as at d256: the difference is library code paged in (column `code`, 24.8 against 22.8 MB), not data."),
    ("cpu", "overhead", "fp32", "cache"): (
        "the point of this group: at d64 a decoding step costs its per-call work (about 0.8 ms per token for 4+4 "
        "layers at batch 1), cached or not, and recomputing a short prefix at this width adds little arithmetic, so "
        "the cache can only save that arithmetic: 1.9x at batch 1, 6x at batch 8, where eight rows give it more to "
        "save. The target was set for d256 (4.5x and 13.8x there in the same run)."),
    ("cpu", "base", "fp32", "encoder"): (
        "inside the run's noise: the per-round ratios of this pair span the target, and the other encoder pairs "
        "of this group run the same operations at 1.009-1.033 (see the d256 notes on the same work)."),
}
NOISY_SPREAD_PCT = 10.0  # median interquartile spread above which a group's ratios near 1 are called noise

PROFILING_NOTES = """\
Measured in an earlier session (1 thread, this machine, shared); reproduce with the commands given.

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
- **Per-call costs (the overhead group, 2026-11-25, the 2-core AMD EPYC).** A d64 model's calls cost what the
  host does per call, as a small model's calls on a GPU cost kernel launches. Profiling it against BART found five
  such costs in ours (a config deep-copied by every forward with a cache, forward's signature rebuilt by generate()
  at every step, dropout modules called at inference, a 4-D mask made on the host at every static-cache step, an
  in-place ReLU that made the backward copy the activation), all removed (docs/performance.md, "Per-call costs"):
  greedy generation at batch 1 / 8 went from 0.972 / 0.979 to 1.058 / 1.057 of BART, the encoder-decoder forward
  from 0.972 to 1.106.
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


class Unsupported(Exception):
    """A workload the model cannot run yet (e.g. compiled static-cache generation): reported, not fatal."""


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
# Timing
# --------------------------------------------------------------------------------------------------------------------


class CpuTimer:
    """Wall-clock time of one call. Peak memory is not measured here on CPU (see ``measure_memory``)."""

    name = "wall clock (time.perf_counter)"
    counts_page_faults = True

    def time(self, fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    def peak_memory_mb(self, fn: Callable[[], object]) -> float | None:
        return None  # without calling fn: the CPU timings stay what they were


class CudaEventTimer:
    """GPU time of one call between two CUDA events. ``cuda`` is the ``torch.cuda`` module (a stand-in in tests):
    the GPU is synchronised before the start event (so the interval starts when the call starts, host overhead
    included) and after the end event, nowhere in between."""

    name = "CUDA events (torch.cuda.Event(enable_timing=True))"
    counts_page_faults = False

    def __init__(self, cuda=None):
        self.cuda = torch.cuda if cuda is None else cuda

    def time(self, fn: Callable[[], object]) -> float:
        start, end = self.cuda.Event(enable_timing=True), self.cuda.Event(enable_timing=True)
        self.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000  # ms -> s

    def peak_memory_mb(self, fn: Callable[[], object]) -> float:
        """Peak of ``memory_allocated`` during one call, above what was allocated before it."""
        self.cuda.synchronize()
        self.cuda.reset_peak_memory_stats()
        before = self.cuda.memory_allocated()
        fn()
        self.cuda.synchronize()
        return (self.cuda.max_memory_allocated() - before) / 2**20


def make_timer(device: str) -> CpuTimer | CudaEventTimer:
    return CudaEventTimer() if device == "cuda" else CpuTimer()


@dataclass
class Pair:
    id: str
    group: str  # encoder | s2s_forward | train_step | generate | cache | compiled | attention | matmul
    title: str
    a: str  # label of A (ours)
    b: str  # label of B (theirs, or the alternative)
    make_a: Callable[[], Callable[[], object]] = field(repr=False)  # builds the model, returns the call to time
    make_b: Callable[[], Callable[[], object]] = field(repr=False)
    tokens: int  # tokens per call, for tokens/s
    target: float | None  # the minimum of median(B) / median(A), None when informative only
    repeats: int
    ratio_name: str = "ours/theirs tokens/s"
    optional: bool = False  # a failure to build or warm up is reported as "not measured", not raised


def summarise(times: list[float], tokens: int) -> dict:
    ordered = sorted(times)
    median = statistics.median(ordered)
    q1, q3 = (statistics.quantiles(ordered, n=4) if len(ordered) > 1 else (median, median))[0::2]
    return {"median_s": median, "min_s": ordered[0], "max_s": ordered[-1], "iqr_s": q3 - q1,
            "spread_pct": 100 * (q3 - q1) / median, "tokens_per_s": tokens / median if tokens else None,
            "times_s": times}


def skipped_pair(pair: Pair, reason: str) -> dict:
    return {"id": pair.id, "group": pair.group, "title": pair.title, "tokens_per_call": pair.tokens,
            "a": {"label": pair.a}, "b": {"label": pair.b}, "ratio_name": pair.ratio_name, "skipped": reason,
            "target": pair.target, "met": None}


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def compile_counts() -> dict[str, int]:
    """torch.compile's running totals in this process: graphs compiled and graph breaks met."""
    counters = torch._dynamo.utils.counters
    return {"graphs": counters["stats"]["unique_graphs"], "graph_breaks": sum(counters["graph_break"].values())}


def _counted(pair: Pair, run: Callable[[], object]) -> dict[str, int] | None:
    """Run once; for a compiled pair, what it compiled (the first call is where generate() compiles)."""
    if pair.group != "compiled":
        run()
        return None
    before = compile_counts()
    run()
    return {key: value - before[key] for key, value in compile_counts().items()}


def _prepare(pair: Pair, warmup: int, timer) -> tuple:
    """Build both sides, warm them up (at least once: compilation and lazy state happen there), count what the
    first calls compiled and measure each side's peak memory per call where the timer can."""
    run_a, run_b = pair.make_a(), pair.make_b()
    compiled = {"a": _counted(pair, run_a), "b": _counted(pair, run_b)}
    for _ in range(warmup - 1):
        run_a()
        run_b()
    return run_a, run_b, timer.peak_memory_mb(run_a), timer.peak_memory_mb(run_b), compiled


def _timed_rounds(pair: Pair, runs: tuple, timer) -> tuple[tuple[list, list], tuple[list, list]]:
    times, faults = ([], []), ([], [])
    for _ in range(pair.repeats):
        for side, run in enumerate(runs):
            faults_before = _minor_faults()
            times[side].append(timer.time(run))
            faults[side].append(_minor_faults() - faults_before)
    return times, faults


def time_pair(pair: Pair, warmup: int, timer=None) -> dict:
    timer = timer or CpuTimer()
    try:
        run_a, run_b, peak_a, peak_b, compiled = _prepare(pair, warmup, timer)
    except Unsupported as reason:
        return skipped_pair(pair, f"not supported: {reason}")
    except Exception as error:
        if not pair.optional:
            raise
        return skipped_pair(pair, f"failed: {type(error).__name__}: {str(error)[:300]}")
    before = compile_counts() if pair.group == "compiled" else None
    times, faults = _timed_rounds(pair, (run_a, run_b), timer)
    a, b = summarise(times[0], pair.tokens), summarise(times[1], pair.tokens)
    for side, side_faults, peak in ((a, faults[0], peak_a), (b, faults[1], peak_b)):
        side["page_faults_per_call"] = statistics.median(side_faults) if timer.counts_page_faults else None
        if peak is not None:
            side["peak_call_mb"] = peak
    rounds = [tb / ta for ta, tb in zip(*times)]
    ratio = b["median_s"] / a["median_s"]
    result = {
        "id": pair.id, "group": pair.group, "title": pair.title, "tokens_per_call": pair.tokens,
        "a": {"label": pair.a, **a}, "b": {"label": pair.b, **b},
        "ratio_name": pair.ratio_name, "ratio": ratio, "round_ratio_median": statistics.median(rounds),
        "round_ratio_min": min(rounds), "round_ratio_max": max(rounds),
        "target": pair.target, "met": None if pair.target is None else ratio >= pair.target,
    }
    if before is not None:  # a graph compiled while timed would put compile time into the medians
        result["compile"] = {**compiled, "graphs_while_timed": compile_counts()["graphs"] - before["graphs"]}
    return result


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



# --------------------------------------------------------------------------------------------------------------------
# CPU: peak memory, one forked child per (workload, model); every pair in its own forked child
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


def _memory_child(size: Size, workload: str, key: str, dtype: str = "fp32") -> dict:
    _pin_malloc_to_live_memory()
    status = "/proc/self/status"
    start = {name: _proc_kb(status, name) for name in ("VmRSS", "RssAnon", "RssFile")}
    run = Workloads(size, "cpu", dtype).get(workload, key)  # builds the model (its transients are not counted)
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


def measure_memory(size: Size, threads: int, dtype: str = "fp32") -> tuple[list[dict], list[dict]]:
    """One child process per (workload, model)."""
    if not Path("/proc/self/clear_refs").exists():
        return [], []
    measured: dict[tuple[str, str], dict] = {}
    for workload, *keys in memory_probes(size):
        for key in keys:
            if (workload, key) not in measured:
                measured[workload, key] = in_child(threads, _memory_child, size, workload, key, dtype)
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


def _pair_child(size: Size, pair_id: str, allocator: str, dtype: str = "fp32") -> dict:
    kept = allocator == "cached" and keep_freed_memory()
    w = Workloads(size, "cpu", dtype)
    pair = next(p for p in make_pairs(w) if p.id == pair_id)
    return {**_with_notes(time_pair(pair, size.warmup, CpuTimer()), w), "freed_memory_kept": kept}


def _with_notes(result: dict, w: Workloads) -> dict:
    return {**result, "notes": list(w.notes)} if w.notes else result


def _parameter_child(size: Size) -> dict:
    return parameter_counts(size)


def parameter_counts(size: Size) -> dict[str, int]:
    w = Workloads(size)  # on CPU: only counted
    keys = ("ours_encoder", "bart_encoder", "bert", "distilbert", "ours_s2s", "bart_s2s")
    # Tied matrices are counted once (parameters() deduplicates).
    return {key: sum(p.numel() for p in w.model(key).parameters()) for key in keys}


def _print_pair(result: dict) -> None:
    if result.get("skipped"):
        print(f"{result['id']:32s} not measured: {result['skipped']}", flush=True)
        return
    a, b = result["a"], result["b"]
    faults = ("" if a["page_faults_per_call"] is None else
              f"  page faults/call {a['page_faults_per_call']:.0f} / {b['page_faults_per_call']:.0f}")
    memory = f"  peak/call {a['peak_call_mb']:.0f} / {b['peak_call_mb']:.0f} MB" if "peak_call_mb" in a else ""
    print(f"{result['id']:32s} A {_fmt_time(a['median_s']):>10s}  B {_fmt_time(b['median_s']):>10s}  ratio "
          f"{result['ratio']:.3f} (per-round {result['round_ratio_median']:.3f}){faults}{memory}", flush=True)


def run_cpu_pairs(size: Size, dtype: str, only: str | None, allocator: str, threads: int) -> list[dict]:
    pairs = []
    for pair in select_pairs(make_pairs(Workloads(size, "cpu", dtype)), only):
        # Each pair in a fresh process: what earlier pairs left in the heap changed a ratio by up to 3%.
        pairs.append(in_child(threads, _pair_child, size, pair.id, allocator, dtype))
        _print_pair(pairs[-1])
    return pairs


# --------------------------------------------------------------------------------------------------------------------
# CUDA: every pair in this process, one after the other (see the module docstring for why)
# --------------------------------------------------------------------------------------------------------------------


def run_cuda_pairs(size: Size, dtype: str, only: str | None, timer=None) -> list[dict]:
    timer = timer or CudaEventTimer()
    pairs = []
    for pair_id in [p.id for p in select_pairs(make_pairs(Workloads(size, "cuda", dtype)), only)]:
        w = Workloads(size, "cuda", dtype)  # fresh models for every pair
        pair = next(p for p in make_pairs(w) if p.id == pair_id)
        try:
            result = time_pair(pair, size.warmup, timer)
        except torch.cuda.OutOfMemoryError as error:
            result = skipped_pair(pair, f"out of GPU memory: {str(error)[:200]}")
        finally:
            w.release()
        pairs.append(_with_notes(result, w))
        _print_pair(result)
    return pairs



# --------------------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------------------


def cpu_info() -> dict:
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


def _nvidia_smi(query: str) -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader", "-i",
                              str(torch.cuda.current_device())], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def gpu_info() -> dict:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"name": props.name, "memory_gb": props.total_memory / 2**30, "capability": f"{props.major}.{props.minor}",
            "multiprocessors": props.multi_processor_count, "driver": _nvidia_smi("driver_version"),
            "cuda_runtime": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "fp32_matmul_precision": torch.get_float32_matmul_precision()}  # "highest": no TF32


def machine(device: str = "cpu") -> dict:
    info = cpu_info()
    if device == "cuda":
        info["gpu"] = gpu_info()
    return info


def describe_machine(m: dict) -> str:
    ram = f", {m['ram_gb']:.0f} GB RAM" if m.get("ram_gb") else ""
    text = f"CPU: {m['cpu']}, {m['logical_cpus']} logical CPUs{ram}; {m['platform']}"
    gpu = m.get("gpu")
    if gpu:
        text = (f"GPU: {gpu['name']} ({gpu['memory_gb']:.0f} GiB, compute capability {gpu['capability']}), driver "
                f"{gpu['driver'] or 'unknown'}, CUDA runtime {gpu['cuda_runtime']}, cuDNN {gpu['cudnn']}, fp32 matmul "
                f"precision '{gpu['fp32_matmul_precision']}'. Host: " + text)
    return text


def git_state() -> dict:
    def git(*args):
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, timeout=30).stdout.strip()
    try:
        return {"commit": git("rev-parse", "--short", "HEAD"),
                "model_file_modified": bool(git("status", "--porcelain", "--", "../scratchformer/models/"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "model_file_modified": None}


def _fmt_time(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.2f} s"


def _fmt_rate(rate: float | None) -> str:
    return "" if rate is None else f"{rate:,.0f}"


def _mark(met: bool | None, noise_reaches: bool = False) -> str:
    if met is None:
        return ""
    return "met" if met else "**missed**" + (" (within noise: per-round max >= target)" if noise_reaches else "")


def group_label(group: dict) -> str:
    return f"{group['size_name']}, {DTYPE_TITLES[group['dtype']]}"


ISSUE_H100 = """\
From the issue "Performance on the hardware users train on", measured by the issue author **before the changes**
(not reproduced here): one H100, PyTorch 2.11, transformers 5.23, ours vs `BartForConditionalGeneration` of the
same dimensions, CUDA-event timing, interleaved, medians; ratio = BART time / our time (> 1: ours is faster).

| size | dtype | encoder fwd 64x128 (half the rows padded) | train step 64x128 | greedy generate batch 1, 64 new tokens | batch 32 |
|---|---|---|---|---|---|
| d256, 4+4 layers, 16k vocab | fp32 | 1.03 | 0.96 | 0.77 | 1.34 |
| same | bf16 autocast | 1.07 | 0.97 | 0.78 | 1.04 |
| paper base, d512, 6+6 | fp32 | 1.08 | 0.90 | 0.87 | 0.72 |
| same | bf16 autocast | 1.05 | 1.16 | 0.91 | 0.98 |
"""

METHODS = {
    "cpu": ("Each pair runs in its own process forked from the parent before anything is computed; wall-clock "
            "time (`time.perf_counter`) per call. Peak memory: resident set of one forked child per (workload, "
            "model), see the memory table of each group."),
    "cuda": ("Every pair runs in the benchmark's process, one after the other, with fresh models; between pairs the "
             "models are dropped, `torch.cuda.empty_cache()` and `torch._dynamo.reset()` run (no fork after CUDA "
             "is initialised; spawning a child per pair would pay an interpreter and a CUDA context each time, and "
             "the GPU's caching allocator has none of the heap-layout and page-fault effects the CPU forks are "
             "for). Time per call: `torch.cuda.Event(enable_timing=True)` around the call, "
             "`torch.cuda.synchronize()` before the start event and after the end event only. `peak/call` = "
             "`torch.cuda.max_memory_allocated()` during one extra untimed call after the warm-up (peak stats "
             "reset before it), minus what was allocated before it: activations, caches, gradients and temporary "
             "buffers, not the weights or the optimizer state (both models of a pair are resident)."),
}


def _speed_rows(group: dict, with_memory: bool) -> list[str]:
    rows = []
    for p in group["pairs"]:
        a, b = p["a"], p["b"]
        if p.get("skipped"):
            rows.append(f"| {p['title']} | {a['label']} | {b['label']} | not measured: {p['skipped']} "
                        + "| " * (8 if with_memory else 7) + "|")
            continue
        target = "" if p["target"] is None else (
            f">= {p['target']:g} {_mark(p['met'], p['round_ratio_max'] >= p['target'])}")
        peaks = (a.get("peak_call_mb"), b.get("peak_call_mb"))
        memory = "" if not with_memory else " |" if None in peaks else f" {peaks[0]:.0f} / {peaks[1]:.0f} MB |"
        rows.append(
            f"| {p['title']} | {a['label']} | {b['label']} | {_fmt_time(a['median_s'])} | {_fmt_time(b['median_s'])} "
            f"| {_fmt_rate(a['tokens_per_s'])} | {_fmt_rate(b['tokens_per_s'])} | **{p['ratio']:.3f}** "
            f"| {p['round_ratio_median']:.3f} [{p['round_ratio_min']:.2f}, {p['round_ratio_max']:.2f}] "
            f"| {a['spread_pct']:.1f}% / {b['spread_pct']:.1f}% |{memory} {target} |")
    return rows


def _speed_section(group: dict) -> list[str]:
    with_memory = group["device"] == "cuda"
    memory = " peak/call A / B |" if with_memory else ""
    return [
        "### Speed", "",
        "`ratio` = median time of B / median time of A = A tokens/s over B tokens/s (> 1: A faster). "
        "`per-round` = median [min, max] of B_i / A_i over neighbouring calls. `spread` = interquartile range "
        "/ median.", "",
        f"| pair | A | B | A median | B median | A tokens/s | B tokens/s | ratio | per-round | spread A / B |{memory} "
        "target |",
        "|---" * (11 + with_memory) + "|",
        *_speed_rows(group, with_memory),
        *_compile_notes(group),
    ]


def _compile_notes(group: dict) -> list[str]:
    """What torch.compile did in the compiled pairs: graphs and graph breaks of each side's first call (where
    generate() compiles), and graphs compiled during the timed rounds (should be 0: else compile time is timed)."""
    notes = []
    for p in group["pairs"]:
        notes += [f"- {p['title']}: note: {note}" for note in p.get("notes", [])]
        if "compile" not in p:
            continue
        sides = [f"{p[side]['label']}: {c['graphs']} graphs, {c['graph_breaks']} graph breaks"
                 for side in ("a", "b") if (c := p["compile"][side]) is not None]
        notes.append(f"- {p['title']}: {'; '.join(sides)}; graphs compiled while timed: "
                     f"{p['compile']['graphs_while_timed']}")
    return ["", "torch.compile in the compiled pairs (first call of each side), and notes:", "", *notes] if notes else []


def _matmul_section(group: dict) -> list[str]:
    m = group["matmul"]
    if "matmul_gflops" not in m:
        return []
    target = "" if m.get("target") is None else (
        f" (target >= {100 * m['target']:.0f}%: {_mark(m['met'])})")
    return [
        "", "### Against the machine's matmul throughput", "",
        f"{m.get('precision', 'fp32')} `torch.mm` {m['n']}x{m['n']}: **{m['matmul_gflops']:.1f} GFLOP/s** (median, "
        f"timed alternately with the encoder). Our encoder forward at batch {m['batch']} x {m['length']} "
        f"({m['encoder_gflop']:.1f} GFLOP per call): {m['encoder_gflops']:.1f} GFLOP/s = "
        f"**{100 * m['fraction']:.0f}%** of it{target}.", "",
        "Encoder throughput of every encoder at that shape (same FLOP count; medians from the encoder pairs): "
        + ", ".join(f"{k} {v:.1f} GFLOP/s ({100 * v / m['matmul_gflops']:.0f}%)"
                    for k, v in m["encoders_gflops"].items()) + ".",
    ]


def _memory_section(group: dict) -> list[str]:
    if group["device"] != "cpu":
        return []
    lines = [
        "", "### Peak memory (RSS)", "",
        "One forked child process per (workload, model) builds the model, then runs the workload twice; `increment` "
        "= peak resident set (VmHWM) while running minus the child's resident set before the model was built (the "
        "interpreter and libraries, the same for all): weights, activations, caches, optimizer state. The "
        "transients of building a model from random weights are not counted. In the children glibc maps every "
        "allocation of 128 KiB or more on its own and unmaps it on free, so the resident set follows the live "
        "tensors (with its defaults the same child varied by +-15% between runs). `code` = library code paged in "
        "on first use (file-backed, shared between processes), part of the increment. Target: ours <= theirs.", "",
        "| workload | ours | theirs | ours increment | theirs increment | ratio | ours / theirs code | ours peak "
        "| theirs peak | target |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in group["memory"]:
        lines.append(
            f"| {c['workload']} | {c['ours']} | {c['theirs']} | {c['ours_increment_mb']:.1f} MB "
            f"| {c['theirs_increment_mb']:.1f} MB | **{c['ratio']:.3f}** "
            f"| {c['ours_code_mb']:.1f} / {c['theirs_code_mb']:.1f} MB | {c['ours_peak_mb']:.0f} MB "
            f"| {c['theirs_peak_mb']:.0f} MB | {'' if c['target'] is None else _mark(c['met'])} |")
    if not group["memory"] and group["size"].get("overhead_bound"):
        lines.append("| (not measured in this group: a tiny model's peak is library code paged in, not data) "
                     "| | | | | | | | | |")
    elif not group["memory"]:
        lines.append("| (not measured: --no-memory, --only, or no Linux /proc/self/clear_refs) | | | | | | | | | |")
    return lines


def group_spread(group: dict) -> float | None:
    """Median interquartile spread (% of the median) of every timed side of the group's pairs."""
    spreads = [p[side]["spread_pct"] for p in group["pairs"] if not p.get("skipped") for side in ("a", "b")]
    return statistics.median(spreads) if spreads else None


def _noise_warning(group: dict) -> list[str]:
    spread = group_spread(group)
    if spread is None or spread <= NOISY_SPREAD_PCT:
        return []
    return [f"**Noisy run: the median spread of the calls was {spread:.0f}%** (on a quiet machine 1-5%). Speed "
            "ratios within that distance of 1 are not differences; the per-round ratios (neighbouring calls) and "
            "the memory numbers are the more reliable ones here. Rerun the group on a quieter machine to settle "
            "them.", ""]


def _group_section(group: dict) -> list[str]:
    run, size = group["run"], group["size"]
    load = run["load_average"]
    padded = " (rows B/2.. of the encoder batch padded to half their length)" if size.get("encoder_pad_half") else ""
    return [
        f"## {group_label(group)}: {describe_size(size)}", "",
        f"Measured by `{run['command']}` on {run['date']} ({run['mode']} mode, {run['duration_s']:.0f} s), "
        f"scratchformer {run['versions']['scratchformer']} at commit {run['git']['commit']}"
        + (" (model files modified)" if run["git"]["model_file_modified"] else "")
        + f"; torch {run['versions']['torch']} ({run['threads']} intra-op threads), transformers "
        f"{run['versions']['transformers']}, Python {run['versions']['python']}. {describe_machine(run['machine'])}. "
        f"Timer: {run['timer']}. Load "
        f"average (1 min) before / after: {load['before'][0]:.2f} / {load['after'][0]:.2f}. {run['shared_note']}", "",
        f"Warm-up {size['warmup']} calls each, then {size['repeats']} rounds A/B/A/B ({size['slow_repeats']} for "
        f"the no-cache generation){padded}. Memory allocator during the timings: {run['allocator']}. Parameters: "
        + ", ".join(f"{k} {v / 1e6:.2f} M" for k, v in group["parameters"].items()) + ".", "",
        *_noise_warning(group), *_speed_section(group), *_matmul_section(group), *_memory_section(group), "",
    ]


def _targets_section(results: dict) -> list[str]:
    lines, missed = ["## Targets", ""], []
    for group in results["groups"]:
        for t in group["targets"]:
            lines.append(f"- [{group_label(group)}] {t['name']}: {t['value']:.3f} (target {t['op']} {t['target']:g}) "
                         f"{_mark(t['met'])}")
            if not t["met"]:
                missed.append((group, t))
    if missed:
        lines += ["", "## Missed targets: what remains and why", ""]
        for group, t in missed:
            key = (results["device"], group["size_name"], group["dtype"])
            why = EXPLANATIONS[t["group"]] if key == ("cpu", "d256", "fp32") else GROUP_EXPLANATIONS.get(
                (*key, t["group"]),
                "not profiled yet in this group (the notes below were taken on the CPU d256 fp32 group).")
            spread = group_spread(group) or 0
            timed = t["group"] != "memory"  # the memory children are not timings
            noisy = f"noisy run (median spread {spread:.0f}%); " if timed and spread > NOISY_SPREAD_PCT else ""
            lines.append(f"- **[{group_label(group)}] {t['name']}**: {noisy}{why}")
    return lines + [""]


def missing(device: str, results: dict | None) -> list[dict]:
    """The planned measurements of ``device`` that ``results`` lacks, with the reason where a pair was skipped."""
    measured, skipped = set(), {}
    for group in (results or {}).get("groups", []):
        for p in group["pairs"]:
            key = (group["size_name"], group["dtype"], p["id"])
            if p.get("skipped"):
                skipped[key] = p["skipped"]
            else:
                measured.add(key)
    return [{**item, "reason": skipped.get((item["size_name"], item["dtype"], item["id"]))}
            for item in plan(device) if (item["size_name"], item["dtype"], item["id"]) not in measured]


def _missing_lines(items: list[dict]) -> list[str]:
    by_pair: dict[tuple[str, str, str], list[str]] = {}
    for item in items:
        where = f"{item['size_name']} {DTYPE_TITLES[item['dtype']]}"
        by_pair.setdefault((item["title"], item["a"], item["b"]), []).append(
            where + (f" ({item['reason']})" if item["reason"] else ""))
    return [f"- {title}: {a} vs {b} -- {'; '.join(where)}" for (title, a, b), where in by_pair.items()]


def _unmeasured_section(device: str, results: dict, gpu_results: dict | None) -> list[str]:
    gpu_missing = missing("cuda", gpu_results)
    lines = ["## Not measured yet", ""]
    if gpu_results is None:
        lines += ["**GPU: none of the GPU numbers exist yet.** No GPU was available when the GPU path of this "
                  f"benchmark was written. Produce them on a CUDA machine with `{GPU_COMMAND}` (fp32 and bf16 "
                  "autocast, sizes d256 and base; writes `results_cuda.json` and `RESULTS_cuda.md` beside these "
                  "files, this report's list below updates on the next run or `--render-only`). Until then the "
                  "only GPU numbers are the issue author's table above. Planned:", ""]
    elif gpu_missing:
        lines += [f"**GPU: not measured or not supported** in `results_cuda.json` (rerun `{GPU_COMMAND}`):", ""]
    else:
        lines += ["GPU: every planned GPU measurement is in `RESULTS_cuda.md`.", ""]
    lines += _missing_lines(gpu_missing)
    quick_only = all(group["size_name"] == "quick" for group in results["groups"])  # a smoke test
    own = missing(device, results) if device == "cpu" and not quick_only else []
    if own:
        lines += ["", "**CPU: not measured or not supported** (rerun the group: `python benchmarks/run.py --sizes "
                  "<size> --threads 1`):", "", *_missing_lines(own)]
    return lines + [""]


def render_markdown(results: dict, gpu_results: dict | None = None) -> str:
    device = results["device"]
    gpu_results = results if device == "cuda" else gpu_results
    machines = list(dict.fromkeys(describe_machine(g["run"]["machine"]) for g in results["groups"]))
    lines = [
        f"# Scratchformer vs Hugging Face models: benchmark results ({'GPU' if device == 'cuda' else 'CPU'})", "",
        "Generated by `benchmarks/run.py" + (" --device cuda`" if device == "cuda" else "`")
        + "; each group below names the command, date and commit of its own run. Do not edit by hand: rerun "
        "the command (`--render-only` rewrites this file from the JSON).", "",
        *([f"**No GPU numbers have been measured by this benchmark yet**: see [Not measured yet](#not-measured-yet) "
           f"for the list and the command (`{GPU_COMMAND}`), and the issue author's H100 table (before the "
           "changes) above it.", ""] if gpu_results is None else []),
        "## Machine and versions", "",
        *(f"- {m}" for m in machines), "",
        *(["The groups below were measured on different machines (each group names its own): compare ratios "
           "within a group, not absolute times across groups.", ""] if len(machines) > 1 else []),
        "## What is compared", "",
        "Every pair compares models of identical dimensions (per group below), sdpa attention unless stated, ReLU. "
        + METHODS[device], "",
        DIFFERENCES,
    ]
    for group in results["groups"]:
        lines += _group_section(group)
    lines += _targets_section(results)
    lines += ["## GPU: the issue's H100 numbers (before the changes)", "", ISSUE_H100]
    lines += _unmeasured_section(device, results, gpu_results)
    if device == "cpu":
        lines += ["## Profiling notes", "", PROFILING_NOTES]
    return "\n".join(lines).rstrip("\n") + "\n"


def matmul_summary(size: Size, pairs: list[dict], device: str, dtype: str) -> dict:
    by_id = {p["id"]: p for p in pairs if not p.get("skipped")}
    # On a GPU a 64 x 128 encoder is far from compute-bound, and so is the overhead group's tiny model anywhere.
    target = MATMUL_TARGET if device == "cpu" and not size.overhead_bound else None
    matmul = {"n": size.matmul_n, "batch": size.encoder_batch, "length": size.long, "target": target,
              "precision": "bf16 (autocast)" if dtype == "bf16" else "fp32", "fraction": math.nan, "met": None,
              "encoders_gflops": {}}
    if "matmul" not in by_id:
        return matmul
    flop = encoder_flops(size, size.encoder_batch, size.long)
    mm = by_id["matmul"]
    matmul.update(encoder_gflop=flop / 1e9, matmul_gflops=2 * size.matmul_n**3 / mm["b"]["median_s"] / 1e9,
                  encoder_gflops=flop / mm["a"]["median_s"] / 1e9)
    matmul["fraction"] = matmul["encoder_gflops"] / matmul["matmul_gflops"]
    matmul["met"] = None if target is None else matmul["fraction"] >= target
    for p in by_id.values():
        if p["group"] == "encoder" and p["id"].startswith(f"encoder_b{size.encoder_batch}_s{size.long}_"):
            matmul["encoders_gflops"].setdefault(p["a"]["label"], flop / p["a"]["median_s"] / 1e9)
            matmul["encoders_gflops"][p["b"]["label"]] = flop / p["b"]["median_s"] / 1e9
    return matmul


def collect_targets(pairs: list[dict], memory: list[dict], matmul: dict) -> list[dict]:
    targets = [{"name": f"{p['title']}: {p['a']['label']} vs {p['b']['label']}", "group": p["group"],
                "value": p["ratio"], "op": ">=", "target": p["target"], "met": p["met"]}
               for p in pairs if p["target"] is not None and not p.get("skipped")]
    targets += [{"name": f"peak memory {c['workload']}: {c['ours']} / {c['theirs']}", "group": "memory",
                 "value": c["ratio"], "op": "<=", "target": c["target"], "met": c["met"]}
                for c in memory if c["target"] is not None]
    if matmul.get("met") is not None:
        targets.append({"name": "encoder forward / fp32 matmul throughput", "group": "matmul",
                        "value": matmul["fraction"], "op": ">=", "target": matmul["target"], "met": matmul["met"]})
    return targets


# --------------------------------------------------------------------------------------------------------------------
# Results files
# --------------------------------------------------------------------------------------------------------------------


def upgrade(results: dict) -> dict:
    """A results.json written before size groups (one CPU group at d256, fp32) in the current layout."""
    if results.get("schema") == SCHEMA:
        return results
    run = dict(results["meta"])
    size, parameters = run.pop("size"), run.pop("parameters")
    size_name = "quick" if run.get("mode") == "quick" else "d256"
    if size_name == "d256":  # the same group is now measured by this command
        run["original_command"] = run["command"]
        run["command"] = run["command"].replace("run.py", "run.py --sizes d256", 1)
    run["timer"] = CpuTimer.name
    group = {"size_name": size_name, "dtype": "fp32", "device": "cpu", "run": run, "size": size,
             "parameters": parameters, **{key: results[key] for key in ("pairs", "matmul", "memory",
                                                                          "memory_children", "targets")}}
    return {"schema": SCHEMA, "device": "cpu", "groups": [group]}


def load_results(path: Path) -> dict | None:
    return upgrade(json.loads(path.read_text())) if path.exists() else None


def merge_results(existing: dict | None, new: dict) -> dict:
    """``new``'s groups replace those of the same (size, dtype) in ``existing``; the others are kept."""
    groups = {(g["size_name"], g["dtype"]): g for g in (existing or {}).get("groups", [])}
    groups.update({(g["size_name"], g["dtype"]): g for g in new["groups"]})
    order = [(name, dtype) for name in SIZES[new["device"]] for dtype in DTYPES]
    ordered = sorted(groups.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order))
    return {"schema": SCHEMA, "device": new["device"], "groups": [group for _, group in ordered]}


def render_files(out_dir: Path) -> dict[str, dict | None]:
    """Rewrite the Markdown of every device whose JSON is in ``out_dir`` (the CPU report lists what the GPU
    results lack)."""
    loaded = {device: load_results(out_dir / result_files(device)[0]) for device in DEVICES}
    for device, results in loaded.items():
        if results is not None:
            (out_dir / result_files(device)[1]).write_text(render_markdown(results, loaded["cuda"]))
    return loaded


def write_results(out_dir: Path, results: dict) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / result_files(results["device"])[0]
    merged = merge_results(load_results(path), results)
    path.write_text(json.dumps(merged, indent=1) + "\n")
    render_files(out_dir)
    print(f"wrote {path} and {out_dir / result_files(results['device'])[1]}")
    return merged


# --------------------------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------------------------


def command_line(args: argparse.Namespace) -> str:
    parts = ["python benchmarks/run.py"]
    parts += ["--device cuda"] if args.device == "cuda" else []
    parts += ["--quick"] if args.quick else []
    for option in ("sizes", "dtype", "threads", "repeats", "only"):
        if getattr(args, option) is not None:
            parts.append(f"--{option} {getattr(args, option)}")
    parts += ["--no-memory"] if args.no_memory else []
    parts += ["--allocator default"] if args.allocator == "default" else []
    return " ".join(parts)


def run_meta(args: argparse.Namespace, threads: int, started: float, load_before: tuple, pairs: list[dict]) -> dict:
    load_after = os.getloadavg()
    busy = args.device == "cpu" and max(load_before[0], load_after[0]) > 0.5 * (os.cpu_count() or 1)
    if args.device == "cuda":
        allocator = "PyTorch's CUDA caching allocator"
    else:
        kept = bool(pairs) and all(p["freed_memory_kept"] for p in pairs)
        allocator = "glibc, freed memory kept" if kept else "default"
    return {
        "command": command_line(args), "mode": "quick" if args.quick else "full",
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "duration_s": time.perf_counter() - started, "machine": machine(args.device), "threads": threads,
        "allocator": allocator, "timer": make_timer(args.device).name,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "scratchformer": scratchformer.__version__},
        "git": git_state(), "load_average": {"before": load_before, "after": load_after},
        "shared_note": ("The machine was shared with other jobs during the run (load above half the CPUs): "
                        "absolute times are noisy, ratios of neighbouring A/B calls less so." if busy else
                        "The host was otherwise idle." if args.device == "cpu" else ""),
    }


def run_group(args: argparse.Namespace, size_name: str, dtype: str, threads: int) -> dict:
    """Every pair (and on CPU the memory children) of one (size, dtype) group."""
    size = SIZES[args.device][size_name]
    if args.repeats:
        size = replace(size, repeats=args.repeats)
    print(f"== {args.device}, {size_name}, {DTYPE_TITLES[dtype]}", flush=True)
    started, load_before = time.perf_counter(), os.getloadavg()
    memory_raw, memory = [], []
    if args.device == "cuda":
        pairs = run_cuda_pairs(size, dtype, args.only)
        parameters = parameter_counts(size)
    else:
        # Every measurement runs in a child forked from this process, which computes nothing itself.
        if not (args.no_memory or args.only or size.overhead_bound):  # a tiny model's peak is library code
            memory_raw, memory = measure_memory(size, threads, dtype)
            print(f"memory: {len(memory_raw)} children", flush=True)
        pairs = run_cpu_pairs(size, dtype, args.only, args.allocator, threads)
        parameters = in_child(threads, _parameter_child, size)
    matmul = matmul_summary(size, pairs, args.device, dtype)
    return {"size_name": size_name, "dtype": dtype, "device": args.device,
            "run": run_meta(args, threads, started, load_before, pairs), "size": asdict(size),
            "parameters": parameters, "pairs": pairs, "matmul": matmul, "memory": memory,
            "memory_children": memory_raw, "targets": collect_targets(pairs, memory, matmul)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="cpu (default): forked children, wall clock, RSS; cuda: CUDA events, in-process, "
                             f"torch.cuda.max_memory_allocated; writes {' / '.join(result_files('cuda'))}")
    parser.add_argument("--dtype", default=None,
                        help="comma-separated: fp32 (float32 weights and compute), bf16 (float32 weights, "
                             "bf16 autocast); default fp32 on cpu, fp32,bf16 on cuda")
    parser.add_argument("--sizes", default=None,
                        help="comma-separated size groups: d256 (4+4 layers, 16k vocab), base (the paper's base: "
                             "d512, 6+6 layers, 8 heads, FFN 2048, 37k vocab), overhead (CPU only: d64, 4+4 layers, "
                             "whose calls cost per-call work as small models' do on a GPU; no memory children); "
                             "default all of the device's. Groups not run are kept in the results file")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds (for the test)")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where to write the results (default: this folder; a temporary one with --quick or "
                             "--only)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's, i.e. all cores; 1 with --quick)")
    parser.add_argument("--repeats", type=int, default=None, help="A/B rounds per pair")
    parser.add_argument("--only", default=None,
                        help="run only pairs whose id contains one of these comma-separated texts (no memory); "
                             "with an explicit --out-dir the partial group replaces the stored one")
    parser.add_argument("--no-memory", action="store_true", help="skip the CPU peak-memory children")
    parser.add_argument("--allocator", choices=("cached", "default"), default="cached",
                        help="CPU timings: 'cached' keeps freed memory (no page faults after warm-up, see "
                             "keep_freed_memory); 'default' leaves glibc as it is")
    parser.add_argument("--render-only", action="store_true",
                        help="measure nothing: rewrite the Markdown reports from the JSON files in --out-dir")
    args = parser.parse_args(argv)
    if args.quick and args.sizes:
        parser.error("--quick runs the tiny size only: leave out --sizes")
    try:
        args.dtypes = parse_dtypes(args.dtype, args.device)
        args.size_names = ("quick",) if args.quick else parse_sizes(args.sizes, args.device)
    except ValueError as error:
        parser.error(str(error))
    if args.device == "cuda" and not args.render_only and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False on this machine")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    partial = args.quick or args.only
    out_dir = args.out_dir or (Path(tempfile.mkdtemp(prefix="scratchformer-bench-")) if partial else HERE)
    if args.render_only:
        return render_files(out_dir)
    if args.threads or args.quick:  # quick: one thread, so that a busy machine cannot stall OpenMP barriers
        torch.set_num_threads(args.threads or 1)
    threads = torch.get_num_threads()
    transformers.logging.set_verbosity_error()
    groups = [run_group(args, name, dtype, threads) for name in args.size_names for dtype in args.dtypes]
    return write_results(out_dir, {"schema": SCHEMA, "device": args.device, "groups": groups})


if __name__ == "__main__":
    main()
