"""Interpretability interop: nnsight traces our encoder-decoder like any PyTorch model - offline.

    pip install "scratchformer[interp]"     # nnsight
    python examples/nnsight_interop.py      # the shipped checkpoint

nnsight (https://nnsight.net) wraps a ``torch.nn.Module`` and lets code inside ``with model.trace(...)`` read and
overwrite the output of any submodule. Our model is a plain module tree, so ``NNsight(model)`` is all it takes:

1. **read** the residual stream after encoder layer 3 and the cross-attention output of decoder layer 1; the
   residual stream is exactly what the package's own extractor gives as ``hidden_states[3]``;
2. **patch** one activation: the encoder's vector of "bank" from "... at the bank on Monday." is written into the
   run on "... at the river on Monday." at one encoder layer, and the decoder's probability of reconstructing
   " bank" there is read from the output. The shipped checkpoint is a denoising autoencoder, so its decoder copies
   what the encoder says stands at each position: the patch decides which word it writes.

The script exits quietly (status 0) with a note when nnsight is not installed. nnsight mounts ``.save()`` on every
Python object when imported, which is one more reason to run it as its own process.
"""

from __future__ import annotations

import importlib.util
import sys

CLEAN = "She deposited her salary at the bank on Monday."
CORRUPT = "She deposited her salary at the river on Monday."
READ_LAYER = 3  # encoder layer whose output (residual stream) is read: hidden_states[3]


def hidden(output):
    """A module's output tensor: a layer returns its hidden states, an attention sublayer ``(output, weights)``."""
    return output[0] if isinstance(output, tuple) else output


def probability_of(logits, position: int, token_id: int) -> float:
    """The decoder's probability of ``token_id`` at ``position`` (teacher forcing: the logits at p predict target
    token p)."""
    return float(logits[0, position].softmax(-1)[token_id])


def main() -> int:
    if importlib.util.find_spec("nnsight") is None:
        print('skipped: nnsight is not installed (pip install "scratchformer[interp]")')
        return 0
    import torch
    from nnsight import NNsight

    from scratchformer.analysis.extractor import EmbeddingExtractor
    from scratchformer.loading import load

    model, tokenizer = load("small", task="seq2seq")
    traced = NNsight(model)
    encoder_layers, decoder_layers = traced.model.encoder.layers, traced.model.decoder.layers

    clean, corrupt = tokenizer([CLEAN], return_tensors="pt"), tokenizer([CORRUPT], return_tensors="pt")
    position = EmbeddingExtractor(model, tokenizer).locate_word(CLEAN, "bank").token_indices
    if len(position) != 1 or clean["input_ids"].shape != corrupt["input_ids"].shape:
        raise SystemExit("the example needs 'bank' and 'river' to be one token each")
    position = position[0]
    bank_id = int(clean["input_ids"][0, position])
    # the decoder reconstructs the clean sentence (teacher forcing: the target shifted right)
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(clean["input_ids"])

    # 1. read: one layer's residual stream and one cross-attention output
    with torch.no_grad(), traced.trace(**clean, decoder_input_ids=decoder_input_ids):
        residual = hidden(encoder_layers[READ_LAYER - 1].output).save()  # (1, source tokens, d_model)
        cross = hidden(decoder_layers[0].cross_attn.output).save()  # (1, target tokens, d_model)
        clean_logits = traced.output.logits.save()
    ours = EmbeddingExtractor(model, tokenizer).token_embeddings(CLEAN, layer=READ_LAYER)[0].vectors
    print(f"encoder layer {READ_LAYER} output (residual stream) {tuple(residual.shape)}; max |nnsight - "
          f"EmbeddingExtractor hidden_states[{READ_LAYER}]| = {float((residual[0] - ours).abs().max()):.2e}")
    print(f"decoder layer 1 cross-attention output {tuple(cross.shape)}, mean norm per token "
          f"{float(cross[0].norm(dim=-1).mean()):.2f}")

    # 2. patch: the clean run's encoder vector of "bank" into the corrupt run, one encoder layer at a time
    clean_vectors = []
    with torch.no_grad(), traced.trace(**clean, decoder_input_ids=decoder_input_ids):
        for layer in encoder_layers:
            clean_vectors.append(hidden(layer.output)[0, position].clone().save())
    with torch.no_grad(), traced.trace(**corrupt, decoder_input_ids=decoder_input_ids):
        corrupt_logits = traced.output.logits.save()
    p_clean = probability_of(clean_logits, position, bank_id)
    p_corrupt = probability_of(corrupt_logits, position, bank_id)
    print(f"p(' bank' at position {position}) reading {CLEAN!r}: {p_clean:.3f}; reading {CORRUPT!r}: {p_corrupt:.3f}")
    for k, vector in enumerate(clean_vectors):
        with torch.no_grad(), traced.trace(**corrupt, decoder_input_ids=decoder_input_ids):
            hidden(encoder_layers[k].output)[0, position] = vector  # overwrite one activation
            patched_logits = traced.output.logits.save()
        print(f"  patched after encoder layer {k + 1}: p(' bank') = "
              f"{probability_of(patched_logits, position, bank_id):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
