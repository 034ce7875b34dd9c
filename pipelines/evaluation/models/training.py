"""The paper's training setups on frozen encoders: full-train linear probe and few-shot.

The CPU option. The paper's own schemes (CLIP ViT-L/14@336px trained whole with AdamW, as its
appendix B.1 gives them) are ``clip-finetune`` (``finetune.py``), for a GPU. Setup of the probes
(ours, documented):

- Features: for each (question, option) pair, the element-wise product of the unit
  embeddings that the zero-shot model compares (CLIP: question image x "question + option"
  text, or option image x question text; embedding baseline: query x option). The zero-shot
  score is the sum of this vector, so the probe can only re-weight what zero-shot uses.
- Scorer: features standardized on the training rows, then an L2-regularized logistic
  regression (L-BFGS, as in Radford et al.'s linear probe) trained to tell the correct
  option (label 1) from the others (label 0). A question's answer is the option with the
  highest decision value; confidence is the softmax over its options' decision values.
- Training data: full train (the paper's "finetuning") or, with ``shots_per_skill = k``,
  k questions per skill drawn deterministically (lowest sha256(seed, question_id) first;
  the paper's few-shot uses k = 16). Questions without a known answer or whose features
  cannot be computed are skipped and counted in ``selection``.
- Model selection: the inverse regularization strength C is chosen from ``C_GRID`` by
  accuracy on valid (ties: the smaller C); the probe trained on train with that C is the
  one reported on test.
- ``per_subject=True`` trains one probe per subject (the paper's per-subject finetuning);
  False trains one probe on all subjects together (the paper's multi-task setting).

scikit-learn is imported on first use only.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Sequence

import numpy as np

from pipelines.evaluation.models.registry import ModelArgs, canonical_name, encoder_names, model_entry, register_model
from pipelines.evaluation.models.base import (
    EvalQuestion,
    MultipleChoiceModel,
    PairFeatureEncoder,
    Prediction,
    failed_prediction,
    prediction_from_scores,
)

C_GRID = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
ALL_SUBJECTS = "all"


def few_shot_sample(questions: Sequence[EvalQuestion], shots_per_skill: int, seed: int = 0) -> list[EvalQuestion]:
    """k answered questions per (subject, skill), the lowest sha256(seed, question_id) first."""
    if shots_per_skill < 1:
        raise ValueError(f"shots per skill must be at least 1, got {shots_per_skill}")
    by_skill: dict[tuple[str, str], list[tuple[str, EvalQuestion]]] = defaultdict(list)
    for question in questions:
        if 0 <= question.answer_idx < question.num_options:
            rank = hashlib.sha256(f"{seed}\x00{question.question_id}".encode()).hexdigest()
            by_skill[(question.subject, question.skill)].append((rank, question))
    chosen: list[EvalQuestion] = []
    for key in sorted(by_skill):
        ranked = sorted(by_skill[key], key=lambda item: (item[0], item[1].question_id))
        chosen.extend(question for _, question in ranked[:shots_per_skill])
    return chosen


class _Probe:
    def __init__(self, mean: np.ndarray, scale: np.ndarray, weights: np.ndarray, bias: float):
        self.mean, self.scale, self.weights, self.bias = mean, scale, weights, bias

    def scores(self, features: np.ndarray) -> np.ndarray:
        return ((features - self.mean) / self.scale) @ self.weights + self.bias


def _labelled_rows(questions, features):
    rows, labels, skipped = [], [], 0
    for question, pair in zip(questions, features):
        if pair.features is None or not 0 <= question.answer_idx < question.num_options:
            skipped += 1
            continue
        rows.append(pair.features)
        target = np.zeros(len(pair.features))
        target[question.answer_idx] = 1.0
        labels.append(target)
    if not rows:
        return None, None, skipped
    return np.concatenate(rows), np.concatenate(labels), skipped


def _train_probe(x: np.ndarray, y: np.ndarray, c: float) -> _Probe:
    from sklearn.linear_model import LogisticRegression

    mean = x.mean(axis=0, dtype=np.float64)
    scale = x.std(axis=0, dtype=np.float64)
    scale = np.where(scale == 0, 1.0, scale)
    classifier = LogisticRegression(C=c, solver="lbfgs", max_iter=2000)
    classifier.fit((x - mean) / scale, y.astype(int))
    return _Probe(mean, scale, classifier.coef_[0].astype(np.float64), float(classifier.intercept_[0]))


def _accuracy(probe: _Probe, questions, features) -> tuple[float, int]:
    correct = total = 0
    for question, pair in zip(questions, features):
        if not 0 <= question.answer_idx < question.num_options:
            continue
        total += 1
        if pair.features is not None:
            correct += int(int(np.argmax(probe.scores(pair.features))) == question.answer_idx)
    return (correct / total if total else float("nan")), total


class LinearProbeModel(MultipleChoiceModel):
    trainable = True

    def __init__(
        self,
        encoder: PairFeatureEncoder,
        shots_per_skill: int | None = None,
        per_subject: bool = True,
        seed: int = 0,
        c_grid: Sequence[float] = C_GRID,
        name: str | None = None,
    ):
        self.encoder = encoder
        self.shots_per_skill = shots_per_skill
        self.per_subject = per_subject
        self.seed = int(seed)
        self.c_grid = tuple(float(c) for c in c_grid)
        setup = "few-shot" if shots_per_skill else "linear-probe"
        self.name = name or f"{setup}:{encoder.name}"
        self.probes: dict[str, _Probe] = {}
        self.selection: dict[str, dict] = {}

    def _group(self, question: EvalQuestion) -> str:
        return question.subject if self.per_subject else ALL_SUBJECTS

    def fit(self, train: Sequence[EvalQuestion], valid: Sequence[EvalQuestion] = ()) -> "LinearProbeModel":
        if self.shots_per_skill:
            train = few_shot_sample(train, self.shots_per_skill, self.seed)
        train_by: dict[str, list[EvalQuestion]] = defaultdict(list)
        valid_by: dict[str, list[EvalQuestion]] = defaultdict(list)
        for question in train:
            train_by[self._group(question)].append(question)
        for question in valid:
            valid_by[self._group(question)].append(question)
        self.probes, self.selection = {}, {}
        for group in sorted(train_by):
            group_train, group_valid = train_by[group], valid_by.get(group, [])
            x, y, skipped = _labelled_rows(group_train, self.encoder.pair_features(group_train))
            if x is None or y.min() == y.max():
                raise ValueError(f"linear probe for {group}: no usable training questions")
            if not any(0 <= q.answer_idx < q.num_options for q in group_valid):
                raise ValueError(f"linear probe for {group}: no answered valid questions to select on")
            valid_features = self.encoder.pair_features(group_valid)
            sweep = []
            for c in self.c_grid:
                probe = _train_probe(x, y, c)
                accuracy, n_valid = _accuracy(probe, group_valid, valid_features)
                sweep.append((accuracy, -c, c, probe))
            best_accuracy, _, best_c, best_probe = max(sweep, key=lambda item: (item[0], item[1]))
            self.probes[group] = best_probe
            self.selection[group] = {
                "C": best_c,
                "valid_accuracy": best_accuracy,
                "valid_questions": n_valid,
                "train_questions": len(group_train) - skipped,
                "train_skipped": skipped,
                "sweep": [(c, accuracy) for accuracy, _, c, _ in sweep],
            }
        return self

    def predict(self, questions: Sequence[EvalQuestion]) -> list[Prediction]:
        if not self.probes:
            raise ValueError(f"{self.name} must be fit on train/valid before predicting")
        predictions = []
        for question, pair in zip(questions, self.encoder.pair_features(questions)):
            probe = self.probes.get(self._group(question))
            if probe is None:
                predictions.append(
                    failed_prediction(question.question_id, f"no probe trained for subject {question.subject}")
                )
            elif pair.features is None:
                predictions.append(failed_prediction(question.question_id, pair.error or "no features"))
            else:
                predictions.append(prediction_from_scores(question.question_id, probe.scores(pair.features)))
        return predictions


PROBE_PARAMETERS = {"encoder", "per_subject", "seed"}


def probe_parameters(kind: str, params: dict[str, str]) -> set[str]:
    """The probe's own parameters, ``k`` for few-shot, and those of its encoder."""
    encoder = params.get("encoder")
    if encoder not in encoder_names():
        raise ValueError(f"{kind}: parameter encoder must be {' or '.join(encoder_names())}, got {encoder!r}")
    return PROBE_PARAMETERS | model_entry(encoder).allowed({}) | ({"k"} if kind == "few-shot" else set())


@register_model("linear-probe", parameters=probe_parameters)
def build_linear_probe(args: ModelArgs) -> LinearProbeModel:
    encoder_kind = args.params["encoder"]
    encoder_entry = model_entry(encoder_kind)
    encoder_params = {k: v for k, v in args.params.items() if k in encoder_entry.allowed({})}
    encoder = encoder_entry.build(ModelArgs(encoder_kind, encoder_params, canonical_name(encoder_kind, encoder_params)))
    shots = args.number("k", 16, int) if args.kind == "few-shot" else None
    if shots is not None and shots < 1:
        raise ValueError(f"few-shot: k must be at least 1, got {shots}")
    per_subject = args.params.get("per_subject", "1")
    if per_subject not in ("0", "1"):
        raise ValueError(f"{args.kind}: per_subject must be 0 or 1, got {per_subject!r}")
    return LinearProbeModel(
        encoder,
        shots_per_skill=shots,
        per_subject=per_subject == "1",
        seed=args.number("seed", 0, int),
        name=args.name,
    )


register_model("few-shot", parameters=probe_parameters)(build_linear_probe)
