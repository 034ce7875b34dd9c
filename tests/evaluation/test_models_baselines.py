"""The adapter interface, floor baselines and the spec registry."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from pipelines.evaluation.models import EvalQuestion, available_baselines, build_model, rotate_options
from pipelines.evaluation.models.baselines import (
    LongestOptionBaseline,
    MostFrequentPositionBaseline,
    RandomBaseline,
)
from pipelines.evaluation.models.base import prediction_from_scores


def png(directory: Path, name: str, color: tuple[int, int, int], size=(24, 16)) -> Path:
    path = directory / f"{name}.png"
    Image.new("RGB", size, color).save(path)
    return path


def text_question(qid: str, choices: tuple[str, ...], answer: int = -1, split: str = "test", image=None):
    return EvalQuestion(
        question_id=qid, subject="science", grade="grade-3", skill="magnets", split=split,
        problem=f"Question {qid}?", problem_image=image, choices=choices, choice_images=None,
        answer_idx=answer,
    )


def image_question(qid: str, images: tuple[Path, ...], captions=None, answer: int = -1):
    return EvalQuestion(
        question_id=qid, subject="math", grade="grade-1", skill="shapes", split="test",
        problem="Which shape is a circle?", problem_image=None, choices=None, choice_images=images,
        answer_idx=answer, choice_captions=captions,
    )


def test_eval_question_requires_exactly_one_kind_of_options(tmp_path):
    with pytest.raises(ValueError, match="exactly one of"):
        EvalQuestion("q", "math", None, "s", "test", "p", None, ("a",), (png(tmp_path, "a", (1, 2, 3)),))
    with pytest.raises(ValueError, match="exactly one of"):
        EvalQuestion("q", "math", None, "s", "test", "p", None, None, None)


def test_random_is_deterministic_seeded_and_roughly_uniform():
    questions = [text_question(f"{i:016x}", ("a", "b", "c")) for i in range(3000)]
    first = RandomBaseline(seed=3).predict(questions)
    again = RandomBaseline(seed=3).predict(questions)
    other = RandomBaseline(seed=4).predict(questions)
    assert [p.prediction for p in first] == [p.prediction for p in again]
    assert [p.prediction for p in first] != [p.prediction for p in other]
    counts = [sum(p.prediction == k for p in first) for k in range(3)]
    assert all(900 < c < 1100 for c in counts), counts
    assert all(p.confidence == pytest.approx(1 / 3) for p in first)
    # A rotated question is a fresh draw, not the same position.
    rotated = RandomBaseline(seed=3).predict([rotate_options(q, 1) for q in questions])
    assert sum(a.prediction != b.prediction for a, b in zip(first, rotated)) > 1500


def test_most_frequent_position_per_number_of_options():
    train = [text_question(f"t{i}", ("a", "b"), answer=1, split="train") for i in range(3)]
    train += [text_question("t9", ("a", "b"), answer=0, split="train")]
    train += [text_question(f"u{i}", ("a", "b", "c"), answer=2, split="train") for i in range(2)]
    train += [text_question("u9", ("a", "b", "c"), answer=0, split="train")]
    model = MostFrequentPositionBaseline()
    with pytest.raises(ValueError, match="must be fit"):
        model.predict([text_question("x", ("a", "b"))])
    model.fit(train)
    two, three, five = model.predict(
        [text_question("x", ("a", "b")), text_question("y", ("a", "b", "c")), text_question("z", tuple("abcde"))]
    )
    assert (two.prediction, two.confidence) == (1, pytest.approx(0.75))
    assert two.option_scores == pytest.approx((0.25, 0.75))
    assert (three.prediction, three.confidence) == (2, pytest.approx(2 / 3))
    assert five.prediction == 0 and five.confidence == pytest.approx(0.2) and "no train question" in five.rule


def test_longest_option_text_and_image_rules(tmp_path):
    model = LongestOptionBaseline()
    text = text_question("a", ("short", "the   longest  one", "medium one"))
    tie = text_question("b", ("abc", "xyz"))
    small = png(tmp_path, "small", (0, 0, 0), size=(4, 4))
    noisy = tmp_path / "noisy.png"
    Image.effect_noise((64, 64), 50).save(noisy)
    by_size = image_question("c", (small, noisy))
    by_caption = image_question("d", (small, noisy), captions=("a big red circle", "a square"))
    p_text, p_tie, p_size, p_caption = model.predict([text, tie, by_size, by_caption])
    assert p_text.prediction == 1 and p_text.rule == "text length"
    assert p_tie.prediction == 0
    assert p_size.prediction == 1 and p_size.rule == "image file size"
    assert p_caption.prediction == 0 and p_caption.rule == "caption length"
    missing = image_question("e", (small, tmp_path / "gone.png"))
    failed = model.predict([missing])[0]
    assert failed.prediction == -1 and "unreadable" in failed.error


def test_rotate_options_moves_answer_with_its_option():
    q = text_question("r", ("a", "b", "c", "d"), answer=2)
    r = rotate_options(q, 1)
    assert r.choices == ("b", "c", "d", "a") and r.answer_idx == 1
    assert r.choices[r.answer_idx] == q.choices[q.answer_idx]
    assert rotate_options(q, 4) == q


def test_prediction_from_scores_softmax_and_ties():
    p = prediction_from_scores("q", [1.0, 3.0, 3.0])
    assert p.prediction == 1
    assert p.confidence == pytest.approx(math.exp(3) / (math.exp(1) + 2 * math.exp(3)))
    assert prediction_from_scores("q", [0.0, 1.0], temperature=0.5).confidence == pytest.approx(
        1 / (1 + math.exp(-2))
    )
    assert prediction_from_scores("q", [float("nan"), 1.0]).prediction == -1


def test_registry_builds_baselines_and_rejects_bad_specs(tmp_path):
    assert available_baselines() == ["random", "most-frequent-position", "longest-option"]
    assert build_model("random").name == "random"
    seeded = build_model("random?seed=3")
    assert isinstance(seeded, RandomBaseline) and seeded.seed == 3 and seeded.name == "random?seed=3"
    assert isinstance(build_model("most-frequent-position"), MostFrequentPositionBaseline)
    assert isinstance(build_model("longest-option"), LongestOptionBaseline)
    chat = build_model(
        f"openai?base_url=http://127.0.0.1:9/v1&model=gpt-4o-mini&mode=vlm&cache_dir={tmp_path}&workers=2"
    )
    assert chat.name == "openai?base_url=http://127.0.0.1:9/v1&mode=vlm&model=gpt-4o-mini"
    assert build_model(f"clip?path={tmp_path}&batch_size=8").name == f"clip?path={tmp_path}"
    probe = build_model(f"few-shot?encoder=clip&path={tmp_path}&k=4")
    assert probe.shots_per_skill == 4 and probe.per_subject
    for spec, message in [
        ("gpt5", "unknown model 'gpt5'"),
        ("random?seed=x", "seed must be a number"),
        ("random?colour=1", "unknown parameter 'colour'"),
        ("random?seed=1&seed=2", "given twice"),
        ("clip", "path"),
        ("openai?model=m", "base_url is required"),
        ("openai?base_url=ftp://x&model=m", "http://"),
        ("openai?base_url=http://x&model=m&mode=audio", "unknown chat mode"),
        ("linear-probe?encoder=glove", "encoder must be clip or embedding"),
        ("few-shot?encoder=embedding&k=0", "k must be at least 1"),
    ]:
        with pytest.raises(ValueError, match=message) as info:
            build_model(spec)
        assert "\n" not in str(info.value)


def test_adapter_modules_import_no_heavy_libraries():
    code = (
        "import sys\n"
        "import pipelines.evaluation.models, pipelines.evaluation.models.registry, pipelines.evaluation.models.clip, pipelines.evaluation.models.embedding\n"
        "import pipelines.evaluation.models.training, pipelines.evaluation.models.openai_chat, pipelines.evaluation.predictions_import\n"
        "heavy = {'torch', 'transformers', 'sentence_transformers', 'sklearn', 'scipy'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])
