"""Paper-scale offline build: time and peak memory of every stage, against the DuckDB I/O floor.

    .venv/bin/python bench/paper_scale.py [--questions 1073146] [--home DIR] [--json OUT]

1. (untimed) writes a raw store for N demo questions with ``pipelines.ingest.demo_site.bulk``
   (an image pool per drawing kind; see that module for what it changes);
2. (timed) runs every offline stage in order in this process: filter, image index, dedup,
   LaTeX, shuffle, split, statistics, CogME tags, export, warehouse publish;
3. (timed) the I/O floor in the same run: DuckDB reads the raw store and writes Parquet of
   the same total size as the build's outputs;
4. (timed) a no-change rebuild, a rebuild after 1% of the raw rows changed, one after 20 new
   questions (``add_rows``) and one after 0.1% changed (edits, removals and additions:
   ``change_rows``), as ratios to the full build, with each stage's wall and CPU seconds and the
   rows it reused and computed; then the rewrite floor of the 0.1% rebuild (``rewrite_floor``);
5. (untimed; ``--no-scratch-check`` skips it) a build from scratch of the same input in a home
   beside this one, compared with the rebuilt home: every lake and export file byte for byte and
   every warehouse table's contents (``compare_homes``).

``--profile STAGE`` runs cProfile around one stage of the full build and prints its top functions.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import polars as pl  # noqa: E402

from pipelines.ingest.demo_site.bulk import default_image_pool, write_raw_store  # noqa: E402
from pipelines.ingest.demo_site.generator import PAPER_QUESTIONS  # noqa: E402
from pipelines.store.checksums import sha256_file  # noqa: E402
from pipelines.store.home import DataHome  # noqa: E402
from pipelines.store.lake import write_table  # noqa: E402
from pipelines.settings import BuildSettings  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def _pss_of(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):  # the worker has just exited
        pass
    return 0


def _children() -> list[str]:
    out = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                out += f.read().split()
        except OSError:
            continue
    return out


def _rss_of_self() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def rss_bytes() -> int:
    """Memory of this process plus its worker processes (some stages fork them). Alone, this
    process's RSS; with workers, the sum of their proportional set sizes: a page shared by
    several (a forked worker shares its parent's) is split among them, so the sum is the
    physical memory the build holds. Summing RSS instead would count every shared page once
    per worker."""
    children = _children()
    if not children:
        return _rss_of_self()
    return _pss_of("self") + sum(_pss_of(pid) for pid in children)


class PeakSampler:
    """Samples the memory of this process (RSS, every ``interval`` seconds) and, while it has
    worker processes, of it and its workers (``rss_bytes``, every ``tree_interval``: reading
    PSS walks page tables: ~20 ms for 2 GiB, too slow to do every 20 ms); ``peak`` since the
    last reset."""

    def __init__(self, interval: float = 0.02, tree_interval: float = 1.0):
        self.interval = interval
        self.tree_every = max(1, round(tree_interval / interval))
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        tick = 0
        while not self._stop.is_set():
            own = _rss_of_self()
            self.peak = max(self.peak, own if tick % self.tree_every else max(own, rss_bytes()))
            tick += 1
            time.sleep(self.interval)

    def reset(self) -> None:
        self.peak = rss_bytes()

    def stop(self) -> None:
        self._stop.set()


def stage_list(home: DataHome, settings: BuildSettings):
    from pipelines.clean import stage as clean_stage
    from pipelines.dataset import stage as dataset_stage
    from pipelines.profiles.stage import tag_stage
    from pipelines.store.integrity import check_before_build
    from pipelines.store.warehouse import publish_warehouse

    return [
        # what `stemforge build` does first: every byte of the lake and the warehouse against its checksum
        ("integrity", lambda: {"damaged": len(check_before_build(home, log=print))}),
        ("filter", lambda: clean_stage.filter_stage(home)),
        ("image_index", lambda: clean_stage.image_index_stage(home)),
        ("dedup", lambda: clean_stage.dedup_stage(home, settings)),
        ("latex", lambda: clean_stage.latex_stage(home)),
        ("shuffle", lambda: dataset_stage.shuffle_stage(home, settings)),
        ("split", lambda: dataset_stage.split_stage(home, settings)),
        ("statistics", lambda: (dataset_stage.statistics_figures(home), dataset_stage.statistics_stage(home))[0]),
        ("tags", lambda: tag_stage(home, settings)[1]),
        ("export", lambda: dataset_stage.export_stage(home, settings)),
        ("warehouse", lambda: publish_warehouse(home)),
    ]


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished worker processes (user + system)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime


def _rows(result) -> tuple[int | None, int | None]:
    """(rows reused, rows computed) a stage's figures report, if it reports them."""
    figures = result if isinstance(result, dict) else getattr(result, "figures", None) or {}
    if figures.get("skipped"):
        return None, None
    return figures.get("rows_reused"), figures.get("rows_computed")


def run_build(home: DataHome, settings: BuildSettings, sampler: PeakSampler, label: str, profile: str = "") -> dict:
    rows = []
    total_start, total_cpu = time.perf_counter(), _cpu_seconds()
    for name, fn in stage_list(home, settings):
        sampler.reset()
        start, cpu = time.perf_counter(), _cpu_seconds()
        if name == profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            result = prof.runcall(fn)
            pstats.Stats(prof).sort_stats(os.environ.get("PSORT", "cumulative")).print_stats(25)
        else:
            result = fn()
        seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
        skipped = bool(getattr(result, "skipped", False) or (isinstance(result, dict) and result.get("skipped")))
        why = result.get("rebuilt_because", "") if isinstance(result, dict) else ""
        reused, computed = _rows(result)
        figures = result if isinstance(result, dict) else {}
        shards = (figures["shards_kept"], figures["shards_written"]) if "shards_written" in figures else None
        verdicts = (figures["picture_verdicts_computed"], figures["picture_verdicts"]) \
            if "picture_verdicts_computed" in figures and not skipped else None
        rows.append({"stage": name, "seconds": seconds, "cpu_seconds": cpu, "peak_rss": sampler.peak,
                     "skipped": skipped, "why": why, "rows_reused": reused, "rows_computed": computed,
                     "shards_kept_written": shards, "verdicts_computed_of": verdicts})
        counts = f"  rows reused {reused:>9,} computed {computed:>9,}" if reused is not None else ""
        if shards and not skipped:
            counts = f"  shards kept {shards[0]:>9,} written {shards[1]:>9,}"
        if verdicts:
            counts += f"  picture verdicts computed {verdicts[0]:,} of {verdicts[1]:,}"
        print(f"  {label:10s} {name:12s} {seconds:9.2f} s  cpu {cpu:8.2f} s  peak mem {sampler.peak / 2**30:6.2f} GiB"
              f"{'  (skipped)' if skipped else ''}{counts}{'  [' + why + ']' if why and label != 'full' else ''}",
              flush=True)
    total, total_cpu = time.perf_counter() - total_start, _cpu_seconds() - total_cpu
    print(f"  {label:10s} {'TOTAL':12s} {total:9.2f} s  cpu {total_cpu:8.2f} s", flush=True)
    return {"stages": rows, "seconds": total, "cpu_seconds": total_cpu, "peak_rss": max(r["peak_rss"] for r in rows)}


def output_files(home: DataHome) -> list[Path]:
    """Everything the build wrote: lake tables (not the raw store), export and warehouse."""
    out = [p for p in home.lake.rglob("*.parquet") if "raw_questions" not in p.parts]
    out += [p for p in home.export.parent.rglob("*") if p.is_file()]
    if home.warehouse.exists():
        out.append(home.warehouse)
    return out


def io_floor(home: DataHome, output_bytes: int, scratch: Path) -> dict:
    """DuckDB reading the raw store, then writing ``output_bytes`` of Parquet.

    The build's outputs are mostly image bytes (the export embeds every picture), so the
    floor writes what they are made of: the raw table once, then the image store's files as
    a BLOB column (``read_blob``), pass after pass, until the total reaches ``output_bytes``.
    Each file is removed once measured; the last pass is scaled to the exact byte count.
    """
    scratch.mkdir(parents=True, exist_ok=True)
    raw_glob = str(home.lake / "raw_questions" / "*.parquet")
    image_glob = str(home.images / "*" / "*.*")
    con = duckdb.connect()
    con.execute("SET memory_limit = '4GB'")
    start = time.perf_counter()
    con.execute(f"CREATE TEMP TABLE raw AS SELECT * FROM read_parquet('{raw_glob}')")
    read_seconds = time.perf_counter() - start
    start = time.perf_counter()
    con.execute(f"CREATE TEMP TABLE blobs AS SELECT filename, content FROM read_blob('{image_glob}')")
    blob_read_seconds = time.perf_counter() - start
    written, passes, write_seconds = 0, 0, 0.0
    while written < output_bytes:
        target = scratch / f"floor-{passes}.parquet"
        query = "raw" if passes == 0 else "blobs"
        start = time.perf_counter()
        con.execute(f"COPY {query} TO '{target}' (FORMAT parquet, COMPRESSION zstd)")
        seconds = time.perf_counter() - start
        size = target.stat().st_size
        target.unlink()
        if size == 0:
            break
        if written + size > output_bytes:
            seconds *= (output_bytes - written) / size
            size = output_bytes - written
        written += size
        write_seconds += seconds
        passes += 1
    con.close()
    shutil.rmtree(scratch, ignore_errors=True)
    # the floor is reading the raw store and writing; loading the picture bytes to write is not counted
    return {"read_seconds": read_seconds, "write_seconds": write_seconds, "seconds": read_seconds + write_seconds,
            "blob_read_seconds": blob_read_seconds,
            "output_bytes": output_bytes, "written_bytes": written, "passes": passes}


# lake/state holds run bookkeeping (stage fingerprints, row memos, dedup graphs, the export shard
# record): not outputs. The split ledger there is the dataset's memory: compared, and a build from
# scratch starts from the ledger the rebuild started from (as tests/end_to_end/test_incremental_equivalence.py).
STATE = "lake/state/"
LEDGER = "lake/state/split_ledger.parquet"
RAW = "lake/raw_questions/"


def compared_files(root: Path) -> dict[str, Path]:
    """The files a rebuild and a build from scratch must write byte for byte: every file of the
    lake and the export, except the raw store (the input), lake/state but the split ledger, and
    hidden files (the previous export kept for rollback)."""
    found = {}
    for top in ("lake", "export"):
        for path in sorted((root / top).rglob("*")):
            rel = path.relative_to(root)
            name = rel.as_posix()
            if (not path.is_file() or any(part.startswith(".") for part in rel.parts) or name.startswith(RAW)
                    or (name.startswith(STATE) and not name.startswith(LEDGER))):
                continue
            found[name] = path
    return found


def _same_bytes(a: Path, b: Path) -> bool:
    return a.stat().st_size == b.stat().st_size and sha256_file(a) == sha256_file(b)


def warehouse_differences(a: Path, b: Path) -> tuple[int, list[str]]:
    """(tables, names of those that differ) between two warehouse files. The file itself is not
    byte-stable, so, as the demo-scale test does, what is compared is its contents: the list of
    tables, each table's columns and its rows as a multiset (EXCEPT ALL both ways, in DuckDB:
    paper-scale tables do not fit in Python lists twice), and the views' SQL."""
    con = duckdb.connect()
    con.execute("SET memory_limit = '2GB'")
    try:
        con.execute(f"ATTACH '{a}' AS rebuilt (READ_ONLY)")
        con.execute(f"ATTACH '{b}' AS scratch (READ_ONLY)")

        def tables(db: str) -> set[tuple[str, str]]:
            return set(con.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ?",
                                   [db]).fetchall())

        def views(db: str) -> list:
            return con.execute("SELECT schema_name, view_name, sql FROM duckdb_views() "
                               "WHERE NOT internal AND database_name = ? ORDER BY ALL", [db]).fetchall()

        ours, theirs = tables("rebuilt"), tables("scratch")
        differing = [f"{s}.{t} (in one warehouse only)" for s, t in sorted(ours ^ theirs)]
        for schema, table in sorted(ours & theirs):
            a_name, b_name = f'rebuilt."{schema}"."{table}"', f'scratch."{schema}"."{table}"'
            same = con.execute(f"DESCRIBE {a_name}").fetchall() == con.execute(f"DESCRIBE {b_name}").fetchall()
            same = same and all(con.execute(f"SELECT count(*) FROM (SELECT * FROM {x} EXCEPT ALL SELECT * FROM {y})"
                                            ).fetchone()[0] == 0 for x, y in ((a_name, b_name), (b_name, a_name)))
            if not same:
                differing.append(f"{schema}.{table}")
        if views("rebuilt") != views("scratch"):
            differing.append("(views)")
        return len(ours | theirs), differing
    finally:
        con.close()


