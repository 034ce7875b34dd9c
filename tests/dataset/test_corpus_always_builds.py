"""A corpus like the real physics one of issue 29 builds a benchmark: questions asked of one
figure with one stem and other options (dedup keeps both, two families) land in one split, so
the blocking ``no_split_leakage`` check passes; the source's own broken ``$...$`` TeX is
counted as the source's by ``latex_is_valid``, apart from damage of ours."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.clean import checks as clean_checks
from pipelines.dataset import checks as dataset_checks
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.warehouse import run_query
from support.images import real_png

ROOT = Path(__file__).resolve().parents[2]
FIGURES = 40
ASKED_AGAIN = 12  # figures asked a second time with the same stem and other options
BROKEN_TEX = 5


def write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True)
    rows = []
    for i in range(FIGURES):
        (folder / f"{i}.png").write_bytes(real_png(i))
        stem = f"A block on the ramp of figure {i}: which force is largest?"
        if i < BROKEN_TEX:  # scraped TeX that does not parse: the source's, not ours
            stem += f" Given $F=\\frac{{{i}}}{{$ N."
        rows.append({"question": stem, "options": [f"gravity {i}", f"friction {i}", f"normal {i}", f"tension {i}"],
                     "answer": i % 4, "image": f"{i}.png", "subject": "science", "skill": "mechanics"})
    for i in range(ASKED_AGAIN):
        rows.append({"question": rows[i]["question"], "options": [f"{i + 1} N", f"{i + 2} N", f"{i + 3} N"],
                     "answer": 2, "image": f"{i}.png", "subject": "science", "skill": "mechanics"})
    data = folder / "q.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return data


@pytest.mark.slow
def test_a_corpus_whose_figures_repeat_with_other_options_builds(tmp_path):
    data = write_corpus(tmp_path / "corpus")
    home = tmp_path / "home"
    command = [sys.executable, "-m", "pipelines.orchestration.cli", "build", "--home", str(home), "--quiet",
               "--select", "group:ingest or group:clean or group:dataset", "--source", f"jsonl:{data}"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data_home, settings = DataHome(home), BuildSettings(home=str(home))
    rows = run_query(data_home, "SELECT problem_image, count(*), count(DISTINCT duplicate_group), count(DISTINCT split) "
                                "FROM questions GROUP BY 1 HAVING count(*) > 1").rows
    assert len(rows) == ASKED_AGAIN  # both questions kept, two dedup families ...
    assert {(n, groups, splits) for _, n, groups, splits in rows} == {(2, 2, 1)}  # ... in one split
    assert dataset_checks.no_split_leakage(data_home, settings).passed
    latex = clean_checks.latex_is_valid(data_home, settings)
    assert latex.passed, latex.description
    # each broken stem twice (asked again), all the source's
    assert (latex.metadata["invalid"], latex.metadata["invalid_in_source"]) == (0, 2 * BROKEN_TEX)
    assert {e["invalid"][0] for e in latex.metadata["invalid_in_source_examples"]} <= {
        f"\\( F=\\frac{{{i}}}{{ \\)" for i in range(BROKEN_TEX)}
