"""Partitions by source, the multiprocess executor, and the scale-out document.

Two sources (the demo site on loopback and a generated ``jsonl:`` corpus with real PNG images)
are built three ways into three data homes:
  A. one run per source partition (ingest only), then one run of everything downstream;
  B. ``run_build``: a single run over all source partitions and the downstream assets;
  C. ``run_build(executor="multiprocess")`` over the ingest, clean and dataset groups.
A and B must leave byte-identical lakes and exports; C the same bytes for what it built.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import dagster as dg
import pytest
import yaml
from PIL import Image, ImageDraw

from assets.ingest import SOURCE_PARTITIONS_NAME, configured_sources, sync_source_partitions
from pipelines.orchestration.run import resource_config, run_build
from pipelines.orchestration.cli import prepare_instance
from pipelines.orchestration.definitions import all_assets, build_job_definition, defs
from pipelines.store.home import DataHome
from pipelines.settings import BuildSettings
from pipelines.store.warehouse import run_query
from support.builds import data_file_digests

ROOT = Path(__file__).resolve().parents[2]
INGEST = [dg.AssetKey("crawled_pages"), dg.AssetKey("raw_questions")]
DEMO_QUESTIONS = 120
WAREHOUSE_QUERIES = (
    "SELECT source, count(*) FROM raw_questions GROUP BY 1 ORDER BY 1",
    "SELECT question_id, source, split, answer_idx, problem FROM questions ORDER BY question_id",
    "SELECT stage, count(*) FROM quarantine GROUP BY 1 ORDER BY 1",
)


def png(color: tuple[int, int, int], mark: int) -> bytes:
    image = Image.new("RGB", (48, 32), color)
    ImageDraw.Draw(image).rectangle([2, 2, 4 + mark, 10 + mark % 7], fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def write_corpus(folder: Path) -> Path:
    """A small jsonl corpus: questions with problem or option images, and a text-only one."""
    (folder / "img").mkdir(parents=True)
    lines = []
    for i in range(14):
        color = (40 + 13 * i, 200 - 11 * i, (97 * i) % 256)
        (folder / "img" / f"q{i}.png").write_bytes(png(color, i))
        line = {
            "question": f"How many black squares are in picture {i} of the corpus?",
            "options": [str(i), str(i + 1), str(i + 2)],
            "answer": i % 3,
            "subject": ("science", "math", "engineering")[i % 3],
            "grade": f"grade {1 + i % 5}",
            "skill": f"corpus skill {i % 4}",
        }
        if i % 5 == 4:
            for k in range(3):
                (folder / "img" / f"q{i}o{k}.png").write_bytes(png(color, 20 + k))
            line.pop("options")
            line["choice_images"] = [f"img/q{i}o{k}.png" for k in range(3)]
        else:
            line["image"] = f"img/q{i}.png"
        lines.append(line)
    lines.append({"question": "A question without any image", "options": ["a", "b"], "answer": 0,
                  "subject": "math", "grade": "grade 2", "skill": "text only"})
    path = folder / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def settings_for(home: DataHome, corpus: Path) -> BuildSettings:
    return BuildSettings(
        home=str(home.root),
        sources=("demo", f"jsonl:{corpus}"),
        demo_questions=DEMO_QUESTIONS,
        models=("random",),
    )


def lake_and_export(home: DataHome) -> dict[str, str]:
    return data_file_digests(home)


def warehouse_rows(home: DataHome) -> list:
    return [run_query(home, sql).rows for sql in WAREHOUSE_QUERIES]


def build_partition_by_partition(settings: BuildSettings) -> dg.DagsterInstance:
    instance = dg.DagsterInstance.get()
    keys = sync_source_partitions(instance, settings.sources)
    job = dg.reconstructable(build_job_definition)
    config = {
        "resources": {"stemforge": {"config": resource_config(settings, progress=False)}},
        "execution": {"config": {"in_process": {}}},
    }
    for key in keys:
        result = dg.execute_job(job, instance, run_config=config, tags={"dagster/partition": key}, asset_selection=INGEST)
        assert result.success, key
    rest = sorted(set(defs.resolve_asset_graph().get_all_asset_keys()) - set(INGEST))
    assert dg.execute_job(job, instance, run_config=config, asset_selection=rest).success
    return instance


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def per_partition(tmp_path_factory, corpus):
    home = DataHome(tmp_path_factory.mktemp("per-partition"))
    prepare_instance(home)
    instance = build_partition_by_partition(settings_for(home, corpus))
    return home, instance


@pytest.fixture(scope="module")
def single_run(tmp_path_factory, corpus):
    home = DataHome(tmp_path_factory.mktemp("single-run"))
    prepare_instance(home)
    outcome = run_build(settings_for(home, corpus), progress=False)
    assert outcome.success, outcome.summary
    return home, dg.DagsterInstance.get()


def test_source_partitions_are_the_configured_sources(per_partition, corpus):
    home, instance = per_partition
    slugs = list(configured_sources(("demo", f"jsonl:{corpus}")))
    assert instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME) == slugs
    assert sorted(p.stem for p in (home.lake / "raw_questions").glob("*.parquet")) == sorted(slugs)
    assert instance.get_materialized_partitions(dg.AssetKey("raw_questions")) == set(slugs)
    assert len(instance.get_runs()) == len(slugs) + 1


def test_single_run_materializes_every_source_partition(single_run, corpus):
    home, instance = single_run
    (run,) = instance.get_runs()
    slugs = set(configured_sources(("demo", f"jsonl:{corpus}")))
    for key in INGEST:
        events = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key), limit=10
        ).records
        assert {e.partition_key for e in events} == slugs
        assert {e.run_id for e in events} == {run.run_id}
    sources = dict(run_query(home, "SELECT source, count(*) FROM raw_questions GROUP BY 1").rows)
    assert sources["demo"] == DEMO_QUESTIONS
    assert sources[f"jsonl:{corpus}"] == 15  # the text-only one is dropped later, by the filter


def test_partitioned_build_equals_single_run(per_partition, single_run):
    (home_a, _), (home_b, _) = per_partition, single_run
    files_a = lake_and_export(home_a)
    assert "lake/questions.parquet" in files_a and any(f.startswith("export/stem/data/") for f in files_a)
    assert files_a == lake_and_export(home_b)
    assert warehouse_rows(home_a) == warehouse_rows(home_b)


def test_removed_source_leaves_the_lake_and_the_partitions(per_partition, corpus):
    home, _ = per_partition
    prepare_instance(home)
    settings = settings_for(home, corpus).with_(sources=("demo",))
    outcome = run_build(settings, selection="key:raw_questions", progress=False)
    assert outcome.success, outcome.summary
    (demo_slug,) = configured_sources(("demo",))
    assert dg.DagsterInstance.get().get_dynamic_partitions(SOURCE_PARTITIONS_NAME) == [demo_slug]
    assert [p.stem for p in (home.lake / "raw_questions").glob("*.parquet")] == [demo_slug]
    assert [p.name for p in (home.lake / "quarantine").glob("ingest-*.parquet")] == [f"ingest-{demo_slug}.parquet"]
    assert run_query(home, "SELECT DISTINCT source FROM raw_questions").rows == [("demo",)]


def test_multiprocess_build_gives_the_same_bytes(tmp_path, single_run, corpus):
    reference, _ = single_run
    home = DataHome(tmp_path / "multiprocess")
    prepare_instance(home)
    outcome = run_build(
        settings_for(home, corpus),
        selection="group:ingest or group:clean or group:dataset",
        progress=False,
        executor="multiprocess",
        max_concurrent=2,
    )
    assert outcome.success, outcome.summary
    instance = dg.DagsterInstance.get()
    (run,) = instance.get_runs()
    workers = [r for r in instance.all_logs(run.run_id) if r.dagster_event and r.dagster_event.event_type_value == "STEP_WORKER_STARTED"]
    assert len(workers) >= 11  # every step ran in a process of its own
    built = lake_and_export(home)
    expected = lake_and_export(reference)
    assert {"lake/questions.parquet", "lake/deduplicated.parquet", "lake/images.parquet"} <= set(built)
    assert {name: expected.get(name) for name in built} == built
    assert {n for n in expected if n.startswith("export/")} == {n for n in built if n.startswith("export/")}
    assert warehouse_rows(home) == warehouse_rows(reference)
    info = instance.event_log_storage.get_concurrency_info("duckdb_write")
    assert info.slot_count == 1 and not info.claimed_slots


def test_ingest_assets_are_partitioned_by_source_in_one_run():
    for asset in all_assets:
        if asset.key in INGEST:
            assert asset.partitions_def.name == SOURCE_PARTITIONS_NAME
            assert asset.backfill_policy == dg.BackfillPolicy.single_run()
        else:
            assert asset.partitions_def is None, asset.key
    assert build_job_definition().partitions_def.name == SOURCE_PARTITIONS_NAME


def test_sync_adds_new_sources_and_drops_removed_ones(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, ["gone-00000000"])
        keys = sync_source_partitions(instance, ("demo", f"jsonl:{corpus}"))
        assert keys == list(configured_sources(("demo", f"jsonl:{corpus}")))
        assert sync_source_partitions(instance, (f"jsonl:{corpus}",)) == [keys[1]]


def test_schedule_requests_one_run_over_all_sources(tmp_path, monkeypatch):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("")
    monkeypatch.setenv("STEMFORGE_SOURCES", f"demo,jsonl:{corpus}")
    with dg.instance_for_test() as instance:
        context = dg.build_schedule_context(instance=instance)
        request = defs.resolve_schedule_def("nightly_full_rebuild").evaluate_tick(context).run_requests[0]
        keys = list(configured_sources(("demo", f"jsonl:{corpus}")))
        assert request.tags["dagster/asset_partition_range_start"] == keys[0]
        assert request.tags["dagster/asset_partition_range_end"] == keys[-1]
        assert instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME) == keys


def yaml_blocks(markdown: str) -> list[str]:
    return re.findall(r"```ya?ml\n(.*?)```", markdown, flags=re.DOTALL)


def test_scale_out_document_yaml_parses():
    text = (ROOT / "docs" / "scale-out.md").read_text()
    blocks = yaml_blocks(text)
    assert len(blocks) >= 4
    documents = [d for block in blocks for d in yaml.safe_load_all(block)]
    assert all(d is not None for d in documents)
    keys = set().union(*(d.keys() for d in documents if isinstance(d, dict)))
    assert {"run_launcher", "storage"} <= keys
    assert "K8sRunLauncher" in text and "k8s_job_executor" in text


def test_build_command_rejects_bad_selections_and_executors(tmp_path):
    import subprocess
    import sys

    def build(*args):
        command = [sys.executable, "-m", "pipelines.orchestration.cli", "build", "--home", str(tmp_path), "--quiet", *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)

    for args, message in (
        (("--select", "key:no_such_asset"), "selects no assets"),
        (("--select", "(("), "invalid asset selection"),
        (("--executor", "multiprocess", "--max-concurrent", "0"), "--max-concurrent must be at least 1"),
    ):
        result = build(*args)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert lines[0].startswith("stemforge: error: ") and message in lines[0]
    assert build("--executor", "k8s").returncode == 2  # argparse: not a choice


def test_nightly_refresh_updates_the_warehouse_and_keeps_the_release(single_run, corpus, tmp_path, monkeypatch):
    from pipelines.orchestration.definitions import REFRESH_JOB_NAME

    home, instance = single_run
    export_before = {p: p.stat().st_ino for p in (home.root / "export").rglob("*") if p.is_file()}
    questions_before = run_query(home, "SELECT count(*) FROM raw_questions").rows[0][0]
    extra = write_corpus(tmp_path / "extra")
    extra = extra.rename(extra.with_name("extra.jsonl"))
    settings = settings_for(home, corpus).with_(sources=("demo", f"jsonl:{corpus}", f"jsonl:{extra}"))
    monkeypatch.setenv("STEMFORGE_SOURCES", ",".join(settings.sources))
    schedule = defs.resolve_schedule_def("nightly_refresh")
    assert schedule.job_name == REFRESH_JOB_NAME and schedule.cron_schedule == "0 3 * * *"
    request = schedule.evaluate_tick(dg.build_schedule_context(instance=instance)).run_requests[0]
    result = defs.resolve_job_def(REFRESH_JOB_NAME).execute_in_process(
        run_config={"resources": {"stemforge": {"config": resource_config(settings, progress=False)}}},
        instance=instance, tags=request.tags,
    )
    assert result.success
    built = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert "warehouse" in built and "questions" in built and "stem_export" not in built
    assert run_query(home, "SELECT count(*) FROM raw_questions").rows[0][0] == questions_before + 15
    assert {p: p.stat().st_ino for p in (home.root / "export").rglob("*") if p.is_file()} == export_before
    release = defs.resolve_schedule_def("weekly_release")
    assert release.job_name == "stemforge_build" and release.cron_schedule == "0 5 * * 0"
