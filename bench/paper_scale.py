"""Paper-scale offline build: time and peak memory of every stage, against the DuckDB I/O floor.

    .venv/bin/python bench/paper_scale.py [--questions 1073146] [--home DIR] [--json OUT]

1. (untimed) writes a raw store for N demo questions with ``pipelines.ingest.demo_site.bulk``
   (an image pool per drawing kind; see that module for what it changes);
2. (timed) runs every offline stage in order in this process: filter, image index, dedup,
   LaTeX, shuffle, split, statistics, CogME tags, export, warehouse publish;
3. (timed) the I/O floor in the same run: DuckDB reads the raw store and writes Parquet of
   the same total size as the build's outputs;
4. (timed) a no-change rebuild and a rebuild after 1% of the raw rows changed (problem text
   rewritten), as ratios to the full build.

``--profile STAGE`` runs cProfile around one stage of the full build and prints its top functions.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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
    from pipelines.store.warehouse import publish_warehouse

    return [
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


def run_build(home: DataHome, settings: BuildSettings, sampler: PeakSampler, label: str, profile: str = "") -> dict:
    rows = []
    total_start = time.perf_counter()
    for name, fn in stage_list(home, settings):
        sampler.reset()
        start = time.perf_counter()
        if name == profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            result = prof.runcall(fn)
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        else:
            result = fn()
        seconds = time.perf_counter() - start
        skipped = bool(getattr(result, "skipped", False) or (isinstance(result, dict) and result.get("skipped")))
        why = result.get("rebuilt_because", "") if isinstance(result, dict) else ""
        rows.append({"stage": name, "seconds": seconds, "peak_rss": sampler.peak, "skipped": skipped, "why": why})
        print(f"  {label:10s} {name:12s} {seconds:9.2f} s  peak mem {sampler.peak / 2**30:6.2f} GiB"
              f"{'  (skipped)' if skipped else ''}{'  [' + why + ']' if why and label != 'full' else ''}", flush=True)
    total = time.perf_counter() - total_start
    print(f"  {label:10s} {'TOTAL':12s} {total:9.2f} s", flush=True)
    return {"stages": rows, "seconds": total, "peak_rss": max(r["peak_rss"] for r in rows)}


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


def change_one_percent(home: DataHome) -> int:
    """Rewrite the problem text of 1% of the raw rows (every 100th row); returns how many."""
    path = home.lake / "raw_questions" / "demo.parquet"
    raw = pl.read_parquet(path)
    changed = pl.arange(0, raw.height, eager=True) % 100 == 0
    raw = raw.with_columns(
        pl.when(changed).then(pl.col("problem") + " (revised)").otherwise(pl.col("problem")).alias("problem")
    )
    write_table(raw, path)
    return int(changed.sum())


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=PAPER_QUESTIONS)
    ap.add_argument("--home", default="", help="data home (default: a fresh folder under /tmp)")
    ap.add_argument("--image-pool", type=int, default=None, help="drawings per kind (0: render every image)")
    ap.add_argument("--keep-input", action="store_true", help="reuse the raw store already in --home")
    ap.add_argument("--no-incremental", action="store_true")
    ap.add_argument("--profile", default="", help="cProfile this stage of the full build")
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
    print("full build:", flush=True)
    full = run_build(home, settings, sampler, "full", args.profile)
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
        changed = change_one_percent(home)
        print(f"1% changed rebuild ({changed} raw rows rewritten):", flush=True)
        onepct = run_build(home, settings, sampler, "1%-change")
        figures["onepct"] = onepct
        figures["onepct_rows"] = changed
        figures["onepct_ratio"] = onepct["seconds"] / full["seconds"]
        print(f"no-change / full = {figures['nochange_ratio']:.3f}; 1% change / full = {figures['onepct_ratio']:.3f}")
    sampler.stop()
    print(f"peak memory of the full build, its worker processes included (PSS): {full['peak_rss'] / 2**30:.2f} GiB "
          f"(peak RSS of the build process alone, ru_maxrss: {full['max_rss_process'] / 2**30:.2f} GiB)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1, default=str))
    return figures


if __name__ == "__main__":
    main()
