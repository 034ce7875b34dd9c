"""The whole pipeline through real Dagster materializations, against the demo site on loopback."""

import hashlib
import json
import subprocess
import sys

import dagster as dg
import pyarrow.parquet as pq
import pytest

from pipelines.orchestration.run import run_build
from pipelines.orchestration.cli import prepare_instance
from pipelines.dataset.export import STEM_SCHEMA, check_release_invariants
from pipelines.store.home import DataHome
from pipelines.settings import DEFAULT_MODELS, BuildSettings
from pipelines.store.warehouse import REQUIRED_COLUMNS, run_query

# the other builds of this file evaluate the baselines only; ``built`` is the main job as
# ``make demo`` runs it, with the default models (the embedding model too)
MODELS = ("random", "most-frequent-position", "longest-option")


def build(home: DataHome, **changes):
    settings = BuildSettings(**{"home": str(home.root), "demo_questions": 300, "models": MODELS, **changes})
    prepare_instance(home)
    outcome = run_build(settings, progress=False)
    assert outcome.success, outcome.summary
    return outcome


def export_digests(home: DataHome) -> dict[str, str]:
    root = home.export.parent
    files = sorted(root.glob("data/*.parquet")) + [root / "test_answer_key.jsonl", root / "index.parquet", root / "README.md"]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    home = DataHome(tmp_path_factory.mktemp("home"))
    outcome = build(home, models=DEFAULT_MODELS)
    return home, outcome


def stemforge(*args, home: DataHome | None = None, stdin: str | None = None):
    command = [sys.executable, "-m", "pipelines.orchestration.cli", *args]
    if home is not None:
        command += ["--home", str(home.root)]
    return subprocess.run(command, capture_output=True, text=True, input=stdin, timeout=120)


def test_every_contract_view_has_its_columns(built):
    home, _ = built
    for table, columns in REQUIRED_COLUMNS.items():
        described = {r[0] for r in run_query(home, f"DESCRIBE {table}").rows}
        assert set(columns) <= described, table
    counts = dict(run_query(home, "SELECT 'questions', count(*) FROM questions UNION ALL SELECT 'raw', count(*) FROM raw_questions").rows)
    assert counts["raw"] == 300 and 200 < counts["questions"] < 300


def test_the_main_job_evaluates_every_default_model(built):
    home, _ = built
    scored = {row[0]: row[1] for row in run_query(
        home, "SELECT model, value FROM metrics WHERE metric = 'accuracy' AND group_by = 'micro' AND split = 'test'").rows}
    assert set(scored) >= {"random", "most-frequent-position", "longest-option", "embedding"}
    assert all(0.0 <= value <= 100.0 for value in scored.values())


def test_every_record_is_kept_duplicated_or_quarantined(built):
    home, _ = built
    raw = run_query(home, "SELECT count(*) FROM raw_questions").rows[0][0]
    kept = run_query(home, "SELECT count(*) FROM questions").rows[0][0]
    removed = run_query(home, "SELECT count(*) FROM duplicates").rows[0][0]
    dropped = run_query(
        home, "SELECT count(*) FROM quarantine WHERE stage IN ('filter', 'dedup', 'cap')"
    ).rows[0][0]
    assert raw == kept + removed + dropped
    provenance = run_query(home, "SELECT count(*) FROM questions WHERE source <> 'demo' OR source_key NOT LIKE 'http://demo.localhost/%'").rows
    assert provenance == [(0,)]


def test_export_matches_the_release_invariants_and_loads_with_datasets(built):
    home, _ = built
    assert check_release_invariants(home.export) == []
    shards = sorted(home.export.glob("*.parquet"))
    assert {p.name.split("-")[0] for p in shards} == {"train", "valid", "test"}
    for path in shards:
        table = pq.read_table(path)
        assert table.schema == STEM_SCHEMA
        rows = table.to_pylist()
        for r in rows:
            assert (r["choices"] is None) != (r["choices_pic"] is None)
            k = len(r["choices"] or r["choices_pic"])
            assert 2 <= k <= 5
            if r["problem_pic"] is not None:
                assert r["problem_pic"][:8] == b"\x89PNG\r\n\x1a\n"
            assert r["answer_idx"] == -1 if path.name.startswith("test") else 0 <= r["answer_idx"] < k
    import datasets

    loaded = datasets.load_dataset("parquet", data_dir=str(home.export), cache_dir=str(home.root / "hf-cache"))
    assert set(loaded) == {"train", "validation", "test"} or set(loaded) == {"train", "valid", "test"}
    key = [json.loads(line) for line in (home.export.parent / "test_answer_key.jsonl").read_text().splitlines()]
    assert len(key) == sum(pq.read_metadata(p).num_rows for p in shards if p.name.startswith("test"))


