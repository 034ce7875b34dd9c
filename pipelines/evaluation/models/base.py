"""The multiple-choice model adapter interface (small, like lm-evaluation-harness's).

A model receives ``EvalQuestion`` records and returns one ``Prediction`` per question, in
the same order. A prediction of ``-1`` means the model could not answer; ``error`` then says
why. Adapters never turn a failure into a silent (wrong) answer.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

OPTION_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class EvalQuestion:
    question_id: str
    subject: str
    grade: str | None
    skill: str
    split: str
    problem: str
    problem_image: Path | None
    choices: tuple[str, ...] | None
    choice_images: tuple[Path, ...] | None
    answer_idx: int = -1
    caption: str | None = None
    # Alt text / captions of the option images, for text-only models (None where unknown).
    choice_captions: tuple[str | None, ...] | None = None

    def __post_init__(self) -> None:
        if (self.choices is None) == (self.choice_images is None):
            raise ValueError(
                f"question {self.question_id}: exactly one of choices / choice_images must be given"
            )
        if self.num_options < 1:
            raise ValueError(f"question {self.question_id}: has no options")

    @property
    def num_options(self) -> int:
        return len(self.choices) if self.choices is not None else len(self.choice_images or ())

    @property
    def image_options(self) -> bool:
        return self.choice_images is not None


@dataclass(frozen=True)
class Prediction:
    question_id: str
    prediction: int  # 0-based option index; -1 = failed
    confidence: float | None = None  # probability of the chosen option, where available
    option_scores: tuple[float, ...] | None = None
    raw: str | None = None  # the model's raw output (generative adapters)
    rule: str | None = None  # which answer-extraction rule matched
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.prediction < 0


def failed_prediction(question_id: str, error: str, raw: str | None = None) -> Prediction:
    return Prediction(question_id=question_id, prediction=-1, raw=raw, error=error)


def softmax(scores: Sequence[float]) -> np.ndarray:
    values = np.asarray(scores, dtype=np.float64)
    shifted = np.exp(values - values.max())
    return shifted / shifted.sum()


def prediction_from_scores(question_id: str, scores: Sequence[float], temperature: float = 1.0) -> Prediction:
    """argmax of the scores (the lowest index wins ties); confidence = softmax(scores / T)[argmax]."""
    values = [float(s) for s in scores]
    if not values or any(math.isnan(v) for v in values):
        return failed_prediction(question_id, "no finite option scores")
    best = int(np.argmax(values))
    probabilities = softmax(np.asarray(values) / temperature)
    return Prediction(
        question_id=question_id,
        prediction=best,
        confidence=float(probabilities[best]),
        option_scores=tuple(values),
    )


def rotate_options(question: EvalQuestion, shift: int) -> EvalQuestion:
    """The same question with its options rotated left by ``shift`` (circular evaluation).

    Option ``i`` of the result is option ``(i + shift) % k`` of the input; the answer index
    follows its option.
    """
    k = question.num_options
    shift %= k

    def rot(values):
        return None if values is None else tuple(values[shift:]) + tuple(values[:shift])

    answer = question.answer_idx if question.answer_idx < 0 else (question.answer_idx - shift) % k
    return replace(
        question,
        choices=rot(question.choices),
        choice_images=rot(question.choice_images),
        choice_captions=rot(question.choice_captions),
        answer_idx=answer,
    )


class MultipleChoiceModel(ABC):
    """A model that answers multiple-choice questions.

    ``predict`` batches internally and returns one prediction per question, in order.
    ``fit`` is for adapters with training setups (baselines that learn priors, linear
    probes); the default does nothing. ``supports_live_rotation`` is True when the model
    is run live, so circular evaluation can re-ask with rotated options.
    """

    name: str
    supports_live_rotation: bool = True
    trainable: bool = False

    @abstractmethod
    def predict(self, questions: Sequence[EvalQuestion]) -> list[Prediction]: ...

    def fit(self, train: Sequence[EvalQuestion], valid: Sequence[EvalQuestion] = ()) -> "MultipleChoiceModel":
        return self


@dataclass(frozen=True)
class PairFeatures:
    """Per-option feature vectors of one question from a frozen encoder.

    Row ``i`` is the element-wise product of the unit-normalized embeddings of the two
    sides the zero-shot model compares for option ``i`` (so the row sum is the zero-shot
    cosine). ``features`` is None when the encoder cannot score the question; ``error`` says why.
    """

    features: np.ndarray | None
    error: str | None = None


class PairFeatureEncoder(ABC):
    """A frozen encoder whose option features a linear probe can be trained on."""

    name: str

    @abstractmethod
    def pair_features(self, questions: Sequence[EvalQuestion]) -> list[PairFeatures]: ...
