"""CLIP zero-shot and the linear-probe / few-shot setups, on a tiny randomly initialized CLIP
built here (tokenizer from a local byte-level vocabulary; nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pipelines.evaluation.models import EvalQuestion, build_model
from pipelines.evaluation.models.base import softmax
from pipelines.evaluation.models import clip as clip_module
from pipelines.evaluation.models.clip import NO_IMAGE_ERROR, ClipZeroShotModel
from pipelines.evaluation.models.training import LinearProbeModel, few_shot_sample

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CONTEXT = 77


def byte_level_alphabet() -> list[str]:
    """GPT-2/CLIP's reversible byte -> unicode character mapping."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    codes, extra = printable[:], 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return [chr(c) for c in codes]


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory) -> Path:
    from transformers import CLIPConfig, CLIPModel, CLIPTokenizer
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    alphabet = byte_level_alphabet()
    vocab = {c: i for i, c in enumerate(alphabet)}
    vocab.update({c + "</w>": len(alphabet) + i for i, c in enumerate(alphabet)})
    merges = [("r", "e"), ("re", "d</w>"), ("b", "l"), ("bl", "u"), ("blu", "e</w>")]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    tokenizer = CLIPTokenizer(vocab=vocab, merges=merges)
    config = CLIPConfig(
        text_config=dict(
            vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=2, max_position_embeddings=CONTEXT, bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        ),
        vision_config=dict(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            image_size=32, patch_size=8,
        ),
        projection_dim=16,
    )
    torch.set_num_threads(1)  # the suite runs with -n 2 on 2 cores
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("tiny-clip")
    CLIPModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    CLIPImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(directory)
    return directory


COLORS = {"red": (220, 20, 20), "green": (20, 200, 40), "blue": (20, 40, 230)}


def png(directory: Path, name: str, rgb, size=(40, 30), seed=0) -> Path:
    rng = np.random.default_rng(seed)
    pixels = np.clip(np.array(rgb)[None, None, :] + rng.integers(-15, 16, (size[1], size[0], 3)), 0, 255)
    path = directory / f"{name}.png"
    Image.fromarray(pixels.astype(np.uint8)).save(path)
    return path


def q(qid, problem, *, image=None, choices=None, choice_images=None, answer=-1, split="test",
      subject="science", skill="colors"):
    return EvalQuestion(qid, subject, "grade-2", skill, split, problem, image, choices, choice_images, answer)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    directory = tmp_path_factory.mktemp("images")
    return {name: png(directory, name, rgb) for name, rgb in COLORS.items()}


