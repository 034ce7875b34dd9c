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
