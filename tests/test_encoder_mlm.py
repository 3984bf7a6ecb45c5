"""The encoder's masked-token loss (``--encoder-mlm-weight``): the masking, the collator, the loss, the run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from model_fixtures import tiny_config
from test_contrastive import EOS, MASK, PAD, paragraphs, text  # noqa: F401  (paragraphs is a fixture)
from test_training import tiny, train_losses
from transformers import TrainerCallback

from scratchformer import ScratchformerForConditionalGeneration
from scratchformer.training import run_training
from scratchformer.training.encoder_mlm import MaskedTokenLoss, mask_tokens
from scratchformer.training.noise import DataCollatorForTextInfilling

SPECIALS = (0, 1, 2, 3, 4)
VOCAB = 600


def collator(**overrides) -> DataCollatorForTextInfilling:
    return DataCollatorForTextInfilling(pad_token_id=PAD, mask_token_id=MASK, eos_token_id=EOS,
                                        decoder_start_token_id=EOS, seed=3, vocab_size=VOCAB,
                                        special_ids=SPECIALS, **overrides)


def test_mask_tokens_follows_berts_proportions_and_never_touches_special_tokens():
    """Over 200,000 tokens at probability 0.15: the chosen share, and of those the <mask> / random / kept shares,
    are within 0.01 of 0.15, 0.8, 0.1, 0.1 (a binomial standard error is below 0.002); </s> is never chosen; a
    random replacement is never a special token."""
    rng = np.random.default_rng(0)
    ordinary = np.arange(5, VOCAB)
    chosen_count = total = masked = random_count = kept = 0
    for start in range(0, 2000):
        ids = [5 + (start * 7 + i) % (VOCAB - 5) for i in range(100)] + [EOS]
        copy, chosen = mask_tokens(ids, rng, 0.15, MASK, ordinary)
        assert len(copy) == len(ids) and len(ids) - 1 not in chosen and copy[-1] == EOS
        unchosen = set(range(len(ids))) - set(chosen)
        assert all(copy[i] == ids[i] for i in unchosen)
        for i in chosen:
            masked += copy[i] == MASK
            kept += copy[i] == ids[i]
            random_count += copy[i] not in (MASK, ids[i])
            assert copy[i] not in SPECIALS or copy[i] == MASK
        chosen_count += len(chosen)
        total += len(ids) - 1
    assert chosen_count / total == pytest.approx(0.15, abs=0.01)
    # a random draw equal to the original counts as kept: 1 in 595, far below the tolerance
    assert (masked / chosen_count, random_count / chosen_count, kept / chosen_count) == \
        pytest.approx((0.8, 0.1, 0.1), abs=0.01)


def test_the_collator_adds_masked_copies_only_when_asked_and_leaves_the_rest_as_it_was():
    features = [{"input_ids": text(40)}, {"input_ids": text(8)}, {"input_ids": text(60, start=300)}]
    plain = collator()(features)
    both = collator(crop_pairs=True, encoder_mlm_probability=0.3)(features)
    cropped = collator(crop_pairs=True)(features)
    assert not any(key.startswith("mlm_") for key in plain)
    for key, value in cropped.items():  # the noise and the windows are unchanged by the masked copies
        assert torch.equal(both[key], value), key
    ids, attention = both["mlm_input_ids"], both["mlm_attention_mask"]
    positions, targets = both["mlm_positions"], both["mlm_targets"]
    assert ids.shape == plain["labels"].shape and torch.equal(attention.bool(), plain["labels"] != -100)
    assert len(positions) == len(targets) > 0
    originals = plain["labels"].reshape(-1)
    assert torch.equal(originals[positions], targets)  # each target is the clean token at its position
    unchosen = torch.ones(ids.numel(), dtype=torch.bool)
    unchosen[positions] = False
    assert torch.equal(ids.reshape(-1)[unchosen & attention.reshape(-1).bool()],
                       originals[unchosen & attention.reshape(-1).bool()])
    again = collator(encoder_mlm_probability=0.3)(features)
    assert torch.equal(again["mlm_input_ids"], ids)  # a function of seed, epoch and text: resumable
    assert not torch.equal(collator(encoder_mlm_probability=0.3, epoch=1)(features)["mlm_input_ids"], ids)


def test_whole_word_masking_chooses_every_piece_of_a_word_together():
    """With the shipped tokenizer's word pieces: " river" + "ban" + "k" is one word, "," and a word after a newline
    start their own; over many texts every word is chosen whole or not at all, at about the probability (within
    0.02 of 0.3 of the words; a binomial standard error is below 0.005), and the pieces keep BERT's 80/10/10."""
    from scratchformer import ScratchformerTokenizer
    from scratchformer.loading import pretrained_path
    from scratchformer.training.encoder_mlm import word_pieces

    tokenizer = ScratchformerTokenizer.from_pretrained(pretrained_path("small"))
    words = word_pieces(tokenizer)
    ids = tokenizer("The riverbank, unsurprisingly, flooded in 1999.\nNew line")["input_ids"]
    pieces = tokenizer.convert_ids_to_tokens(ids)
    starts = words.word_starts(np.asarray(ids))
    spelled = [("" if start else "+") + piece for piece, start in zip(pieces, starts)]
    assert spelled[:8] == ["The", "Ġriver", "+ban", "+k", ",", "Ġuns", "+ur", "+pr"]
    assert spelled[13:] == ["Ġin", "Ġ199", "+9", ".", "Ċ", "New", "Ġline", "</s>"]
    ordinary = np.setdiff1d(np.arange(len(tokenizer)), tokenizer.all_special_ids)
    rng = np.random.default_rng(0)
    chosen_words = all_words = masked = pieces_chosen = 0
    for k in range(400):
        ids = tokenizer(f"Riverbanks {k} flooded unsurprisingly, and the banking quarter too.")["input_ids"]
        copy, chosen = mask_tokens(ids, rng, 0.3, tokenizer.mask_token_id, ordinary, words)
        word = np.cumsum(words.word_starts(np.asarray(ids))) - 1
        for w in range(word[-2] + 1):  # every word but </s>
            inside = set(np.flatnonzero(word == w).tolist())
            assert inside <= set(chosen) or not inside & set(chosen), (ids, chosen)
            chosen_words += inside <= set(chosen)
            all_words += 1
        assert len(ids) - 1 not in chosen
        masked += sum(copy[i] == tokenizer.mask_token_id for i in chosen)
        pieces_chosen += len(chosen)
    assert chosen_words / all_words == pytest.approx(0.3, abs=0.02)
    assert masked / pieces_chosen == pytest.approx(0.8, abs=0.03)
    # without words: the same draw gives each piece its own choice, as before
    plain = mask_tokens(ids, np.random.default_rng(5), 0.3, tokenizer.mask_token_id, ordinary)
    assert plain == mask_tokens(ids, np.random.default_rng(5), 0.3, tokenizer.mask_token_id, ordinary, None)


