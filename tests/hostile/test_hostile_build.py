"""Hostile data through a whole build, and SQL smuggled through the command line.

A ``jsonl:`` source whose question text is ``<script>alert(1)</script><img src=x
onerror=alert(2)>`` is built (real PNGs, the random model) with ``run_build``, its texts kept as
written (``html=0``; read as a browser shows them, the option ``<b onmouseover=…>yes</b>`` is
``yes``: tests/ingest/test_importer_quiz_exports.py); the text must
reach the warehouse verbatim and the report only escaped: no script element and no event
handler attribute from the data. Then ``stemforge sql`` (a subprocess, as users run it) must
refuse writes, file access, extension loading and stacked statements with a one-line error
and leave the warehouse intact, and ``stemforge eval --model "x'; DROP TABLE metrics; --"``
must store the name verbatim and break nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from support.builds import home_instance
from pipelines.orchestration.run import run_build
from pipelines.store.home import DataHome
from pipelines.settings import BuildSettings
from pipelines.store.warehouse import run_query
from support.images import real_png

HOSTILE_TEXT = "<script>alert(1)</script><img src=x onerror=alert(2)>"
HOSTILE_OPTION = "<b onmouseover=alert(3)>yes</b>"
HOSTILE_MODEL = "x'; DROP TABLE metrics; --"
SUBJECTS = ("science", "technology", "engineering", "math")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-build")
    source = root / "source"
    (source / "img").mkdir(parents=True)
    lines = []
    for i in range(48):
        (source / "img" / f"{i}.png").write_bytes(real_png(1000 + i, size=64))
        lines.append({
            "question": f"{HOSTILE_TEXT} Which picture {i} shows the {SUBJECTS[i % 4]} idea number {i * 7}?",
            "options": [HOSTILE_OPTION, f"no {i}", f"maybe {i}"],
            "answer": i % 3,
            "subject": SUBJECTS[i % 4],
            "grade": None if i % 4 == 1 else f"grade-{1 + i % 5}",
            "skill": f"<svg/onload=alert({i % 3})> skill {i % 3}",
            "image": f"img/{i}.png",
        })
    path = source / "hostile.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    home = DataHome(root / "home")
    with home_instance(home):
        settings = BuildSettings(home=str(home.root), sources=(f"jsonl:{path}?html=0",), models=("random",))
        outcome = run_build(settings, progress=False)
    assert outcome.success, outcome.summary
    return home


class _Elements(HTMLParser):
    """Every element and attribute name a browser would see in the page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes.extend((tag, name, value) for name, value in attrs)

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)


def _elements(html: str) -> _Elements:
    parsed = _Elements()
    parsed.feed(html)
    parsed.close()
    return parsed


def test_question_markup_is_verbatim_in_the_warehouse(built):
    rows = run_query(built, "SELECT problem FROM raw_questions ORDER BY source_key").rows
    assert len(rows) == 48 and all(r[0].startswith(HOSTILE_TEXT + " Which picture") for r in rows)
    # ``questions.problem`` has LaTeX applied (the converter reads ``src=x`` as a formula),
    # the markup around it is untouched
    kept = run_query(built, "SELECT problem FROM questions").rows
    assert kept and all(r[0].startswith("<script>alert(1)</script><img ") and "onerror=alert(2)>" in r[0] for r in kept)
    options = run_query(built, "SELECT DISTINCT text FROM choices WHERE text LIKE '<b%'").rows
    assert options == [(HOSTILE_OPTION,)]


def test_report_shows_data_markup_only_escaped(built):
    html = (built.reports / "index.html").read_text()
    page = _elements(html)
    assert "script" not in page.tags and "img" not in page.tags
    handlers = [a for a in page.attributes if a[1].lower().startswith("on")]
    assert handlers == [], handlers
    assert "<script" not in html.lower() and "</script" not in html.lower()
    # the data did reach the page, as text: the question-type table shows the first word
    # (leading punctuation stripped), the per-skill table the slugified skill
    assert "<td>script&gt;alert(1)&lt;/script&gt;&lt;img</td>" in html
    assert any("script>alert(1)</script><img" in chunk for chunk in page.text)
    assert "svg-onload-alert-0-skill-0" in html


