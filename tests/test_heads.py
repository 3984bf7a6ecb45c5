"""The task heads, as DistilBERT and BART have them: ScratchformerForSequenceClassification (mean over the real tokens,
then a classifier) and ScratchformerForTokenClassification (a classifier on every token).

Unit tests on a tiny model check the outputs, the three losses of ``problem_type`` and the Auto classes. Two honest
fine-tuning tests train the heads with ``Trainer`` from the shipped checkpoint on WordNet example sentences
(``/work/shared/data/wordnet_senses_dev.tsv``; skipped where it is absent) and must beat the majority-class
baseline on rows of **held-out lemmas** (every fifth lemma, so no word of the test rows was seen in training):

- sequence classification: (sentence, target lemma) -> is the target used as a NOUN or a VERB in this sentence?
- token classification: (sentence, target lemma) -> which tokens of the sentence are the target word (TARGET / O)?
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pytest
import torch
from model_fixtures import tiny_config
from transformers import (
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
    Trainer,
    TrainingArguments,
)
from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput

from scratchformer import (
    ScratchformerForConditionalGeneration,
    ScratchformerForSequenceClassification,
    ScratchformerForTokenClassification,
    load_pretrained,
    pretrained_path,
)

POS_LABELS = {0: "NOUN", 1: "VERB"}
SPAN_LABELS = {0: "O", 1: "TARGET"}


def labels_of(id2label: dict[int, str]) -> dict:
    """``from_pretrained`` keyword arguments that name the labels (transformers wants both directions)."""
    return {"num_labels": len(id2label), "id2label": id2label, "label2id": {v: k for k, v in id2label.items()}}


# ---------------------------------------------------------------------------------------------------- units


@pytest.fixture(scope="module")
def batch():
    ids = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    return {"input_ids": ids, "attention_mask": (ids != 0).long()}


def test_sequence_classification_pools_the_real_tokens_and_gives_hf_outputs(batch):
    torch.manual_seed(0)
    model = ScratchformerForSequenceClassification(tiny_config(num_labels=3)).eval()
    out = model(**batch)
    assert isinstance(out, SequenceClassifierOutput) and out.logits.shape == (2, 3) and out.loss is None
    alone = model(input_ids=batch["input_ids"][1:, :3], attention_mask=batch["attention_mask"][1:, :3]).logits
    assert torch.allclose(alone, out.logits[1:], atol=1e-5)  # padding changes nothing: mean over real tokens only
    assert model(**batch, return_dict=False)[0].shape == (2, 3)


@pytest.mark.parametrize("num_labels, labels, problem_type, loss_fn", [
    (3, torch.tensor([0, 2]), "single_label_classification", torch.nn.functional.cross_entropy),
    (1, torch.tensor([0.5, -1.0]), "regression", lambda logits, y: torch.nn.functional.mse_loss(logits.squeeze(-1), y)),
    (3, torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]), "multi_label_classification",
     torch.nn.functional.binary_cross_entropy_with_logits),
])
def test_sequence_classification_loss_follows_problem_type(batch, num_labels, labels, problem_type, loss_fn):
    torch.manual_seed(0)
    model = ScratchformerForSequenceClassification(tiny_config(num_labels=num_labels)).eval()
    out = model(**batch, labels=labels)
    assert model.config.problem_type == problem_type
    assert torch.allclose(out.loss, loss_fn(out.logits, labels))


def test_token_classification_ignores_minus_100(batch):
    torch.manual_seed(0)
    model = ScratchformerForTokenClassification(tiny_config(num_labels=2)).eval()
    labels = torch.tensor([[0, 1, 1, 0, -100], [1, 0, -100, -100, -100]])
    out = model(**batch, labels=labels)
    assert isinstance(out, TokenClassifierOutput) and out.logits.shape == (2, 5, 2)
    kept = labels != -100
    assert torch.allclose(out.loss, torch.nn.functional.cross_entropy(out.logits[kept], labels[kept]))
    assert model(**batch, labels=torch.full_like(labels, -100)).loss.item() == 0.0


def test_labels_outside_the_classes_and_no_labels_at_all_are_refused(batch):
    """cross-entropy would fail obscurely (or index garbage on a GPU) on a label >= num_labels."""
    torch.manual_seed(0)
    classifier = ScratchformerForSequenceClassification(tiny_config(num_labels=3)).eval()
    with pytest.raises(ValueError, match=r"labels must be class ids in 0..2 \(3 classes: num_labels, or an LM head's vocabulary\); they "
                                         r"span \[0, 3\]"):
        classifier(**batch, labels=torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="labels must be class ids in 0..2"):
        classifier(**batch, labels=torch.tensor([-1, 0]))
    tagger = ScratchformerForTokenClassification(tiny_config(num_labels=2)).eval()
    with pytest.raises(ValueError, match=r"labels must be class ids in 0..1 \(2 classes.*\) or -100"):
        tagger(**batch, labels=torch.tensor([[0, 1, 2, 0, -100], [1, 0, -100, -100, -100]]))
    with pytest.raises(AttributeError, match="'list' object has no attribute"):  # not a tensor: Python says so
        classifier(**batch, labels=[0, 1])
    with pytest.raises(ValueError, match="num_labels=0 is invalid: a task head needs at least one label"):
        tiny_config(num_labels=0)


@pytest.mark.parametrize("num_labels, problem_type, labels, message", [
    # one target per text, or one per label: a (B,) target against (B, 2) logits was broadcast to (B, B) in silence
    (2, "regression", torch.tensor([0.5, 1.0]), r"labels have shape \(2,\); regression with num_labels=2 needs "
                                                 r"\(2, 2\)"),
    (1, "regression", torch.tensor([0.5, 1.0, 2.0]), r"labels have shape \(3,\); regression with num_labels=1 "
                                                      r"needs \(2,\) or \(2, 1\)"),
    (3, None, torch.tensor([0, 1, 2]), r"labels have shape \(3,\); single_label_classification with num_labels=3 "
                                       r"needs \(2,\) or \(2, 1\)"),
    (3, "multi_label_classification", torch.tensor([1.0, 0.0]), r"needs \(2, 3\)"),
    # a NaN or infinite target made a NaN or infinite loss; a multi-label target is a probability
    (1, None, torch.tensor([float("nan"), 1.0]),
     r"labels must be finite numbers \(regression targets\); 1 of 2 are not, e.g. nan"),
    (3, "multi_label_classification", torch.tensor([[2.0, 0.0, 1.0], [0.0, 0.0, 1.0]]),
     r"labels must be finite numbers in \[0, 1\] .*; 1 of 6 are not, e.g. 2.0"),
])
def test_sequence_labels_of_the_wrong_shape_or_not_finite_are_refused(batch, num_labels, problem_type, labels,
                                                                      message):
    torch.manual_seed(0)
    model = ScratchformerForSequenceClassification(tiny_config(num_labels=num_labels, problem_type=problem_type))
    with pytest.raises(ValueError, match=message):
        model.eval()(**batch, labels=labels)


def test_masked_lm_labels_outside_the_vocabulary_or_of_the_wrong_shape_are_refused(batch):
    """The masked-LM head passed any labels to cross-entropy: an id past the vocabulary was a traceback from torch
    (an index error, or garbage on a GPU). They are checked as the seq2seq head's are; -100 stays "nothing here"."""
    from scratchformer import ScratchformerForMaskedLM

    torch.manual_seed(0)
    config = tiny_config()
    model = ScratchformerForMaskedLM(config).eval()
    vocab = config.vocab_size
    good = torch.full_like(batch["input_ids"], -100)
    good[0, 1] = 7
    assert torch.isfinite(model(**batch, labels=good).loss)
    for labels in (torch.tensor([[5, vocab, -100, -100, -100], [5, 6, -100, -100, -100]]),
                   torch.tensor([[5, -7, -100, -100, -100], [5, 6, -100, -100, -100]])):
        with pytest.raises(ValueError, match=rf"labels must be class ids in 0..{vocab - 1} \({vocab} classes"):
            model(**batch, labels=labels)
    with pytest.raises(ValueError, match=r"labels must be a tensor of shape \(2, 5\), one id \(or -100\) per "
                                         r"position of the output, got \(2, 3\)"):
        model(**batch, labels=good[:, :3])
    with pytest.raises(ValueError, match=r"labels must be a tensor of shape \(2, 5\).*got \(5,\)"):
        model(**batch, labels=good[0])
    with pytest.raises(ValueError, match="labels must be integer class ids in 0..60, got dtype torch.float32"):
        model(**batch, labels=good.float())