def test_text_options_match_clip_forward_and_softmax(clip_dir, images):
    from transformers import AutoTokenizer, CLIPModel

    model = ClipZeroShotModel(clip_dir)
    question = q("c1", "What color is the square?", image=images["red"], choices=("red", "blue", "green"))
    prediction = model.predict([question])[0]
    assert prediction.error is None and len(prediction.option_scores) == 3
    probabilities = softmax(prediction.option_scores)
    assert probabilities.sum() == pytest.approx(1.0)
    assert prediction.confidence == pytest.approx(probabilities.max())
    assert prediction.prediction == int(np.argmax(prediction.option_scores))

    # Same logits as CLIP's own forward pass on "question option" texts.
    reference = CLIPModel.from_pretrained(clip_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(clip_dir)
    from transformers import AutoImageProcessor

    pixels = AutoImageProcessor.from_pretrained(clip_dir)(
        images=[Image.open(images["red"]).convert("RGB")], return_tensors="pt"
    )["pixel_values"]
    texts = [f"What color is the square? {o}" for o in question.choices]
    tokens = tokenizer(texts, padding="max_length", max_length=CONTEXT, return_tensors="pt")
    with torch.inference_mode():
        logits = reference(**tokens, pixel_values=pixels).logits_per_image[0].double().numpy()
    assert np.allclose(prediction.option_scores, logits, atol=1e-4)


def test_long_question_is_truncated_so_the_option_fits(clip_dir, images):
    model = ClipZeroShotModel(clip_dir)
    long_problem = " ".join(["why"] * 400)
    option = "a very long option text that must survive whole"
    question = q("c2", long_problem, image=images["blue"], choices=(option, "blue"))
    sequences = model.text_token_ids(question)
    option_ids = model._content_ids(option)
    assert [len(s) for s in sequences] == [CONTEXT, CONTEXT]
    assert sequences[0][-1 - len(option_ids) : -1] == option_ids
    assert sequences[1][-2] == model._content_ids("blue")[-1]
    assert sequences[0][0] == model._tokenizer.bos_token_id and sequences[0][-1] == model._tokenizer.eos_token_id
    # An option longer than the context is cut to it; short texts are not padded here.
    huge = q("c3", "short?", image=images["blue"], choices=("word " * 300, "x"))
    assert [len(s) for s in model.text_token_ids(huge)] == [CONTEXT, len(model._content_ids("short? x")) + 2]
    prediction = model.predict([question])[0]
    assert prediction.error is None and len(prediction.option_scores) == 2


def test_image_options_text_only_and_determinism(clip_dir, images, tmp_path, monkeypatch):
    picture = q("c4", "Which picture is blue?", choice_images=(images["red"], images["blue"], images["green"]))
    text_only = q("c5", "Which word is a color?", choices=("red", "chair"))
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG not really")
    unreadable = q("c6", "?", image=broken, choices=("a", "b"))
    first = ClipZeroShotModel(clip_dir).predict([picture, text_only, unreadable])
    monkeypatch.setattr(clip_module, "QUESTION_CHUNK", 1)
    second = ClipZeroShotModel(clip_dir, batch_size=1).predict([picture, text_only, unreadable])
    monkeypatch.undo()
    assert len(first[0].option_scores) == 3 and first[0].error is None
    assert first[1].prediction == -1 and first[1].error == NO_IMAGE_ERROR
    assert first[2].prediction == -1 and "unreadable image" in first[2].error
    assert first[0].prediction == second[0].prediction
    assert [p.error for p in second] == [p.error for p in first]
    assert np.allclose(first[0].option_scores, second[0].option_scores, atol=1e-6)
    assert first == ClipZeroShotModel(clip_dir).predict([picture, text_only, unreadable])


def test_missing_weights_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="CLIP weights directory not found"):
        build_model(f"clip?path={tmp_path / 'nope'}").predict([])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="cannot load CLIP") as info:
        build_model(f"clip?path={tmp_path / 'empty'}").predict([])
    assert "\n" not in str(info.value)


def colour_questions(directory: Path, split: str, count: int, start_seed: int) -> list[EvalQuestion]:
    """The answer is the colour of the (noisy) question image; options in rotating order."""
    names = list(COLORS)
    questions = []
    for i in range(count):
        colour = names[i % 3]
        image = png(directory, f"{split}-{i}", COLORS[colour], seed=start_seed + i)
        order = tuple(names[(i + j) % 3] for j in range(3))
        questions.append(
            q(f"{split}{i:04d}", "What color is it?", image=image, choices=order,
              answer=order.index(colour), split=split, skill=f"skill-{i % 2}")
        )
    return questions


def test_linear_probe_selects_on_valid_and_beats_zero_shot(clip_dir, tmp_path):
    train = colour_questions(tmp_path, "train", 24, 0)
    valid = colour_questions(tmp_path, "valid", 9, 1000)
    test = colour_questions(tmp_path, "test", 9, 2000)
    encoder = ClipZeroShotModel(clip_dir)
    probe = LinearProbeModel(encoder).fit(train, valid)
    selection = probe.selection["science"]
    assert selection["train_questions"] == 24 and selection["valid_questions"] == 9
    assert [c for c, _ in selection["sweep"]] == [0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]
    assert selection["valid_accuracy"] == max(a for _, a in selection["sweep"])
    predictions = probe.predict(test)
    probe_accuracy = np.mean([p.prediction == t.answer_idx for p, t in zip(predictions, test)])
    zero_shot = np.mean([p.prediction == t.answer_idx for p, t in zip(encoder.predict(test), test)])
    assert probe_accuracy >= 0.9 and probe_accuracy > zero_shot
    for p in predictions:
        assert softmax(p.option_scores)[p.prediction] == pytest.approx(p.confidence)
    # Deterministic: refitting gives the same predictions.
    assert LinearProbeModel(ClipZeroShotModel(clip_dir)).fit(train, valid).predict(test) == predictions


