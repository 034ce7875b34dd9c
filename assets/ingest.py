"""Group ``ingest``: crawl the web sources, parse pages and import corpora into raw questions.

Both assets are partitioned by source: one dynamic partition per configured source, keyed by
``SourceSpec.slug`` (the same name as its folders ``raw/<slug>/`` and lake files
``lake/raw_questions/<slug>.parquet``). ``stemforge build`` registers the configured sources
as partitions and runs them all in one run (``BackfillPolicy.single_run``: each asset iterates
over ``context.partition_keys``); the downstream assets are unpartitioned and read every
source's lake file.
"""

import warnings

import dagster as dg

from assets.resources import StemforgeSettings
from pipelines.ingest.spec import SourceSpec, parse_source_spec

from assets._meta import OWNERS, frame_metadata, json_metadata

SOURCE_PARTITIONS_NAME = "sources"

source_partitions = dg.DynamicPartitionsDefinition(name=SOURCE_PARTITIONS_NAME)


def configured_sources(sources) -> dict[str, SourceSpec]:
    """Partition key (the source's slug) -> its spec, for the configured source texts."""
    specs = [parse_source_spec(text) for text in sources]
    return {spec.slug: spec for spec in specs}


def partition_specs(context: dg.AssetExecutionContext, by_slug: dict[str, SourceSpec]) -> list[SourceSpec]:
    """The specs of this run's partitions; partitions of sources no longer configured are skipped."""
    specs = []
    for key in sorted(context.partition_keys):
        if key in by_slug:
            specs.append(by_slug[key])
        else:
            context.log.warning(f"source partition {key} is not among the configured sources; skipped")
    return specs


def source_partitioned_asset(**kwargs):
    """``dg.asset`` partitioned by source, all partitions in one run (the policy is beta in 1.13)."""

    def decorate(fn):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dg.BetaWarning)
            return dg.asset(
                partitions_def=source_partitions, backfill_policy=dg.BackfillPolicy.single_run(), **kwargs
            )(fn)

    return decorate


@source_partitioned_asset(
    group_name="ingest",
    kinds={"python", "http"},
    owners=OWNERS,
    description=(
        "Crawl every web source (the bundled demo site or http:// sites with its layouts) into a "
        "content-addressed raw store under raw/<source>/: robots.txt obeyed, rate-limited, retried, "
        "conditional GETs, resumable frontier. Importer sources need no crawl. Partitioned by source."
    ),
)
def crawled_pages(context: dg.AssetExecutionContext, stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.ingest.stage import crawl_web_source

    settings = stemforge.settings()
    reports = {}
    for spec in partition_specs(context, configured_sources(settings.sources)):
        if spec.is_web:
            context.log.info(f"crawling {spec.text}")
            reports[spec.text] = crawl_web_source(spec, settings, settings.data_home, progress=stemforge.progress)
    return dg.MaterializeResult(
        metadata=json_metadata({"crawls": reports, "partitions": sorted(context.partition_keys)})
    )


@source_partitioned_asset(
    group_name="ingest",
    kinds={"python", "parquet"},
    owners=OWNERS,
    deps=[crawled_pages],
    description=(
        "Raw questions before cleaning, one Parquet file per source in lake/raw_questions/: crawled "
        "pages parsed by layout, or records of an imported corpus. Unusable pages and records go to "
        "quarantine with stage and reason. Partitioned by source; the lake files of sources no longer "
        "configured are removed."
    ),
)
def raw_questions(context: dg.AssetExecutionContext, stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.store.images import ImageStore
    from pipelines.ingest.stage import land_source, remove_stale_sources, source_problem
    from pipelines.store.lake import read_raw_questions

    settings = stemforge.settings()
    home = settings.data_home
    by_slug = configured_sources(settings.sources)
    images = ImageStore(home.images)
    per_source = {}
    problems = []
    for spec in partition_specs(context, by_slug):
        outcome = land_source(spec, home, images)
        per_source[spec.text] = {
            "partition": spec.slug,
            "questions": outcome.questions,
            "quarantined": outcome.quarantined,
            "skipped_unchanged": outcome.skipped,
        }
        context.log.info(f"{spec.text}: {outcome.questions} questions, {outcome.quarantined} quarantined")
        problem = source_problem(spec, outcome)
        if problem:
            problems.append(problem)
    if problems:
        raise dg.Failure(description="; ".join(problems), allow_retries=False)
    removed = remove_stale_sources(home, list(by_slug.values()))
    raw = read_raw_questions(home)
    by_subject = raw.group_by("subject").len().sort("subject")
    return dg.MaterializeResult(
        metadata={
            **frame_metadata(raw.drop("extra")),
            **json_metadata(
                {
                    "per_source": per_source,
                    "per_subject": dict(zip(by_subject["subject"].to_list(), by_subject["len"].to_list())),
                    "removed_sources": removed,
                    "skipped": bool(per_source) and not removed and all(s["skipped_unchanged"] for s in per_source.values()),
                }
            ),
        }
    )


def sync_source_partitions(instance: dg.DagsterInstance, sources) -> list[str]:
    """Make the instance's ``sources`` partitions exactly the configured sources; returns their keys.

    Keys are added in configuration order; keys of sources no longer configured are deleted so
    a run over all partitions never names a source the settings cannot resolve.
    """
    wanted = list(configured_sources(sources))
    existing = instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME)
    for key in existing:
        if key not in wanted:
            instance.delete_dynamic_partition(SOURCE_PARTITIONS_NAME, key)
    missing = [key for key in wanted if key not in existing]
    if missing:
        instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, missing)
    return instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME)


def all_sources_tags(keys: list[str]) -> dict[str, str]:
    """Run tags that select every registered source partition as one range (one run)."""
    if not keys:
        raise ValueError("no sources are configured")
    return {
        "dagster/asset_partition_range_start": keys[0],
        "dagster/asset_partition_range_end": keys[-1],
    }