def test_whole_word_masking_is_an_option_of_the_run_and_needs_a_masked_copy(tmp_path, paragraphs):  # noqa: F811
    """--encoder-mlm-whole-words reaches the collator (its copies differ from the piece-by-piece ones) and is
    recorded; without a loss that reads the masked copy it is warned about and ignored."""
    options, args = tiny(tmp_path, paragraphs, "whole", max_length=64, max_steps=2, encoder_mlm_weight=1.0,
                         denoising_weight=0.0, encoder_mlm_whole_words=True, save_steps=100)
    out = Path(run_training(options, args)["output_dir"])
    assert json.loads((out / "train_config.json").read_text())["encoder_mlm_whole_words"] is True
    from scratchformer.training.checks import check_options

    with pytest.warns(UserWarning, match="--encoder-mlm-whole-words \\(without --encoder-mlm-weight"):
        check_options(*tiny(tmp_path, paragraphs, "ignored", encoder_mlm_whole_words=True))
    with pytest.raises(ValueError, match="needs word_pieces"):
        collator(encoder_mlm_probability=0.15, mlm_whole_words=True)
    from scratchformer import ScratchformerTokenizer

    tokenizer = ScratchformerTokenizer.from_pretrained(out)
    features = [{"input_ids": tokenizer(f"Riverbanks {k} flooded unsurprisingly.")["input_ids"]} for k in range(8)]
    copies = {whole: DataCollatorForTextInfilling.from_tokenizer(tokenizer, EOS, encoder_mlm_probability=0.3,
                                                                 mlm_whole_words=whole)(features)["mlm_input_ids"]
              for whole in (False, True)}
    assert copies[True].shape == copies[False].shape and not torch.equal(copies[True], copies[False])


