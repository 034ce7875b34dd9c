"""Nothing a user does breaks a data home (issue 12): imports are isolated and scored over the
whole split, a failed blocking check publishes nothing, one build per home at a time, query
limits, and a removed source is named and pruned only on request.

Real homes built from a ``jsonl:`` source of real PNGs. Each module's first build, the
concurrent and killed builds and the query limits run ``stemforge`` as a subprocess, as users
run it; the other commands run its ``main`` in this process (the same code and output, without
the 3 s of dagster imports each process start pays).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.store.home import DataHome
from pipelines.store.warehouse import run_query
from support.builds import stemforge_in_process
from support.images import real_png

REPO = Path(__file__).resolve().parents[2]
SUBJECTS = ("science", "technology", "engineering", "math")


def make_source(folder: Path, n: int = 90, tag: str = "a") -> str:
    (folder / "img").mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        (folder / "img" / f"{i}.png").write_bytes(real_png(ord(tag[0]) * 10 + i * 3, size=64))
        lines.append({
            "question": f"Which picture {tag} {i} shows the {SUBJECTS[i % 4]} idea number {i * 7}?",
            "options": [f"yes {tag}{i}", f"no {tag}{i}", f"maybe {tag}{i}"],
            "answer": i % 3,
            "subject": SUBJECTS[i % 4],
            "grade": f"grade-{1 + i % 5}",
            "skill": f"skill {i % 3}",
            "image": f"img/{i}.png",
        })
    path = folder / "q.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return f"jsonl:{path}"


def cli(home: DataHome, *args: str) -> subprocess.CompletedProcess:
    return stemforge_in_process(home, *args)


def cli_process(home: DataHome, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "STEMFORGE_HOME": str(home.root), "DAGSTER_HOME": str(home.dagster)}
    env.pop("STEMFORGE_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "pipelines.orchestration.cli", *args, "--home", str(home.root)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout)


def cli_async(home: DataHome, *args: str) -> subprocess.Popen:
    env = {**os.environ, "STEMFORGE_HOME": str(home.root), "DAGSTER_HOME": str(home.dagster)}
    env.pop("STEMFORGE_DEBUG", None)
    return subprocess.Popen([sys.executable, "-m", "pipelines.orchestration.cli", *args, "--home", str(home.root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)


# not the defaults: `stemforge eval` must rescore with the settings of the home's build
BUILD_SETTINGS = ("--seed", "3", "--exam-min-questions", "1")


def build(home: DataHome, *sources: str, extra: tuple[str, ...] = (), run=cli) -> subprocess.CompletedProcess:
    args = ["build", "--quiet", "--model", "random", *BUILD_SETTINGS]
    for source in sources:
        args += ["--source", source]
    return run(home, *args, *extra)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stemforge: error:"), result.stderr[-2000:]
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def published(home: DataHome) -> dict[str, str]:
    files = [home.warehouse, *sorted(home.export.parent.rglob("*.parquet")), home.export.parent / "test_answer_key.jsonl"]
    return {str(p.relative_to(home.root)): digest(p) for p in files}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("home-safety")
    source = make_source(root / "source-a", tag="a")
    home = DataHome(root / "base")
    result = build(home, source, run=cli_process)
    assert result.returncode == 0, result.stderr[-3000:]
    return home, source


@pytest.fixture
def home(base, tmp_path):
    """A private copy of the built home."""
    original, source = base
    copy = DataHome(tmp_path / "home")
    shutil.copytree(original.root, copy.root)
    return copy, source


def split_questions(home_: DataHome, split: str = "test") -> list[tuple[str, int]]:
    return run_query(home_, "SELECT question_id, answer_idx FROM questions WHERE split = ? ORDER BY 1", [split]).rows


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps({"question_id": q, "prediction": p}) + "\n" for q, p in rows))
    return path


def metric(home_: DataHome, model: str, name: str = "accuracy", group_by: str = "micro"):
    return run_query(
        home_,
        "SELECT value, n, ci_low, ci_high FROM metrics WHERE model = ? AND metric = ? AND group_by = ? AND split = 'test'",
        [model, name, group_by],
    ).rows


# ---- 1. imports are isolated, 2. coverage is explicit ---------------------------------


@pytest.mark.parametrize("case", ["all-right", "all-wrong", "one-question"])
def test_import_is_scored_over_the_split_and_later_builds_succeed(home, tmp_path, case):
    home_, source = home
    questions = split_questions(home_)
    assert len(questions) >= 5
    builtin = "SELECT metric, group_by, group_value, split, value FROM metrics WHERE model = 'random' ORDER BY ALL"
    built = run_query(home_, builtin).rows
    assert any(row[0] == "exam_score" for row in built)  # skills of one test question are exam-scored
    rows = {
        "all-right": [(q, a) for q, a in questions],
        "all-wrong": [(q, (a + 1) % 3) for q, a in questions],
        "one-question": [questions[0]],
    }[case]
    result = cli(home_, "eval", "--predictions", str(write_jsonl(tmp_path / "preds.jsonl", rows)), "--model", "mine")
    assert result.returncode == 0, result.stderr[-3000:]
    total = len(questions)
    value, n, low, high = metric(home_, "mine")[0]
    assert n == total  # a missing prediction counts as wrong: accuracy over the whole split
    assert value == {"all-right": 100.0, "all-wrong": 0.0, "one-question": 100.0 / total}[case]
    assert 0.0 <= low <= value <= high <= 100.0
    for group_by in ("macro", "subject"):
        for v, _, lo, hi in metric(home_, "mine", group_by=group_by):
            assert 0.0 <= lo <= v <= hi <= 100.0
    coverage = metric(home_, "mine", "coverage")[0]
    assert coverage[:2] == (100.0 * len(rows) / total, total)
    if case == "one-question":
        warning = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
        assert warning == [f"warning: {total - 1} of {total} test questions have no prediction; they count as wrong "
                           "(coverage is in metrics, metric = 'coverage')"]
    else:
        assert "warning" not in result.stderr
    assert (home_.reports / "index.html").exists()
    assert run_query(home_, builtin).rows == built  # rescored with the build's settings, not the defaults
    later = build(home_, source)
    assert later.returncode == 0, later.stderr[-3000:]
    assert "nothing changed" in later.stdout  # the same settings again: the rescoring stands
    assert metric(home_, "mine")[0][0] == value
    assert run_query(home_, "SELECT count(*) FROM metrics WHERE model = 'random' AND metric = 'accuracy'").rows[0][0] > 0


def test_import_named_like_a_builtin_or_the_paper_is_refused(home, tmp_path):
    home_, source = home
    before = run_query(home_, "SELECT model, metric, group_by, group_value, split, value FROM metrics ORDER BY ALL").rows
    preds = write_jsonl(tmp_path / "preds.jsonl", split_questions(home_))
    for name in ["random", "longest-option", "random?seed=3", "paper:Human", "PAPER:GPT-3.5-Turbo"]:
        result = cli(home_, "eval", "--predictions", str(preds), "--model", name)
        assert result.returncode == 2, name
        assert "is refused" in one_error_line(result) and repr(name) in result.stderr
        assert not list((home_.lake / "predictions").glob("import-*")), name
    # one build after all the refusals: none of them left anything that changes it
    later = build(home_, source)
    assert later.returncode == 0, later.stderr[-3000:]
    assert run_query(home_, "SELECT model, metric, group_by, group_value, split, value FROM metrics ORDER BY ALL").rows == before
    dup = run_query(home_, "SELECT count(*) FROM (SELECT model, split, metric, group_by, group_value FROM metrics "
                           "GROUP BY ALL HAVING count(*) > 1)").rows[0][0]
    assert dup == 0


def test_predictions_on_questions_without_a_key_are_refused(home, tmp_path):
    home_, _ = home
    questions_path = home_.lake_path("questions")
    frame = pl.read_parquet(questions_path)
    hidden = frame.with_columns(
        pl.when(pl.col("split") == "test").then(pl.lit(-1, frame.schema["answer_idx"])).otherwise(pl.col("answer_idx")).alias("answer_idx")
    )
    hidden.write_parquet(questions_path)  # a home built from a release whose test answers are hidden
    first = split_questions(home_)[0][0]
    preds = write_jsonl(tmp_path / "preds.jsonl", [(first, 0)])
    result = cli(home_, "eval", "--predictions", str(preds), "--model", "mine")
    assert result.returncode == 2
    line = one_error_line(result)
    assert "preds.jsonl line 1:" in line and first in line and "no answer key" in line
    assert not list((home_.lake / "predictions").glob("import-*"))


def test_eval_list_and_remove(home, tmp_path):
    home_, source = home
    preds = write_jsonl(tmp_path / "preds.jsonl", split_questions(home_))
    assert cli(home_, "eval", "--predictions", str(preds), "--model", "mine").returncode == 0
    listed = cli(home_, "eval", "--list")
    assert listed.returncode == 0 and listed.stdout.splitlines() == [f"mine\ttest {len(split_questions(home_))} predictions"]
    refused = cli(home_, "eval", "--remove", "random")
    assert refused.returncode == 2 and "built-in model" in one_error_line(refused)
    unknown = cli(home_, "eval", "--remove", "nobody")
    assert unknown.returncode == 2 and "no imported model 'nobody'" in one_error_line(unknown)
    removed = cli(home_, "eval", "--remove", "mine")
    assert removed.returncode == 0, removed.stderr[-2000:]
    assert metric(home_, "mine") == [] and metric(home_, "random")
    assert cli(home_, "eval", "--list").stdout.strip() == "no imported models"
    record = home_.lake / "state" / "build_settings.json"
    record.write_text('{"seed": "three"')  # damaged: eval says so on one line and changes nothing
    damaged = cli(home_, "eval", "--predictions", str(preds), "--model", "mine")
    assert damaged.returncode == 2
    assert f"{record}: the last build's settings cannot be read" in one_error_line(damaged)
    assert metric(home_, "mine") == []
    assert build(home_, source).returncode == 0
    assert json.loads(record.read_text())["seed"] == 3  # the next build records them again


def test_a_model_that_cannot_be_scored_is_left_out_and_breaks_nothing(home, tmp_path):
    home_, source = home
    from pipelines.evaluation.stage import PREDICTIONS_SCHEMA, import_path

    good = write_jsonl(tmp_path / "preds.jsonl", split_questions(home_))
    assert cli(home_, "eval", "--predictions", str(good), "--model", "good").returncode == 0
    (question, _), *_ = split_questions(home_)
    broken = pl.DataFrame(  # written past the importer: an option index the question does not have
        [{"model": "broken", "question_id": question, "split": "test", "prediction": 7, "confidence": None,
          "option_scores": None, "correct": False, "error": None, "rule": None, "raw": None, "origin": "import"}],
        schema=PREDICTIONS_SCHEMA,
    )
    broken.write_parquet(import_path(home_, "broken"))
    result = build(home_, source)
    assert result.returncode == 0, result.stderr[-3000:]
    assert metric(home_, "broken") == []
    assert metric(home_, "good")[0][0] == 100.0 and metric(home_, "random")


# ---- 3. blocking means blocking -------------------------------------------------------


def test_failed_blocking_check_publishes_nothing(base, tmp_path):
    original, _ = base
    release = tmp_path / "release"
    shutil.copytree(original.export.parent, release)
    home_ = DataHome(tmp_path / "home")
    source = f"stem-parquet:{release}"
    assert build(home_, source).returncode == 0
    before = published(home_)
    shard = sorted((release / "data").glob("train-*.parquet"))[0]
    table = pq.read_table(shard)
    answers = table.column("answer_idx").to_pylist()
    answers[0] = -1
    field = table.schema.field("answer_idx")
    pq.write_table(table.set_column(table.schema.get_field_index("answer_idx"), field, pa.array(answers, field.type)), shard)
    result = build(home_, source)
    assert result.returncode == 1
    failures = [line.strip() for line in result.stdout.splitlines() if "export_invariants" in line]
    assert failures == [
        "stem_export: blocking check export_invariants failed: 1 problem(s), first: "
        f"{shard.name} row 0: answer_idx -1 out of range; the previous export is kept"
    ]
    assert "1 blocking asset check failed with" not in result.stdout
    assert published(home_) == before
    # a later run that only rescores still does not publish the unchecked questions (the
    # release hides its test answers: valid predictions)
    preds = write_jsonl(tmp_path / "preds.jsonl", split_questions(home_, "valid"))
    rescored = cli(home_, "eval", "--predictions", str(preds), "--model", "mine")
    assert rescored.returncode == 1 and "not published: blocking check export_invariants failed" in rescored.stdout
    assert digest(home_.warehouse) == before[str(home_.warehouse.relative_to(home_.root))]


# ---- 4. one build per home at a time --------------------------------------------------


def wait_for_lock(home_: DataHome, process: subprocess.Popen) -> dict:
    lock = home_.root / "build.lock"
    for _ in range(600):
        if lock.exists() and lock.read_text().strip():
            return json.loads(lock.read_text())
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    raise AssertionError("the first build never took the lock")


def test_second_concurrent_build_is_refused_with_one_line(home):
    home_, source = home
    first = cli_async(home_, "build", "--quiet", "--model", "random", "--source", source, "--cap", "5")
    holder = wait_for_lock(home_, first)
    assert holder["pid"] == first.pid
    second = build(home_, source, run=cli_process)
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    assert second.returncode == 2
    line = one_error_line(second)
    assert f"another stemforge process is writing {home_.root} (build pid {first.pid}" in line
    assert not (home_.root / "build.lock").read_text().strip()  # released
    assert build(home_, source).returncode == 0


def test_lock_of_a_killed_build_is_taken_over(home):
    home_, source = home
    first = cli_async(home_, "build", "--model", "random", "--source", source, "--cap", "5")
    wait_for_lock(home_, first)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=60)
    assert json.loads((home_.root / "build.lock").read_text())["pid"] == first.pid  # left behind
    result = cli_process(home_, "build", "--model", "random", "--source", source)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"taking over the lock of an earlier build pid {first.pid}" in result.stdout


# ---- 6. query limits ------------------------------------------------------------------


def test_runaway_recursive_query_stops_at_the_time_limit(base):
    home_, _ = base
    started = time.monotonic()
    result = cli_process(home_, "sql", "--timeout", "2",
                 "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r")
    assert result.returncode == 2
    assert one_error_line(result) == "stemforge: error: query stopped at the time limit of 2 s (--timeout SECONDS)"
    assert time.monotonic() - started < 30


def test_big_cross_join_stops_at_the_memory_limit(base):
    home_, _ = base
    result = cli_process(home_, "sql", "--max-memory", "100MB",
                 "SELECT count(DISTINCT a.problem || b.problem || c.problem || d.i) "
                 "FROM questions a, questions b, questions c, range(100) d(i)")
    assert result.returncode == 2
    assert one_error_line(result) == "stemforge: error: query stopped at the memory limit of 100MB (--max-memory SIZE)"


@pytest.mark.parametrize("args,message", [
    (("--max-memory", "lots"), "memory limit 'lots' is not a size such as 512MB or 2GB"),
    (("--timeout", "0"), "--timeout must be a positive number of seconds, got 0"),
])
def test_bad_query_limits_are_refused(base, args, message):
    home_, _ = base
    result = cli(home_, "sql", *args, "SELECT 1")
    assert result.returncode == 2 and one_error_line(result) == f"stemforge: error: {message}"


def test_default_limits_let_ordinary_queries_run(base):
    home_, _ = base
    result = cli(home_, "sql", "SELECT count(*) AS n FROM questions", "--format", "json")
    assert result.returncode == 0 and json.loads(result.stdout)[0]["n"] > 0


# ---- 7. source changes are said -------------------------------------------------------


def test_removing_a_source_is_named_and_needs_prune(home, tmp_path):
    home_, source_a = home
    source_b = make_source(tmp_path / "source-b", n=40, tag="b")
    assert build(home_, source_a, source_b).returncode == 0
    b_questions = run_query(home_, "SELECT question_id, answer_idx FROM questions WHERE split = 'test' AND source = ?",
                            [source_b]).rows
    all_test = split_questions(home_)
    preds = write_jsonl(tmp_path / "preds.jsonl", all_test)
    assert cli(home_, "eval", "--predictions", str(preds), "--model", "mine").returncode == 0
    n_b = run_query(home_, "SELECT count(*) FROM questions WHERE source = ?", [source_b]).rows[0][0]
    predictions_b = run_query(
        home_, "SELECT count(*) FILTER (origin = 'import'), count(*) FROM predictions p JOIN questions q USING (question_id) "
               "WHERE q.source = ?", [source_b]).rows[0]
    assert n_b > 0 and predictions_b[0] == len(b_questions) > 0
    before = published(home_)

    refused = build(home_, source_a)
    assert refused.returncode == 2
    line = one_error_line(refused)
    assert (f"would remove source(s) not given now: {source_b} ({n_b} questions, {predictions_b[1]} predictions "
            f"of which {predictions_b[0]} imported); add --prune") in line
    assert published(home_) == before

    pruned = build(home_, source_a, extra=("--prune",))
    assert pruned.returncode == 0, pruned.stderr[-3000:]
    assert run_query(home_, "SELECT count(*) FROM questions WHERE source = ?", [source_b]).rows[0][0] == 0
    orphans = run_query(home_, "SELECT count(*) FROM predictions WHERE question_id NOT IN (SELECT question_id FROM questions)")
    assert orphans.rows[0][0] == 0
    assert run_query(home_, "SELECT count(*) FROM predictions WHERE model = 'mine'").rows[0][0] == len(all_test) - len(b_questions)
    assert build(home_, source_a).returncode == 0  # nothing left to prune
