"""Run the asset graph in-process, recorded in the data home's Dagster instance."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from .home import DataHome
from .settings import BuildSettings


@dataclass
class BuildOutcome:
    success: bool
    home: DataHome
    failed_steps: list[str]
    summary: str

    def metrics_summary(self, model: str) -> str:
        from .warehouse import run_query

        try:
            result = run_query(
                self.home,
                "SELECT split, group_by, group_value, round(value, 1), n FROM metrics "
                "WHERE model = ? AND metric = 'accuracy' AND group_by IN ('subject', 'macro', 'micro') "
                "ORDER BY split, group_by, group_value",
                [model],
            )
        except Exception as exc:  # the summary is a courtesy; the build result stands
            return f"(no metrics: {exc})"
        lines = [f"accuracy (%) of {model}:"]
        lines += [f"  {s:5} {g:7} {v:12} {val:6} (n={n})" for s, g, v, val, n in result.rows]
        return "\n".join(lines)


def _selection(selection: str | None):
    import dagster as dg

    if not selection:
        return None
    # the warehouse is always published, so what was built is queryable
    return dg.AssetSelection.from_string(selection) | dg.AssetSelection.assets("warehouse")


def run_build(settings: BuildSettings, selection: str | None = None, progress: bool = True) -> BuildOutcome:
    import dagster as dg

    from .definitions import all_asset_checks, all_assets
    from .resources import StemforgeSettings

    home = settings.data_home
    instance = dg.DagsterInstance.get()
    result = dg.materialize(
        [*all_assets, *all_asset_checks],
        instance=instance,
        resources={"stemforge": StemforgeSettings.from_settings(settings, progress=progress)},
        selection=_selection(selection),
        run_config={"loggers": {"console": {"config": {"log_level": "INFO" if progress else "WARNING"}}}},
        raise_on_error=False,
        tags={"stemforge/command": "build"},
    )
    failed = [
        event.step_key
        for event in result.all_events
        if event.is_step_failure and event.step_key
    ]
    return BuildOutcome(result.success, home, failed, build_summary(home, result.success, failed, result.run_id))


def build_summary(home: DataHome, success: bool, failed: list[str], run_id: str) -> str:
    from .warehouse import run_query

    lines = [f"stemforge build {'finished' if success else 'FAILED'} (run {run_id})"]
    if failed:
        lines.append(f"failed steps: {', '.join(failed)}")
    try:
        def rows(sql):
            return run_query(home, sql).rows

        lines.append("")
        lines.append("raw questions per source:")
        for source, n in rows("SELECT source, count(*) FROM raw_questions GROUP BY 1 ORDER BY 1"):
            lines.append(f"  {source:40} {n:>9,}")
        lines.append("kept questions per subject and split:")
        for subject, tr, va, te, n in rows(
            "SELECT subject, count(*) FILTER (split='train'), count(*) FILTER (split='valid'), "
            "count(*) FILTER (split='test'), count(*) FROM questions GROUP BY 1 ORDER BY 1"
        ):
            lines.append(f"  {subject:12} train {tr:>8,}  valid {va:>8,}  test {te:>8,}  total {n:>9,}")
        lines.append("quarantined by stage:")
        for stage, n in rows("SELECT stage, count(*) FROM quarantine GROUP BY 1 ORDER BY 1"):
            lines.append(f"  {stage:12} {n:>9,}")
        dup = rows("SELECT kind, count(*) FROM duplicates GROUP BY 1 ORDER BY 1")
        lines.append("duplicates removed: " + (", ".join(f"{k} {n:,}" for k, n in dup) or "none"))
        stats_path = home.lake_path("dataset_statistics")
        if stats_path.exists():
            from .export import statistics_markdown

            lines.append("")
            lines.append("dataset statistics (the paper's Table 1):")
            lines.append(statistics_markdown(pl.read_parquet(stats_path)))
        acc = rows(
            "SELECT model, round(value, 1), round(ci_low, 1), round(ci_high, 1), n FROM metrics "
            "WHERE metric = 'accuracy' AND group_by = 'macro' AND split = 'test' AND model NOT LIKE 'paper:%' ORDER BY model"
        )
        if acc:
            lines.append("")
            lines.append("test accuracy, macro average over subjects (%, 95% interval):")
            for model, v, lo, hi, n in acc:
                lines.append(f"  {model:28} {v:5}  [{lo}, {hi}]  n={n}")
    except Exception as exc:  # a partial build still reports what it can
        lines.append(f"(summary incomplete: {str(exc).splitlines()[0]})")
    lines.append("")
    lines.append(f"data home:  {home.root}")
    lines.append(f"warehouse:  {home.warehouse}   (stemforge sql \"SELECT * FROM questions LIMIT 5\")")
    lines.append(f"export:     {home.export}")
    lines.append(f"report:     {home.reports / 'index.html'}")
    lines.append(f"Dagster UI: stemforge ui --home {home.root}")
    return "\n".join(lines)
