"""The SmartScore simulation against the paper's published exam scores (issue 27, point 3).

Prints, per published row of Table 8 and Table 10, the paper's exam score and ours for the same
accuracy, and the fit error (RMSE) on the fit rows (Table 8 Random and CLIP finetuning), the
held-out rows (Table 8's other methods) and Table 10's skills. ``--search`` reruns the grid
search per subject (minutes) and prints the fits to paste into CALIBRATED_FITS.

    .venv/bin/python bench/exam_calibration.py [--search] [--all-rows]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.evaluation.exam_calibration import (  # noqa: E402
    CALIBRATED_RULES,
    CALIBRATED_SUBJECTS,
    STARTING_POINT,
    calibration_table,
    fit_errors,
    fit_subject,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--search", action="store_true", help="rerun the grid search per subject")
    parser.add_argument("--all-rows", action="store_true", help="print every Table 10 row, not only Table 8")
    args = parser.parse_args()
    if args.search:
        for subject in CALIBRATED_SUBJECTS:
            print(repr(fit_subject(subject)), flush=True)
    pl.Config.set_tbl_rows(400)
    pl.Config.set_tbl_width_chars(200)
    pl.Config.set_fmt_str_lengths(90)
    for name, rules in (("starting point (REFERENCE.md section 2)", STARTING_POINT), ("calibrated (the build's default)", CALIBRATED_RULES)):
        table = calibration_table(rules)
        print(f"\n== {name}")
        shown = table if args.all_rows else table.filter(pl.col("table") == "8")
        print(shown.select("table", "method", "subject", "skill", "accuracy", "paper", pl.col("ours").round(1), pl.col("error").round(1), "role"))
        print(fit_errors(table).with_columns(pl.col("rmse", "mean_abs_error").round(1)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