def test_runs_are_recorded_in_the_instance_the_ui_uses(built):
    home, outcome = built
    instance = dg.DagsterInstance.from_config(str(home.dagster))
    runs = instance.get_runs()
    assert runs and runs[0].status == dg.DagsterRunStatus.SUCCESS
    record = instance.get_latest_materialization_event(dg.AssetKey("questions"))
    assert record is not None and record.asset_materialization.metadata["dagster/row_count"].value > 0


def test_random_baseline_is_within_its_interval_of_the_analytic_mean(built):
    home, _ = built
    rows = run_query(
        home,
        "SELECT a.ci_low, a.ci_high, r.value FROM metrics a JOIN metrics r USING (model, split, group_by, group_value) "
        "WHERE a.model = 'random' AND a.split = 'test' AND a.group_by = 'micro' "
        "AND a.metric = 'accuracy' AND r.metric = 'random_expected'",
    ).rows
    low, high, expected = rows[0]
    assert low <= expected <= high


def test_sql_command_formats_and_errors(built):
    home, _ = built
    out = stemforge("sql", "--format", "json", "SELECT subject, count(*) AS n FROM questions GROUP BY 1 ORDER BY 1", home=home)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {row["subject"] for row in data} <= {"math", "science", "engineering", "technology"}
    csv_out = stemforge("sql", "--format", "csv", "SELECT 1 AS a, 'x' AS b", home=home)
    assert csv_out.stdout.splitlines() == ["a,b", "1,x"]
    bad = stemforge("sql", "SELEC nonsense", home=home)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    drop = stemforge("sql", "DROP TABLE questions", home=home)
    assert drop.returncode == 2


@pytest.mark.parametrize("name", sorted(p.name for p in __import__("pathlib").Path(__file__).parents[2].glob("sql/reports/*.sql")))
def test_report_queries_run(built, name):
    home, _ = built
    out = stemforge("sql", "-f", f"sql/reports/{name}", home=home)
    assert out.returncode == 0, out.stderr
    assert "row" in out.stdout.splitlines()[-1]


def test_eval_imports_jsonl_and_preds_txt(built, tmp_path):
    home, _ = built
    test = run_query(home, "SELECT question_id, num_choices FROM questions WHERE split = 'test' ORDER BY question_id").rows
    jsonl = tmp_path / "preds.jsonl"
    jsonl.write_text("\n".join(json.dumps({"question_id": q, "prediction": 0, "confidence": 0.5}) for q, _ in test))
    out = stemforge("eval", "--predictions", str(jsonl), "--model", "always-first", home=home)
    assert out.returncode == 0, out.stderr
    n = run_query(home, "SELECT count(*) FROM predictions WHERE model = 'always-first'").rows[0][0]
    assert n == len(test)
    assert run_query(home, "SELECT count(*) FROM metrics WHERE model = 'always-first' AND group_by = 'macro'").rows[0][0] >= 1
    latest = dg.DagsterInstance.from_config(str(home.dagster)).get_runs(limit=1)[0]
    assert latest.tags["stemforge/command"] == "eval"
    compared = stemforge("compare", "always-first", "random", home=home)
    assert compared.returncode == 0, compared.stderr
    assert "always-first minus random" in compared.stdout and "macro (" in compared.stdout and "McNemar" in compared.stdout
    unknown = stemforge("compare", "always-first", "nobody", home=home)
    assert unknown.returncode == 2 and "no predictions" in unknown.stderr
    preds = tmp_path / "preds.txt"
    preds.write_text("\n".join("1" for _ in test) + "\n")
    out = stemforge("eval", "--predictions", str(preds), "--model", "always-second", home=home)
    assert out.returncode == 0, out.stderr
    short = tmp_path / "short.txt"
    short.write_text("0\n")
    bad = stemforge("eval", "--predictions", str(short), "--model", "x", home=home)
    assert bad.returncode == 2 and "line" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_kept_order_questions_match_the_site_truth(built):
    """Figure-label options and options that refer to others keep the site's order and key."""
    from pipelines.ingest.demo_site.generator import SiteConfig
    from pipelines.ingest.demo_site.truth import CANONICAL_BASE, iter_truth

    home, _ = built
    records = list(iter_truth(SiteConfig(seed=BuildSettings().seed, questions=300)))[1:]
    truth = {CANONICAL_BASE + r["url"].lstrip("/"): r for r in records}
    rows = run_query(home, "SELECT source_key, shuffle, choices, answer_idx, permutation FROM questions").rows
    recorded = {}
    for source_key, shuffle, choices, answer_idx, permutation in rows:
        site = truth[source_key]
        recorded[shuffle] = recorded.get(shuffle, 0) + 1
        if site["option_order"] != "shuffled":
            assert shuffle == site["option_order"], source_key
            assert list(choices) == site["choices"] and list(permutation) == list(range(len(choices)))
            assert answer_idx == site["answer_idx"]
        elif shuffle != "shuffled":
            # the one ambiguous case: numbers 1, 2, 3 in order read as figure labels (harmless: kept in order)
            assert shuffle == "kept-order:figure-labels" and list(choices) == [str(j + 1) for j in range(len(choices))]
    assert recorded.get("kept-order:figure-labels", 0) >= 3 and recorded.get("kept-order:refers-to-options", 0) >= 3


