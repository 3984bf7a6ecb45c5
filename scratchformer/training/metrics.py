"""What the Trainer computes about predictions: the loss (:class:`Seq2SeqLoss`), denoising's token accuracy and
seq2seq's BLEU and chrF (:class:`GenerationMetrics`)."""

from __future__ import annotations

import numpy as np
import torch

from ..models.modeling_scratchformer import mean_over_labelled


class Seq2SeqLoss:
    """``compute_loss_func``: label-smoothed cross-entropy while training, plain on evaluation, over the Trainer's
    ``num_items_in_batch`` target tokens (so accumulation and data parallelism give one big batch's gradient)."""

    def __init__(self, label_smoothing: float = 0.1):
        self.label_smoothing = label_smoothing  # torch's cross_entropy says what it takes

    def __call__(self, outputs, labels, num_items_in_batch=None):
        logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
        smoothing = self.label_smoothing if torch.is_grad_enabled() else 0.0
        labels = labels.reshape(-1).to(logits.device)
        total = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels,
                                                  ignore_index=-100, reduction="sum", label_smoothing=smoothing)
        return mean_over_labelled(total, labels, num_items_in_batch)  # the model's own rule: 0 with no label


def argmax_logits(logits, labels):
    """``preprocess_logits_for_metrics``: keep only the predicted ids (the Trainer would otherwise gather V floats
    per token)."""
    if isinstance(logits, (tuple, list)):
        logits = logits[0]
    return logits.argmax(dim=-1)


def token_accuracy(eval_pred) -> dict[str, float]:
    """Share of target tokens that the teacher-forced argmax predicts exactly."""
    preds, labels = eval_pred.predictions, eval_pred.label_ids
    if isinstance(preds, tuple):
        preds = preds[0]
    mask = labels != -100
    return {"token_accuracy": float((preds[mask] == labels[mask]).mean()) if mask.any() else 0.0}


class GenerationMetrics:
    """BLEU and chrF (``sacrebleu``) of generated outputs against the references."""

    def __init__(self, tokenizer):
        import sacrebleu  # when the trainer is built, not at the first evaluation after training steps

        self.tokenizer, self.sacrebleu = tokenizer, sacrebleu

    def decode(self, ids) -> list[str]:
        ids = np.where(ids < 0, self.tokenizer.pad_token_id, ids)
        return [t.strip() for t in self.tokenizer.batch_decode(ids, skip_special_tokens=True)]

    def __call__(self, eval_pred) -> dict[str, float]:
        sacrebleu = self.sacrebleu
        preds = eval_pred.predictions[0] if isinstance(eval_pred.predictions, tuple) else eval_pred.predictions
        hyps, refs = self.decode(preds), self.decode(eval_pred.label_ids)
        return {"bleu": sacrebleu.corpus_bleu(hyps, [refs]).score, "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score}
