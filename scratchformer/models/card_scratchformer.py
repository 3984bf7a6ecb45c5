"""The short model card that ``model.push_to_hub`` writes for a repo that has none, and the push that writes it.

It travels with the model code, so a Hub user's copy (without ``scratchformer``, whose ``hub.card`` writes the full
card) pushes a card too: it imports only the standard library and, when pushing, ``huggingface_hub``.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

PAPER_CITATION = """
@inproceedings{vaswani2017attention,
  title     = {Attention Is All You Need},
  author    = {Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion and
               Gomez, Aidan N. and Kaiser, {\\L}ukasz and Polosukhin, Illia},
  booktitle = {Advances in Neural Information Processing Systems 30 (NIPS 2017)},
  pages     = {5998--6008},
  year      = {2017},
  url       = {https://arxiv.org/abs/1706.03762}
}
"""


def model_card_text(model: Any, repo_id: str) -> str:
    """A short model card for ``model.push_to_hub``: metadata, the architecture, how to load it, what it is for,
    its limits and the paper to cite."""
    c = model.config
    tags = ["scratchformer", "transformer", "attention-is-all-you-need", "custom_code", "feature-extraction"]
    return "\n".join([
        "---", "library_name: transformers", "pipeline_tag: feature-extraction", "tags:", *[f"- {tag}" for tag in tags],
        "---", "", f"# {repo_id.split('/')[-1]}", "",
        f"A Scratchformer ({type(model).__name__}): the encoder-decoder Transformer of *Attention Is All You Need* "
        f"written from scratch, with {c.encoder_layers} encoder / {c.decoder_layers} decoder layers, d_model "
        f"{c.d_model}, {c.encoder_attention_heads} heads, d_ff {c.encoder_ffn_dim}, {c.position_embedding_type} "
        f"positions and {model.num_parameters() / 1e6:.1f} M parameters.", "",
        "## How to use", "", "```python", "from transformers import AutoModel, AutoTokenizer", "",
        f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)',
        f'encoder = AutoModel.from_pretrained("{repo_id}", trust_remote_code=True)  # runs this repo\'s code',
        'states = encoder(**tokenizer(["A sentence."], return_tensors="pt")).last_hidden_state', "```", "",
        "## Uses and limitations", "",
        "For studying and teaching the Transformer, and as a small model to fine-tune. A small model trained from "
        "scratch: not for decisions about people or anything that needs reliable or unbiased output.", "",
        "## Training data", "", "Not described yet: add the data this model was trained on, and their licences.", "",
        "## Citation", "", "```bibtex", PAPER_CITATION.strip(), "```", "",
    ])


def push_with_model_card(model: Any, repo_id: str, *, commit_message: str | None = None,
                         commit_description: str | None = None, private: bool | None = None,
                         token: bool | str | None = None, revision: str | None = None, create_pr: bool = False,
                         max_shard_size: int | str | None = "50GB", tags: list[str] | None = None):
    """``PreTrainedModel.push_to_hub`` with our card: create the repo if needed, save the model into a temporary
    folder, add ``README.md`` unless the repo has one (its card is kept), upload everything in one commit."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder, max_shard_size=max_shard_size)
        if not api.file_exists(repo_id, "README.md", revision=revision):
            card = model_card_text(model, repo_id)
            if tags:
                card = card.replace("tags:\n", "tags:\n" + "".join(f"- {tag}\n" for tag in tags), 1)
            with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as handle:
                handle.write(card)
        return api.upload_folder(repo_id=repo_id, folder_path=folder, revision=revision, create_pr=create_pr,
                                 commit_message=commit_message or "Upload model",
                                 commit_description=commit_description)
