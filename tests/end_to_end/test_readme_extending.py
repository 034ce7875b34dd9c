"""README "Extending stemforge": each example, written to a module of its own, registers and works."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import polars as pl
import pytest

from pipelines.evaluation import metrics
from pipelines.evaluation.models import registry
from pipelines.evaluation.models.base import EvalQuestion
from pipelines.ingest import sources
from pipelines.ingest.spec import SourceSpecError, parse_source_spec
from pipelines.ingest.stage import land_source, source_files
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
SECTION = README.split("## Extending stemforge", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, re.DOTALL)


def block_for(path: str) -> str:
    found = [b for b in BLOCKS if b.startswith(f"# {path}\n")]
    assert len(found) == 1, path
    return found[0]


def import_as_module(tmp_path: Path, name: str, text: str):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def yaml_kind(tmp_path):
    sources.source_kinds()
    import_as_module(tmp_path, "readme_yaml_source", block_for("pipelines/ingest/importers/yaml_file.py"))
    yield sources.source_kind("yaml")
    sources._KINDS.pop("yaml", None)
    sys.modules.pop("readme_yaml_source", None)


def test_the_readme_source_kind_registers_parses_watches_and_lands(yaml_kind, tmp_path):
    assert yaml_kind is not None and yaml_kind.usage in sources.expected_sources()
    data = tmp_path / "quiz"
    data.mkdir()
    (data / "quiz.yaml").write_text(
        '- {id: 1, question: "How many legs has a cat?", options: ["2", "4", "6"], answer: B, skill: counting}\n'
        '- {id: 2, question: "How many wheels has a bicycle?", options: ["1", "2", "3"], answer: B, skill: counting}\n'
        "- {id: 3, question: A row without options, answer: A, skill: counting}\n"
    )
    spec = parse_source_spec(f"yaml:{data / 'quiz.yaml'}?subject='math'")
    assert (spec.kind, spec.is_web) == ("yaml", False)
    with pytest.raises(SourceSpecError, match="does not exist"):
        parse_source_spec(f"yaml:{data / 'missing.yaml'}")
    home = DataHome(tmp_path / "home")
    home.root.mkdir()
    assert source_files(spec, home) == [data / "quiz.yaml"]
    outcome = land_source(spec, home, ImageStore(home.images))
    assert (outcome.questions, outcome.quarantined) == (2, 1)
    questions = pl.read_parquet(outcome.question_file)
    assert questions["subject"].to_list() == ["math", "math"]
    assert land_source(spec, home, ImageStore(home.images)).skipped  # watched: unchanged is reused


@pytest.fixture
def fixed_position():
    registry.models()
    yield block_for("pipelines/evaluation/models/fixed_position.py")
    registry._MODELS.pop("fixed-position", None)
    sys.modules.pop("readme_fixed_position", None)


def test_the_readme_model_registers_and_predicts(fixed_position, tmp_path):
    import_as_module(tmp_path, "readme_fixed_position", fixed_position)
    assert "fixed-position" in registry.available_baselines()
    model = registry.build_model("fixed-position?position=2")
    assert model.name == "fixed-position?position=2"
    questions = [
        EvalQuestion(f"q{k}", "math", None, "s", "test", "?", None, tuple("abcdef"[:k]), None) for k in (2, 4)
    ]
    assert [p.prediction for p in model.predict(questions)] == [1, 2]
    with pytest.raises(ValueError, match="unknown parameter 'seed'; allowed: position"):
        registry.build_model("fixed-position?seed=1")


@pytest.fixture
def overconfident_rate():
    metrics.measures()
    yield block_for_measure()
    metrics.MEASURES.pop("overconfident_rate", None)


def block_for_measure() -> str:
    found = [b for b in BLOCKS if "@register_metric" in b]
    assert len(found) == 1
    return found[0]


def test_the_readme_measure_registers_and_gets_every_breakdown(overconfident_rate):
    exec(overconfident_rate, vars(metrics).copy())
    assert metrics.measures()["overconfident_rate"].higher_is_better is False
    scored = pl.DataFrame(
        {
            "model": ["m"] * 4,
            "question_id": ["a", "b", "c", "d"],
            "split": ["test"] * 4,
            "subject": ["math", "math", "science", "science"],
            "grade": ["grade-1"] * 4,
            "skill": ["add"] * 4,
            "num_choices": [3] * 4,
            "problem": ["Which one?"] * 4,
            "prediction": [0, 1, 2, 0],
            "confidence": [0.95, 0.95, None, 0.5],
            "correct": [False, True, False, False],
        }
    )
    rows = metrics.compute_metrics(scored).filter(pl.col("metric") == "overconfident_rate")
    micro = rows.filter(pl.col("group_by") == "micro").row(0, named=True)
    assert micro["value"] == pytest.approx(25.0) and micro["ci_low"] is not None
    assert set(rows["group_by"]) >= {"subject", "macro", "micro", "grade", "skill", "num_choices"}
