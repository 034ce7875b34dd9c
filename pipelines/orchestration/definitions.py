"""The one Dagster ``Definitions`` of stemforge, loaded by ``workspace.yaml`` and the CLI."""

from __future__ import annotations

import logging
import sys
import threading
import time

import dagster as dg

from assets import clean, dataset, evaluation, ingest, profiles

from assets.resources import StemforgeSettings
from pipelines.orchestration.executor import stemforge_executor
from pipelines.orchestration.sensors import source_change_sensor
from pipelines.settings import BuildSettings

ASSET_MODULES = (ingest, clean, dataset, evaluation, profiles)

all_assets = dg.load_assets_from_modules(ASSET_MODULES)
all_asset_checks = dg.load_asset_checks_from_modules(ASSET_MODULES)

BUILD_JOB_NAME = "stemforge_build"
# runs launched from the UI, the schedule or the sensor execute their steps in one process by default;
# whatever the executor (a launchpad config may pick multiprocess), the run's own process holds the
# data home's lock from its first step to its last (pipelines.orchestration.executor)
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}

build_job = dg.define_asset_job(
    BUILD_JOB_NAME,
    selection=dg.AssetSelection.all(),
    description=(
        "Rebuild the whole benchmark: crawl/import (one partition per source, all in one run), clean, "
        "dataset, evaluation, profiles, warehouse."
    ),
    config=IN_PROCESS,
    executor_def=stemforge_executor,
)


REFRESH_JOB_NAME = "stemforge_refresh"
# a change spread over the set rewrites every shard of the release export (~7 GiB at paper scale):
# most of a small rebuild's cost, and not needed to refresh the warehouse, reports and profiles
refresh_job = dg.define_asset_job(
    REFRESH_JOB_NAME,
    selection=dg.AssetSelection.all() - dg.AssetSelection.assets("stem_export"),
    description=(
        "Everything but the release export: crawl/import, clean, dataset, evaluation, profiles and the "
        "warehouse are brought up to date; export/stem keeps the last release (stale in the UI) until "
        "stemforge_build runs."
    ),
    config=IN_PROCESS,
    executor_def=stemforge_executor,
)


