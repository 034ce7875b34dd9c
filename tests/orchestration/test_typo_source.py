"""A typo'd source does not hold the home hostage (issue 28, item 3): a source joins a home only
when a build that includes it succeeds; the failure says its cause once and points at nothing
that does not exist."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pipelines.ingest.source_changes import built_sources, removed_sources
from pipelines.store.home import DataHome

REPO = Path(__file__).resolve().parents[2]


def quiz(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "quiz.jsonl"
    with path.open("w") as out:
        for i in range(40):
            out.write(json.dumps({"question": f"What is {i} plus {i + 1}, written in digits?",
                                  "options": [str(2 * i + 1), str(2 * i + 2), str(2 * i + 3), str(2 * i)],
                                  "answer": 0, "level": f"grade {1 + i % 4}", "topic": f"adding {i % 3}"}) + "\n")
    return path


def build(home: DataHome, source: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "STEMFORGE_HOME": str(home.root), "DAGSTER_HOME": str(home.dagster)}
    env.pop("STEMFORGE_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "pipelines.orchestration.cli", "build", "--home", str(home.root), "--model", "random",
         "--source", source, *extra],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )


def test_a_typo_then_its_fix(tmp_path):
    home = DataHome(tmp_path / "home")
    path = quiz(tmp_path / "corpus")
    fixed = f"jsonl:{path}?problem=question&choices=options&answer=answer&subject='math'&skill=topic&grade=level"
    typo = fixed.replace("skill=topic", "skill=topik")

    failed = build(home, typo)
    assert failed.returncode == 1
    output = failed.stdout + failed.stderr
    cause = "mapped field skill=topik is in none of its 40 records"
    assert output.count(cause) == 1, output[-4000:]
    assert "left out stem_export" not in output
    assert str(home.warehouse) not in output and "index.html" not in output  # neither was built
    assert "warehouse:  not built yet" in output and "report:     not built yet" in output
    assert built_sources(home) is None and removed_sources(home, [fixed]) == []

    done = build(home, fixed)  # no --prune: the typo'd source never joined the home
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "would remove source" not in done.stderr
    assert built_sources(home) == [fixed]

    other = fixed.replace("subject='math'", "subject='science'")
    refused = build(home, other)
    assert refused.returncode == 2
    line = refused.stderr.strip()
    assert f"would remove source(s) not given now: {fixed} (" in line, line  # named by its spec
    assert "jsonl-" not in line.partition("not given now:")[2].partition(" (")[0]
