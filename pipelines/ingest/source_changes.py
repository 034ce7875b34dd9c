"""What a build with another ``--source`` set would remove from a data home.

A source becomes part of a home when a build that includes it succeeds: that build records its
source specs in ``<home>/sources.json``. A source of that record not given now is removed by
the build (its raw rows, its questions, and with them the predictions on those questions);
``stemforge build`` names it by its spec and goes ahead only with ``--prune``. A source whose
build failed (a typo in its mapping) never joined the home: the corrected spec replaces it
without ``--prune``. Homes built before the record existed fall back to their lake files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Iterable

import polars as pl

from pipelines.store.home import DataHome


@dataclass(frozen=True)
class RemovedSource:
    source: str  # as given to --source last time
    raw: int
    questions: int
    predictions: int
    imported_predictions: int

    def describe(self) -> str:
        return (
            f"{self.source} ({self.questions:,} questions, {self.predictions:,} predictions "
            f"of which {self.imported_predictions:,} imported)"
        )


RECORD_NAME = "sources.json"


def record_built_sources(home: DataHome, sources: Iterable[str]) -> None:
    """After a successful build over ``sources``: they are the home's sources now."""
    path = home.root / RECORD_NAME
    temporary = path.with_name(f".{RECORD_NAME}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps({"sources": list(sources)}, indent=1) + "\n")
    os.replace(temporary, path)


def built_sources(home: DataHome) -> list[str] | None:
    """The source specs of the home's last successful build (None: no build recorded them)."""
    try:
        return list(json.loads((home.root / RECORD_NAME).read_text())["sources"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def removed_sources(home: DataHome, sources: Iterable[str]) -> list[RemovedSource]:
    """The sources of the home (its last successful build's) that are not among ``sources``
    (the configured specs), named by their spec."""
    from pipelines.ingest.spec import parse_source_spec

    slugs = {parse_source_spec(text).slug for text in sources}
    folder = home.lake / "raw_questions"
    recorded = built_sources(home)
    if recorded is not None:
        by_slug = {}
        for text in recorded:
            try:
                by_slug[parse_source_spec(text).slug] = text
            except ValueError:  # a spec this version no longer reads: nothing to name it by but its text
                by_slug[text] = text
        stale = [folder / f"{slug}.parquet" for slug in sorted(by_slug) if slug not in slugs]
        stale = [p for p in stale if p.exists()]
    else:
        stale = [p for p in sorted(folder.glob("*.parquet")) if p.stem not in slugs] if folder.exists() else []
        by_slug = {}
    if not stale:
        return []
    questions_path = home.lake_path("questions")
    questions = (
        pl.read_parquet(questions_path, columns=["question_id", "source"])
        if questions_path.exists() else pl.DataFrame(schema={"question_id": pl.String, "source": pl.String})
    )
    prediction_files = sorted((home.lake / "predictions").glob("*.parquet")) if (home.lake / "predictions").exists() else []
    predictions = (
        pl.concat([pl.read_parquet(f, columns=["question_id", "origin"]) for f in prediction_files], how="vertical_relaxed")
        if prediction_files else pl.DataFrame(schema={"question_id": pl.String, "origin": pl.String})
    )
    out = []
    for path in stale:
        raw = pl.read_parquet(path, columns=["source"])
        if recorded is None and raw.height == 0:
            continue  # a source whose records were all unusable (its build failed) never joined
        source = by_slug.get(path.stem) or (raw["source"][0] if raw.height else path.stem)
        ids = questions.filter(pl.col("source") == source).select("question_id")
        hit = predictions.join(ids, on="question_id", how="semi")
        out.append(RemovedSource(source, raw.height, ids.height, hit.height, hit.filter(pl.col("origin") == "import").height))
    return out
