"""Group ``ingest``: crawl the web sources, parse pages and import corpora into raw questions."""

import dagster as dg

from pipelines.resources import StemforgeSettings
from pipelines.sources.spec import parse_source_spec

from ._meta import OWNERS, frame_metadata, json_metadata


@dg.asset(
    group_name="ingest",
    kinds={"python", "http"},
    owners=OWNERS,
    code_version="1",
    description=(
        "Crawl every web source (the bundled demo site or http:// sites with its layouts) into a "
        "content-addressed raw store under raw/<source>/: robots.txt obeyed, rate-limited, retried, "
        "conditional GETs, resumable frontier. Importer sources need no crawl."
    ),
)
def crawled_pages(context: dg.AssetExecutionContext, stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.ingest import crawl_web_source

    settings = stemforge.settings()
    reports = {}
    for text in settings.sources:
        spec = parse_source_spec(text)
        if spec.is_web:
            context.log.info(f"crawling {spec.text}")
            reports[spec.text] = crawl_web_source(spec, settings, settings.data_home, progress=stemforge.progress)
    return dg.MaterializeResult(metadata=json_metadata({"crawls": reports, "sources": list(settings.sources)}))


@dg.asset(
    group_name="ingest",
    kinds={"python", "parquet"},
    owners=OWNERS,
    code_version="1",
    deps=[crawled_pages],
    description=(
        "Raw questions before cleaning, one Parquet file per source in lake/raw_questions/: crawled "
        "pages parsed by layout, or records of an imported corpus. Unusable pages and records go to "
        "quarantine with stage and reason."
    ),
)
def raw_questions(context: dg.AssetExecutionContext, stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.images import ImageStore
    from pipelines.ingest import land_source
    from pipelines.ingest import remove_stale_sources
    from pipelines.stages import read_raw_questions

    settings = stemforge.settings()
    home = settings.data_home
    specs = [parse_source_spec(t) for t in settings.sources]
    images = ImageStore(home.images)
    per_source = {}
    for spec in specs:
        outcome = land_source(spec, home, images)
        per_source[spec.text] = {"questions": outcome.questions, "quarantined": outcome.quarantined}
        context.log.info(f"{spec.text}: {outcome.questions} questions, {outcome.quarantined} quarantined")
    removed = remove_stale_sources(home, specs)
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
                }
            ),
        }
    )
