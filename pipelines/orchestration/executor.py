"""The executor of every stemforge job: in process (default) or one process per step, holding
the data home's write lock in the run's own process from its first step to its last.

Runs launched from the UI (a job launch, a backfill, "Materialize"), the schedules and the
sensor go through here as ``stemforge build`` does: the process that orchestrates the run takes
``<home>/build.lock`` before the first step and keeps it until the last step ended, so a CLI
build started meanwhile is refused at once, and a run launched while a build holds the home
fails before writing anything, with one line naming the build. Step processes of the
multiprocess executor are children of that process and work under its lock.
"""

from __future__ import annotations

import sys
from typing import Iterator

import dagster as dg
from dagster._core.definitions.executor_definition import (
    _core_in_process_executor_creation,
    _core_multiprocess_executor_creation,
    _get_default_executor_requirements,
    IN_PROC_CONFIG,
    MULTI_PROC_CONFIG,
)
from dagster._core.executor.base import Executor

# step processes fork from a server that has imported, once, what every step imports: the
# definitions, Dagster's instance storage (SQLAlchemy, Alembic: ~1 s a step on two shared cores)
# and the stages with their libraries (Polars, PyArrow, Pillow, DuckDB: ~0.5-1 s a step); a
# no-op build of the demo with 120 questions took 100-113 s with the definitions alone, 46-51 s so
FORKSERVER_PRELOAD = (
    "dagster._core.executor.multiprocess", "pipelines.orchestration.definitions",
    "dagster._core.instance.factory", "dagster._core.storage.event_log", "dagster._core.storage.runs",
    "dagster._core.storage.schedules", "dagster._core.storage.root", "dagster._core.secrets.env_file",
    "dagster._core.workspace.autodiscovery", "upath", "pipelines.store.homelock",
    "pipelines.ingest.stage", "pipelines.clean.stage", "pipelines.dataset.stage", "pipelines.evaluation.stage",
    "pipelines.profiles.stage", "pipelines.store.warehouse", "pipelines.checks",
)


class HomeLockedExecutor(Executor):
    """Runs ``inner`` while holding the data home's lock in this (the run's) process."""

    def __init__(self, inner: Executor):
        self.inner = inner

    @property
    def retries(self):
        return self.inner.retries

    @property
    def step_dependency_config(self):
        return self.inner.step_dependency_config

    def execute(self, plan_context, execution_plan) -> Iterator:
        from pipelines.store import publish
        from pipelines.store.homelock import home_lock

        home = run_home(plan_context.run_config)
        run_id = plan_context.run_id
        with home_lock(home, f"dagster run {run_id[:8]}", run_id=run_id):
            check_partitions(plan_context.dagster_run.tags, execution_plan.step_keys_to_execute)
            # one published version: a commit a crash interrupted is completed first, and what
            # this run staged but did not commit (it failed before) is removed at its end
            publish.recover(home, log=lambda line: print(f"warning: {line}", file=sys.stderr, flush=True))
            try:
                yield from self.inner.execute(plan_context, execution_plan)
            finally:
                try:
                    publish.recover(home)
                except OSError as exc:  # the next build or command completes it
                    print(f"warning: could not finish publishing: {exc}", file=sys.stderr, flush=True)


PARTITION_TAGS = ("dagster/partition", "dagster/asset_partition_range_start")


class NoSourcePartition(Exception):
    """A run of the source-partitioned ingest steps launched without a partition (one line)."""


def check_partitions(tags, step_keys) -> None:
    """Refuse, before any step, a run that would crawl or import with no source partition chosen."""
    from assets.ingest import crawled_pages, raw_questions

    partitioned = {asset.op.name for asset in (crawled_pages, raw_questions)}
    if partitioned & set(step_keys) and not any(tag in tags for tag in PARTITION_TAGS):
        raise NoSourcePartition(
            "this run has no source partition: launch it with the partitions of the sources to build "
            "(the launchpad's partition picker, all of them for a full build), or run `stemforge build`"
        )


def run_home(run_config: dict):
    """The data home a run writes: its ``stemforge`` resource's ``home``, else the environment's."""
    from pipelines.settings import BuildSettings

    config = ((run_config or {}).get("resources") or {}).get("stemforge") or {}
    home = (config.get("config") or {}).get("home") or ""
    return BuildSettings(home=home).data_home


@dg.executor(
    name="stemforge_executor",
    config_schema=dg.Field(
        dg.Selector({"multiprocess": MULTI_PROC_CONFIG, "in_process": IN_PROC_CONFIG}),
        default_value={"in_process": {}},
    ),
    requirements=_get_default_executor_requirements,
)
def stemforge_executor(init_context) -> Executor:
    """In process by default; ``multiprocess`` forks its step processes from a preloaded server
    unless another start method is configured. Either holds the data home's lock for the run."""
    config = init_context.executor_config
    if "multiprocess" in config:
        multi = dict(config["multiprocess"] or {})
        if not multi.get("start_method"):
            multi["start_method"] = {"forkserver": {"preload_modules": list(FORKSERVER_PRELOAD)}}
        inner = _core_multiprocess_executor_creation(multi)
    else:
        inner = _core_in_process_executor_creation(config["in_process"])
    return HomeLockedExecutor(inner)
