"""A build killed with SIGKILL at any stage resumes and ends with the outputs of an uninterrupted one.

The real command runs in a subprocess; it is killed with SIGKILL when a stage's file appears
(polling), rerun, killed at the next stage, ... and finally rerun to completion. Its lake,
export and warehouse are compared with a build of the same command in another home.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dagster as dg

from pipelines.orchestration.run import (
    HOST_TAG,
    PID_TAG,
    PROCESS_START_TAG,
    process_tags,
    release_abandoned_runs,
)
from pipelines.orchestration.cli import prepare_instance
from pipelines.store.home import DataHome
from pipelines.store.warehouse import run_query
from support.builds import data_file_digests

ROOT = Path(__file__).resolve().parents[2]
QUERIES = (
    "SELECT source, count(*) FROM raw_questions GROUP BY 1 ORDER BY 1",
    "SELECT question_id, split, answer_idx, problem, choices FROM questions ORDER BY question_id",
    "SELECT stage, source_key, reason FROM quarantine ORDER BY ALL",
    "SELECT kind, count(*) FROM duplicates GROUP BY 1 ORDER BY 1",
    "SELECT model, metric, split, group_by, group_value, value, n FROM metrics ORDER BY ALL",
)


def build_command(home: Path) -> list[str]:
    return [sys.executable, "-m", "pipelines.orchestration.cli", "build", "--home", str(home), "--questions", "200",
            "--model", "random", "--quiet"]


def start(home: Path) -> subprocess.Popen:
    return subprocess.Popen(build_command(home), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def kill_when(home: Path, appeared, what: str, timeout: float = 240) -> None:
    """Run the build and SIGKILL it as soon as ``appeared(home)`` is true."""
    process = start(home)
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        if appeared(home):
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    else:
        process.kill()
        output = process.communicate()[0]
        raise AssertionError(f"the build ended before it was killed {what}: {output[-2000:]}")
    assert process.wait() == -signal.SIGKILL


def crawl_under_way(home: Path) -> bool:
    return len(list(home.glob("raw/*/bodies/*/*"))) >= 40


def clean_stage_done(home: Path) -> bool:
    return (home / "lake" / "latex.parquet").exists()


def export_staging(home: Path) -> bool:
    return any((home / "export").glob(".stem.*.tmp"))


def warehouse_publishing(home: Path) -> bool:
    return any(home.glob(".warehouse.duckdb.*.tmp"))


def outputs(home: DataHome) -> dict[str, str]:
    return data_file_digests(home)


def test_killed_builds_resume_to_identical_outputs(tmp_path):
    reference_home, killed_home = tmp_path / "uninterrupted", tmp_path / "killed"
    reference = start(reference_home)
    kill_when(killed_home, crawl_under_way, "during the crawl")
    kill_when(killed_home, clean_stage_done, "after the clean stage")
    kill_when(killed_home, export_staging, "while the export was written")
    kill_when(killed_home, warehouse_publishing, "during the warehouse publish")
    assert warehouse_publishing(killed_home)  # the killed publish left its temporary behind
    finished = subprocess.run(build_command(killed_home), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    assert reference.wait(timeout=300) == 0, reference.communicate()[0][-2000:]

    expected, actual = DataHome(reference_home), DataHome(killed_home)
    digests = outputs(actual)
    assert "lake/questions.parquet" in digests and any(n.startswith("export/stem/data/") for n in digests)
    assert digests == outputs(expected)
    for sql in QUERIES:
        assert run_query(actual, sql).rows == run_query(expected, sql).rows, sql
    assert not warehouse_publishing(killed_home)
    assert not [p for p in killed_home.rglob("*") if p.name.endswith(".tmp") or ".tmp-" in p.name]

    prepare_instance(actual)
    instance = dg.DagsterInstance.get()
    statuses = [run.status for run in reversed(instance.get_runs())]  # oldest first
    assert statuses == [dg.DagsterRunStatus.FAILURE] * 4 + [dg.DagsterRunStatus.SUCCESS]
    info = instance.event_log_storage.get_concurrency_info("duckdb_write")
    assert not info.claimed_slots and not info.pending_steps


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_abandoned_run_releases_its_warehouse_slot(tmp_path):
    home = DataHome(tmp_path)
    prepare_instance(home)
    instance = dg.DagsterInstance.get()
    storage = instance.event_log_storage
    mine = process_tags()

    def started_run(tags: dict) -> str:
        run_id = str(uuid.uuid4())
        instance.add_run(dg.DagsterRun(job_name="stemforge_build", run_id=run_id, status=dg.DagsterRunStatus.STARTED, tags=tags))
        return run_id

    killed = started_run({**mine, PID_TAG: str(dead_pid())})
    alive = started_run(mine)  # this very process: still running
    elsewhere = started_run({**mine, PID_TAG: str(dead_pid()), HOST_TAG: "another-host"})
    reused = started_run({**mine, PROCESS_START_TAG: "1"})  # our pid, but another process's start time
    storage.initialize_concurrency_limit_to_default("duckdb_write")
    assert storage.claim_concurrency_slot("duckdb_write", killed, "warehouse").is_claimed

    assert sorted(release_abandoned_runs(instance)) == sorted([killed, reused])
    assert instance.get_run_by_id(killed).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(reused).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(alive).status == dg.DagsterRunStatus.STARTED
    assert instance.get_run_by_id(elsewhere).status == dg.DagsterRunStatus.STARTED
    info = storage.get_concurrency_info("duckdb_write")
    assert info.slot_count == 1 and not info.claimed_slots
    assert storage.claim_concurrency_slot("duckdb_write", alive, "warehouse").is_claimed
    assert release_abandoned_runs(instance) == []


def test_stray_temporaries_of_killed_writes_are_removed(tmp_path):
    from pipelines.orchestration.run import remove_stray_temporaries

    home = DataHome(tmp_path)
    gone = dead_pid()
    stray = [home.lake / "raw_questions" / f".demo.parquet.{gone}.abc123.tmp", home.images / "ab" / f".abcd.png.{gone}.9f.tmp",
             home.reports / f".index.html.{gone}.77.tmp", home.lake / "state" / "fingerprints" / f".dedup.json.{gone}.2.tmp",
             home.root / f".warehouse.duckdb.{gone}.5.tmp.wal"]
    keep = [home.lake / "questions.parquet", home.images / "ab" / "abcd.png",
            home.lake / f".live.parquet.{os.getpid()}.1.tmp"]  # a write of a running process
    for path in stray + keep:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    assert remove_stray_temporaries(home) == len(stray)
    assert [p.exists() for p in stray + keep] == [False] * len(stray) + [True] * len(keep)