def test_the_collator_needs_the_vocabulary_for_masked_copies():
    with pytest.raises(ValueError, match="needs vocab_size"):
        DataCollatorForTextInfilling(pad_token_id=PAD, mask_token_id=MASK, eos_token_id=EOS,
                                     decoder_start_token_id=EOS, encoder_mlm_probability=0.15)
    with pytest.raises(ValueError, match=r"encoder_mlm_probability=1.0 must be in \[0, 1\)"):
        collator(encoder_mlm_probability=1.0)


def test_masked_token_loss_is_the_cross_entropy_at_the_chosen_positions_and_trains_only_the_encoder():
    """The loss equals a direct computation (within 1e-5): every position's logits through ``lm_head``, the
    cross-entropy at the chosen ones. The gradient reaches the encoder and the tied embedding, not the decoder."""
    torch.manual_seed(0)
    model = ScratchformerForConditionalGeneration(tiny_config(vocab_size=VOCAB))
    batch = collator(encoder_mlm_probability=0.3)([{"input_ids": text(40, start=10 + 60 * i)} for i in range(4)])
    loss = MaskedTokenLoss(1.0)(model, batch)
    hidden = model.get_encoder()(input_ids=batch["mlm_input_ids"],
                                 attention_mask=batch["mlm_attention_mask"]).last_hidden_state
    logits = model.lm_head(hidden).reshape(-1, VOCAB)
    direct = torch.nn.functional.cross_entropy(logits[batch["mlm_positions"]], batch["mlm_targets"])
    assert float(loss.detach()) == pytest.approx(float(direct.detach()), abs=1e-5)
    assert float(loss.detach()) == pytest.approx(math.log(VOCAB), rel=0.2)  # an untrained model: near uniform
    loss.backward()
    assert float(model.get_input_embeddings().weight.grad.abs().sum()) > 0
    assert any(float(p.grad.abs().sum()) > 0 for p in model.get_encoder().layers.parameters() if p.grad is not None)
    assert all(p.grad is None for p in model.get_decoder().layers.parameters())


def test_a_batch_with_nothing_chosen_gives_no_loss():
    model = ScratchformerForConditionalGeneration(tiny_config(vocab_size=VOCAB))
    batch = collator(encoder_mlm_probability=1e-9)([{"input_ids": text(10)}])
    assert batch["mlm_positions"].numel() == 0
    assert MaskedTokenLoss(1.0)(model, batch) is None


def test_a_run_with_the_masked_token_loss_logs_it_next_to_the_contrastive_one(tmp_path, paragraphs):  # noqa: F811
    """Both encoder losses reach one run: each is logged at every step, the weights differ from the same run with
    the contrastive loss alone, and the options are recorded for ``--resume``."""
    runs = {}
    for name, weight in (("contrastive", 0.0), ("both", 1.0)):
        options, args = tiny(tmp_path, paragraphs, name, max_length=64, contrastive_weight=1.0, max_steps=3,
                             encoder_mlm_weight=weight, save_steps=100, config_overrides="dropout=0.0")
        runs[name] = Path(run_training(options, args)["output_dir"])
    state = json.loads((runs["both"] / "checkpoint-3" / "trainer_state.json").read_text())
    for key in ("encoder_mlm_loss", "contrastive_loss"):
        logged = [entry[key] for entry in state["log_history"] if key in entry]
        assert len(logged) == 3 and all(math.isfinite(v) and v > 0 for v in logged), key
    only = json.loads((runs["contrastive"] / "checkpoint-3" / "trainer_state.json").read_text())
    assert not any("encoder_mlm_loss" in entry for entry in only["log_history"])
    weights = {name: ScratchformerForConditionalGeneration.from_pretrained(folder).model.encoder.layers[0]
               .self_attn.q_proj.weight for name, folder in runs.items()}
    assert not torch.allclose(weights["contrastive"], weights["both"])
    saved = json.loads((runs["both"] / "train_config.json").read_text())
    assert (saved["encoder_mlm_weight"], saved["encoder_mlm_probability"]) == (1.0, 0.15)