def test_bad_source_is_a_one_line_error(tmp_path):
    for source in ("nonsense", "jsonl:/does/not/exist.jsonl", "ftp://x/"):
        out = stemforge("build", "--source", source, "--home", str(tmp_path / "h"))
        assert out.returncode == 2
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_latex_command_converts_lines():
    out = stemforge("latex", stdin="What is 3 × 4?\nThere are 5 apples.\n")
    assert out.stdout.splitlines() == ["What is \\( 3 \\times 4 \\)?", "There are 5 apples."]


def test_rebuild_is_byte_identical_and_adding_questions_moves_none(tmp_path):
    home = DataHome(tmp_path / "home")
    build(home)
    first = export_digests(home)
    splits_before = dict(run_query(home, "SELECT question_id, split FROM questions").rows)
    build(home)
    assert export_digests(home) == first
    crawl = json.loads(json.dumps(run_query(home, "SELECT count(*) FROM raw_questions").rows))
    assert crawl == [[300]]
    build(home, demo_revision=1)
    after = dict(run_query(home, "SELECT question_id, split FROM questions").rows)
    kept = set(after) & set(splits_before)
    assert len(kept) > 0.9 * len(splits_before)
    assert all(after[q] == splits_before[q] for q in kept)
    assert len(set(after) - set(splits_before)) > 0  # the revision added questions


def test_clean_quality_lists_every_wrong_dedup_pair(built):
    """bench/clean_quality.py names each planted pair left apart and each merge the truth does
    not plant; the list agrees with its precision and recall, and follows the truth."""
    import copy
    import importlib.util
    from pathlib import Path

    from pipelines.ingest.demo_site.generator import SiteConfig

    path = Path(__file__).resolve().parents[2] / "bench" / "clean_quality.py"
    spec = importlib.util.spec_from_file_location("clean_quality_bench", path)
    clean_quality = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(clean_quality)
    home, _ = built
    config = SiteConfig(seed=BuildSettings().seed, questions=300)
    truth = clean_quality.truth_by_key(config)
    figures = clean_quality.measure(home, config)
    found = clean_quality.wrong_pairs(home, truth)
    true_merges = round(figures["dedup_recall"] * figures["planted_pairs"])
    assert sum(row["error"] == "missed" for row in found) == figures["planted_pairs"] - true_merges
    assert sum(row["error"] == "false" for row in found) == figures["predicted_pairs"] - true_merges

    predicted, planted, reached, _ = clean_quality.dedup_pairs(home, truth)
    a, b = sorted(next(iter(sorted(predicted & planted, key=sorted))))
    lone = next(k for k in sorted(reached) if not truth[k]["duplicate_group"] and all(k not in p for p in predicted))
    changed = copy.deepcopy(truth)
    changed[b]["duplicate_group"] = None  # the build's merge of a and b is no longer planted
    changed[lone]["duplicate_group"] = truth[a]["duplicate_group"]  # a planted copy the build kept apart
    base = clean_quality.CANONICAL_BASE.rstrip("/")
    errors = {(row["error"], *row["pages"]) for row in clean_quality.wrong_pairs(home, changed)} - \
        {(row["error"], *row["pages"]) for row in found}
    page = {k: k[len(base):] for k in (a, b, lone)}
    assert ("false", page[a], page[b]) in errors
    assert ("missed", *sorted((page[a], page[lone]))) in errors
