"""Run the build job (in one process or one process per step), recorded in the data home's Dagster instance."""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import sys
import warnings
from dataclasses import dataclass
from typing import Iterator

import polars as pl

from pipelines.store.home import DataHome
from pipelines.store.atomic import process_alive, process_start, remove_stale_temporaries
from pipelines.store.integrity import check_before_build
from pipelines.settings import BuildSettings, record_built_settings


@dataclass
class BuildOutcome:
    success: bool
    home: DataHome
    failed_steps: list[str]
    summary: str

    def metrics_summary(self, model: str) -> str:
        from pipelines.store.warehouse import run_query

        try:
            result = run_query(
                self.home,
                "SELECT split, group_by, group_value, round(value, 1), n FROM metrics "
                "WHERE model = ? AND metric = 'accuracy' AND group_by IN ('subject', 'macro', 'micro') "
                "ORDER BY split, group_by, group_value",
                [model],
            )
        except Exception as exc:  # the summary is a courtesy; the build result stands
            return f"(no metrics: {exc})"
        lines = [f"accuracy (%) of {model}:"]
        lines += [f"  {s:5} {g:7} {v:12} {val:6} (n={n})" for s, g, v, val, n in result.rows]
        return "\n".join(lines)


class SelectionError(ValueError):
    """An asset selection that does not parse or names unknown assets (one-line message)."""


EXECUTORS = ("in_process", "multiprocess")

# Run tags that identify the process running a build, so a later build can tell that a run
# left STARTED was abandoned (its process killed) rather than still running.
PID_TAG = "stemforge/pid"
HOST_TAG = "stemforge/host"
PROCESS_START_TAG = "stemforge/process_start"
UNFINISHED_STATUSES = ("NOT_STARTED", "STARTING", "STARTED", "CANCELING")


def process_tags() -> dict[str, str]:
    pid = os.getpid()
    return {PID_TAG: str(pid), HOST_TAG: socket.gethostname(), PROCESS_START_TAG: process_start(pid)}


def release_abandoned_runs(instance) -> list[str]:
    """Mark runs of earlier builds on this host whose process is gone as failed and free their
    concurrency-pool slots.

    A build killed with SIGKILL leaves its run STARTED and, if it was inside the warehouse step,
    the one ``duckdb_write`` slot claimed; without this the next build would wait for that slot
    forever (the Dagster daemon frees slots only of runs already marked finished).
    """
    import dagster as dg

    host = socket.gethostname()
    released = []
    runs = instance.get_runs(
        filters=dg.RunsFilter(
            statuses=[dg.DagsterRunStatus[s] for s in UNFINISHED_STATUSES], tags={HOST_TAG: host}
        )
    )
    for run in runs:
        pid = run.tags.get(PID_TAG, "")
        if not pid.isdigit() or process_alive(int(pid), run.tags.get(PROCESS_START_TAG, "")):
            continue
        instance.report_run_failed(run, f"the build process (pid {pid}) ended without finishing the run; marked failed by a later build")
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(run.run_id)
    return released


def live_build_runs(instance) -> int:
    """How many runs of this instance are still unfinished after abandoned ones are released."""
    import dagster as dg

    return len(instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus[s] for s in UNFINISHED_STATUSES])))


def remove_stray_temporaries(home: DataHome) -> int:
    """Delete the temporaries that writes a killed build never finished left in the data
    home (the raw stores sweep their own when a crawl takes their lock)."""
    removed = sum(remove_stale_temporaries(folder, recursive=True) for folder in (home.lake, home.images, home.reports))
    return removed + sum(remove_stale_temporaries(folder) for folder in (home.root, home.export.parent.parent))


def resource_config(settings: BuildSettings, progress: bool) -> dict:
    from assets.resources import StemforgeSettings

    return StemforgeSettings.from_settings(settings, progress=progress).model_dump()


def selected_asset_keys(selection: str | None):
    """The asset keys of a selection string (None: everything); the warehouse is always added,
    so what was built is queryable."""
    import dagster as dg

    from pipelines.orchestration.definitions import defs

    if not selection:
        return None
    graph = defs.resolve_asset_graph()
    try:
        with warnings.catch_warnings():  # group selections use a beta parameter internally
            warnings.simplefilter("ignore", dg.BetaWarning)
            chosen = dg.AssetSelection.from_string(selection).resolve(graph)
    except Exception as exc:  # Dagster raises several types for a bad selection string
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SelectionError(f"invalid asset selection {selection!r}: {reason}") from None
    if not chosen:
        raise SelectionError(f"asset selection {selection!r} selects no assets")
    return sorted(chosen | {dg.AssetKey("warehouse")})


