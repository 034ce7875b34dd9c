"""What a build with another ``--source`` set would remove from a data home.

Each configured source lands in ``lake/raw_questions/<slug>.parquet``; a source given last
time and not now is removed by the build (its raw rows, its questions, and with them the
predictions on those questions). ``stemforge build`` names them and goes ahead only with
``--prune``.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def removed_sources(home: DataHome, slugs: set[str]) -> list[RemovedSource]:
    """The sources in the home's lake that are not among ``slugs`` (the configured ones)."""
    folder = home.lake / "raw_questions"
    stale = [p for p in sorted(folder.glob("*.parquet")) if p.stem not in slugs] if folder.exists() else []
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
        source = raw["source"][0] if raw.height else path.stem
        ids = questions.filter(pl.col("source") == source).select("question_id")
        hit = predictions.join(ids, on="question_id", how="semi")
        out.append(RemovedSource(source, raw.height, ids.height, hit.height, hit.filter(pl.col("origin") == "import").height))
    return out