def _cli(home: DataHome, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "STEMFORGE_HOME": str(home.root), "DAGSTER_HOME": str(home.dagster)}
    env.pop("STEMFORGE_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "pipelines.orchestration.cli", *args, "--home", str(home.root)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


def _digest(home: DataHome) -> str:
    return hashlib.sha256(home.warehouse.read_bytes()).hexdigest()


HOSTILE_SQL = {
    "drop": "DROP TABLE questions",
    "delete": "DELETE FROM questions",
    "update": "UPDATE questions SET problem = 'x'",
    "create": "CREATE TABLE evil AS SELECT 1",
    "stacked": "SELECT 1; DROP TABLE questions",
    "stacked-delete": "SELECT count(*) FROM questions; DELETE FROM metrics",
    "copy-to": "COPY questions TO '/tmp/stemforge-hostile-copy.csv'",
    "copy-from": "COPY questions FROM '/etc/passwd'",
    "read-csv": "SELECT * FROM read_csv('/etc/passwd')",
    "read-text": "SELECT * FROM read_text('/etc/passwd')",
    "replacement-scan": "SELECT * FROM '/etc/passwd'",
    "glob": "SELECT * FROM glob('/etc/*')",
    "attach": "ATTACH '/tmp/stemforge-hostile.duckdb' AS evil",
    "install": "INSTALL httpfs",
    "load": "LOAD httpfs",
    "set": "SET enable_external_access = true",
    "pragma": "PRAGMA enable_external_access",
    "export": "EXPORT DATABASE '/tmp/stemforge-hostile-export'",
    "detach": "DETACH warehouse",
    "call-shell": "SELECT * FROM read_blob('/proc/self/environ')",
}


def test_sql_refuses_writes_files_extensions_and_stacked_statements(built):
    before = _digest(built)
    count = run_query(built, "SELECT count(*) FROM questions").rows[0][0]
    env_files = [Path("/tmp/stemforge-hostile-copy.csv"), Path("/tmp/stemforge-hostile.duckdb"),
                 Path("/tmp/stemforge-hostile-export")]
    processes = {name: _cli_async(built, "sql", query) for name, query in HOSTILE_SQL.items()}
    for name, process in processes.items():
        out, err = process.communicate(timeout=300)
        assert process.returncode != 0, f"{name}: accepted: {out[:200]}"
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("stemforge: error:"), (name, err)
        assert "Traceback" not in err and "root:" not in out, name
    assert _digest(built) == before, "a refused statement changed the warehouse"
    assert run_query(built, "SELECT count(*) FROM questions").rows[0][0] == count
    assert not any(p.exists() for p in env_files)


def _cli_async(home: DataHome, *args: str) -> subprocess.Popen:
    env = {**os.environ, "STEMFORGE_HOME": str(home.root), "DAGSTER_HOME": str(home.dagster)}
    env.pop("STEMFORGE_DEBUG", None)
    return subprocess.Popen([sys.executable, "-m", "pipelines.orchestration.cli", *args, "--home", str(home.root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)


def test_hostile_model_name_is_stored_verbatim_and_breaks_nothing(built, tmp_path):
    test_ids = [r[0] for r in run_query(built, "SELECT question_id FROM questions WHERE split = 'test' ORDER BY 1").rows]
    assert test_ids
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("\n".join(json.dumps({"question_id": q, "prediction": 0}) for q in test_ids) + "\n")
    tables_before = run_query(built, "SELECT count(*) FROM information_schema.tables").rows[0][0]
    result = _cli(built, "eval", "--predictions", str(predictions), "--model", HOSTILE_MODEL)
    assert result.returncode == 0, result.stderr[-2000:]
    stored = run_query(built, "SELECT DISTINCT model FROM predictions WHERE model = ?", [HOSTILE_MODEL]).rows
    assert stored == [(HOSTILE_MODEL,)]
    metrics = run_query(built, "SELECT count(*) FROM metrics WHERE model = ?", [HOSTILE_MODEL]).rows[0][0]
    assert metrics > 0
    assert run_query(built, "SELECT count(*) FROM metrics WHERE model = 'random'").rows[0][0] > 0
    assert run_query(built, "SELECT count(*) FROM information_schema.tables").rows[0][0] == tables_before
    html = (built.reports / "index.html").read_text()
    assert "x&#x27;; DROP TABLE metrics; --" in html
    assert not [a for a in _elements(html).attributes if a[1].lower().startswith("on")]
    # the same name through sql: a parameterless literal cannot break out either
    listed = _cli(built, "sql", "SELECT model FROM predictions GROUP BY model ORDER BY model", "--format", "json")
    assert listed.returncode == 0 and HOSTILE_MODEL in [row["model"] for row in json.loads(listed.stdout)]


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "with-progress"])
def test_failed_build_prints_no_stack_trace(tmp_path, quiet):
    """A build that fails on bad input says why in one line per failure, with or without
    progress; the stack trace stays in the run's event log for the UI."""
    data = tmp_path / "bad.jsonl"
    data.write_text('{"question": "q", "options": ["a", "b"], "answer": 0, "image": "missing.png"}\n')
    home = DataHome(tmp_path / "home")
    args = ["build", "--source", f"jsonl:{data}"] + (["--quiet"] if quiet else [])
    result = _cli(home, *args)
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "Stack Trace" not in output and "Not executing" not in output
    assert "0 of 1 records usable" in result.stdout
    if quiet:
        assert result.stderr == ""
