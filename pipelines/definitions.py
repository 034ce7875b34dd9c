"""The one Dagster ``Definitions`` of stemforge, loaded by ``workspace.yaml`` and the CLI."""

from __future__ import annotations

import dagster as dg

from assets import clean, dataset, evaluation, ingest, profiles

from .resources import StemforgeSettings
from .settings import BuildSettings

ASSET_MODULES = (ingest, clean, dataset, evaluation, profiles)

all_assets = dg.load_assets_from_modules(ASSET_MODULES)
all_asset_checks = dg.load_asset_checks_from_modules(ASSET_MODULES)

build_job = dg.define_asset_job(
    "stemforge_build",
    selection=dg.AssetSelection.all(),
    description="Rebuild the whole benchmark: crawl/import, clean, dataset, evaluation, profiles, warehouse.",
)

full_rebuild_schedule = dg.ScheduleDefinition(
    name="nightly_full_rebuild",
    job=build_job,
    cron_schedule="0 3 * * *",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Rebuild everything every night at 03:00 (turn it on in the UI).",
)


def resources_from_env() -> dict:
    return {"stemforge": StemforgeSettings.from_settings(BuildSettings.from_env(), progress=False)}


defs = dg.Definitions(
    assets=all_assets,
    asset_checks=all_asset_checks,
    jobs=[build_job],
    schedules=[full_rebuild_schedule],
    resources=resources_from_env(),
)
