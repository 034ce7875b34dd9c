"""The README's examples run: its SQL blocks against a demo build, its shell examples' output."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.orchestration.run import run_build
from pipelines.orchestration.cli import prepare_instance
from pipelines.store.home import DataHome
from pipelines.settings import BuildSettings
from pipelines.store.warehouse import run_query

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
SQL_BLOCKS = re.findall(r"```sql\n(.*?)```", README, re.DOTALL)


def test_readme_starts_with_the_two_commands():
    first_block = re.search(r"```sh\n(.*?)```", README, re.DOTALL).group(1)
    assert first_block.splitlines()[0].startswith("make demo")
    assert first_block.splitlines()[1].startswith("make test")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = DataHome(tmp_path_factory.mktemp("readme"))
    prepare_instance(home)
    outcome = run_build(BuildSettings(home=str(home.root), demo_questions=200, models=("random", "longest-option")), progress=False)
    assert outcome.success, outcome.summary
    return home


@pytest.mark.parametrize("block", SQL_BLOCKS, ids=[b.splitlines()[0][:50] for b in SQL_BLOCKS])
def test_sql_examples_run(home, block):
    result = run_query(home, block)
    assert result.rows, block


def test_latex_example_output_is_what_the_readme_says():
    match = re.search(r'echo "(.*?)" \| \.venv/bin/stemforge latex\n# (.*?)\n', README)
    out = subprocess.run([sys.executable, "-m", "pipelines.orchestration.cli", "latex"], input=match.group(1) + "\n",
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == match.group(2)


def test_documented_report_queries_exist():
    for name in re.findall(r"sql/reports/(\w+\.sql)", README):
        assert (Path(__file__).resolve().parents[2] / "sql" / "reports" / name).exists()


def test_python_snippets_say_what_they_need_beyond_the_base_install():
    import importlib.util

    for block in re.findall(r"```python\n(.*?)```", README, re.DOTALL):
        for module in re.findall(r"^import (\w+)", block, re.MULTILINE):
            if module in ("polars", "duckdb", "json", "pathlib"):
                continue
            assert f"pip install {module}" in block or importlib.util.find_spec(module) is not None, module
        if "datasets" in block:
            assert "pip install datasets" in block


def test_readme_asset_selections_parse_and_the_nightly_one_leaves_the_export_out():
    from pipelines.orchestration.run import selected_asset_keys

    selections = re.findall(r"build --select '([^']+)'", README)
    assert "not key:stem_export" in selections
    for selection in selections:
        keys = {key.to_user_string() for key in selected_asset_keys(selection)}
        assert "warehouse" in keys
        if selection == "not key:stem_export":
            assert "stem_export" not in keys and "deduplicated_questions" in keys


def test_load_dataset_example_gives_the_splits_the_card_names(tmp_path):
    """The README's `load_dataset` example, run as printed from a folder whose
    `stemforge-data/export/stem` holds a small export, gives the card's splits (`valid`, not
    the Parquet builder's `validation`) with the card's row counts (issue 27, point 6)."""
    import ast
    import hashlib
    import io
    import os

    import polars as pl
    import yaml
    from PIL import Image

    from pipelines.dataset.export import write_stem_export
    from pipelines.store.images import ImageStore

    pytest.importorskip("datasets")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", README, re.DOTALL) if "load_dataset" in b]
    store = ImageStore(tmp_path / "images")

    def png(i: int) -> bytes:
        buffer = io.BytesIO()
        Image.new("RGB", (8 + i % 5, 8), (i * 40 % 256, 90, 40)).save(buffer, format="PNG")
        return buffer.getvalue()

    splits = ("train", "train", "train", "valid", "test")
    frame = pl.DataFrame(
        [
            {"question_id": hashlib.sha256(str(i).encode()).hexdigest()[:16], "source": "demo", "source_key": f"k{i}",
             "subject": ("science", "math")[i % 2], "grade": "grade-2", "skill": f"skill-{i % 3}",
             "problem": f"What is {i} + 1?", "problem_original": f"What is {i} + 1?",
             "problem_image": store.put(png(i)).image_hash if i % 3 == 0 else None,
             "choices": [str(i + 1), str(i + 2), str(i)], "choice_images": None, "answer_idx": i % 3,
             "shuffle": "shuffled", "split": splits[i % 5], "duplicate_group": f"g{i}", "source_split": None}
            for i in range(20)
        ],
        schema_overrides={"choice_images": pl.List(pl.String), "choices": pl.List(pl.String), "problem_image": pl.String,
                          "source_split": pl.String},
    )
    export = tmp_path / "stemforge-data" / "export" / "stem"
    write_stem_export(frame, store, export, rows_per_shard=4)
    card = yaml.safe_load((export / "README.md").read_text(encoding="utf-8")[4:].partition("\n---\n")[0])
    named = {s["name"]: s["num_examples"] for s in card["dataset_info"]["splits"]}
    assert list(named) == ["train", "valid", "test"]

    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    code = block + "\nprint({name: part.num_rows for name, part in ds.items()})\n"  # what `ds` holds, whatever the block prints
    ran = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    loaded = ast.literal_eval(ran.stdout.strip().splitlines()[-1])
    assert list(loaded) == list(named) and loaded == named