def compare_homes(rebuilt: Path, scratch: Path) -> dict:
    """A rebuilt home against a home built from scratch: which output files and warehouse tables differ."""
    ours, theirs = compared_files(rebuilt), compared_files(scratch)
    differing = [f"{name} (in one home only)" for name in sorted(set(ours) ^ set(theirs))]
    differing += [name for name in sorted(set(ours) & set(theirs)) if not _same_bytes(ours[name], theirs[name])]
    tables, differing_tables = warehouse_differences(rebuilt / "warehouse.duckdb", scratch / "warehouse.duckdb")
    return {"identical": not differing and not differing_tables, "files": len(set(ours) | set(theirs)),
            "tables": tables, "differing_files": differing, "differing_tables": differing_tables}


def start_scratch_home(home: DataHome) -> DataHome:
    """A fresh home beside ``home`` holding the split ledger ``home`` has now (call it right before
    the rebuild that is to be checked)."""
    scratch = DataHome(home.root.parent / f"{home.root.name}-scratch")
    shutil.rmtree(scratch.root, ignore_errors=True)
    state = scratch.lake / "state"
    state.mkdir(parents=True)
    for path in (home.lake / "state").glob("split_ledger.parquet*"):
        shutil.copy2(path, state / path.name)
    return scratch


def scratch_check(home: DataHome, scratch: DataHome) -> dict:
    """Build ``scratch`` from ``home``'s raw store (copied) and image store (linked) and compare its
    outputs with ``home``'s. The build runs in a new process, as a build from scratch would: nothing
    this process holds (memos, its hash seed) can make the two agree."""
    shutil.copytree(home.lake / "raw_questions", scratch.lake / "raw_questions")
    scratch.images.symlink_to(home.images, target_is_directory=True)
    print("build from scratch, in a new process (untimed for the goals):", flush=True)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import paper_scale as ps; "
            "home = ps.DataHome(ps.Path(sys.argv[2])); "
            "ps.run_build(home, ps.BuildSettings(home=sys.argv[2]), ps.PeakSampler(), 'scratch')")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(ROOT / "bench"), str(scratch.root)], check=True, cwd=ROOT)
    build_seconds = time.perf_counter() - start
    start = time.perf_counter()
    result = compare_homes(home.root, scratch.root)
    result["build_seconds"] = build_seconds
    result["compare_seconds"] = time.perf_counter() - start
    return result


