"""CLIP fine-tuning (the paper's Table 4 schemes) and reduced-precision inference, on the
tiny randomly initialized CLIP of ``test_models_clip`` (nothing is downloaded)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipelines.evaluation.models import build_model
from pipelines.evaluation.models.clip import ClipZeroShotModel
from pipelines.evaluation.models.finetune import (
    ClipFineTuneModel,
    EarlyStopping,
    TrainSettings,
    batch_indices,
    lr_factor,
    plan_steps,
)

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_models_clip import COLORS, clip_dir, colour_questions, png, q  # noqa: E402,F401  (fixture reused)

# A learning rate and batch for a 32-wide random model, not the paper's (1e-5 / 128 for ViT-L).
FAST = dict(lr=3e-3, batch=12, epochs=6, patience=6)


@pytest.fixture(scope="module")
def colour_data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("colour-data")
    return (colour_questions(directory, "train", 48, 0), colour_questions(directory, "valid", 18, 1000),
            colour_questions(directory, "test", 18, 2000))


def accuracy(predictions, questions) -> float:
    return float(np.mean([p.prediction == x.answer_idx for p, x in zip(predictions, questions)]))


def finetune(clip_dir, checkpoints, **given) -> ClipFineTuneModel:
    settings = TrainSettings.for_scheme(given.pop("scheme", "subject"), **{**FAST, **given})
    return ClipFineTuneModel(clip_dir, settings, checkpoint_dir=checkpoints, save_every=1, eval_batch=32)


def weights(model: ClipFineTuneModel, group="science") -> dict:
    return model.trained_state(group)


def test_fine_tuning_learns_what_zero_shot_cannot_see(clip_dir, colour_data, tmp_path):
    train, valid, test = colour_data
    model = finetune(clip_dir, tmp_path / "ckpt").fit(train, valid)
    selection = model.selection["science"]
    curve = [point["valid_accuracy"] for point in selection["curve"]]
    print("valid curve (step 0 = zero-shot):", [(p["step"], round(p["valid_accuracy"], 3)) for p in selection["curve"]])
    zero_shot_valid = curve[0]
    assert zero_shot_valid == pytest.approx(accuracy(ClipZeroShotModel(clip_dir).predict(valid), valid))
    assert max(curve) >= 0.8 and max(curve) >= zero_shot_valid + 0.3
    # Early stopping keeps the best evaluation: the predicting weights score the curve's best on valid.
    assert selection["best_valid_accuracy"] == max(curve)
    assert selection["curve"][curve.index(max(curve))]["step"] == selection["best_step"]
    assert accuracy(model.predict(valid), valid) == pytest.approx(max(curve))
    test_accuracy = accuracy(model.predict(test), test)
    assert test_accuracy >= accuracy(ClipZeroShotModel(clip_dir).predict(test), test) + 0.3
    # The run's settings and curve are written next to its checkpoints; the name carries the settings.
    run = json.loads(next((tmp_path / "ckpt").glob("science-*/run.json")).read_text())
    assert run["selection"]["curve"] == selection["curve"] and run["model"] == model.name
    assert "lr=0.003" in model.name and "scheme=subject" in model.name and "weight_decay=0.2" in model.name
    # A finished run is not retrained: a new model with the same settings reuses it.
    again = finetune(clip_dir, tmp_path / "ckpt")
    again.stop_after_steps = 0
    assert again.fit(train, valid).predict(test) == model.predict(test)


def test_early_stopping_stops_and_keeps_the_best_evaluation(clip_dir, colour_data, tmp_path):
    train, valid, _ = colour_data
    model = finetune(clip_dir, tmp_path / "ckpt", patience=2).fit(train, valid)
    selection = model.selection["science"]
    curve = [point["valid_accuracy"] for point in selection["curve"]]
    assert selection["stopped_early"] and selection["steps_run"] < selection["steps_planned"]
    assert len(curve) == curve.index(max(curve)) + 3  # two evaluations without a better accuracy, then stop
    assert selection["best_step"] == selection["curve"][curve.index(max(curve))]["step"] < selection["steps_run"]
    last = torch.load(next((tmp_path / "ckpt").glob("science-*/last.pt")), weights_only=False)["model"]
    best = weights(model)
    assert any(not torch.equal(last[k], best[k]) for k in best)  # the best evaluation's weights, not the last
    assert accuracy(model.predict(valid), valid) == pytest.approx(max(curve))


def test_killed_and_resumed_run_ends_with_the_same_weights(clip_dir, colour_data, tmp_path):
    train, valid, _ = colour_data
    short = dict(epochs=2)
    whole = finetune(clip_dir, tmp_path / "whole", **short).fit(train, valid)
    killed = finetune(clip_dir, tmp_path / "killed", **short)
    killed.stop_after_steps = 5  # mid-epoch: 4 steps per epoch
    with pytest.raises(KeyboardInterrupt):
        killed.fit(train, valid)
    resumed = finetune(clip_dir, tmp_path / "killed", **short).fit(train, valid)
    assert resumed.selection["science"]["curve"] == whole.selection["science"]["curve"]
    first, second = weights(whole), weights(resumed)
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    last = torch.load(next((tmp_path / "killed").glob("science-*/last.pt")), weights_only=False)
    assert last["step"] == whole.selection["science"]["steps_run"]


def test_bf16_predictions_agree_with_fp32(clip_dir, colour_data, tmp_path):
    """On a trained model (the fine-tuned tiny CLIP) bf16 and fp32 agree on >= 99% of the
    questions; on the random-weight model, whose option logits are nearly tied, only the
    questions whose fp32 margin exceeds bf16's rounding are expected to agree."""
    train, valid, _ = colour_data
    tuned = finetune(clip_dir, tmp_path / "ckpt", epochs=3).fit(train, valid)
    state = tuned.trained_state("science")
    questions = colour_questions(tmp_path, "agree", 150, 5000)
    runs = {}
    for dtype in ("fp32", "bf16"):
        model = ClipZeroShotModel(clip_dir, dtype=dtype)
        trained = tuned._base()
        trained.load_state_dict(state)
        model.use_model(trained)
        runs[dtype] = model.predict(questions)
    agreement = np.mean([a.prediction == b.prediction for a, b in zip(runs["fp32"], runs["bf16"])])
    print(f"fine-tuned tiny CLIP: bf16 vs fp32 agreement on {len(questions)} questions: {agreement:.3f}")
    assert agreement >= 0.99
    fp32 = ClipZeroShotModel(clip_dir, dtype="fp32").predict(questions)
    bf16 = ClipZeroShotModel(clip_dir, dtype="bf16").predict(questions)
    raw = np.mean([a.prediction == b.prediction for a, b in zip(fp32, bf16)])
    margins = [np.diff(sorted(p.option_scores))[-1] for p in fp32]
    clear = [a.prediction == b.prediction for a, b, m in zip(fp32, bf16, margins) if m > 0.1]
    print(f"random tiny CLIP: agreement {raw:.3f}; {np.mean(clear):.3f} where the fp32 margin > 0.1 logit "
          f"({len(clear)} questions)")
    assert all(clear) and len(clear) >= 50