def test_heads_load_from_the_seq2seq_checkpoint_through_the_auto_classes():
    """The encoder comes from the checkpoint (equal to the seq2seq model's), only the head is new."""
    folder = pretrained_path("small")
    full, tokenizer = load_pretrained("small")
    classifier = AutoModelForSequenceClassification.from_pretrained(folder, **labels_of(POS_LABELS))
    tagger = AutoModelForTokenClassification.from_pretrained(folder, num_labels=2)
    assert type(classifier) is ScratchformerForSequenceClassification
    assert type(tagger) is ScratchformerForTokenClassification
    assert classifier.config.id2label == POS_LABELS and classifier.config.label2id == {"NOUN": 0, "VERB": 1}
    inputs = tokenizer(["The bank of the river."], return_tensors="pt")
    with torch.no_grad():
        expected = full.get_encoder()(**inputs).last_hidden_state
        for head in (classifier.eval(), tagger.eval()):
            assert torch.allclose(head.get_encoder()(**inputs).last_hidden_state, expected, atol=1e-6)
    assert isinstance(full, ScratchformerForConditionalGeneration)


def test_masked_lm_is_the_trained_encoder_and_tied_projection_with_the_training_loss(batch, tmp_path):
    """ScratchformerForMaskedLM from a seq2seq save: its projection *is* the token table (tied, nothing new to
    learn), its logits are the seq2seq model's lm_head over the encoder output, and its loss over the labelled
    positions equals the masked-token loss that `train --encoder-mlm-weight` optimises (atol 1e-5)."""
    from transformers import AutoModelForMaskedLM
    from transformers.modeling_outputs import MaskedLMOutput

    from scratchformer import ScratchformerForMaskedLM
    from scratchformer.training.encoder_mlm import MaskedTokenLoss

    torch.manual_seed(0)
    full = ScratchformerForConditionalGeneration(tiny_config()).eval()
    full.save_pretrained(tmp_path)
    model = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert type(model) is ScratchformerForMaskedLM
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, 1], labels[0, 3], labels[1, 0] = 6, 8, 9
    with torch.no_grad():
        out = model(**batch, labels=labels)
        expected = full.lm_head(full.get_encoder()(**batch).last_hidden_state)
        positions = torch.tensor([1, 3, 5])  # flat indices of the labelled tokens, as the training batch holds them
        training_loss = MaskedTokenLoss(weight=1.0)(full, {
            "mlm_input_ids": batch["input_ids"], "mlm_attention_mask": batch["attention_mask"],
            "mlm_positions": positions, "mlm_targets": torch.tensor([6, 8, 9])})
    assert isinstance(out, MaskedLMOutput) and out.logits.shape == (2, 5, full.config.vocab_size)
    assert torch.allclose(out.logits, expected, atol=1e-5)
    assert torch.allclose(out.loss, training_loss, atol=1e-5)
    assert model(**batch, labels=torch.full_like(labels, -100)).loss.item() == 0.0
    model.save_pretrained(tmp_path / "mlm")
    again = ScratchformerForMaskedLM.from_pretrained(tmp_path / "mlm").eval()
    with torch.no_grad():
        assert torch.equal(again(**batch).logits, out.logits)


