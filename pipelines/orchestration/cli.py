"""The ``stemforge`` command line (``stemforge --help``; README, "What `make demo` does" and "Querying with SQL")."""

from __future__ import annotations

import argparse
import atexit
import csv
import io
import json
import os
import sys
from pathlib import Path

from pipelines.ingest.spec import SourceSpecError, parse_source_spec
from pipelines.settings import BuildSettings, built_settings
from pipelines.store.home import DataHome, resolve_home

DEFAULT_QUERY_TIMEOUT = 60.0  # seconds; pipelines.warehouse has the same defaults
DEFAULT_QUERY_MEMORY = "2GB"

DAGSTER_YAML = """\
# Written by stemforge. The instance the CLI's runs and `stemforge ui` share.
concurrency:
  pools:
    default_limit: 1   # duckdb_write: one warehouse writer at a time
python_logs:
  python_log_level: INFO   # step processes of the multiprocess executor log at this level
telemetry:
  enabled: false
nux:
  enabled: false   # no newsletter dialog over the asset graph
"""


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def prepare_instance(home: DataHome) -> None:
    """Create the data home and the Dagster instance folder; point DAGSTER_HOME at it."""
    home.dagster.mkdir(parents=True, exist_ok=True)
    config = home.dagster / "dagster.yaml"
    if not config.exists() or config.read_text() != DAGSTER_YAML:
        config.write_text(DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(home.dagster)
    os.environ["STEMFORGE_HOME"] = str(home.root)


# ---- build ---------------------------------------------------------------------------

def cmd_build(args: argparse.Namespace) -> int:
    sources = tuple(args.source) if args.source else BuildSettings.sources
    for text in sources:
        try:
            parse_source_spec(text)
        except SourceSpecError as exc:
            raise CliError(str(exc)) from None
    settings = BuildSettings(
        home=args.home or "",
        sources=sources,
        seed=args.seed,
        demo_questions=args.questions,
        demo_faults=args.faults,
        demo_revision=args.revision,
        cap_per_skill=args.cap,
        crawl_revalidate=args.crawl_revalidate,
        crawl_max_urls=args.crawl_max_urls,
        models=tuple(args.model) if args.model else BuildSettings.models,
        exam_skills=args.exam_skills,
        exam_min_questions=args.exam_min_questions,
    )
    home = settings.data_home
    prepare_instance(home)
    from pipelines.orchestration.run import run_build

    from pipelines.orchestration.run import SelectionError
    from pipelines.store.homelock import HomeBusy, home_lock

    if args.exam_min_questions < 1:
        raise CliError("--exam-min-questions must be at least 1")
    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise CliError("--max-concurrent must be at least 1")
    try:
        with home_lock(home, "build", log=None if args.quiet else print):
            _check_source_changes(home, sources, args.prune, quiet=args.quiet)
            outcome = run_build(
                settings,
                selection=args.select,
                progress=not args.quiet,
                executor=args.executor,
                max_concurrent=args.max_concurrent,
            )
    except (SelectionError, HomeBusy) as exc:
        raise CliError(str(exc)) from None
    print(outcome.summary)
    return 0 if outcome.success else 1


def _check_source_changes(home: DataHome, sources: tuple[str, ...], prune: bool, quiet: bool) -> None:
    """Refuse a build that would drop sources of the last one, unless ``--prune``."""
    from pipelines.ingest.source_changes import removed_sources

    removed = removed_sources(home, sources)
    if not removed:
        return
    listing = "; ".join(r.describe() for r in removed)
    if not prune:
        raise CliError(
            f"this build would remove source(s) not given now: {listing}; add --prune to remove them "
            "(or give them again with --source to keep them)"
        )
    if not quiet:
        for r in removed:
            print(f"pruning source {r.describe()}")


# ---- sql -----------------------------------------------------------------------------

def format_rows(columns: list[str], rows: list[tuple], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([dict(zip(columns, r)) for r in rows], default=str, ensure_ascii=False, indent=1)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        return buf.getvalue().rstrip("\n")
    cells = [[("" if v is None else str(v)) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "-+-".join("-" * w for w in widths)
    out = [" | ".join(c.ljust(w) for c, w in zip(columns, widths)), line]
    out += [" | ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def cmd_sql(args: argparse.Namespace) -> int:
    from pipelines.store.publish import recover_if_idle
    from pipelines.store.warehouse import WarehouseError, run_query

    if args.file:
        path = Path(args.file)
        if not path.is_file():
            raise CliError(f"no such SQL file: {args.file}")
        query = path.read_text()
    elif args.query:
        query = args.query
    else:
        raise CliError('give a query, e.g. stemforge sql "SELECT count(*) FROM questions", or -f FILE')
    if args.timeout <= 0:
        raise CliError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    try:
        home = resolve_home(args.home)
        recover_if_idle(home)  # a publish a crash interrupted is completed before reading
        result = run_query(home, query, timeout=args.timeout, memory_limit=args.max_memory)
    except WarehouseError as exc:
        raise CliError(str(exc)) from None
    print(format_rows(result.columns, result.rows, args.format))
    return 0


# ---- verify --------------------------------------------------------------------------

def cmd_verify(args: argparse.Namespace) -> int:
    from pipelines.store.homelock import HomeBusy, home_lock
    from pipelines.store.integrity import DAMAGED, describe, repair, summary_line, verify_home

    home = resolve_home(args.home)
    if not home.lake.is_dir():
        raise CliError(f"no data home at {home.root}; run `stemforge build` first")
    try:
        with home_lock(home, "verify"):  # a build's files are complete only between its writes
            from pipelines.store.publish import recover

            recover(home, log=print)  # a publish a crash interrupted is completed first
            report = verify_home(home)
            for finding in report.findings:
                if not (args.repair and finding.problem == DAMAGED):
                    print(describe(home, finding))
            if args.repair:
                repair(home, report.findings, print)
    except HomeBusy as exc:
        raise CliError(str(exc)) from None
    print(summary_line(report))
    if not report.clean:
        print("the next `stemforge build` rebuilds what is missing or was removed" if args.repair else
              "the next `stemforge build` rebuilds damaged lake files, the warehouse and what is missing; "
              "`stemforge verify --repair` first removes damaged export files and images, for it to rebuild them too")
    return 0 if report.clean else 1


# ---- eval ----------------------------------------------------------------------------

RESCORE_SELECTION = "key:evaluation_metrics or key:cogme_profiles or key:report"


def cmd_eval(args: argparse.Namespace) -> int:
    home = resolve_home(args.home)
    if args.list:
        if args.remove or args.predictions or args.model:
            raise CliError("--list takes no other option")
        return _eval_list(home)
    if args.remove is not None:
        if args.predictions or args.model:
            raise CliError("--remove NAME takes no --predictions or --model")
    elif not args.predictions or not args.model:
        raise CliError("give --predictions FILE and --model NAME (or --list, or --remove NAME)")
    prepare_instance(home)
    from pipelines.orchestration.run import run_build
    from pipelines.evaluation.stage import import_predictions_file, remove_imported_model
    from pipelines.store.homelock import HomeBusy, home_lock

    try:
        settings = built_settings(home)  # rescored as the last build scored: its seed, exam skills, sources
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        with home_lock(home, "eval"):
            if args.remove is not None:
                path = remove_imported_model(home, args.remove)
                print(f"removed imported model {args.remove} ({path.name})")
            else:
                figures = import_predictions_file(home, Path(args.predictions), args.model, fmt=args.format)
                print(f"imported {figures['rows']} predictions for model {args.model}")
                for split, cover in figures["coverage"].items():
                    if cover["missing"]:
                        print(
                            f"warning: {cover['missing']} of {cover['questions']} {split} questions have no prediction; "
                            "they count as wrong (coverage is in metrics, metric = 'coverage')",
                            file=sys.stderr,
                        )
            if show_progress(args):
                print("rescoring: metrics, profiles and report (each step says when it starts and ends)", file=sys.stderr)
            outcome = run_build(settings, selection=RESCORE_SELECTION, progress=show_progress(args), command="eval")
    except HomeBusy as exc:
        raise CliError(str(exc)) from None
    except (ValueError, FileNotFoundError) as exc:
        raise CliError(str(exc).splitlines()[0]) from None
    if args.remove is None:
        print(outcome.metrics_summary(args.model))
    if not outcome.success:
        print(outcome.summary)
    return 0 if outcome.success else 1


def cmd_export(args: argparse.Namespace) -> int:
    from pipelines.dataset.harness_export import HarnessExportError, export_for_harness

    from pipelines.store.publish import recover_if_idle

    home = resolve_home(args.home)
    if not home.lake_path("questions").exists():
        raise CliError(f"no built dataset in {home.root}; run `stemforge build` first")
    recover_if_idle(home)  # a publish a crash interrupted is completed before reading the export
    try:
        result = export_for_harness(home, args.format, Path(args.out) if args.out else None, split=args.split,
                                    with_answer_key=args.with_answer_key)
    except HarnessExportError as exc:
        raise CliError(str(exc)) from None
    what = "rows" if args.format == "stem" else f"{args.split} questions"
    print(f"exported {result.rows} {what} as {result.format} to {result.out}")
    for reason, n in result.left_out.items():
        print(f"left out {n} question(s): {reason}")
    for note in result.notes:
        print(f"note: {note}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from pipelines.evaluation.stage import scored_frame
    from pipelines.evaluation.metrics import MetricsInputError, compare_models

    home = resolve_home(args.home)
    scored = scored_frame(home)
    if scored.height == 0:
        raise CliError(f"no scored predictions in {home.root} (run `stemforge build` first)")
    try:
        result = compare_models(scored, args.model_a, args.model_b, args.split, bootstrap=args.bootstrap, seed=args.seed)
    except MetricsInputError as exc:
        raise CliError(str(exc)) from None
    print(format_comparison(result))
    return 0


def format_comparison(result: dict) -> str:
    """The text ``stemforge compare`` prints: one row per subject, micro and macro."""

    def interval(low, high) -> str:
        return "n/a" if low is None else f"[{low:+.1f}, {high:+.1f}]"

    a, b = result["model_a"], result["model_b"]
    lines = [f"{a} minus {b} on split {result['split']} (percentage points; 95% paired intervals; McNemar exact p)"]
    rows = []
    for subject, r in result["subjects"].items():
        rows.append((subject, r["n"], f"{r['accuracy_a']:.1f}", f"{r['accuracy_b']:.1f}", f"{r['difference']:+.1f}",
                     interval(r["ci_low"], r["ci_high"]), f"{r['a_only']}/{r['b_only']}", f"{r['mcnemar_p']:.3g}"))
    m = result["micro"]
    rows.append(("micro", m["n"], f"{m['accuracy_a']:.1f}", f"{m['accuracy_b']:.1f}", f"{m['difference']:+.1f}",
                 interval(m["ci_low"], m["ci_high"]), f"{m['a_only']}/{m['b_only']}", f"{m['mcnemar_p']:.3g}"))
    mac = result["macro"]
    rows.append((f"macro ({mac['subjects']} subjects)", "", f"{mac['accuracy_a']:.1f}", f"{mac['accuracy_b']:.1f}",
                 f"{mac['difference']:+.1f}", interval(mac["ci_low"], mac["ci_high"]), "",
                 "" if mac.get("mcnemar_p") is None else f"{mac['mcnemar_p']:.3g}"))
    columns = ["scope", "n", f"acc {a}", f"acc {b}", "difference", "95% interval", "only A/only B", "McNemar p"]
    lines.append(format_rows(columns, rows, "table"))
    if mac.get("significant") is not None:
        lines.append(f"macro difference {mac['difference']:+.1f}: {'significant' if mac['significant'] else 'not significant'} "
                     "at 95% (its McNemar p is stratified by subject; significant needs p < 0.05 and the interval to exclude 0)")
    return "\n".join(lines)


def show_progress(args: argparse.Namespace) -> bool:
    """Progress on stderr while eval rescores (12-25 s on the demo): at a terminal, unless --quiet."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def _eval_list(home: DataHome) -> int:
    from pipelines.evaluation.stage import imported_models

    if not home.lake.exists():
        raise CliError(f"no data home at {home.root}; run `stemforge build` first")
    models = imported_models(home)
    if not models:
        print("no imported models")
        return 0
    for entry in models:
        splits = ", ".join(f"{split} {n:,}" for split, n in entry["rows"].items())
        print(f"{entry['model']}\t{splits} predictions")
    return 0


# ---- site ----------------------------------------------------------------------------

def _site_config(args: argparse.Namespace):
    from pipelines.ingest.demo_site.generator import SiteConfig

    return SiteConfig(seed=args.seed, questions=args.questions, faults=args.faults, revision=args.revision)


def cmd_site_serve(args: argparse.Namespace) -> int:
    from pipelines.ingest.demo_site.server import start_site

    with start_site(_site_config(args), host=args.host, port=args.port) as site:
        print(site.base_url, flush=True)
        try:
            import threading

            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


def cmd_site_truth(args: argparse.Namespace) -> int:
    from pipelines.ingest.demo_site.truth import write_truth

    out = Path(args.out)
    if out.parent and not out.parent.exists():
        raise CliError(f"folder {out.parent} does not exist")
    write_truth(_site_config(args), out)
    print(f"wrote the demo site's truth to {out}")
    return 0


# ---- latex ---------------------------------------------------------------------------

def cmd_latex(args: argparse.Namespace) -> int:
    from pipelines.clean.latex.convert import convert_line

    for line in sys.stdin:
        print(convert_line(line.rstrip("\n")), flush=True)
    return 0


# ---- ui ------------------------------------------------------------------------------

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
UI_EXPOSED = ("stemforge ui: listening on {host}, not only this machine: anyone who reaches it can launch builds, "
              "change the sources and delete runs, with this account's rights (the UI has no login)")


def cmd_ui(args: argparse.Namespace) -> int:
    home = resolve_home(args.home)
    prepare_instance(home)
    workspace = Path(__file__).resolve().parents[2] / "workspace.yaml"
    command = [
        sys.executable, "-m", "dagster", "dev", "-w", str(workspace), "-h", args.host, "-p", str(args.port),
    ]
    if args.host not in LOOPBACK_HOSTS:
        print(UI_EXPOSED.format(host=args.host), file=sys.stderr)
    os.chdir(workspace.parent)
    os.execv(sys.executable, command)  # signals reach dagster dev and its children directly


# ---- parser --------------------------------------------------------------------------

def source_help() -> str:
    """``--source``'s help: every registered source kind as it is written (never out of date)."""
    from pipelines.ingest.sources import source_kinds

    kinds = []
    for name, kind in source_kinds().items():
        if name == "http":
            kinds.append(f"{kind.usage}[?layout=FILE][&max_urls=N]")
        else:
            kinds.append(f"{kind.usage}[?{'query' if name == 'python' else 'mapping'}]" if kind.query else kind.usage)
    return "a source spec: " + " | ".join(kinds) + " (repeatable; default: demo; README, Sources)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stemforge", description="Build, evaluate and profile a multimodal STEM benchmark.")
    sub = parser.add_subparsers(dest="command", required=True)

    def add_home(p):
        p.add_argument("--home", help="data home (default: $STEMFORGE_HOME, else ./stemforge-data)")

    p = sub.add_parser("build", help="materialize the asset graph (one run over all sources)")
    p.add_argument("--source", action="append", help=source_help())
    add_home(p)
    p.add_argument("--select", help="a Dagster asset selection, e.g. group:ingest (the warehouse is always published; default: every asset)")
    p.add_argument("--seed", type=int, default=BuildSettings.seed,
                   help="seed of every random step: demo site, shuffle, split, sessions, intervals (default: %(default)s)")
    p.add_argument("--questions", type=int, default=BuildSettings.demo_questions, help="size of the bundled demo site (default: %(default)s)")
    p.add_argument("--faults", action="store_true", help="serve the demo site with faults (default: off)")
    p.add_argument("--revision", type=int, default=0, help="demo site revision (default: %(default)s)")
    p.add_argument("--cap", type=int, default=BuildSettings.cap_per_skill, help="at most this many questions per skill (default: %(default)s)")
    p.add_argument(
        "--crawl-revalidate",
        choices=("lastmod", "all"),
        default=BuildSettings.crawl_revalidate,
        help="a rebuild re-requests only pages whose sitemap lastmod changed (lastmod), or every page (all) "
        "(default: %(default)s)",
    )
    p.add_argument("--crawl-max-urls", type=int, default=BuildSettings.crawl_max_urls, metavar="N",
                   help="the crawl budget: at most N URLs per web source, links past it are not followed; a source's "
                   "own ?max_urls=N overrides it (default: %(default)s)")
    p.add_argument("--model", action="append",
                   help="model spec to evaluate, e.g. random or embedding?threads=1 (repeatable; default: "
                   + ", ".join(BuildSettings.models) + ")")
    p.add_argument(
        "--exam-skills",
        choices=("all", "paper"),
        default=BuildSettings.exam_skills,
        help="skills the exam score covers: all, or the paper's seeded sample of 40 maths and 30 science "
        "skills (engineering and technology all) (default: %(default)s)",
    )
    p.add_argument(
        "--exam-min-questions",
        type=int,
        default=BuildSettings.exam_min_questions,
        help="a skill with fewer test questions is not exam-scored (default: %(default)s)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output (default: off)")
    p.add_argument(
        "--executor",
        choices=("in_process", "multiprocess"),
        default="in_process",
        help="run every step in this process (default) or each step in its own process",
    )
    p.add_argument("--max-concurrent", type=int, help="multiprocess: at most this many steps at once (default: CPU count)")
    p.add_argument("--prune", action="store_true", help="allow removing sources of the last build that are not given now (with their questions and predictions; default: off)")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("ui", help="start the Dagster UI and daemon on the same instance")
    add_home(p)
    p.add_argument("--host", default="127.0.0.1", help="address the UI listens on (default: %(default)s, this machine "
                   "only; another address lets anyone who reaches it run builds with this account's rights)")
    p.add_argument("--port", type=int, default=3000, help="port of the UI (default: %(default)s)")
    p.set_defaults(func=cmd_ui)

    p = sub.add_parser("sql", help="read-only query on the warehouse")
    p.add_argument("query", nargs="?", help="the SQL query (or give -f FILE)")
    p.add_argument("-f", "--file", help="read the query from this file (default: the query argument)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=DEFAULT_QUERY_TIMEOUT, metavar="SECONDS",
                   help=f"stop the query after this long (default {DEFAULT_QUERY_TIMEOUT:g})")
    p.add_argument("--max-memory", default=DEFAULT_QUERY_MEMORY, metavar="SIZE",
                   help=f"stop the query when it needs more memory than this (default {DEFAULT_QUERY_MEMORY})")
    add_home(p)
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("verify", help="check every file of a home against its recorded checksum")
    p.add_argument("--repair", action="store_true",
                   help="remove damaged files for the next build to rebuild (moved to damaged/ when no stage writes them; default: off)")
    add_home(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("eval", help="import predictions and score them; list or remove imported models")
    p.add_argument("--predictions", help="JSONL, CSV or preds.txt file of predictions (required to import)")
    p.add_argument("--model", help="the imported model's name, not a built-in model's nor paper:... (required to import)")
    p.add_argument("--list", action="store_true", help="list the imported models (default: off)")
    p.add_argument("--remove", metavar="NAME", help="remove an imported model and rescore")
    p.add_argument("--format", default="auto", metavar="FORMAT",
                   help="auto | stemforge | vlmevalkit | lmms-eval: how to read --predictions; auto tells our "
                   "JSONL/CSV/preds.txt, a VLMEvalKit prediction table and an lmms-eval sample log apart (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress while rescoring (default: progress at a terminal)")
    add_home(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("export", help="write a split for an evaluation harness (VLMEvalKit, lmms-eval) or copy the STEM export")
    p.add_argument("--format", default="stem", metavar="FORMAT",
                   help="stem | vlmevalkit | lmms-eval (default: %(default)s)")
    p.add_argument("--split", default="test", metavar="SPLIT",
                   help="train | valid | test: the split a harness format holds, questions with an answer key only (default: %(default)s)")
    p.add_argument("--out", metavar="DIR",
                   help="folder to write (default: the home's export/vlmevalkit or export/lmms-eval; for stem: export/stem itself, or a copy at DIR to upload)")
    p.add_argument("--with-answer-key", action="store_true",
                   help="stem --out DIR: copy test_answer_key.jsonl, the hidden test answers, too (default: left out)")
    add_home(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("compare", help="paired comparison of two scored models: macro, micro and per subject")
    p.add_argument("model_a", metavar="A", help="a scored model (built-in spec or imported name)")
    p.add_argument("model_b", metavar="B", help="the model it is compared with")
    p.add_argument("--split", default="test", help="the split compared on (default: %(default)s)")
    p.add_argument("--bootstrap", type=int, default=0,
                   help="0: cluster-robust normal intervals; N: a paired clustered bootstrap of N replicates (default: %(default)s)")
    p.add_argument("--seed", type=int, default=BuildSettings.seed, help="bootstrap seed (default: %(default)s)")
    add_home(p)
    p.set_defaults(func=cmd_compare)

    site = sub.add_parser("site", help="the bundled demo quiz site")
    site_sub = site.add_subparsers(dest="site_command", required=True)
    for name, func in (("serve", cmd_site_serve), ("truth", cmd_site_truth)):
        p = site_sub.add_parser(name, help="serve the demo site" if name == "serve" else "write the site's ground truth")
        p.add_argument("--seed", type=int, default=0, help="seed of the generated site (default: %(default)s)")
        p.add_argument("--questions", type=int, default=BuildSettings.demo_questions, help="number of questions (default: %(default)s)")
        p.add_argument("--faults", action="store_true", help="serve with faults (default: off)")
        p.add_argument("--revision", type=int, default=0, help="site revision: later revisions change some pages (default: %(default)s)")
        if name == "serve":
            p.add_argument("--port", type=int, default=8765, help="port (default: %(default)s)")
            p.add_argument("--host", default="127.0.0.1", help="address (default: %(default)s)")
        else:
            p.add_argument("--out", required=True, help="the file to write the truth to (required)")
        p.set_defaults(func=func)

    p = sub.add_parser(
        "latex", help="convert formulas in stdin lines to LaTeX",
        description="Read lines from stdin and print each with its formulas in LaTeX, as the build's LaTeX "
        "stage converts question texts: plain-text maths (3 × 4, ½, x², ≤, 45°) becomes \\( ... \\), prose "
        "is left unchanged, TeX math already in the line is kept ($...$ written as \\( ... \\)).",
        epilog='example: echo "What is 3 × 4 ÷ ½? Is x² ≤ 45°?" | stemforge latex',
    )
    p.set_defaults(func=cmd_latex)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except CliError as exc:
        print(f"stemforge: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stemforge: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader closed the pipe (`stemforge sql ... | head`): stop quietly, and point stdout
        # at /dev/null so the interpreter's final flush does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell tool stopped by the closed pipe
    except OSError as exc:
        from pipelines.store.atomic import describe_os_error

        print(f"stemforge: error: {describe_os_error(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # the last line of defence: one line, never a bare traceback
        if os.environ.get("STEMFORGE_DEBUG"):
            raise
        message = str(exc).splitlines()[0] if str(exc) else ""
        print(f"stemforge: error: {type(exc).__name__}: {message} (set STEMFORGE_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1


def _clear_typing_caches() -> None:
    """At exit, drop typing's caches first: they keep DuckDB's nanobind objects alive until after
    nanobind checks for leaks, which then prints a wall of benign warnings on stderr (nanobind
    issue #19/#69), breaking the one-line error contract. Then the cycles still holding DuckDB
    objects (a failed query's exception chain and its frames) are collected, which the
    interpreter would otherwise leave to after the leak check."""
    import gc
    import typing

    for cleanup in getattr(typing, "_cleanups", ()):
        cleanup()
    gc.collect()


atexit.register(_clear_typing_caches)


if __name__ == "__main__":
    sys.exit(main())
