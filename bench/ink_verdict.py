"""The picture verdict (``pipelines.clean.dedup.ink``) on pairs made from real figures.

Takes figures from the real corpora in ``../shared/corpora`` (every png/jpg of wemath/data,
gaokao-mm/Data, scemqa/Multiple_Choice, opendsa-html/Exercises; a seeded sample), makes a pair
of each class from each figure and prints, per class, how many pairs the verdict calls the same
picture, and the cost per pair:

copies (should be same): jpeg (re-encoded at quality 60-90), resize (70%), rescan (grey, tinted
paper, a 0.6 degree turn, noise, wider margins, slight blur, JPEG), margins (margins cut to the
ink or widened), tone (another tone curve: gamma 0.7 or 1.4 on every channel);
different (should not be): label (one label, "75°", "x = 3", "4 cm", ..., drawn in the ink's
colour at the height of the figure's own text, where the figure has paper), relabel (the figure
with one label and with another of the same size at the same place: "x = 3" / "x = 5", "45°" /
"60°", "2 cm" / "2 in.", ...), nearest (the nearest
other figure of the sample by 64-bit average hash), frame (two different figures pasted in the
same frame beside a shared one, with a title).

    .venv/bin/python bench/ink_verdict.py [--figures 120] [--seed 0] [--show-misses] [--descriptors] [--filled] [--small]

``--filled`` takes only mostly filled figures (photos, grids of filled cells, dark pages; ink over
30% of the page), which the verdict, made for line drawings, judges less well. ``--small`` takes
only small figures (under 130 px, the geometric mean of width and height: 115 of the corpora's),
whose resized and re-scanned copies lose detail finer than their own pixel.

``--descriptors`` judges the same pairs by the image descriptors alone (``image_match``'s rule,
what dedup decided before the picture verdict) instead.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from pipelines.clean.dedup.image_match import ImageIndex, ImageMatcher  # noqa: E402
from pipelines.clean.dedup.ink import InkVerdict, compare_pictures  # noqa: E402
from pipelines.clean.dedup.phash import describe_bytes  # noqa: E402


def descriptors_verdict(a: bytes, b: bytes) -> InkVerdict:
    """The descriptors' rule on two pictures (dedup without the picture verdict)."""
    phash, thumbnail, content = {}, {}, {}
    for name, data in (("a", a), ("b", b)):
        d = describe_bytes(data)
        phash[name], thumbnail[name] = int(d.phash[0]), d.thumbnail[0].tobytes()
        content[name] = (int(d.content_phash[0]), d.content_thumbnail[0].tobytes(),
                         tuple(int(v) for v in d.content_box[0]), d.colours[0].tobytes())
    evidence = ImageMatcher(ImageIndex(phash, thumbnail, content)).distance("a", "b")
    return InkVerdict(evidence is not None, "descriptors", evidence or {})
from support.picture_pairs import COPIES, DIFFERENT, make_pairs, real_figures  # noqa: E402

def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--figures", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument("--classes", default=",".join(COPIES + DIFFERENT))
    parser.add_argument("--descriptors", action="store_true", help="judge by the descriptors alone (before)")
    parser.add_argument("--filled", action="store_true", help="only mostly filled figures (photos, filled grids)")
    parser.add_argument("--small", action="store_true", help="only small figures (under 130 px)")
    args = parser.parse_args()
    wanted = set(args.classes.split(","))
    paths = real_figures(args.figures, args.seed, only_filled=args.filled, only_small=args.small)
    same = defaultdict(int)
    total = defaultdict(int)
    seconds = cpu = 0.0
    judged = 0
    costs = []
    for kind, name, a, b in make_pairs(paths, args.seed):
        if kind not in wanted:
            continue
        started, started_cpu = time.perf_counter(), time.process_time()
        verdict = descriptors_verdict(a, b) if args.descriptors else compare_pictures(a, b)
        seconds += time.perf_counter() - started
        cpu += time.process_time() - started_cpu
        costs.append(time.process_time() - started_cpu)
        judged += 1
        total[kind] += 1
        same[kind] += verdict.same
        should = kind in COPIES
        if args.show_misses and verdict.same != should:
            print(f"  miss {kind:8s} {name}: {verdict.kind} {verdict.measure}")
    print(f"{len(paths)} real {'mostly filled ' if args.filled else ''}{'small ' if args.small else ''}figures, seed {args.seed}, judged by "
          f"{'the descriptors alone' if args.descriptors else 'the picture verdict'}")
    for kind in COPIES + DIFFERENT:
        if total[kind]:
            goal = "copies, want all" if kind in COPIES else "different, want none"
            print(f"{kind:8s} same {same[kind]:4d} / {total[kind]:4d}  ({goal})")
    costs.sort()
    if not costs:
        return
    print(f"cost per pair (decode and normalize both, align, compare): {1000 * cpu / max(judged, 1):.1f} ms CPU "
          f"(median {1000 * costs[len(costs) // 2]:.1f}, 95th percentile {1000 * costs[int(0.95 * len(costs))]:.1f}), "
          f"{1000 * seconds / max(judged, 1):.1f} ms wall")


if __name__ == "__main__":
    main()