# ---------------------------------------------------------------------------------------------------- fine-tuning


def wordnet_rows(shared_data: Path) -> tuple[list[dict], list[dict]]:
    """(train, test) rows of the WordNet TSV; the test rows are those of every fifth lemma in sorted order."""
    path = shared_data / "wordnet_senses_dev.tsv"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    with path.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    held_out = set(sorted({row["lemma"] for row in rows})[::5])
    return [r for r in rows if r["lemma"] not in held_out], [r for r in rows if r["lemma"] in held_out]


def lemmas(rows: list[dict]) -> list[str]:
    """The second text of each pair: the lemma after a space, so that it gets the token it has inside a sentence
    (byte-level BPE: ``Ġbank``, not ``bank``)."""
    return [" " + r["lemma"] for r in rows]


def encode_pos(tokenizer, rows: list[dict]) -> list[dict]:
    encoded = tokenizer([r["sentence"] for r in rows], lemmas(rows), truncation=True, max_length=64)
    return [{"input_ids": ids, "attention_mask": mask, "labels": int(r["pos"] == "v")}
            for ids, mask, r in zip(encoded["input_ids"], encoded["attention_mask"], rows)]


def encode_spans(tokenizer, rows: list[dict]) -> list[dict]:
    """Label 1 for the sentence tokens that overlap the target occurrence ``sentence[start:end]``, 0 for the other
    sentence tokens, -100 for ``</s>`` and the lemma segment."""
    encoded = tokenizer([r["sentence"] for r in rows], lemmas(rows), truncation=True, max_length=64,
                        return_offsets_mapping=True)
    examples = []
    for i, r in enumerate(rows):
        start, end = int(r["start"]), int(r["end"])
        labels = []
        for segment, (left, right) in zip(encoded.sequence_ids(i), encoded["offset_mapping"][i]):
            if segment != 0:
                labels.append(-100)
            else:
                labels.append(int(left < end and right > start))
        examples.append({"input_ids": encoded["input_ids"][i], "attention_mask": encoded["attention_mask"][i],
                         "labels": labels})
    return examples


