"""Floor baselines: a seeded random guesser and two answer-position/length priors."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from typing import Sequence

from pipelines.evaluation.models.base import EvalQuestion, MultipleChoiceModel, Prediction
from pipelines.evaluation.models.registry import ModelArgs, register_model


def options_fingerprint(question: EvalQuestion) -> str:
    """A stable description of the options in their current order (text, or image file names)."""
    if question.choices is not None:
        parts = question.choices
    else:
        parts = tuple(path.name for path in question.choice_images or ())
    return "\x1f".join(parts)


class RandomBaseline(MultipleChoiceModel):
    """Uniform guess, deterministic per (seed, question, option order).

    The draw is ``sha256(seed, question_id, options in order) mod k``: the same inputs give the
    same guesses on every machine, and a rotated question (circular evaluation) is an
    independent draw, as a fresh random guess would be. Confidence is 1/k (the true
    probability that a uniform guess is right).
    """

    def __init__(self, seed: int = 0):
        self.seed = int(seed)
        self.name = "random" if self.seed == 0 else f"random?seed={self.seed}"

    def predict(self, questions: Sequence[EvalQuestion]) -> list[Prediction]:
        predictions = []
        for question in questions:
            k = question.num_options
            key = f"{self.seed}\x00{question.question_id}\x00{options_fingerprint(question)}"
            draw = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")
            predictions.append(
                Prediction(
                    question_id=question.question_id,
                    prediction=draw % k,
                    confidence=1.0 / k,
                    option_scores=tuple([1.0 / k] * k),
                )
            )
        return predictions


class MostFrequentPositionBaseline(MultipleChoiceModel):
    """Always answers the position that is most often right in train among questions with
    the same number of options (ties: the lowest position). Confidence is that position's
    frequency in train; option_scores are all positions' train frequencies.

    A question whose number of options never occurs in train gets position 0 with confidence
    1/k, and ``rule`` says so.
    """

    name = "most-frequent-position"
    trainable = True

    def __init__(self) -> None:
        self.position_counts: dict[int, Counter] | None = None

    def fit(self, train: Sequence[EvalQuestion], valid: Sequence[EvalQuestion] = ()) -> "MostFrequentPositionBaseline":
        counts: dict[int, Counter] = defaultdict(Counter)
        for question in train:
            if 0 <= question.answer_idx < question.num_options:
                counts[question.num_options][question.answer_idx] += 1
        self.position_counts = dict(counts)
        return self

    def predict(self, questions: Sequence[EvalQuestion]) -> list[Prediction]:
        if self.position_counts is None:
            raise ValueError("most-frequent-position must be fit on the train split before predicting")
        predictions = []
        for question in questions:
            k = question.num_options
            counts = self.position_counts.get(k)
            if not counts:
                predictions.append(
                    Prediction(
                        question_id=question.question_id,
                        prediction=0,
                        confidence=1.0 / k,
                        option_scores=tuple([1.0 / k] * k),
                        rule=f"no train question with {k} options: position 0",
                    )
                )
                continue
            total = sum(counts.values())
            frequencies = [counts.get(position, 0) / total for position in range(k)]
            best = max(range(k), key=lambda position: (frequencies[position], -position))
            predictions.append(
                Prediction(
                    question_id=question.question_id,
                    prediction=best,
                    confidence=frequencies[best],
                    option_scores=tuple(frequencies),
                )
            )
        return predictions


class LongestOptionBaseline(MultipleChoiceModel):
    """Answers the longest option (ties: the lowest position); no confidence.

    Text options: length in characters after collapsing white space. Image options: the
    length of the option captions when every option has one, else the image file size in
    bytes (the most detailed picture), recorded in ``rule``.
    """

    name = "longest-option"

    def predict(self, questions: Sequence[EvalQuestion]) -> list[Prediction]:
        predictions = []
        for question in questions:
            if question.choices is not None:
                lengths = [len(" ".join(text.split())) for text in question.choices]
                rule = "text length"
            elif question.choice_captions is not None and all(question.choice_captions):
                lengths = [len(" ".join(str(c).split())) for c in question.choice_captions]
                rule = "caption length"
            else:
                try:
                    lengths = [path.stat().st_size for path in question.choice_images or ()]
                except OSError as exc:
                    predictions.append(
                        Prediction(question.question_id, -1, error=f"option image unreadable: {exc}")
                    )
                    continue
                rule = "image file size"
            best = max(range(len(lengths)), key=lambda i: (lengths[i], -i))
            predictions.append(
                Prediction(
                    question_id=question.question_id,
                    prediction=best,
                    option_scores=tuple(float(n) for n in lengths),
                    rule=rule,
                )
            )
        return predictions


@register_model("random", parameters={"seed"}, baseline=True)
def build_random(args: ModelArgs) -> RandomBaseline:
    model = RandomBaseline(seed=args.number("seed", 0, int))
    model.name = args.name
    return model


@register_model("most-frequent-position", baseline=True)
def build_most_frequent_position(args: ModelArgs) -> MostFrequentPositionBaseline:
    return MostFrequentPositionBaseline()


@register_model("longest-option", baseline=True)
def build_longest_option(args: ModelArgs) -> LongestOptionBaseline:
    return LongestOptionBaseline()