def run_build(
    settings: BuildSettings,
    selection: str | None = None,
    progress: bool = True,
    executor: str = "in_process",
    max_concurrent: int | None = None,
    command: str = "build",
) -> BuildOutcome:
    """One Dagster run of the build job over all configured sources, recorded in the instance
    at ``$DAGSTER_HOME`` and tagged ``stemforge/command: <command>`` (the CLI command that ran it).

    The configured sources are registered as the ``sources`` partitions (sources no longer
    configured are removed) and the run covers them as one partition range, followed in the
    same run by the unpartitioned downstream assets. ``executor`` is ``in_process`` (every step
    in this process) or ``multiprocess`` (each step in its own process, at most
    ``max_concurrent`` at once, default the CPU count); the ``duckdb_write`` pool keeps the
    warehouse writer single either way.
    One build per data home at a time (``pipelines.store.homelock``): a second one raises
    ``HomeBusy`` naming the running one.
    """
    from pipelines.store.homelock import home_lock

    with home_lock(settings.data_home, "build", log=print if progress else None):
        return _run_build(settings, selection, progress, executor, max_concurrent, command)


def _run_build(
    settings: BuildSettings,
    selection: str | None,
    progress: bool,
    executor: str,
    max_concurrent: int | None,
    command: str = "build",
) -> BuildOutcome:
    import dagster as dg

    from assets.ingest import all_sources_tags, source_partitions, sync_source_partitions

    from pipelines.orchestration.definitions import build_job_definition
    from pipelines.orchestration.executor import FORKSERVER_PRELOAD

    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; expected one of {', '.join(EXECUTORS)}")
    home = settings.data_home
    instance = dg.DagsterInstance.get()
    release_abandoned_runs(instance)
    if live_build_runs(instance) == 0:  # nobody else is writing: leftovers are a killed build's
        remove_stray_temporaries(home)
    # one published version: a publish a crash interrupted is completed (before the warehouse is
    # checked: its sidecar may be the one the crash had not moved yet), a failed build's staging removed
    from pipelines.store.publish import recover

    recover(home, log=lambda line: print(f"warning: {line}", file=sys.stderr, flush=True))
    # the lake and the warehouse byte-checked: a damaged file is named and rebuilt by this run
    check_before_build(home, log=lambda line: print(f"warning: {line}", file=sys.stderr, flush=True))
    keys = sync_source_partitions(instance, settings.sources)
    asset_selection = selected_asset_keys(selection)
    tags = {"stemforge/command": command, **process_tags()}
    job_def = build_job_definition()
    partitioned = {
        key for key in job_def.asset_layer.asset_graph.get_all_asset_keys()
        if job_def.asset_layer.asset_graph.get(key).partitions_def == source_partitions
    }
    ingests = asset_selection is None or bool(partitioned & set(asset_selection))
    if ingests:
        tags.update(all_sources_tags(keys))
    if executor == "multiprocess":
        execution = {
            "multiprocess": {
                "max_concurrent": max_concurrent or os.cpu_count() or 1,
                # step processes fork from a server that has imported the definitions once
                "start_method": {"forkserver": {"preload_modules": list(FORKSERVER_PRELOAD)}},
            }
        }
    else:
        execution = {"in_process": {}}
    run_config = {
        "resources": {"stemforge": {"config": resource_config(settings, progress)}},
        "execution": {"config": execution},
        "loggers": {"one_line_console": {"config": {"log_level": "INFO" if progress else "CRITICAL"}}},
    }
    with long_lived_objects_frozen():
        result = dg.execute_job(
            dg.reconstructable(build_job_definition),
            instance=instance,
            run_config=run_config,
            tags=tags,
            raise_on_error=False,
            asset_selection=asset_selection,
        )
    failed = failed_checks(result.all_events) + step_failures(result.all_events)
    if result.success and ingests:
        # a source joins the home only with a build that includes it and succeeds
        from pipelines.ingest.source_changes import record_built_sources

        record_built_sources(home, settings.sources)
    if result.success and command == "build":
        record_built_settings(home, settings)
    reused, ran = reused_stages(result.all_events)
    if result.success and not failed and reused and not ran:
        summary = f"stemforge build finished (run {result.run_id}): nothing changed, {len(reused)} stages reused"
        return BuildOutcome(True, home, failed, summary)
    return BuildOutcome(result.success, home, failed, build_summary(home, result.success, failed, result.run_id))