def fine_tune(model, tokenizer, train: list[dict], collator, output_dir: Path, learning_rate: float) -> float:
    """Train with ``Trainer``; the token table stays as pre-trained (4.1 M of the encoder's 8.8 M parameters, and
    the slowest part of a step on a CPU). One epoch, batches of 32. Returns the seconds it took."""
    model.get_input_embeddings().weight.requires_grad_(False)
    args = TrainingArguments(
        output_dir=str(output_dir), per_device_train_batch_size=32, num_train_epochs=1, learning_rate=learning_rate,
        warmup_steps=10, weight_decay=0.01, lr_scheduler_type="linear", seed=0, use_cpu=True, report_to=[],
        save_strategy="no", logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0)
    started = time.perf_counter()
    Trainer(model=model, args=args, train_dataset=train, data_collator=collator, processing_class=tokenizer).train()
    return time.perf_counter() - started


@torch.no_grad()
def predict(model, collator, examples: list[dict]) -> list[torch.Tensor]:
    model.eval()
    out = []
    for i in range(0, len(examples), 64):
        batch = collator(examples[i:i + 64])
        labels = batch.pop("labels")
        out.append((model(**batch).logits.argmax(-1), labels))
    return out


@pytest.mark.slow
def test_fine_tuned_classifier_tells_nouns_from_verbs_on_unseen_words(shared_data, tmp_path):
    train_rows, test_rows = wordnet_rows(shared_data)
    _, tokenizer = load_pretrained("small")
    train, test = encode_pos(tokenizer, train_rows), encode_pos(tokenizer, test_rows)
    majority = max((0, 1), key=lambda label: sum(e["labels"] == label for e in train))
    baseline = sum(e["labels"] == majority for e in test) / len(test)

    torch.manual_seed(0)
    model = ScratchformerForSequenceClassification.from_pretrained(
        pretrained_path("small"), **labels_of(POS_LABELS), classifier_dropout=0.1)
    collator = DataCollatorWithPadding(tokenizer)
    seconds = fine_tune(model, tokenizer, train, collator, tmp_path, learning_rate=2e-4)
    correct = sum(int((p == y).sum()) for p, y in predict(model, collator, test))
    accuracy = correct / len(test)
    print(f"NOUN/VERB on {len(test)} rows of unseen lemmas: accuracy {accuracy:.3f}, majority baseline "
          f"{baseline:.3f}, trained in {seconds:.0f} s")
    assert accuracy > baseline + 0.2, (accuracy, baseline)  # measured: 0.897 vs 0.502, 46 s


@pytest.mark.slow
def test_fine_tuned_tagger_finds_the_target_word_in_unseen_sentences(shared_data, tmp_path):
    train_rows, test_rows = wordnet_rows(shared_data)
    _, tokenizer = load_pretrained("small")
    train, test = encode_spans(tokenizer, train_rows), encode_spans(tokenizer, test_rows)

    torch.manual_seed(0)
    model = ScratchformerForTokenClassification.from_pretrained(
        pretrained_path("small"), **labels_of(SPAN_LABELS), classifier_dropout=0.1)
    collator = DataCollatorForTokenClassification(tokenizer)
    seconds = fine_tune(model, tokenizer, train, collator, tmp_path, learning_rate=2e-3)
    tokens = correct = spans = exact = 0
    baseline_correct = 0  # the majority class, O, for every token
    for predicted, labels in predict(model, collator, test):
        scored = labels != -100
        tokens += int(scored.sum())
        correct += int((predicted == labels)[scored].sum())
        baseline_correct += int((labels == 0)[scored].sum())
        for row_predicted, row_labels, row_scored in zip(predicted, labels, scored):
            spans += 1
            exact += bool((row_predicted[row_scored] == row_labels[row_scored]).all())
    accuracy, baseline, exact_rate = correct / tokens, baseline_correct / tokens, exact / spans
    print(f"target-word tagging on {spans} sentences of unseen lemmas: token accuracy {accuracy:.3f} (majority "
          f"baseline {baseline:.3f}), whole span exact {exact_rate:.3f} (baseline 0), trained in {seconds:.0f} s")
    assert accuracy > baseline + 0.04, (accuracy, baseline)  # measured: 0.906 vs 0.832, 45 s
    assert exact_rate > 0.35, exact_rate  # measured: 0.542; the majority class never gets a span right
