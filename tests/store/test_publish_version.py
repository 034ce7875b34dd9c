"""Issue 30, point 6: one build publishes one version of the export and the warehouse, or none.

Real builds (Dagster runs in process) of a small JSONL source into a real home: a build that
fails after the export step leaves the previous export and warehouse live (before the fix the
export was already the new one); a commit interrupted between its two swaps is completed by the
next command that opens the home; the version check fails on a home whose warehouse and export
are not one version."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipelines.orchestration.cli import main as stemforge
from pipelines.orchestration.run import run_build
from pipelines.settings import BuildSettings
from pipelines.store import publish
from pipelines.store import warehouse as warehouse_module
from pipelines.store.home import DataHome
from pipelines.store.integrity import NOT_ONE_VERSION, verify_home
from pipelines.store.warehouse import WarehouseError, run_query
from support.builds import data_file_digests, home_instance
from support.images import real_png

SUBJECTS = ("science", "technology", "engineering", "math")


def write_source(folder: Path, n: int) -> Path:
    (folder / "img").mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        image = folder / "img" / f"{i}.png"
        if not image.exists():
            image.write_bytes(real_png(700 + i, size=48))
        lines.append(json.dumps({"question": f"Which picture {i} shows idea {i * 11} of {SUBJECTS[i % 4]}?",
                                 "options": [f"yes {i}", f"no {i}", f"maybe {i}"], "answer": i % 3,
                                 "subject": SUBJECTS[i % 4], "skill": f"skill {i % 3}", "image": f"img/{i}.png"}))
    (folder / "q.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "q.jsonl"


def settings_for(home: DataHome, source: Path) -> BuildSettings:
    return BuildSettings(home=str(home.root), sources=(f"jsonl:{source}",), models=("random",))


def export_digests(home: DataHome) -> dict[str, str]:
    return {k: v for k, v in data_file_digests(home).items() if k.startswith("export/")}


def question_count(home: DataHome) -> int:
    return run_query(home, "SELECT count(*) FROM questions").rows[0][0]


def assert_one_version(home: DataHome) -> None:
    assert publish.version_mismatch(home) == ""
    assert publish.warehouse_version(home.warehouse) == publish.export_version(publish.export_root(home)) != ""
    assert not publish.journal_path(home).exists()
    assert not publish.staged_export(home).exists() and not publish.staged_warehouse(home).parent.exists()


@pytest.fixture(scope="module")
def built_once(tmp_path_factory):
    """One home built from 40 questions, and its source."""
    root = tmp_path_factory.mktemp("publish-version")
    source = write_source(root / "src", 40)
    home = DataHome(root / "home")
    with home_instance(home):
        outcome = run_build(settings_for(home, source), progress=False)
    assert outcome.success, outcome.summary
    return home, source


@pytest.fixture
def built(built_once, tmp_path):
    """A private copy of that home, and its source (the next build adds 12; the source is
    written back to its 40 questions after the test)."""
    original, source = built_once
    home = DataHome(tmp_path / "home")
    shutil.copytree(original.root, home.root)
    with home_instance(home):
        assert question_count(home) == 40
        assert_one_version(home)
        yield home, source
    write_source(source.parent, 40)


def test_a_build_failing_after_the_export_step_publishes_neither(built, monkeypatch):
    """Before the fix the export step swapped the new export in and the warehouse step then
    failed: export new, warehouse old. Now neither is published, nothing staged is left, and
    the next build publishes both."""
    home, source = built
    export_before = export_digests(home)
    write_source(source.parent, 52)

    def fail(*args, **kwargs):
        raise WarehouseError("could not publish the warehouse: No space left on device")

    monkeypatch.setattr(warehouse_module, "publish_warehouse", fail)
    failed = run_build(settings_for(home, source), progress=False)
    assert not failed.success
    assert question_count(home) == 40
    assert export_digests(home) == export_before  # the export is the old version too
    assert_one_version(home)

    monkeypatch.undo()
    again = run_build(settings_for(home, source), progress=False)
    assert again.success, again.summary
    assert question_count(home) == 52
    assert export_digests(home) != export_before
    assert_one_version(home)
    unchanged = run_build(settings_for(home, source), progress=False)
    assert unchanged.success and "nothing changed" in unchanged.summary, unchanged.summary


def test_a_failed_blocking_check_after_staging_keeps_the_old_version(built, monkeypatch):
    """The blocked-check path: the warehouse step refuses to publish (a blocking check failed
    after the export was staged); the staged export is removed with the run."""
    home, source = built
    export_before = export_digests(home)
    write_source(source.parent, 52)
    from pipelines.store import blocking

    monkeypatch.setattr(blocking, "blocked_checks", lambda _home: {"no_split_leakage": "a family in two splits"})
    failed = run_build(settings_for(home, source), progress=False)
    assert not failed.success
    assert "no_split_leakage" in failed.summary, failed.summary
    assert question_count(home) == 40 and export_digests(home) == export_before
    assert_one_version(home)


def test_a_commit_interrupted_between_its_swaps_is_completed_by_the_next_command(built, monkeypatch, capsys):
    home, source = built
    export_before = export_digests(home)
    write_source(source.parent, 52)
    # the build is killed (SIGKILL: no cleanup runs) just before its commit: both versions staged
    monkeypatch.setattr(publish, "commit", lambda _home: {"committed": False})
    monkeypatch.setattr(publish, "recover", lambda *a, **k: "")
    killed = run_build(settings_for(home, source), progress=False)
    assert killed.success, killed.summary
    assert publish.staged_export(home).is_dir() and publish.staged_warehouse(home).exists()
    monkeypatch.undo()

    # the commit starts and dies after its first swap (the export), before the warehouse's
    def die(*args):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(publish, "_move", die)
    with pytest.raises(KeyboardInterrupt):
        publish.commit(home)
    monkeypatch.undo()
    assert publish.journal_path(home).exists()
    assert export_digests(home) != export_before  # the mixed state: export new ...
    assert question_count(home) == 40  # ... warehouse old
    assert "export version" in publish.version_mismatch(home)
    assert NOT_ONE_VERSION in [f.problem for f in verify_home(home).findings]

    # the next command that opens the home completes the commit before it reads
    capsys.readouterr()
    assert stemforge(["sql", "--home", str(home.root), "--format", "json", "SELECT count(*) AS n FROM questions"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 52}]
    assert_one_version(home)
    report = verify_home(home)
    assert report.clean, report.findings
    # the stage records were pointed at the live files: nothing to rebuild
    unchanged = run_build(settings_for(home, source), progress=False)
    assert unchanged.success and "nothing changed" in unchanged.summary, unchanged.summary


def test_a_build_completes_an_interrupted_commit_before_it_checks_the_warehouse(built, monkeypatch):
    """A crash between the warehouse file's move and its checksum's: the build rolls the commit
    forward instead of taking the new warehouse for damage."""
    home, source = built
    write_source(source.parent, 52)
    monkeypatch.setattr(publish, "commit", lambda _home: {"committed": False})
    monkeypatch.setattr(publish, "recover", lambda *a, **k: "")
    assert run_build(settings_for(home, source), progress=False).success
    monkeypatch.undo()
    real_move = publish._move
    calls = []

    def second_dies(*args):
        calls.append(args)
        if len(calls) == 2:  # the warehouse moved, its checksum not yet
            raise KeyboardInterrupt("killed")
        return real_move(*args)

    monkeypatch.setattr(publish, "_move", second_dies)
    with pytest.raises(KeyboardInterrupt):
        publish.commit(home)
    monkeypatch.undo()
    outcome = run_build(settings_for(home, source), progress=False)
    assert outcome.success, outcome.summary
    assert "nothing changed" in outcome.summary, outcome.summary
    assert question_count(home) == 52
    assert_one_version(home)


def test_the_version_check_fails_when_warehouse_and_export_disagree(built, tmp_path, capsys):
    home, source = built
    old_warehouse = tmp_path / "old.duckdb"
    shutil.copy2(home.warehouse, old_warehouse)
    shutil.copy2(home.warehouse.with_name("warehouse.duckdb.sha256"), tmp_path / "old.duckdb.sha256")
    write_source(source.parent, 52)
    assert run_build(settings_for(home, source), progress=False).success
    assert_one_version(home)
    # the old warehouse put back beside the new export (checksum and all): each file is intact
    shutil.copy2(old_warehouse, home.warehouse)
    shutil.copy2(tmp_path / "old.duckdb.sha256", home.warehouse.with_name("warehouse.duckdb.sha256"))

    problem = publish.version_mismatch(home)
    assert "export version" in problem, problem
    from assets.dataset import published_version_matches
    from assets.resources import StemforgeSettings

    result = published_version_matches(StemforgeSettings.from_settings(settings_for(home, source), progress=False))
    assert not result.passed and "export version" in result.description

    report = verify_home(home)
    assert [f.problem for f in report.findings] == [NOT_ONE_VERSION] and not report.clean
    capsys.readouterr()
    assert stemforge(["verify", "--home", str(home.root)]) == 1
    out = capsys.readouterr().out
    assert "not one version: warehouse.duckdb" in out, out
    # --repair removes the warehouse; the next build republishes it with the live export
    assert stemforge(["verify", "--repair", "--home", str(home.root)]) == 1
    assert run_build(settings_for(home, source), progress=False).success
    assert question_count(home) == 52
    assert_one_version(home)


def test_the_export_materialized_alone_is_published_with_the_warehouse(built):
    """A run that selects the export without the warehouse (the UI's "Materialize" on
    stem_export) publishes the warehouse with it, as one version."""
    import dagster as dg

    from pipelines.orchestration.definitions import build_job_definition
    from pipelines.orchestration.run import resource_config

    home, source = built
    export_before = export_digests(home)
    settings = settings_for(home, source).with_(rows_per_shard=7)  # only the export changes
    config = {"resources": {"stemforge": {"config": resource_config(settings, progress=False)}}}
    result = dg.execute_job(dg.reconstructable(build_job_definition), dg.DagsterInstance.get(), run_config=config,
                            asset_selection=[dg.AssetKey("stem_export")])
    assert result.success
    built_keys = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert built_keys == {"stem_export"}
    assert export_digests(home) != export_before
    assert question_count(home) == 40
    assert_one_version(home)