@contextlib.contextmanager
def long_lived_objects_frozen() -> Iterator[None]:
    """The objects alive now (Dagster's definitions, the imported libraries: hundreds of
    thousands) left out of the cyclic collector's passes while the run executes: every full pass
    would traverse them again, and a run that imports matplotlib or numba, or parses code,
    starts many. Garbage is collected first, and they are handed back after the run."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def reused_stages(events) -> tuple[list[str], list[str]]:
    """The materialized assets (``asset`` or ``asset[partition]``) whose stage was skipped as
    unchanged (metadata ``skipped`` or ``skipped_unchanged`` true), and those that ran."""
    reused, ran = [], []
    for event in events:
        if event.event_type_value != "ASSET_MATERIALIZATION":
            continue
        materialization = event.event_specific_data.materialization
        name = materialization.asset_key.to_user_string()
        if materialization.partition:
            name = f"{name}[{materialization.partition}]"
        metadata = materialization.metadata
        flag = metadata.get("skipped", metadata.get("skipped_unchanged"))
        value = getattr(flag, "value", flag)
        (reused if value is True else ran).append(name)
    # a crawl always asks the site; it changed nothing when the raw questions it feeds were reused
    raw = [n for n in reused + ran if n.startswith("raw_questions")]
    if raw and all(n in reused for n in raw):
        crawls = [n for n in ran if n.startswith("crawled_pages")]
        reused += crawls
        ran = [n for n in ran if n not in crawls]
    return reused, ran


def failed_checks(events) -> list[str]:
    """``check <asset>.<name> failed: <description>`` for every asset check that failed
    (blocking or not), in run order."""
    lines = []
    for event in events:
        if event.event_type_value != "ASSET_CHECK_EVALUATION":
            continue
        evaluation = event.asset_check_evaluation_data
        if evaluation.passed:
            continue
        kind = "blocking check" if evaluation.blocking else "check"
        reason = (evaluation.description or "failed").strip().splitlines()[0]
        lines.append(f"{kind} {evaluation.asset_key.to_user_string()}.{evaluation.check_name} failed: {reason}")
    return lines


def step_failures(events) -> list[str]:
    """``step: one-line reason`` for every failed step of a run (a step failed only by its
    blocking checks is named by ``failed_checks``)."""
    reasons: dict[str, str] = {}
    for event in events:
        if event.is_step_failure and event.step_key and event.step_key not in reasons:
            error = event.step_failure_data.error
            root = error.cause or error if error else None
            message = (root.message.strip().splitlines() or [""])[0] if root else "failed"
            if root is not None and root.cls_name == "Failure":  # a step's own one-line verdict
                message = message.partition(": ")[2] or message
            if "blocking asset check" in message and "failed with" in message:
                continue  # Dagster's header line; failed_checks names each check and its reason
            reasons[event.step_key] = f"{event.step_key}: {message}"
    return [reasons[k] for k in sorted(reasons)]


def build_summary(home: DataHome, success: bool, failed: list[str], run_id: str) -> str:
    from pipelines.store.warehouse import run_query

    lines = [f"stemforge build {'finished' if success else 'FAILED'} (run {run_id})"]
    if failed:
        lines.append("failed steps:")
        lines += [f"  {reason}" for reason in failed]
    if home.warehouse.exists():
        try:
            lines += warehouse_summary(home)
        except Exception as exc:  # a partial build still reports what it can
            lines.append(f"(summary incomplete: {str(exc).splitlines()[0]})")
    command = stemforge_command()
    lines.append("")
    lines.append(f"data home:  {home.root}")
    if home.warehouse.exists():
        lines.append(f"warehouse:  {home.warehouse}   ({command} sql --home {quote(home.root)} \"SELECT * FROM questions LIMIT 5\")")
    else:
        lines.append("warehouse:  not built yet")
    if home.export.exists():
        lines.append(f"export:     {home.export}")
    else:
        lines.append("export:     not built yet" + ("" if not success else " (the build left out stem_export)"))
    report = home.reports / "index.html"
    lines.append(f"report:     {report}" if report.exists() else "report:     not built yet")
    lines.append(f"Dagster UI: {command} ui --home {quote(home.root)}")
    return "\n".join(lines)


def warehouse_summary(home: DataHome) -> list[str]:
    """Counts per source, subject and split, quarantine, duplicates, Table 1 and test accuracy."""
    from pipelines.store.warehouse import run_query

    def rows(sql):
        return run_query(home, sql).rows

    lines = ["", "raw questions per source:"]
    for source, n in rows("SELECT source, count(*) FROM raw_questions GROUP BY 1 ORDER BY 1"):
        lines.append(f"  {source:40} {n:>9,}")
    lines.append("kept questions per subject and split:")
    for subject, tr, va, te, n in rows(
        "SELECT subject, count(*) FILTER (split='train'), count(*) FILTER (split='valid'), "
        "count(*) FILTER (split='test'), count(*) FROM questions GROUP BY 1 ORDER BY 1"
    ):
        lines.append(f"  {subject:12} train {tr:>8,}  valid {va:>8,}  test {te:>8,}  total {n:>9,}")
    unkeyed = rows("SELECT split, count(*) FROM questions WHERE answer_idx < 0 GROUP BY 1 ORDER BY 1")
    if unkeyed:
        lines.append("warning: no answer key for " + ", ".join(f"{n:,} {split}" for split, n in unkeyed)
                     + " questions (a release hides its test answers: put its test_answer_key.jsonl beside data/); "
                     "their metrics cover only the questions with a key")
    lines.append("quarantined by stage:")
    for stage, n in rows("SELECT stage, count(*) FROM quarantine GROUP BY 1 ORDER BY 1"):
        lines.append(f"  {stage:12} {n:>9,}")
    dup = rows("SELECT kind, count(*) FROM duplicates GROUP BY 1 ORDER BY 1")
    lines.append("duplicates removed: " + (", ".join(f"{k} {n:,}" for k, n in dup) or "none"))
    stats_path = home.lake_path("dataset_statistics")
    if stats_path.exists():
        from pipelines.dataset.export import statistics_markdown

        lines.append("")
        lines.append("dataset statistics (the paper's Table 1):")
        lines.append(statistics_markdown(pl.read_parquet(stats_path)))
    acc = rows(
        "SELECT model, round(value, 1), round(ci_low, 1), round(ci_high, 1), n FROM metrics "
        "WHERE metric = 'accuracy' AND group_by = 'macro' AND split = 'test' AND model NOT LIKE 'paper:%' ORDER BY model"
    )
    if acc:
        lines.append("")
        lines.append("test accuracy, macro average over subjects (%, 95% interval):")
        for model, v, lo, hi, n in acc:
            lines.append(f"  {model:28} {v:5}  [{lo}, {hi}]  n={n}")
    gaps = rows(
        "SELECT model, split, value, n FROM metrics WHERE metric = 'coverage' AND group_by = 'micro' "
        "AND value < 100 AND model NOT LIKE 'paper:%' ORDER BY model, split"
    )
    if gaps:
        lines.append("")
        lines.append("coverage below 100% (keyed questions with a prediction):")
        for model, split, value, n in gaps:
            lacking = round(n * (100.0 - value) / 100.0)
            lines.append(f"  {model:28} {split:5} {min(value, 99.9):5.1f}%  ({lacking:,} of {n:,} without a prediction)")
        lines.append("questions without a prediction count as wrong in these figures; re-import the model's "
                     "predictions on the current questions to score them")
    return lines


def quote(path) -> str:
    import shlex

    return shlex.quote(str(path))


def stemforge_command() -> str:
    """How to run stemforge again from the current folder, as printed commands say it:
    ``stemforge`` when that is on PATH and is this installation, else the path of this
    environment's script (``.venv/bin/stemforge`` after ``make demo``)."""
    import shutil
    from pathlib import Path

    script = Path(sys.executable).parent / "stemforge"
    if not script.exists():
        return f"{quote(sys.executable)} -m pipelines.orchestration.cli"
    found = shutil.which("stemforge")
    if found and Path(found).resolve() == script.resolve():
        return "stemforge"
    try:
        relative = script.absolute().relative_to(Path.cwd())
        return relative.as_posix() if "/" in relative.as_posix() else f"./{relative.as_posix()}"
    except ValueError:
        return quote(script.absolute())