def test_denoising_weight_0_trains_the_encoder_alone_and_skips_the_decoder(tmp_path, paragraphs):  # noqa: F811
    """``--denoising-weight 0 --encoder-mlm-weight 1``: BERT's setting, the model's own (decoder) pass skipped. The
    decoder never gets a gradient, so it stays as initialised (the same after 1 and 3 steps), the encoder learns
    (it differs), and the training loss is the masked-token loss alone (within 1e-3). One process only."""
    runs = {}
    for steps in (1, 3):
        options, args = tiny(tmp_path, paragraphs, f"s{steps}", max_length=64, max_steps=steps, save_steps=100,
                             denoising_weight=0.0, encoder_mlm_weight=1.0, config_overrides="dropout=0.0")
        runs[steps] = ScratchformerForConditionalGeneration.from_pretrained(run_training(options, args)["output_dir"])
    for one, three in zip(runs[1].model.decoder.layers.parameters(), runs[3].model.decoder.layers.parameters(),
                          strict=True):  # (the embedding is shared with the encoder)
        assert torch.equal(one, three)
    assert not torch.equal(runs[1].model.encoder.layers[0].self_attn.q_proj.weight,
                           runs[3].model.encoder.layers[0].self_attn.q_proj.weight)
    state = json.loads((tmp_path / "s3" / "checkpoint-3" / "trainer_state.json").read_text())
    steps = [entry for entry in state["log_history"] if "encoder_mlm_loss" in entry]
    assert len(steps) == 3
    for entry in steps:
        assert entry["loss"] == pytest.approx(entry["encoder_mlm_loss"], rel=1e-3)


def test_denoising_weight_0_is_refused_under_torchrun(monkeypatch, tmp_path, paragraphs):  # noqa: F811
    """Skipping the model's own pass skips the distributed wrapper's gradient synchronisation: refused up front."""
    from scratchformer.errors import TrainingSetupError
    from scratchformer.training.checks import check_options

    options, args = tiny(tmp_path, paragraphs, "ddp", denoising_weight=0.0, encoder_mlm_weight=1.0)
    monkeypatch.setenv("WORLD_SIZE", "2")  # what torchrun sets in each process
    with pytest.raises(TrainingSetupError, match="--denoising-weight 0 skips the model's own forward pass"):
        check_options(options, args)


class EncoderDtypes(TrainerCallback):
    """Records the dtype of the first encoder layer's query projection at each training forward pass."""

    def __init__(self):
        self.seen: list[torch.dtype] = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        query = model.model.encoder.layers[0].self_attn.q_proj
        query.register_forward_hook(lambda module, inputs, output: self.seen.append(output.dtype))


@pytest.mark.parametrize("loss", [dict(encoder_mlm_weight=1.0, contrastive_weight=1.0),
                                  dict(electra_weight=1.0, electra_discriminator_weight=10.0)])
def test_the_encoders_losses_train_in_the_runs_precision_when_the_decoder_is_skipped(
        tmp_path, paragraphs, loss, monkeypatch):  # noqa: F811
    """``--bf16 --denoising-weight 0``: accelerate casts only the model's own forward, which is skipped, so the
    encoder's losses take the run's autocast themselves. Every pass of the encoder (training and the final
    evaluation) is in bfloat16 (in float32 without ``--bf16``), the losses stay finite, and the weights differ from
    the float32 run's. On any CPU: a CPU without bfloat16 kernels computes the same, only slower."""
    seen, weights = {}, {}
    for bf16 in (False, True):
        recorder = EncoderDtypes()
        options, args = tiny(tmp_path, paragraphs, f"bf16-{bf16}", max_length=64, max_steps=2, save_steps=100,
                             denoising_weight=0.0, config_overrides="dropout=0.0", bf16=bf16, **loss)
        folder = Path(run_training(options, args, callbacks=[recorder])["output_dir"])
        seen[bf16] = set(recorder.seen)
        weights[bf16] = ScratchformerForConditionalGeneration.from_pretrained(folder).model.encoder.layers[0] \
            .self_attn.q_proj.weight
        losses = train_losses(folder)
        assert len(losses) == 2 and all(math.isfinite(value) for value in losses.values())
    assert seen == {False: {torch.float32}, True: {torch.bfloat16}}
    assert not torch.equal(weights[False], weights[True])
