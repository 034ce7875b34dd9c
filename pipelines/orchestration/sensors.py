"""The source-change sensor: start a rebuild when a configured source changed.

Each tick looks at every configured source without downloading page bodies
(``pipelines.ingest.changes.detect_source_changes``):

- a web source (``http://...``): robots.txt and its sitemaps, each with a conditional GET
  against the validators the raw store kept (ETag / Last-Modified); a sitemap answering
  200 is parsed and its (URL, lastmod) entries compared with the ones the last crawl
  recorded. A site without a sitemap cannot be watched this way (left to the schedule).
- ``demo``: the bundled site is started at the configured revision
  (``STEMFORGE_DEMO_REVISION`` is not read: the settings' ``demo_revision``) for the
  duration of the probe, as the build starts it; ``include_demo=False`` skips demo sources.
- a file source: the sizes and mtimes of its files, content hashes of those whose
  identity changed, against the fingerprint recorded when it was last imported.

When a source changed, the sensor yields one ``RunRequest`` for the build job (every
configured source partition, in one run) whose ``run_key`` is derived from the digest of
the state seen, so the same change never starts two runs. The cursor holds that digest:
a tick that sees the state the cursor names does not ask again (if that build failed,
the next change, or the schedule, starts the next one).
"""

from __future__ import annotations

import json
from typing import Callable

import dagster as dg

from pipelines.settings import BuildSettings

BUILD_JOB_NAME = "stemforge_build"
SENSOR_NAME = "source_change_sensor"


def _cursor_digest(cursor: str | None) -> str | None:
    if not cursor:
        return None
    try:
        return json.loads(cursor).get("digest")
    except (ValueError, AttributeError):
        return None


def _instance(context: dg.SensorEvaluationContext) -> dg.DagsterInstance | None:
    try:
        return context.instance
    except dg.DagsterInvariantViolationError:  # a test context built without an instance
        return None


def _partition_tags(instance: dg.DagsterInstance | None, settings: BuildSettings) -> dict[str, str]:
    """Tags selecting every configured source partition (as the nightly schedule does)."""
    if instance is None:
        return {}
    from assets.ingest import all_sources_tags, sync_source_partitions

    return all_sources_tags(sync_source_partitions(instance, settings.sources))


def build_source_change_sensor(
    job: dg.JobDefinition | None = None,
    *,
    job_name: str = BUILD_JOB_NAME,
    name: str = SENSOR_NAME,
    settings_factory: Callable[[], BuildSettings] = BuildSettings.from_env,
    include_demo: bool = True,
    minimum_interval_seconds: int = 300,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """The sensor, for ``job`` (or the job named ``job_name`` in the same Definitions)."""
    target = {"job": job} if job is not None else {"job_name": job_name}

    @dg.sensor(
        name=name,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=(
            "Starts a rebuild when a source changed: web sources by their sitemaps' lastmods and "
            "validators (no page bodies), file sources by sizes, mtimes and content hashes."
        ),
        **target,
    )
    def source_change_sensor(context: dg.SensorEvaluationContext):
        from pipelines.ingest.changes import detect_source_changes

        settings = settings_factory()
        report = detect_source_changes(settings, include_demo=include_demo)
        digest = report.digest
        changed = report.changed
        if not changed:
            return dg.SkipReason(f"no source changed: {report.summary()}")
        if _cursor_digest(context.cursor) == digest:
            return dg.SkipReason(f"this change was already requested: {report.summary()}")
        context.update_cursor(json.dumps({"digest": digest, "changed": [s.source for s in changed]}, sort_keys=True))
        return dg.RunRequest(
            run_key=f"sources-{digest[:20]}",
            run_config={"execution": {"config": {"in_process": {}}}},  # one process holds the home's lock
            tags={
                **_partition_tags(_instance(context), settings),
                "stemforge/command": "sensor",
                "stemforge/changed_sources": ",".join(s.source for s in changed)[:200],
            },
        )

    return source_change_sensor


source_change_sensor = build_source_change_sensor()
