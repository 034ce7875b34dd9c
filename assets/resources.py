"""The Dagster resource that carries the build settings to every asset."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator

import dagster as dg

from pipelines.settings import BuildSettings


class StemforgeSettings(dg.ConfigurableResource):
    """Where the data home is, which sources to build from, and the stages' knobs.

    Defaults come from ``BuildSettings`` (see ``pipelines/settings.py``); the UI and the
    schedules read ``STEMFORGE_*`` environment variables, ``stemforge build`` its flags.
    """

    home: str = ""
    sources: list[str] = list(BuildSettings.sources)
    seed: int = BuildSettings.seed
    demo_questions: int = BuildSettings.demo_questions
    demo_faults: bool = BuildSettings.demo_faults
    demo_revision: int = BuildSettings.demo_revision
    crawl_rate_per_host: float = BuildSettings.crawl_rate_per_host
    crawl_concurrency: int = BuildSettings.crawl_concurrency
    crawl_revalidate: str = BuildSettings.crawl_revalidate
    crawl_timeout: float = BuildSettings.crawl_timeout
    crawl_max_urls: int = BuildSettings.crawl_max_urls
    cap_per_skill: int = BuildSettings.cap_per_skill
    split_train: float = BuildSettings.split_train
    split_valid: float = BuildSettings.split_valid
    split_test: float = BuildSettings.split_test
    models: list[str] = list(BuildSettings.models)
    eval_splits: list[str] = list(BuildSettings.eval_splits)
    bootstrap: int = BuildSettings.bootstrap
    exam_skills: str = BuildSettings.exam_skills
    exam_min_questions: int = BuildSettings.exam_min_questions
    taxonomy: str = BuildSettings.taxonomy
    manual_tags: str = BuildSettings.manual_tags
    rows_per_shard: int = BuildSettings.rows_per_shard
    progress: bool = True

    @contextlib.contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator["StemforgeSettings"]:
        """Every run that uses these settings, however launched (``stemforge build``, the UI, the
        schedule, the sensor), holds the data home's write lock while its steps run."""
        from pipelines.store.homelock import home_lock

        run_id = context.run.run_id if context.run else None
        command = f"dagster run {run_id[:8]}" if run_id else "dagster run"
        with home_lock(self.settings().data_home, command, run_id=run_id):
            yield self

    @classmethod
    def from_settings(cls, settings: BuildSettings, progress: bool = True) -> "StemforgeSettings":
        values = {name: getattr(settings, name) for name in _shared_fields()}
        values = {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
        return cls(**{**values, "home": str(settings.data_home.root)}, progress=progress)

    def settings(self) -> BuildSettings:
        values = {name: getattr(self, name) for name in _shared_fields()}
        return BuildSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def _shared_fields() -> list[str]:
    """The BuildSettings fields this resource carries (every one, checked by a test)."""
    return [f.name for f in dataclasses.fields(BuildSettings) if f.name in StemforgeSettings.model_fields]