def scratch_verdict(result: dict, show: int = 10) -> str:
    if result["identical"]:
        return f"rebuild vs scratch: identical ({result['files']} files, {result['tables']} tables)"
    files, tables = result["differing_files"], result["differing_tables"]
    listed = (files + tables)[:show]
    return (f"rebuild vs scratch: DIFFERENT ({len(files)} of {result['files']} files, {len(tables)} of "
            f"{result['tables']} tables differ); first: " + ", ".join(listed))


def file_identities(root: Path) -> dict[str, tuple[int, int, int]]:
    """(inode, size, mtime_ns) of every compared output file (``compared_files``) of a home: outputs
    are written to a temporary file and renamed into place, so a rewritten file has a new inode."""
    return {name: (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            for name, stat in ((name, path.stat()) for name, path in compared_files(root).items())}


def rewritten_files(before: dict, after: dict) -> list[str]:
    """The output files a rebuild wrote: new, or not the file it was before."""
    return sorted(name for name, identity in after.items() if before.get(name) != identity)


def rewrite_floor(root: Path, rewritten: list[str], scratch: Path) -> dict:
    """The least a rebuild that writes ``rewritten`` again, byte for byte, has to spend on them: each
    lake table read and written by the lake's own writer (``write_table``: what a stage does with a
    table it has in memory, nothing computed), each other file (the export's shards, checksums)
    copied by the kernel (``shutil.copyfile``: no encoding, no hashing). A change spread over the
    set rewrites every lake table and every shard, however few rows it touched."""
    import pyarrow.parquet as pq

    scratch.mkdir(parents=True, exist_ok=True)
    lake_seconds = copy_seconds = 0.0
    lake_bytes = copy_bytes = 0
    try:
        for number, name in enumerate(rewritten):
            source, target = root / name, scratch / f"{number}{Path(name).suffix}"
            start = time.perf_counter()
            if name.startswith("lake/") and name.endswith(".parquet"):
                write_table(pq.read_table(source), target)
                lake_seconds += time.perf_counter() - start
                lake_bytes += source.stat().st_size
            else:
                shutil.copyfile(source, target)
                copy_seconds += time.perf_counter() - start
                copy_bytes += source.stat().st_size
            target.unlink()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"files": len(rewritten), "lake_seconds": lake_seconds, "lake_bytes": lake_bytes,
            "copy_seconds": copy_seconds, "copy_bytes": copy_bytes, "seconds": lake_seconds + copy_seconds}