def all_sources_request(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    """One run over every configured source (their partitions synced first)."""
    settings = BuildSettings.from_env()
    keys = ingest.sync_source_partitions(context.instance, settings.sources)
    return dg.RunRequest(run_config=IN_PROCESS, tags={**ingest.all_sources_tags(keys), "stemforge/command": "schedule"})


def all_sources_schedule(name: str, job: dg.UnresolvedAssetJobDefinition, cron: str, description: str
                         ) -> dg.ScheduleDefinition:
    """A schedule (off until turned on in the UI) of one run of ``job`` over every configured source."""
    return dg.ScheduleDefinition(name=name, job=job, cron_schedule=cron, execution_fn=all_sources_request,
                                 default_status=dg.DefaultScheduleStatus.STOPPED, description=description)


full_rebuild_schedule = all_sources_schedule(
    "nightly_full_rebuild", build_job, "0 3 * * *",
    "Rebuild everything every night at 03:00 over all configured sources (turn it on in the UI).")
nightly_refresh_schedule = all_sources_schedule(
    "nightly_refresh", refresh_job, "0 3 * * *",
    "Every night at 03:00, everything but the release export (pair it with weekly_release instead of "
    "nightly_full_rebuild).")
weekly_release_schedule = all_sources_schedule(
    "weekly_release", build_job, "0 5 * * 0", "Sundays at 05:00, everything, the release export included.")


@dg.logger(
    config_schema={"log_level": dg.Field(str, is_required=False, default_value="INFO")},
    description="One line per message on stderr; a failure's stack trace stays in the run's event log (UI).",
)
def one_line_console(init_context: dg.InitLoggerContext) -> logging.Logger:
    level = logging.getLevelName(init_context.logger_config["log_level"].upper())
    logger = logging.Logger("stemforge", level=min(level, logging.DEBUG) if level <= logging.INFO else level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter("%(asctime)s - stemforge - %(levelname)s - %(message)s"))
    handler.addFilter(skip_not_executed)
    handler.addFilter(StepClock(level, handler, every=HEARTBEAT_SECONDS))
    logger.addHandler(handler)
    return logger


HEARTBEAT_SECONDS = 20.0  # a step running longer says so this often


def _progress_bar_showing() -> bool:
    """Whether a tqdm bar (the crawl's, say) is on the terminal now."""
    tqdm = sys.modules.get("tqdm")
    instances = getattr(getattr(tqdm, "tqdm", None), "_instances", None)
    return bool(instances)


class StepClock(logging.Filter):
    """Every step says when it starts and ends, and a step still running says so every
    ``every`` seconds (no stage is silent for long, whatever it prints itself). Dagster logs a
    step's start and success at DEBUG; at INFO they are shown as INFO lines."""

    STEP_EVENTS = ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE")

    def __init__(self, level: int, handler: logging.Handler, every: float = 20.0):
        super().__init__()
        self.level = level
        self.handler = handler
        self.every = every
        self.running: dict[str, float] = {}
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event")
        kind = event.event_type_value if event is not None else None
        step = meta.get("step_key")
        if kind in self.STEP_EVENTS and step:
            with self.lock:
                if kind == "STEP_START":
                    self.running[step] = time.monotonic()
                    if self.level <= logging.INFO and (self.thread is None or not self.thread.is_alive()):
                        self.thread = threading.Thread(target=self._beat, name="stemforge-step-clock", daemon=True)
                        self.thread.start()
                else:
                    self.running.pop(step, None)
            if record.levelno < logging.INFO and self.level <= logging.INFO:
                record.levelno, record.levelname = logging.INFO, "INFO"
        return record.levelno >= self.level

    def _beat(self) -> None:
        shown: dict[str, int] = {}
        while True:
            time.sleep(1.0)
            with self.lock:
                if not self.running:
                    return
                now = time.monotonic()
                due = []
                for step, started in self.running.items():
                    beats = int((now - started) // self.every)
                    if beats > shown.get(step, 0):
                        shown[step] = beats
                        due.append((step, now - started))
            if due and _progress_bar_showing():
                continue  # the step's own bar shows its progress; a line would break the bar
            for step, elapsed in due:
                line = logging.LogRecord("stemforge", logging.INFO, __file__, 0,
                                         f"{step} - still running ({elapsed:.0f} s)", None, None)
                self.handler.emit(line)


class OneLineFormatter(logging.Formatter):
    """A Dagster message on one line: a failure's header followed by its reason, no stack trace."""

    def format(self, record: logging.LogRecord) -> str:
        head, _, rest = super().format(record).partition("\n")
        reason = next((line.strip() for line in rest.splitlines() if line.strip()), "")
        if " - RUN_FAILURE - " in head or " - STEP_FAILURE - " in head:
            return head  # the build's summary says why, once
        if record.levelno >= logging.ERROR and reason and not reason.startswith("Stack Trace"):
            return f"{head} {reason}"
        return head


def skip_not_executed(record: logging.LogRecord) -> bool:
    """Steps skipped after a failure are one message each; the failure itself says it all."""
    return "Not executing." not in record.getMessage()


def resources_from_env() -> dict:
    return {"stemforge": StemforgeSettings.from_settings(BuildSettings.from_env(), progress=False)}


defs = dg.Definitions(
    assets=all_assets,
    asset_checks=all_asset_checks,
    jobs=[build_job, refresh_job],
    schedules=[full_rebuild_schedule, nightly_refresh_schedule, weekly_release_schedule],
    sensors=[source_change_sensor],
    resources=resources_from_env(),
    loggers={"one_line_console": one_line_console},
    executor=stemforge_executor,  # asset backfills and "Materialize" runs (the implicit asset job) too
)


def build_job_definition() -> dg.JobDefinition:
    """The resolved build job; ``dg.reconstructable(build_job_definition)`` lets executors that
    run steps in other processes (multiprocess here, ``k8s_job_executor`` on a cluster) load it."""
    return defs.resolve_job_def(BUILD_JOB_NAME)
