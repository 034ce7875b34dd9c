"""The Dagster resource that carries the build settings to every asset."""

from __future__ import annotations

import dagster as dg

from .settings import BuildSettings


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
    cap_per_skill: int = BuildSettings.cap_per_skill
    split_train: float = BuildSettings.split_train
    split_valid: float = BuildSettings.split_valid
    split_test: float = BuildSettings.split_test
    models: list[str] = list(BuildSettings.models)
    bootstrap: int = BuildSettings.bootstrap
    taxonomy: str = BuildSettings.taxonomy
    manual_tags: str = BuildSettings.manual_tags
    rows_per_shard: int = BuildSettings.rows_per_shard
    progress: bool = True

    @classmethod
    def from_settings(cls, settings: BuildSettings, progress: bool = True) -> "StemforgeSettings":
        return cls(
            home=str(settings.data_home.root),
            sources=list(settings.sources),
            seed=settings.seed,
            demo_questions=settings.demo_questions,
            demo_faults=settings.demo_faults,
            demo_revision=settings.demo_revision,
            crawl_rate_per_host=settings.crawl_rate_per_host,
            crawl_concurrency=settings.crawl_concurrency,
            crawl_revalidate=settings.crawl_revalidate,
            cap_per_skill=settings.cap_per_skill,
            split_train=settings.split_train,
            split_valid=settings.split_valid,
            split_test=settings.split_test,
            models=list(settings.models),
            bootstrap=settings.bootstrap,
            taxonomy=settings.taxonomy,
            manual_tags=settings.manual_tags,
            rows_per_shard=settings.rows_per_shard,
            progress=progress,
        )

    def settings(self) -> BuildSettings:
        return BuildSettings(
            home=self.home,
            sources=tuple(self.sources),
            seed=self.seed,
            demo_questions=self.demo_questions,
            demo_faults=self.demo_faults,
            demo_revision=self.demo_revision,
            crawl_rate_per_host=self.crawl_rate_per_host,
            crawl_concurrency=self.crawl_concurrency,
            crawl_revalidate=self.crawl_revalidate,
            cap_per_skill=self.cap_per_skill,
            split_train=self.split_train,
            split_valid=self.split_valid,
            split_test=self.split_test,
            models=tuple(self.models),
            bootstrap=self.bootstrap,
            taxonomy=self.taxonomy,
            manual_tags=self.manual_tags,
            rows_per_shard=self.rows_per_shard,
        )