def change_rows(home: DataHome, fraction: float, seed: int) -> dict:
    """Change ``fraction`` of the raw rows the way a crawled site changes: of the changed rows,
    8 in 10 are edited in place (a number in the problem changed, a word inserted mid-sentence,
    or an option's text edited, in turn), 1 in 10 is removed and 1 in 10 is a new question (a
    new page: the pictures, subject and skill of one existing question with the problem text of
    another of the same skill, a number changed). Rows are drawn by a seeded generator.

    (Until 2026-11-23 the 1% change appended " (revised)" to every 100th problem: the same
    number of changed rows, edits only.)"""
    import numpy as np

    path = home.lake / "raw_questions" / "demo.parquet"
    raw = pl.read_parquet(path)
    rng = np.random.default_rng(seed)
    total = max(10, round(raw.height * fraction))
    removed_n = added_n = total // 10
    edited_n = total - removed_n - added_n
    picked = rng.choice(raw.height, size=edited_n + removed_n, replace=False)
    edited, removed = np.sort(picked[:edited_n]), picked[edited_n:]
    mode = pl.Series("mode", np.zeros(raw.height, dtype=np.int8))
    mode[edited] = (np.arange(edited_n) % 3 + 1).astype(np.int8)
    # a number changed (or a word added where there is none); a word inserted; an option edited
    number_edit = pl.when(pl.col("problem").str.contains(r"\d")).then(
        pl.col("problem").str.replace(r"(\d+)", "${1}7")).otherwise("Now: " + pl.col("problem"))
    word_edit = pl.col("problem").str.replace(" ", " really ", literal=True)
    option_edit = pl.col("choices").list.eval(
        pl.when(pl.int_range(pl.len()) == 0).then(pl.element() + " only").otherwise(pl.element()))
    changed = raw.with_columns(mode).with_columns(
        pl.when(pl.col("mode") == 1).then(number_edit)
        .when(pl.col("mode") == 2).then(word_edit)
        .when((pl.col("mode") == 3) & pl.col("choices").is_null()).then(pl.col("problem") + " Explain.")
        .otherwise(pl.col("problem")).alias("problem"),
        pl.when((pl.col("mode") == 3) & pl.col("choices").is_not_null()).then(option_edit)
        .otherwise(pl.col("choices")).alias("choices"),
    ).drop("mode")
    keep = np.ones(raw.height, dtype=bool)
    keep[removed] = False
    changed = changed.filter(pl.Series(keep))
    out = pl.concat([changed, _new_questions(raw, added_n, rng, seed)]).sort("source", "source_key")
    write_table(out, path)
    return {"rows": raw.height, "edited": edited_n, "removed": removed_n, "added": added_n, "changed": total}


