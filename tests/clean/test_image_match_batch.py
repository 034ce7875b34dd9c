"""The compiled batch judgement of image pairs (``ImageMatcher.near_many`` / ``judge``) against the
rule written pair by pair (``ImageMatcher._distance``), on real corpus pictures and on drawn pages
with their re-encodings, re-scans, crops, margins and colour variants."""

from __future__ import annotations

import io
from collections import Counter
from itertools import combinations

import numpy as np
import polars as pl
import pytest
from PIL import Image, ImageDraw

from pipelines.clean.dedup import ImageIndex, ImageMatcher, describe_bytes
from pipelines.clean.dedup.image_match import _SHIFT, _UP_SCALE, _UP_SCALED, aligned_distance
from pipelines.ingest.demo_site.drawing import rescan
from support.corpora import CORPORA

CORPUS_PICTURES = (
    "scemqa/Multiple_Choice/Chemistry/26.jpg",
    "scemqa/Multiple_Choice/Math/29.jpg",
    "scemqa/Multiple_Choice/Biology/102.jpg",
    "scemqa/Multiple_Choice/Math/16.png",
    "gaokao-mm/Data/2010-2023_Biology_MCQs/2010-2023_Biology_MCQs_0_0.png",
    "gaokao-mm/Data/2010-2023_Chemistry_MCQs/2010-2023_Chemistry_MCQs_60_0.png",
)


def _encode(im: Image.Image, fmt: str, **kw) -> bytes:
    out = io.BytesIO()
    im.save(out, format=fmt, **kw)
    return out.getvalue()


def _page(colour=(46, 160, 67), at=(60, 40), seed=0, size=(240, 200)) -> Image.Image:
    rng = np.random.default_rng(seed)
    im = Image.new("RGB", size, (250, 248, 240))
    d = ImageDraw.Draw(im)
    x, y = at
    d.rectangle([x, y, x + 110, y + 110], fill=colour, outline=(30, 30, 30), width=3)
    for k in range(4):
        d.ellipse([x + 10 + 25 * k, y + 8, x + 22 + 25 * k, y + 20], fill=(255, 255, 255), outline=(30, 30, 30))
    for _ in range(3):
        px, py, qx, qy = (int(v) for v in rng.integers(10, 100, 4))
        d.line([x + px, y + py, x + qx, y + qy], fill=(30, 30, 30), width=4)
    return im