def test_few_shot_sampling_and_errors(clip_dir, tmp_path):
    train = colour_questions(tmp_path, "train", 30, 0)
    sample = few_shot_sample(train, 4, seed=1)
    assert len(sample) == 8 and sorted({x.skill for x in sample}) == ["skill-0", "skill-1"]
    assert few_shot_sample(train, 4, seed=1) == sample and few_shot_sample(train, 4, seed=2) != sample
    model = build_model(f"few-shot?encoder=clip&path={clip_dir}&k=4")
    with pytest.raises(ValueError, match="must be fit"):
        model.predict(train[:1])
    with pytest.raises(ValueError, match="no answered valid questions"):
        model.fit(train, [])
    valid = colour_questions(tmp_path, "valid", 6, 1000)
    model.fit(train, valid)
    assert model.selection["science"]["train_questions"] == 8
    math_question = q("m1", "?", image=train[0].problem_image, choices=("a", "b"), subject="math")
    assert "no probe trained for subject math" in model.predict([math_question])[0].error


def test_fast_input_pipeline_predicts_exactly_as_the_processor_path(clip_dir, images, tmp_path, monkeypatch):
    """clip_pixels' fast path (libspng, uint8 pixels normalized after the transfer) and the
    per-worker token cache give the predictions of the processor's own path, in the main
    process and in a DataLoader worker."""
    from pipelines.evaluation.models import clip_pixels
    from pipelines.evaluation.models.clip import Prepare

    rng = np.random.default_rng(3)
    tall = tmp_path / "tall.png"
    Image.fromarray(rng.integers(0, 256, (90, 25, 3), dtype=np.uint8)).save(tall)
    alpha = tmp_path / "alpha.png"
    Image.fromarray(rng.integers(0, 256, (50, 70, 4), dtype=np.uint8)).save(alpha)
    keyed = tmp_path / "keyed.png"
    Image.fromarray(rng.integers(0, 256, (64, 48), dtype=np.uint8)).convert("P").save(keyed, transparency=0)
    photo = tmp_path / "photo.jpg"
    Image.fromarray(rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)).save(photo)
    questions = [
        q(f"f{i}", problem, image=picture, choices=choices)
        for i, (problem, picture, choices) in enumerate([
            ("What color is it?", images["red"], ("red", "blue", "green")),
            ("What color is it?", images["red"], ("blue", "red")),  # same picture, same texts again
            ("Which is blue?", tall, ("red", "blue")),
            ("Is it red?", alpha, ("yes", "no")),
            ("Which one?", keyed, ("a", "b", "c", "d")),
            ("A photo of what color?", photo, ("red", "green")),
        ])
    ]
    questions.append(q("f9", "Which picture is red?", choice_images=(images["blue"], images["red"], photo)))
    fast = ClipZeroShotModel(clip_dir).predict(questions)
    in_worker = ClipZeroShotModel(clip_dir, workers=1).predict(questions)
    monkeypatch.setattr(clip_pixels, "FAST", False)
    before = ClipZeroShotModel(clip_dir).predict(questions)
    assert all(p.error is None for p in fast)
    assert fast == before and in_worker == before

    # Token ids: one tokenizer call per distinct text in a worker, the same ids as text by text.
    model = ClipZeroShotModel(clip_dir)
    model._load()
    tokenizer = model._tokenizer

    def one_by_one(text):
        return [i for i in tokenizer(text, add_special_tokens=False)["input_ids"]
                if i not in (tokenizer.bos_token_id, tokenizer.eos_token_id)]

    prepared = Prepare(tokenizer, CONTEXT, model._image_processor)(("text", questions))[1]
    for question, sequences in zip(questions, prepared):
        expected = [[tokenizer.bos_token_id, *one_by_one(f"{question.problem}")[: CONTEXT - 2 - len(one_by_one(o))],
                     *one_by_one(o), tokenizer.eos_token_id] for o in question.choices] if question.choices else \
            [[tokenizer.bos_token_id, *one_by_one(question.problem)[: CONTEXT - 2], tokenizer.eos_token_id]]
        assert sequences == expected