def _new_questions(raw: pl.DataFrame, count: int, rng, seed: int) -> pl.DataFrame:
    """``count`` new pages: the pictures, subject and skill of an existing question with the problem
    text of another of the same skill, a number changed."""
    donors = raw[rng.choice(raw.height, size=count, replace=False).tolist()]
    texts = raw.select("skill", "problem").sample(fraction=1.0, shuffle=True, seed=seed).group_by(
        "skill", maintain_order=True).agg(pl.col("problem").last().alias("other_problem"))
    return donors.join(texts, on="skill", how="left", maintain_order="left").with_columns(
        (pl.col("source_key") + "?rev=" + str(seed) + "-" + pl.int_range(pl.len()).cast(pl.String)).alias("source_key"),
        pl.coalesce("other_problem", "problem").str.replace(r"(\d+)", "${1}3").alias("problem"),
    ).select(raw.columns)


def add_rows(home: DataHome, count: int, seed: int) -> dict:
    """A site that only grew: ``count`` new questions (``_new_questions``), nothing edited or removed."""
    import numpy as np

    path = home.lake / "raw_questions" / "demo.parquet"
    raw = pl.read_parquet(path)
    added = _new_questions(raw, count, np.random.default_rng(seed), seed)
    write_table(pl.concat([raw, added]).sort("source", "source_key"), path)
    return {"rows": raw.height, "edited": 0, "removed": 0, "added": count, "changed": count}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=PAPER_QUESTIONS)
    ap.add_argument("--home", default="", help="data home (default: a fresh folder under /tmp)")
    ap.add_argument("--image-pool", type=int, default=None, help="drawings per kind (0: render every image)")
    ap.add_argument("--keep-input", action="store_true", help="reuse the raw store already in --home")
    ap.add_argument("--no-incremental", action="store_true")
    ap.add_argument("--no-scratch-check", action="store_true",
                    help="skip the build from scratch that the rebuilt outputs are compared with")
    ap.add_argument("--profile", default="", help="cProfile this stage of the full build")
    ap.add_argument("--verdicts", default="", help="a folder of picture verdicts (lake/state/verdicts parts) kept "
                    "between runs: copied into the home before the full build and back after it, so only a first run "
                    "pays the verdicts (CPU-hours at paper scale); their code generation decides which are read")
    ap.add_argument("--json", default="", help="write the figures here")
    args = ap.parse_args(argv)

    home_path = Path(args.home or f"/tmp/stemforge-paper-{args.questions}")
    home = DataHome(home_path.resolve())
    pool = default_image_pool(args.questions) if args.image_pool is None else args.image_pool
    figures: dict = {"questions": args.questions, "image_pool": pool, "home": str(home.root)}
    if not (args.keep_input and (home.lake / "raw_questions" / "demo.parquet").exists()):
        shutil.rmtree(home.root, ignore_errors=True)
        start = time.perf_counter()
        bulk = write_raw_store(home.root, args.questions, image_pool=pool)
        figures["input"] = {"seconds": time.perf_counter() - start, "rows": bulk.questions,
                            "images": bulk.images_written, "pool_drawings": bulk.pool_drawings}
        print(f"input (untimed): {bulk.questions} raw rows, {bulk.images_written} images, "
              f"{figures['input']['seconds']:.1f} s", flush=True)
    else:
        for name in ("lake", "export", "warehouse.duckdb"):
            target = home.root / name
            if name == "lake":
                for child in target.iterdir():
                    if child.name != "raw_questions":
                        shutil.rmtree(child) if child.is_dir() else child.unlink()
            elif target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    settings = BuildSettings(home=str(home.root))
    sampler = PeakSampler()
    verdict_parts = home.lake / "state" / "verdicts"
    if args.verdicts and Path(args.verdicts).is_dir():
        shutil.rmtree(verdict_parts, ignore_errors=True)
        shutil.copytree(args.verdicts, verdict_parts)
    print("full build:", flush=True)
    full = run_build(home, settings, sampler, "full", args.profile)
    if args.verdicts:
        shutil.rmtree(args.verdicts, ignore_errors=True)
        shutil.copytree(verdict_parts, args.verdicts)
    full["max_rss_process"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    files = output_files(home)
    out_bytes = sum(p.stat().st_size for p in files)
    raw_bytes = sum(p.stat().st_size for p in (home.lake / "raw_questions").glob("*.parquet"))
    figures["full"] = full
    figures["output_bytes"] = out_bytes
    figures["raw_bytes"] = raw_bytes
    save = (lambda: Path(args.json).write_text(json.dumps(figures, indent=1, default=str))) if args.json else (lambda: None)
    save()
    floor = io_floor(home, out_bytes, home.root / "floor-scratch")
    figures["floor"] = floor
    figures["build_over_floor"] = full["seconds"] / floor["seconds"]
    print(f"I/O floor: read raw {raw_bytes / 2**20:.0f} MiB in {floor['read_seconds']:.2f} s, "
          f"write {out_bytes / 2**20:.0f} MiB in {floor['write_seconds']:.2f} s; "
          f"build / floor = {figures['build_over_floor']:.1f}x", flush=True)
    save()
    if not args.no_incremental:
        print("no-change rebuild:", flush=True)
        nochange = run_build(home, settings, sampler, "no-change")
        figures["nochange"] = nochange
        figures["nochange_ratio"] = nochange["seconds"] / full["seconds"]
        save()
        scratch = None
        # 1% and 0.1% of the rows edited, removed and added over the whole set; between them, a site
        # that only grew by 20 questions (the export keeps the shards they do not fall in)
        for label, key, fraction, seed in (("1%-change", "onepct", 0.01, 1), ("20-new", "added", 20, 3),
                                           ("0.1%-change", "tenthpct", 0.001, 2)):
            if key == "tenthpct" and not args.no_scratch_check:
                scratch = start_scratch_home(home)
            changes = add_rows(home, fraction, seed) if key == "added" else change_rows(home, fraction, seed)
            print(f"{label} rebuild ({changes['changed']} of {changes['rows']} raw rows: {changes['edited']} edited, "
                  f"{changes['removed']} removed, {changes['added']} added):", flush=True)
            before = file_identities(home.root)
            result = run_build(home, settings, sampler, label)
            result["rewritten"] = rewritten_files(before, file_identities(home.root))
            result["changes"] = changes
            result["ratio"] = result["seconds"] / full["seconds"]
            result["cpu_ratio"] = result["cpu_seconds"] / full["cpu_seconds"]
            for row, full_row in zip(result["stages"], full["stages"]):
                row["ratio"] = row["seconds"] / full_row["seconds"] if full_row["seconds"] else None
            figures[key] = result
            figures[f"{key}_rows"] = changes["changed"]
            figures[f"{key}_ratio"] = result["ratio"]
            save()
        # what the smallest change's rewrites cost at the least: the floor under both rebuild goals
        rewrite = rewrite_floor(home.root, figures["tenthpct"]["rewritten"], home.root / "floor-scratch")
        rewrite["ratio"] = rewrite["seconds"] / full["seconds"]
        figures["rewrite_floor"] = rewrite
        print(f"rewrite floor of the 0.1% rebuild ({rewrite['files']} files it rewrote): lake tables "
              f"{rewrite['lake_bytes'] / 2**20:.0f} MiB read and written {rewrite['lake_seconds']:.1f} s, other files "
              f"{rewrite['copy_bytes'] / 2**20:.0f} MiB copied {rewrite['copy_seconds']:.1f} s; "
              f"{100 * rewrite['ratio']:.1f}% of the full build", flush=True)
        save()
        print(f"no-change / full = {figures['nochange_ratio']:.3f}; 1% change / full = {figures['onepct_ratio']:.3f} "
              f"(cpu {figures['onepct']['cpu_ratio']:.3f}; goal <= 0.10); 0.1% change / full = "
              f"{figures['tenthpct_ratio']:.3f} (cpu {figures['tenthpct']['cpu_ratio']:.3f}; goal <= 0.03)")
        if scratch is not None:
            figures["scratch"] = {"identical": None, "error": "the build from scratch or the comparison did not finish"}
            save()
            try:
                figures["scratch"] = scratch_check(home, scratch)
            finally:
                shutil.rmtree(scratch.root, ignore_errors=True)
            print(f"build from scratch: {figures['scratch']['build_seconds']:.1f} s wall (process start included); "
                  f"compared in {figures['scratch']['compare_seconds']:.1f} s")
            print(scratch_verdict(figures["scratch"]), flush=True)
            save()
    sampler.stop()
    print(f"peak memory of the full build, its worker processes included (PSS): {full['peak_rss'] / 2**30:.2f} GiB "
          f"(peak RSS of the build process alone, ru_maxrss: {full['max_rss_process'] / 2**30:.2f} GiB)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1, default=str))
    return figures


if __name__ == "__main__":
    main()