def test_schedule_order_and_early_stopping_rules():
    settings = TrainSettings.for_scheme("subject", batch=10)
    assert (settings.lr, settings.weight_decay, settings.warmup, settings.max_samples) == (1e-5, 0.2, 0.1, 100_000)
    assert TrainSettings.for_scheme("multi-task").max_samples == 200_000
    few = TrainSettings.for_scheme("few-shot")
    assert (few.batch, few.epochs, few.shots, few.max_samples) == (16, 10, 16, None)
    assert plan_steps(settings, 95) == (10, 10_000)  # 100k samples / batch 10
    assert plan_steps(few, 40) == (3, 30)
    # Each epoch is a permutation, the same for the same (seed, epoch).
    epoch = sorted(i for s in range(10) for i in batch_indices(settings, 95, s))
    assert epoch == list(range(95)) and batch_indices(settings, 95, 12) == batch_indices(settings, 95, 12)
    assert batch_indices(settings, 95, 0) != batch_indices(settings, 95, 10)
    # 10% warm-up, then cosine to 0.
    assert lr_factor(0, 100, 0.1) == pytest.approx(0.1) and lr_factor(9, 100, 0.1) == pytest.approx(1.0)
    assert lr_factor(10, 100, 0.1) == pytest.approx(1.0) and lr_factor(99, 100, 0.1) < 0.01
    stopper = EarlyStopping(patience=2)
    assert [stopper.update(s, i) for i, s in enumerate([0.3, 0.5, 0.5, 0.4])] == [True, True, False, False]
    assert stopper.best_step == 1 and stopper.stop


def test_spec_parameters_and_errors(clip_dir, tmp_path):
    model = build_model(f"clip-finetune?path={clip_dir}&scheme=few-shot&k=4&device=cpu&workers=0")
    assert isinstance(model, ClipFineTuneModel) and model.settings.shots == 4
    assert "scheme=few-shot" in model.name and "batch=16" in model.name and "device" not in model.name
    assert build_model(f"clip?path={clip_dir}&dtype=bf16").dtype == "bf16"
    assert build_model(f"clip?path={clip_dir}").dtype == "fp32"
    with pytest.raises(ValueError, match="scheme must be one of"):
        build_model(f"clip-finetune?path={clip_dir}&scheme=zero")
    with pytest.raises(ValueError, match="dtype must be one of"):
        build_model(f"clip?path={clip_dir}&dtype=int8")
    with pytest.raises(ValueError, match="must be fit"):
        model.predict([])