def _pictures() -> dict[str, bytes]:
    pictures = {}
    for path in CORPUS_PICTURES:
        data = (CORPORA / path).read_bytes()
        pictures[path] = data
        with Image.open(io.BytesIO(data)) as im:
            rgb = im.convert("RGB")
        pictures[path + ":jpeg"] = _encode(rgb, "JPEG", quality=70)
        pictures[path + ":half"] = _encode(rgb.resize((max(8, rgb.width // 2), max(8, rgb.height // 2))), "PNG")
        pictures[path + ":rescan"] = _encode(rescan(rgb, 1), "JPEG", quality=72)
    for seed in range(4):
        page = _page(seed=seed)
        pictures[f"page{seed}"] = _encode(page, "PNG")
        pictures[f"page{seed}:jpeg"] = _encode(page, "JPEG", quality=75)
        pictures[f"page{seed}:moved"] = _encode(_page(seed=seed, at=(66, 44)), "PNG")
        pictures[f"page{seed}:teal"] = _encode(_page((20, 150, 150), seed=seed), "PNG")
        pictures[f"page{seed}:rescan"] = _encode(rescan(page, seed), "JPEG", quality=72)
        wide = Image.new("RGB", (262, 216), (250, 248, 240))
        wide.paste(page, (9, 2))
        pictures[f"page{seed}:margins"] = _encode(wide, "PNG")
        pictures[f"page{seed}:crop"] = _encode(page.crop((40, 20, 200, 180)), "PNG")
    return pictures


@pytest.fixture(scope="module")
def index() -> ImageIndex:
    phash, thumbs, content = {}, {}, {}
    for name, data in _pictures().items():
        d = describe_bytes(data)
        phash[name], thumbs[name] = int(d.phash[0]), d.thumbnail[0].tobytes()
        content[name] = (int(d.content_phash[0]), d.content_thumbnail[0].tobytes(), d.content_box[0].tolist(),
                         d.colours[0].tobytes())
    phash["hash only"] = phash["page0"]  # described by a page hash alone: the same-layout rule only
    return ImageIndex(phash, thumbs, content)


def test_batch_verdicts_and_evidence_equal_the_rule_pair_by_pair(index):
    names = sorted(index.row_of) + ["not in the index"]
    pairs = list(combinations(names, 2)) + [(b, a) for a, b in combinations(names[:12], 2)]
    pairs += [("page0", "page0"), (None, None)]
    a, b = [x for x, _ in pairs], [y for _, y in pairs]

    one_by_one = ImageMatcher(index)
    expected = [x == y or one_by_one._distance(*sorted((x, y))) for x, y in pairs]
    kinds = Counter(e["image"] for e in expected if isinstance(e, dict))
    # the pictures exercise every outcome of the rule
    assert {"re-encoded", "re-scanned", "re-cropped"} <= set(kinds), kinds
    assert sum(e is None for e in expected) > len(pairs) // 2

    batch = ImageMatcher(index)
    assert batch.near_many(a, b).tolist() == [e is True or isinstance(e, dict) for e in expected]
    batch.judge(a, b)
    for (x, y), e in zip(pairs, expected):
        if x != y:
            assert batch.distance(x, y) == e, (x, y)


def test_compiled_aligned_distances_are_the_float_ones_to_the_last_bit(index):
    from pipelines.clean.dedup import pair_kernel

    rows = np.flatnonzero(index.has_content)
    ra, rb = (np.array(x, dtype=np.int64) for x in zip(*combinations(rows.tolist(), 2)))
    order = np.lexsort((rb, ra))
    ra, rb = ra[order], rb[order]
    exact = np.array([aligned_distance(index.fine_thumbnail(x), index.fine_thumbnail(y))
                      for x, y in zip(ra.tolist(), rb.tolist())])
    taps, tap_weights = pair_kernel.upsampling_taps(_UP_SCALED)
    sa, sb = index.content_slot[ra], index.content_slot[rb]
    unbounded = pair_kernel.aligned_distances(index.content_thumbnails, taps, tap_weights, _UP_SCALE, sa, sb,
                                              np.full(len(ra), np.inf), _SHIFT)
    assert unbounded.tobytes() == exact.tobytes()
    for bound in (0.0, 3.0, 3.5, 8.0, float(np.median(exact))):
        bounded = pair_kernel.aligned_distances(index.content_thumbnails, taps, tap_weights, _UP_SCALE, sa, sb,
                                                np.full(len(ra), bound), _SHIFT)
        within = exact <= bound
        assert ((bounded <= bound) == within).all()
        assert bounded[within].tobytes() == exact[within].tobytes()


def test_index_from_the_lake_table_equals_the_mapping_form_and_digests_every_descriptor(index):
    names = sorted(index.row_of)
    rows = [index.row_of[n] for n in names]
    table = pl.DataFrame({
        "image_hash": names,
        "phash": [int(index.phash[r]) if index.has_phash[r] else None for r in rows],
        "thumbnail": [index.thumbnails[index.thumbnail_slot[r]].tobytes() if index.has_thumbnail[r] else None
                      for r in rows],
        "content_phash": [int(index.content_phash[r]) if index.has_content[r] else None for r in rows],
        "content_thumbnail": [index.content_thumbnails[index.content_slot[r]].tobytes() if index.has_content[r]
                              else None for r in rows],
        "content_box": [index.box[r].tolist() if index.has_content[r] else None for r in rows],
        "colours": [index.colour_bins[index.content_slot[r]].tobytes() if index.has_content[r] else None
                    for r in rows],
    }, schema_overrides={"phash": pl.UInt64, "content_phash": pl.UInt64, "content_box": pl.List(pl.UInt16)})
    from_table = ImageIndex.from_table(table)
    for field in ("phash", "has_phash", "thumbnails", "thumbnail_slot", "has_thumbnail", "has_content",
                  "content_slot", "content_phash", "box", "content_thumbnails", "colour_bins", "descriptor_digest"):
        assert np.array_equal(getattr(from_table, field), getattr(index, field)), field
    # any one descriptor of an image changed changes that image's digest, and only its own
    page = table.filter(pl.col("image_hash") == "page0")
    edits = {
        "phash": pl.lit(int(index.phash[index.row_of["page0"]]) ^ 1, dtype=pl.UInt64),
        "thumbnail": pl.lit(bytes(256)), "content_phash": pl.lit(1, dtype=pl.UInt64),
        "content_thumbnail": pl.lit(bytes(768)), "content_box": pl.lit([0, 0, 1000, 999], dtype=pl.List(pl.UInt16)),
        "colours": pl.lit(bytes(16)),
    }
    for column, value in edits.items():
        edited = pl.concat([table.filter(pl.col("image_hash") != "page0"), page.with_columns(value.alias(column))])
        digests = ImageIndex.from_table(edited).descriptor_digest
        changed = np.flatnonzero(digests != index.descriptor_digest)
        assert changed.tolist() == [index.row_of["page0"]], column
    # a malformed content descriptor counts as none
    short = ImageIndex.from_table(table.with_columns(pl.col("colours").bin.slice(0, 8)))
    assert not short.has_content.any()


def test_normalized_pictures_kept_are_bounded_by_their_bytes(monkeypatch):
    """The picture verdict keeps normalized pictures by their memory, least recently used out
    first: a bounded cache gives the verdicts an unbounded one gives."""
    import io

    from PIL import Image, ImageDraw

    from pipelines.clean.dedup import image_match, ink

    pictures = {}
    for k in range(6):
        im = Image.new("RGB", (300, 220), "white")
        draw = ImageDraw.Draw(im)
        draw.rectangle((20 + 5 * k, 30, 200, 150), outline=(200, 30, 30), width=3)
        draw.line((40, 190, 260 - 20 * k, 60), fill="black", width=2)
        buffer = io.BytesIO()
        im.save(buffer, "PNG")
        pictures[f"p{k}"] = buffer.getvalue()
    index = ImageIndex({name: k for k, name in enumerate(pictures)})
    pairs = [(f"p{i}", f"p{j}") for i in range(6) for j in range(i + 1, 6)]

    unbounded = ImageMatcher(index, read_image=pictures.__getitem__)
    unbounded.verdicts_for(pairs)
    one = max(image_match._kept_bytes(ink.ink_picture(data)) for data in pictures.values())
    room = int(2.5 * one)  # two pictures (~5.6 MB each: ink, surroundings, colours raw and blurred)
    monkeypatch.setattr(image_match, "_PICTURE_BYTES_KEPT", room)
    bounded = ImageMatcher(index, read_image=pictures.__getitem__)
    monkeypatch.setattr(image_match, "worker_count", lambda *args, **kwargs: 1)  # one process's cache
    bounded.verdicts_for(pairs)
    assert bounded._picture_bytes <= room and len(bounded._pictures) == 2
    assert bounded._picture_bytes == sum(image_match._kept_bytes(p) for p in bounded._pictures.values())
    assert bounded.verdicts().equals(unbounded.verdicts())


def test_verdict_pairs_are_ordered_so_a_process_normalizes_each_picture_about_once():
    import hashlib
    import random
    from collections import OrderedDict

    from pipelines.clean.dedup.image_match import _TILE, cache_friendly

    rng = random.Random(3)
    # three templated blocks of look-alike pictures (half their pairs candidates) and a chain;
    # pictures are named by content hashes, so name order scatters a block
    block_of = {}
    blocks = []
    for b, n in (("p", 150), ("q", 40), ("r", 3), ("s", 3)):
        names = [hashlib.sha256(f"{b}{k}".encode()).hexdigest() for k in range(n)]
        block_of.update(dict.fromkeys(names, b))
        blocks.append(names)
    pairs = {tuple(sorted((x, y))) for names in blocks[:3] for i, x in enumerate(names) for y in names[i + 1:]
             if rng.random() < 0.5}
    chain = sorted(blocks[3])
    pairs |= {(chain[0], chain[1]), (chain[1], chain[2])}
    pairs = sorted(pairs, key=lambda _: rng.random())
    order = cache_friendly(pairs)
    assert sorted(order) == sorted(pairs) and cache_friendly(list(reversed(pairs))) == order
    # one component after the other
    runs = [block_of[a] for k, (a, _) in enumerate(order) if k == 0 or block_of[a] != block_of[order[k - 1][0]]]
    assert sorted(runs) == ["p", "q", "r", "s"]

    def loads(sequence, room=2 * _TILE):
        cache, count = OrderedDict(), 0
        for pair in sequence:
            for x in pair:
                if x in cache:
                    cache.move_to_end(x)
                    continue
                count += 1
                cache[x] = True
                if len(cache) > room:
                    cache.popitem(last=False)
        return count

    pictures = len({x for pair in pairs for x in pair})
    assert loads(order) < 2 * pictures < loads(sorted(pairs)) / 2
