"""The one Dagster ``Definitions`` of stemforge, loaded by ``workspace.yaml`` and the CLI."""

from __future__ import annotations

import dagster as dg

from assets import clean, dataset, evaluation, ingest, profiles

from .resources import StemforgeSettings
from .sensors import source_change_sensor
from .settings import BuildSettings

ASSET_MODULES = (ingest, clean, dataset, evaluation, profiles)

all_assets = dg.load_assets_from_modules(ASSET_MODULES)
all_asset_checks = dg.load_asset_checks_from_modules(ASSET_MODULES)

BUILD_JOB_NAME = "stemforge_build"

build_job = dg.define_asset_job(
    BUILD_JOB_NAME,
    selection=dg.AssetSelection.all(),
    description=(
        "Rebuild the whole benchmark: crawl/import (one partition per source, all in one run), clean, "
        "dataset, evaluation, profiles, warehouse."
    ),
)


@dg.schedule(
    job=build_job,
    cron_schedule="0 3 * * *",
    name="nightly_full_rebuild",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Rebuild everything every night at 03:00 over all configured sources (turn it on in the UI).",
)
def full_rebuild_schedule(context: dg.ScheduleEvaluationContext):
    settings = BuildSettings.from_env()
    keys = ingest.sync_source_partitions(context.instance, settings.sources)
    return dg.RunRequest(tags={**ingest.all_sources_tags(keys), "stemforge/command": "schedule"})


def resources_from_env() -> dict:
    return {"stemforge": StemforgeSettings.from_settings(BuildSettings.from_env(), progress=False)}


defs = dg.Definitions(
    assets=all_assets,
    asset_checks=all_asset_checks,
    jobs=[build_job],
    schedules=[full_rebuild_schedule],
    sensors=[source_change_sensor],
    resources=resources_from_env(),
)


def build_job_definition() -> dg.JobDefinition:
    """The resolved build job; ``dg.reconstructable(build_job_definition)`` lets executors that
    run steps in other processes (multiprocess here, ``k8s_job_executor`` on a cluster) load it."""
    return defs.resolve_job_def(BUILD_JOB_NAME)
