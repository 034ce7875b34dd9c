"""Deduplication: normalization, identity, Hamming search, perceptual hash and
the whole dedup on hand-made frames."""

from __future__ import annotations

import io
import json
import unicodedata

import numpy as np
import polars as pl
import pytest
from PIL import Image, ImageDraw

from pipelines.clean.dedup import (
    DedupConfig,
    DedupInputError,
    MultiIndexHashIndex,
    deduplicate,
    math_tokens,
    normalize_text,
    phash_bytes,
    phash_files,
    question_id_of,
    question_identity,
)
from pipelines.clean.dedup.phash import PhashError, hashes_of_pixels, phash_image, phash_many
from pipelines.store.records import RAW_QUESTION_SCHEMA
from support.corpora import SCEMQA_JSON


# ---- normalization -------------------------------------------------------------------

def test_nfc_and_nfd_forms_normalize_equal():
    composed = "Which café is closer to the façade?"
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    assert normalize_text(composed) == normalize_text(decomposed)


@pytest.mark.parametrize(
    "variant",
    [
        "How many  stars are\nthere?",
        "How many\u00a0stars are there?",
        "How many\u202fstars are\u3000there?",
        "How many \u200bstars are there?\ufeff",
        "HOW MANY STARS ARE THERE?",
        "  How many stars are there?  ",
        "How\u2060 many stars are there?",
    ],
)
def test_white_space_zero_width_and_case_vanish(variant):
    assert normalize_text(variant) == "how many stars are there?"


def test_digits_operators_and_symbols_are_kept():
    assert normalize_text("What is 3 + 4?") == "what is 3 + 4?"
    assert normalize_text("What is 3 + 4?") != normalize_text("What is 5 × 2?")
    assert normalize_text("Is 7 ≤ 9 − 2?") == "is 7 ≤ 9 − 2?"
    assert normalize_text("Solve x² = 16") == "solve x² = 16"  # never NFKC: x² stays x²
    assert normalize_text("Shade ½ of the shape.") == "shade ½ of the shape."
    assert normalize_text("∠ABC = 45°") == "∠abc = 45°"
    assert normalize_text("") == "" and normalize_text(None) == ""


def test_math_tokens_keep_numbers_and_operators_apart_from_spacing():
    assert math_tokens(normalize_text("3 + 4 = ?")) == ("3", "+", "4", "=")
    assert math_tokens(normalize_text("3+4 =?")) == math_tokens(normalize_text("3 + 4 = ?"))
    assert math_tokens("3 + 4") != math_tokens("3 + 5")
    assert math_tokens("x² + 1.5") == ("²", "+", "1.5")
    assert math_tokens("select the liquid.") == ()


# ---- identity ------------------------------------------------------------------------

def test_identity_is_order_free_and_normalized():
    a = question_id_of("What is 3 + 4?", "img1", ["7", "8", "6"], None)
    b = question_id_of("what is 3 +\u00a04?", "img1", ["6", "7", "8"], None)
    assert a == b and len(a) == 16 and all(ch in "0123456789abcdef" for ch in a)
    assert question_id_of("x", None, None, ["i1", "i2"]) == question_id_of("x", None, None, ["i2", "i1"])


def test_identity_separates_images_options_and_numbers():
    base = question_id_of("What is 3 + 4?", "img1", ["7", "8"], None)
    assert base != question_id_of("What is 3 + 5?", "img1", ["7", "8"], None)
    assert base != question_id_of("What is 3 + 4?", "img2", ["7", "8"], None)
    assert base != question_id_of("What is 3 + 4?", "img1", ["7", "9"], None)
    assert base != question_id_of("What is 3 + 4?", "img1", ["7", "8", "8"], None)  # a multiset
    assert base != question_id_of("What is 3 + 4?", None, None, ["7", "8"])  # text vs image options
    assert question_identity("A", None, ["b"], None) != question_identity("A", None, None, ["b"])


# ---- Hamming search --------------------------------------------------------------------

@pytest.mark.parametrize("radius,bands", [(0, 4), (3, 4), (4, 5), (6, 4), (9, 4)])
def test_multi_index_hashing_equals_brute_force(radius, bands):
    rng = np.random.default_rng(radius * 10 + bands)
    base = rng.integers(0, 2**64, 2000, dtype=np.uint64, endpoint=False)
    # plant neighbours at distances 0..12
    near = base[:300].copy()
    for k in range(300):
        bits = rng.choice(64, size=k % 13, replace=False)
        for bit in bits:
            near[k] ^= np.uint64(1) << np.uint64(int(bit))
    hashes = np.concatenate([base, near])
    index = MultiIndexHashIndex(hashes, bands=bands)
    for qi in list(range(0, 2300, 97)) + [5, 2005]:
        brute = np.flatnonzero(np.bitwise_count(hashes ^ hashes[qi]) <= radius)
        assert index.query(int(hashes[qi]), radius).tolist() == brute.tolist()
    if radius <= 6:
        d = np.bitwise_count(hashes[:, None] ^ hashes[None, :])
        ii, jj = np.nonzero(np.triu(d <= radius, k=1))
        assert index.pairs(radius).tolist() == np.column_stack([ii, jj]).tolist()


# ---- perceptual hash -------------------------------------------------------------------

def _drawing(seed: int, size=(240, 180)) -> Image.Image:
    rng = np.random.default_rng(seed)
    im = Image.new("RGB", size, (255, 255, 255))
    d = ImageDraw.Draw(im)
    for _ in range(6):
        x, y = (int(v) for v in rng.integers(0, min(size) - 40, 2))
        w, h = (int(v) for v in rng.integers(15, 60, 2))
        d.ellipse([x, y, x + w, y + h], fill=tuple(int(v) for v in rng.integers(0, 255, 3)))
        d.rectangle([y, x, y + h, x + w // 2], outline=(0, 0, 0), width=3)
    return im


def _encode(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def _reference_phash(im: Image.Image) -> int:
    """imagehash's phash written out with an explicit DCT-II sum (scipy's unnormalized form)."""
    px = np.asarray(im.convert("L").resize((32, 32), Image.Resampling.LANCZOS), dtype=np.float64)
    n = np.arange(32)
    basis = 2 * np.cos(np.pi * n[:, None] * (2 * n[None, :] + 1) / 64)
    low = (basis @ px @ basis.T)[:8, :8].ravel()
    bits = low > np.median(low)
    return int("".join("1" if b else "0" for b in bits), 2)


def test_phash_matches_the_reference_algorithm_on_png():
    for seed in range(6):
        im = _drawing(seed)
        data = _encode(im, "PNG")
        assert phash_bytes(data, fast=False) == _reference_phash(Image.open(io.BytesIO(data)))
        assert phash_image(Image.open(io.BytesIO(data))) == _reference_phash(im)


def test_exact_path_matches_imagehash():
    import imagehash  # the bench extra, installed by `make test`
    for seed in range(4):
        for fmt in ("PNG", "JPEG"):
            data = _encode(_drawing(seed), fmt)
            assert phash_bytes(data, fast=False) == int(str(imagehash.phash(Image.open(io.BytesIO(data)))), 16)


def test_fast_path_stays_within_a_few_bits_of_imagehash():
    import imagehash
    for seed in range(8):
        for fmt in ("PNG", "JPEG"):
            data = _encode(_drawing(seed), fmt)
            reference = int(str(imagehash.phash(Image.open(io.BytesIO(data)))), 16)
            assert (phash_bytes(data) ^ reference).bit_count() <= 6


def _png_modes():
    """(label, PNG bytes, whether libspng decodes it) for each kind of PNG a site may serve."""
    rgb = _drawing(3)
    shaded = Image.blend(rgb, Image.radial_gradient("L").resize(rgb.size).convert("RGB"), 0.5)
    palette = shaded.convert("P", palette=Image.Palette.ADAPTIVE, colors=200)  # 8-bit indices
    rgba = rgb.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(rgb.size))
    yield "RGB", _encode(rgb, "PNG"), True
    yield "RGBA", _encode(rgba, "PNG"), True
    yield "L", _encode(rgb.convert("L"), "PNG"), True
    yield "LA", _encode(rgba.convert("LA"), "PNG"), True
    yield "P", _encode(palette, "PNG"), True
    yield "P with tRNS", _encode(palette, "PNG", transparency=0), True
    yield "P 4-bit", _encode(rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=16), "PNG"), False
    yield "I;16", _encode(rgb.convert("I").point(lambda v: v * 200).convert("I;16"), "PNG"), False
    yield "1-bit", _encode(rgb.convert("1"), "PNG"), False


def test_libspng_decoding_gives_pillows_pixels_in_every_png_mode():
    from pipelines.clean.dedup.phash import _png_via_spng, _small_gray

    for label, data, by_spng in _png_modes():
        pillow = _small_gray(Image.open(io.BytesIO(data)), fast=False)
        via_spng = _png_via_spng(data)
        assert (via_spng is not None) == by_spng, label
        if via_spng is not None:
            assert np.array_equal(_small_gray(via_spng, fast=False), pillow), label
        assert phash_bytes(data, fast=False) == _reference_phash(Image.open(io.BytesIO(data))), label


def test_corrupt_png_gets_pillows_one_line_error():
    data = _encode(_drawing(1), "PNG")
    broken = data[:60] + bytes(len(data) - 60)
    with pytest.raises(PhashError, match=r"^cannot hash image: \w+") as err:
        phash_bytes(broken)
    assert "\n" not in str(err.value)


def test_reencoded_and_resized_images_are_near_and_others_far():
    ims = [_drawing(s) for s in range(8)]
    png = [phash_bytes(_encode(im, "PNG")) for im in ims]
    jpg = [phash_bytes(_encode(im, "JPEG", quality=80)) for im in ims]
    small = [phash_bytes(_encode(im.resize((180, 135), Image.Resampling.LANCZOS), "PNG")) for im in ims]
    for a, b, c in zip(png, jpg, small):
        assert (a ^ b).bit_count() <= 4 and (a ^ c).bit_count() <= 4
    for i in range(len(png)):
        for j in range(i + 1, len(png)):
            assert (png[i] ^ png[j]).bit_count() > 10


@pytest.mark.parametrize("images_per_worker", [1, 256])  # 1: worker processes; 256: in process
def test_batched_files_equal_single_hashes(tmp_path, monkeypatch, images_per_worker):
    monkeypatch.setattr("pipelines.clean.dedup.phash.MIN_IMAGES_PER_WORKER", images_per_worker)
    paths, expected = [], []
    for seed in range(10):
        fmt, ext = ("JPEG", "jpg") if seed % 2 else ("PNG", "png")
        data = _encode(_drawing(seed), fmt)
        path = tmp_path / f"{seed}.{ext}"
        path.write_bytes(data)
        paths.append(path)
        expected.append(phash_bytes(data))
    got = phash_files(paths, workers=2, batch=3)
    assert got.dtype == np.uint64 and got.tolist() == expected
    assert phash_many([p.read_bytes() for p in paths]).tolist() == expected
    from pipelines.clean.dedup.phash import image_signature_bytes, image_signatures

    hashes, thumbs = image_signatures(paths, workers=2, batch=4)
    assert hashes.tolist() == expected and thumbs.shape == (10, 256) and thumbs.dtype == np.uint8
    assert thumbs[3].tobytes() == image_signature_bytes(paths[3].read_bytes())[1]
    assert hashes_of_pixels(np.zeros((0, 32, 32))).shape == (0,)


def test_phash_of_bad_bytes_is_a_one_line_error(tmp_path):
    from pipelines.clean.dedup import PhashError

    with pytest.raises(PhashError, match="cannot hash image"):
        phash_bytes(b"not an image")
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    with pytest.raises(PhashError, match="bad.png"):
        phash_files([bad])


def test_a_bad_file_fails_the_batch_with_its_name_from_a_worker_process(tmp_path, monkeypatch):
    monkeypatch.setattr("pipelines.clean.dedup.phash.MIN_IMAGES_PER_WORKER", 1)
    paths = []
    for seed in range(6):
        path = tmp_path / f"{seed}.png"
        path.write_bytes(_encode(_drawing(seed), "PNG"))
        paths.append(path)
    paths[4].write_bytes(paths[4].read_bytes()[:80])  # truncated
    with pytest.raises(PhashError, match=r"cannot hash .*4\.png"):
        phash_files(paths, workers=2)
    with pytest.raises(PhashError, match="missing.png"):
        phash_files([*paths[:4], tmp_path / "missing.png"], workers=2)


# ---- deduplicate -------------------------------------------------------------------------

def _q(key, problem, image=None, choices=None, pics=None, answer=0, source="site"):
    return {
        "source": source, "source_key": key, "subject": "math", "grade": "grade-3", "skill": "add",
        "problem": problem, "problem_image": image, "choices": choices, "choice_images": pics,
        "answer_idx": answer, "source_split": None, "extra": "{}",
    }


def _frame(rows):
    return pl.DataFrame(rows, schema=pl.Schema(RAW_QUESTION_SCHEMA))


def _flip(h: int, *bits: int) -> int:
    for b in bits:
        h ^= 1 << b
    return h


H = {
    "star": 0x9A3C_55F0_1E2D_7B41,
    "star_jpeg": _flip(0x9A3C_55F0_1E2D_7B41, 3, 40),
    "moon": 0x1234_5678_9ABC_DEF0,
    "sun": 0xF0E1_D2C3_B4A5_9687,
    "b1": 0x0F0F_0F0F_0F0F_0F0F,
    "b1_jpeg": _flip(0x0F0F_0F0F_0F0F_0F0F, 7),
    "b2": 0x7777_1111_AAAA_5555,
    "b2_jpeg": _flip(0x7777_1111_AAAA_5555, 20, 50),
    # a chain: A ~ B (3 bits), B ~ C (3 bits), A !~ C (6 bits)
    "ca": 0x0000_0000_0000_0000,
    "cb": _flip(0, 1, 17, 33),
    "cc": _flip(0, 1, 17, 33, 49, 60, 62),
}


def _by_key(result):
    kept = {r["source_key"]: r for r in result.kept.iter_rows(named=True)}
    dups = {r["source_key"]: r for r in result.duplicates.iter_rows(named=True)}
    quarantine = {r["source_key"]: r for r in result.quarantine.iter_rows(named=True)}
    return kept, dups, quarantine


def test_exact_and_near_duplicates_are_removed_with_evidence():
    rows = [
        _q("a1", "How many stars are there?", "star", ["3", "4", "5"], answer=1),
        _q("a2", "How many  STARS are\u00a0there?", "star", ["5", "3", "4"], answer=2),  # exact, options reordered
        _q("a3", unicodedata.normalize("NFD", "¿Cuántas estrellas hay?"), "star", ["3", "4", "5"], answer=1),
        _q("a4", "¿Cuántas estrellas hay?", "star", ["3", "4", "5"], answer=1),  # NFC of a3: exact
        _q("a5", "How many stars are there?", "star_jpeg", ["3", "4", "5"], answer=1),  # re-encoded image: near
        _q("b1", "Which shows a magnet?", None, None, ["b1", "b2"], answer=0),
        _q("b2", "Which shows a magnet?", None, None, ["b2_jpeg", "b1_jpeg"], answer=1),  # near, image options
    ]
    result = deduplicate(_frame(rows), H)
    kept, dups, quarantine = _by_key(result)
    assert set(kept) == {"a1", "a3", "b1"}
    assert quarantine == {}
    a1 = kept["a1"]
    assert a1["duplicate_group"] == a1["question_id"]
    assert dups["a2"]["kind"] == "exact" and dups["a2"]["kept_question_id"] == a1["question_id"]
    assert dups["a4"]["kind"] == "exact" and dups["a4"]["kept_question_id"] == kept["a3"]["question_id"]
    near = dups["a5"]
    assert near["kind"] == "near" and near["kept_question_id"] == a1["question_id"]
    ev = json.loads(near["evidence"])
    assert ev["hamming"] == 2 and ev["text"] == "equal" and ev["options"] == "equal" and ev["image"] == "re-encoded"
    evb = json.loads(dups["b2"]["evidence"])
    assert dups["b2"]["kind"] == "near" and evb["options"] == "near" and evb["options_hamming"] == 2
    assert result.kept["question_id"].to_list() == sorted(result.kept["question_id"].to_list())
    assert result.kept.columns == [*RAW_QUESTION_SCHEMA.names, "question_id", "duplicate_group"]
    for row in result.kept.iter_rows(named=True):
        assert row["question_id"] == question_id_of(
            row["problem"], row["problem_image"], row["choices"], row["choice_images"]
        )


def test_templated_questions_and_different_numbers_are_not_duplicates():
    rows = [
        _q("t1", "How many stars are there?", "star", ["3", "4", "5"]),
        _q("t2", "How many stars are there?", "moon", ["3", "4", "5"]),  # same text, other image
        _q("t3", "How many stars are there?", "star", ["6", "7", "8"]),  # same text, other options
        _q("n1", "What is 3 + 4?", "sun", ["7", "8"]),
        _q("n2", "What is 3 + 5?", "sun", ["7", "8"]),  # one digit differs
        _q("n3", "What is 5 × 2?", "sun", ["7", "8"]),
        _q("s1", "Select the liquid.", None, None, ["b1", "moon"]),
        _q("s2", "Select the liquid.", None, None, ["b1", "sun"]),  # one option image differs
        _q("e1", "", "moon", ["yes", "no"]),
        _q("e2", "", "sun", ["yes", "no"]),  # empty texts, different images
    ]
    result = deduplicate(_frame(rows), H)
    assert result.duplicates.height == 0 and result.quarantine.height == 0
    assert result.kept.height == len(rows)
    assert result.kept["question_id"].n_unique() == len(rows)


def test_near_duplicates_need_the_same_canonical_text():
    long = "A ball rolls down a ramp. Which force makes the ball speed up as it rolls down 2 meters?"
    rows = [
        _q("x1", long, None, ["gravity", "friction"]),
        _q("x2", long.replace("ramp.", "ramp ").upper(), None, ["(B) friction", "(A) gravity"], answer=1),
        _q("x3", long.replace("2 meters", "3 meters"), None, ["gravity", "friction"]),  # a number differs
        _q("x4", long.replace("speed up", "go faster"), None, ["gravity", "friction"]),  # words differ
        _q("x5", long, None, ["gravity", "magnetism"]),  # an option differs
    ]
    result = deduplicate(_frame(rows), {})
    kept, dups, _ = _by_key(result)
    assert set(kept) == {"x1", "x3", "x4", "x5"}
    evidence = json.loads(dups["x2"]["evidence"])
    assert dups["x2"]["kind"] == "near" and evidence == {"text": "equivalent", "options": "equivalent"}


def test_conflicting_answers_are_quarantined_not_merged():
    rows = [
        _q("c1", "How many moons?", "moon", ["1", "2"], answer=0),
        _q("c2", "How many moons?", "moon", ["2", "1"], answer=0),  # same identity, answer "2"
        _q("c3", "How many moons?", "moon", ["1", "2"], answer=-1),  # unknown answer
        _q("d1", "How many suns?", "sun", ["1", "2"], answer=0),
        _q("d2", "How many suns?", "sun", ["2", "1"], answer=1),  # same answer by content: fine
        _q("k1", "How many stars are there?", "star", ["3", "4"], answer=0),
        _q("k2", "How many stars are there?", "star_jpeg", ["3", "4"], answer=1),  # near, other answer
    ]
    result = deduplicate(_frame(rows), H)
    kept, dups, quarantine = _by_key(result)
    assert {"c1", "c2", "c3"} <= set(quarantine)
    assert quarantine["c1"]["stage"] == "dedup" and "conflicting" in quarantine["c1"]["reason"]
    assert sorted(json.loads(quarantine["c1"]["detail"])["answers"]) == ["1", "2"]
    assert set(kept) == {"d1", "k1"} and dups["d2"]["kind"] == "exact"
    assert "k2" in quarantine and json.loads(quarantine["k2"]["detail"])["kept_question_id"] == kept["k1"]["question_id"]
    # every input record is accounted for exactly once
    assert len(kept) + len(dups) + len(quarantine) == len(rows)


def test_no_transitive_chaining():
    rows = [
        _q("ch-a", "Which shape is shown?", "ca", ["circle", "square"]),
        _q("ch-b", "Which shape is shown?", "cb", ["circle", "square"]),
        _q("ch-c", "Which shape is shown?", "cc", ["circle", "square"]),
    ]
    result = deduplicate(_frame(rows), H, DedupConfig(image_hamming=4))
    kept, dups, _ = _by_key(result)
    # A ~ B (3 bits), B ~ C (3 bits), A !~ C (6 bits): C stays, and is not chained via B
    assert set(kept) == {"ch-a", "ch-c"}
    assert dups["ch-b"]["kept_question_id"] == kept["ch-a"]["question_id"]


def test_kept_record_choice_is_deterministic_and_order_independent():
    rows = [
        _q("z9", "How many stars are there?", "star", ["3", "4"], source="b-site"),
        _q("z1", "How many stars are there?", "star_jpeg", ["4", "3"], answer=1, source="b-site"),
        _q("z5", "how many stars are there?", "star", ["3", "4"], source="a-site"),
        _q("m1", "What is 3 + 4?", "sun", ["7", "8"]),
    ]
    first = deduplicate(_frame(rows), H)
    second = deduplicate(_frame(rows[::-1]), H)
    assert first.kept.equals(second.kept) and first.duplicates.equals(second.duplicates)
    kept, dups, _ = _by_key(first)
    assert set(kept) == {"z5", "m1"}  # smallest (source, source_key)
    assert dups["z9"]["kind"] == "exact" and dups["z1"]["kind"] == "near"


def test_missing_phash_only_matches_identical_images():
    rows = [
        _q("p1", "How many stars are there?", "unhashed-1", ["3", "4"]),
        _q("p2", "How many stars are there?", "unhashed-2", ["3", "4"]),
        _q("p3", "How many stars are there?", "unhashed-1", ["4", "3"], answer=1),
    ]
    kept, dups, _ = _by_key(deduplicate(_frame(rows), {}))
    assert set(kept) == {"p1", "p2"} and dups["p3"]["kind"] == "exact"


def test_large_templated_blocks_stay_linear_and_correct():
    rng = np.random.default_rng(7)
    images = {f"img{i}": int(v) for i, v in enumerate(rng.integers(0, 2**63, 3000, dtype=np.int64))}
    images["img0_jpeg"] = images["img0"] ^ 1
    rows = [_q(f"k{i:05d}", "How many stars are there?", f"img{i}", ["1", "2", "3"]) for i in range(3000)]
    rows.append(_q("k99999", "How many stars are there?", "img0_jpeg", ["1", "2", "3"]))
    result = deduplicate(_frame(rows), images)
    assert result.kept.height == 3000
    assert result.duplicates["source_key"].to_list() == ["k99999"]


def test_bad_input_is_a_clear_error():
    with pytest.raises(DedupInputError, match="lacks column"):
        deduplicate(pl.DataFrame({"source": ["x"]}), {})
    rows = [_q("same", "a?", "star", ["1", "2"]), _q("same", "b?", "moon", ["1", "2"])]
    with pytest.raises(DedupInputError, match="appears twice"):
        deduplicate(_frame(rows), H)


def test_empty_input():
    result = deduplicate(_frame([]), {})
    assert result.kept.height == 0 and result.duplicates.height == 0 and result.quarantine.height == 0
    assert "question_id" in result.kept.columns


def test_thumbnails_separate_look_alike_drawings_that_the_hash_confuses():
    from pipelines.clean.dedup.phash import image_signature_bytes, thumbnail_distance

    def clock(minute_angle: float) -> Image.Image:
        im = Image.new("RGB", (200, 200), "white")
        d = ImageDraw.Draw(im)
        d.ellipse([20, 20, 180, 180], outline="black", width=3)
        x = 100 + 70 * np.cos(np.radians(minute_angle))
        y = 100 + 70 * np.sin(np.radians(minute_angle))
        d.line([100, 100, x, y], fill="black", width=3)
        return im

    a_png = _encode(clock(0), "PNG")
    a_jpg = _encode(clock(0), "JPEG", quality=80)
    b_png = _encode(clock(180), "PNG")
    (ha, ta), (hj, tj), (hb, tb) = (image_signature_bytes(x) for x in (a_png, a_jpg, b_png))
    assert len(ta) == 256 and ha == phash_bytes(a_png)
    assert thumbnail_distance(ta, tj) < 3.0 < thumbnail_distance(ta, tb)

    phash_of = {"a": ha, "a_jpg": hj, "b": hb}
    thumbs = {"a": ta, "a_jpg": tj, "b": tb}
    rows = [
        _q("c1", "What time is shown?", "a", ["3:00", "9:00"]),
        _q("c2", "What time is shown?", "a_jpg", ["3:00", "9:00"]),
        _q("c3", "What time is shown?", "b", ["3:00", "9:00"]),
    ]
    # force the hashes to look equal, as they do for many sparse line drawings
    same_hash = {k: ha for k in phash_of}
    loose = _by_key(deduplicate(_frame(rows), same_hash))[0]
    strict_kept, strict_dups, _ = _by_key(deduplicate(_frame(rows), same_hash, DedupConfig(), thumbs))
    assert set(loose) == {"c1"}
    assert set(strict_kept) == {"c1", "c3"} and json.loads(strict_dups["c2"]["evidence"])["thumbnail"] < 3.0


def _reference_pairs(c, only=None):
    """The candidate rule of ``_Candidates.pairs``, pair by pair in plain Python."""
    from pipelines.clean.dedup.image_index import band_layout

    cfg = c.config
    radius = min(cfg.rescan_hamming, cfg.large_block_hamming)
    page = [((1 << w) - 1) << s for s, w in band_layout(radius + 1)]
    content = [((1 << w) - 1) << s for s, w in band_layout(c.content_hamming + 1)]
    shares = lambda x, masks: any((int(x) & mk) == 0 for mk in masks)  # noqa: E731
    bits = lambda x: bin(int(x)).count("1")  # noqa: E731
    large, imaged = c.large, c.imaged
    width = 0 if c.opt is None else c.opt.shape[1]

    def options(i):
        return [k for k in range(width) if c.opt[i, k] != -2]

    def option_close(i, k, j, d):
        return (c.opt[i, k] >= 0 and c.opt[i, k] == c.opt[j, d]) or bits(c.opt_hash[i, k] ^ c.opt_hash[j, d]) <= \
            cfg.rescan_hamming or (c.opt_content[i, k] and c.opt_content[j, d]
                                   and bits(c.opt_chash[i, k] ^ c.opt_chash[j, d]) <= c.content_hamming)

    def candidate(i, j):
        if not large[i]:
            return True
        if c.prob_hashed[i] and c.prob_hashed[j] and shares(c.prob_hash[i] ^ c.prob_hash[j], page):
            return True
        if c.prob_content[i] and c.prob_content[j] and shares(c.prob_chash[i] ^ c.prob_chash[j], content):
            return True
        if c.has_prob[i] and c.has_prob[j] and not c.prob_hashed[i] and not c.prob_hashed[j] \
                and c.image_id[i] == c.image_id[j]:
            return True
        if not c.has_prob[i] and not c.has_prob[j]:
            return any(shares(c.opt_hash[i, k] ^ c.opt_hash[j, d], page) or (
                c.opt_content[i, k] and c.opt_content[j, d] and shares(c.opt_chash[i, k] ^ c.opt_chash[j, d], content))
                for k in options(i) for d in options(j))
        return False

    def survives(i, j):
        if c.prob_hashed[i] and c.prob_hashed[j]:
            if not (bits(c.prob_hash[i] ^ c.prob_hash[j]) <= cfg.rescan_hamming or (
                    c.prob_content[i] and c.prob_content[j]
                    and bits(c.prob_chash[i] ^ c.prob_chash[j]) <= c.content_hamming)):
                return False
        elif c.image_id[i] != c.image_id[j]:
            return False
        if c.opt_count[i] > 0:
            return all(any(option_close(x, k, y, d) for d in options(y)) for x, y in ((i, j), (j, i))
                       for k in options(x))
        return True

    out = set()
    for i in range(c.m):
        for j in range(i + 1, c.m):
            if c.key[i] != c.key[j]:
                continue
            if imaged[i] and imaged[j]:
                if only is not None and not (only[i] or only[j]):
                    continue
                if candidate(i, j) and survives(i, j):
                    out.add((i, j))
    # questions without images: one star per exact key (equality is transitive)
    plain = [i for i in range(c.m) if not imaged[i]]
    for i in plain:
        first = min(x for x in plain if c.key[x] == c.key[i])
        if first != i and (only is None or any(only[x] for x in plain if c.key[x] == c.key[i])):
            out.add((first, i))
    return out


@pytest.mark.parametrize("threaded, survival", [(False, None), (True, None), (False, 14)])
def test_compiled_candidate_pairs_follow_the_rule_pair_by_pair(threaded, survival, monkeypatch):
    """``survival``: the content distance a pair may have (the picture verdict's looser rule)."""
    from pipelines.clean.dedup import pair_kernel
    from pipelines.clean.dedup.dedup import _Candidates
    from pipelines.clean.dedup.image_match import ImageIndex
    from pipelines.clean.dedup.phash import COLOUR_BINS, CONTENT_BYTES

    rng = np.random.default_rng(5)
    bases = rng.integers(0, 2**63, 6, dtype=np.int64)
    phash_of, content = {}, {}
    for i in range(60):  # look-alike drawings: a few base hashes, a few bits flipped
        h = int(bases[i % 6])
        for bit in rng.choice(64, int(rng.integers(0, 12)), replace=False):
            h ^= 1 << int(bit)
        phash_of[f"img{i}"] = h
        if i % 3:
            content[f"img{i}"] = (h ^ int(rng.integers(0, 2**8)), bytes(CONTENT_BYTES), (0, 0, 1000, 1000),
                                  bytes(COLOUR_BINS))
    phash_of["nohash"] = None
    index = ImageIndex(phash_of, None, content)
    names = list(phash_of) + ["unknown"]
    m = 240
    keys = rng.integers(0, 4, m).astype(np.uint64)  # blocks of ~60: large with small_block 20
    keys[200:220], keys[220:] = 7, 8  # two small blocks
    problem, opts = [], []
    for i in range(m):
        kind = int(keys[i]) % 3 if i < 200 else 0
        if kind == 0:
            problem.append(str(rng.choice(names)))
            opts.append(None)
        elif kind == 1:
            problem.append(None)
            opts.append(tuple(str(x) for x in rng.choice(names, 3)))
        else:
            problem.append(None)
            opts.append(None)
    config = DedupConfig(small_block=20)
    candidates = _Candidates(keys, problem, opts, index, config, content_hamming=survival)
    assert candidates.large.any() and not candidates.large.all()
    parts = []
    if threaded:  # the blocks cut into parts for threads, whatever the machine
        monkeypatch.setattr(pair_kernel, "_BLOCK_COST_PER_THREAD", 1)
        monkeypatch.setattr(pair_kernel.os, "cpu_count", lambda: 3)
        plain = pair_kernel.block_pairs
        monkeypatch.setattr(pair_kernel, "block_pairs", lambda *args: parts.append(len(args[1])) or plain(*args))

    def produced(only=None):
        return {(int(x), int(y)) for a, b in candidates.pairs(only) for x, y in zip(a, b)}

    whole = produced()
    assert whole == _reference_pairs(candidates)
    assert len(whole) > 100
    # a block's size never hides a pair of problem images whose content hashes are close enough
    # to survive (a re-scan whose page hash moved: hard-case copies under one generic text)
    rows = {name: index.rows([name])[0] for name in phash_of}
    close = {(i, j) for i in range(m) for j in range(i + 1, m)
             if keys[i] == keys[j] and candidates.large[i] and problem[i] in content and problem[j] in content
             and problem[i] != problem[j] and int(index.content_phash[rows[problem[i]]]
                                                  ^ index.content_phash[rows[problem[j]]]).bit_count()
             <= candidates.content_hamming}
    assert close <= whole and (close or survival is None)
    only = rng.random(m) < 0.1
    assert produced(only) == _reference_pairs(candidates, only)
    assert (len(parts) > 2) == threaded


# ---- canonical text: what near-duplicate confirmation compares --------------------------------

@pytest.mark.parametrize(
    "a,b",
    [
        (r"\frac{2 + \sqrt{5}}{2}", r"\frac{2+\sqrt{5}}2"),
        (r"$\frac{a}{b}$", r"\(\frac ab\)"),
        (r"\frac{a}b", r"\dfrac{a}{b}"),
        (r"\left( x + 1 \right)^2", r"(x+1)^{2}"),
        (r"$$x \le 3$$", r"\[x\leq 3\]"),
        (r"5\,\mathrm{cm}", "5 cm"),
        ("5 × 3 = 15", r"$5 \times 3=15$"),
        ("x² − 1", "x^2 - 1"),
        ("45°", r"$45^\circ$"),
        ("(2, 3)", "(2,3)"),
        ("Select the square that is green.", "select the  square that is GREEN"),
        (r"It costs \$5.", "It costs $5"),
        ("What is 3 + 4?", "what is 3+4"),
    ],
)
def test_canonical_text_accepts_notation_that_typesets_the_same(a, b):
    from pipelines.clean.dedup import canonical_text

    assert canonical_text(a) == canonical_text(b)


@pytest.mark.parametrize(
    "a,b",
    [
        ("Select the square that is green.", "Select the square that is teal."),  # a colour
        ("Mia has 5 apples.", "Liam has 5 apples."),  # a name
        ("The rope is 5 cm long.", "The rope is 5 mm long."),  # a unit
        ("What is 3 + 4?", "What is 3 + 5?"),  # a number
        ("(2, 3)", "(23)"),  # two numbers are not one
        ("3.5", "35"),
        ("5!", "5"),  # a factorial
        (r"\frac{1}{2}", r"\frac{2}{1}"),
        (r"x^{2}", "x2"),
        ("It costs $5 and $6.", "It costs 5 and 6."),  # prices are not math delimiters
    ],
)
def test_canonical_text_keeps_every_content_word_number_unit_and_symbol(a, b):
    from pipelines.clean.dedup import canonical_text

    assert canonical_text(a) != canonical_text(b)


@pytest.mark.parametrize("label", ["A", "(A)", "A.", "A)", "(a)", "[A]", "Ａ．", "（Ａ）"])
def test_option_labels_lose_their_punctuation(label):
    from pipelines.clean.dedup import canonical_text

    assert canonical_text(label, option=True) == "a"
    assert canonical_text(label.replace("A", "B").replace("a", "b").replace("Ａ", "Ｂ"), option=True) == "b"
    assert canonical_text("(A) 12 cm", option=True) == canonical_text("A. 12 cm", option=True) == canonical_text("12 cm")
    assert canonical_text("A", option=False) == "a" and canonical_text("(A)", option=False) != "a"  # a stem keeps it


def test_canonical_text_plain_and_tex_paths_agree():
    from pipelines.clean.dedup import normalize as N

    texts = ["How many stars are there?", "Mia's 3 cats, 2 dogs; 1.5 m... done!", "It is 3:00 (a.m.)", "Café — naïve",
             "x - y / 2 % 3 < 4 > 1 | 7", "Which is it: A, B or C?", "5! and 10,000"]
    for text in texts:
        assert not N._NEEDS_TEX.search(text)
        tokens: list[str] = []
        N._canonical_tokens(N._TEX_TOKEN.findall(" ".join(text.split())), 0, None, tokens)
        assert N.canonical_text(text) == N._finish(tokens), text


def test_near_duplicates_through_tex_spacing_and_label_punctuation():
    rows = [
        _q("t1", "Which expression gives the shaded part?", "star", [r"$\frac{2 + \sqrt{5}}{2}$", r"$\frac{1}{2}$"]),
        _q("t2", "Which expression gives the shaded part?", "star",
           [r"\( \frac12 \)", r"\( \frac{2+\sqrt{5}}2 \)"], answer=1),
        _q("l1", "Which figure is a hexagon?", "moon", ["A", "B", "C"], answer=2),
        _q("l2", "Which figure is a hexagon?", "moon", ["(A)", "(B)", "(C)"], answer=2),
        _q("l3", "Which figure is a hexagon?", "moon", ["A.", "B.", "C."], answer=1),  # another key: a conflict
        _q("g1", "Select the square that is green.", "sun", ["yes", "no"]),
        _q("g2", "Select the square that is teal.", "sun", ["yes", "no"]),  # one content word differs
    ]
    kept, dups, quarantine = _by_key(deduplicate(_frame(rows), H))
    assert set(kept) == {"t1", "l1", "g1", "g2"}
    assert dups["t2"]["kind"] == dups["l2"]["kind"] == "near"
    assert json.loads(dups["t2"]["evidence"])["options"] == "equivalent"
    assert set(quarantine) == {"l3"} and json.loads(quarantine["l3"]["detail"])["answer"] == "b"


# ---- images: colour, re-scans, crops ----------------------------------------------------------

def _page(colour=(46, 160, 67), size=(240, 200), at=(60, 40), side=110, background=(250, 248, 240), seed=0):
    """A figure on a page: a filled square, a grid of dots and a few strokes that depend on
    ``seed``, on a tinted page."""
    rng = np.random.default_rng(seed)
    im = Image.new("RGB", size, background)
    d = ImageDraw.Draw(im)
    x, y = at
    d.rectangle([x, y, x + side, y + side], fill=colour, outline=(30, 30, 30), width=3)
    for k in range(4):
        d.ellipse([x + 10 + 25 * k, y + 8, x + 22 + 25 * k, y + 20], fill=(255, 255, 255), outline=(30, 30, 30))
    for _ in range(3):
        px, py, qx, qy = (int(v) for v in rng.integers(10, side - 10, 4))
        d.line([x + px, y + py, x + qx, y + qy], fill=(30, 30, 30), width=4)
    return im


def _descriptors(images: dict[str, bytes]):
    from pipelines.clean.dedup import ImageIndex, describe_bytes

    phash, thumbs, content = {}, {}, {}
    for name, data in images.items():
        d = describe_bytes(data)
        phash[name], thumbs[name] = int(d.phash[0]), d.thumbnail[0].tobytes()
        content[name] = (int(d.content_phash[0]), d.content_thumbnail[0].tobytes(), d.content_box[0].tolist(),
                         d.colours[0].tobytes())
    return ImageIndex(phash, thumbs, content)


def _rescanned(im: Image.Image, seed: int) -> bytes:
    from pipelines.ingest.demo_site.drawing import rescan

    return _encode(rescan(im, seed), "JPEG", quality=72)


def test_colour_variants_are_neither_merged_nor_conflicts():
    green, teal = _page((46, 160, 67)), _page((20, 150, 150))  # nearly the same grey
    images = {"green": _encode(green, "PNG"), "teal": _encode(teal, "PNG")}
    index = _descriptors(images)
    assert (index.phash[index.row_of["green"]] ^ index.phash[index.row_of["teal"]]).bit_count() <= 4
    rows = [
        _q("c1", "What color is the square?", "green", ["green", "teal", "red"], answer=0),
        _q("c2", "What color is the square?", "teal", ["teal", "green", "red"], answer=0),
    ]
    result = deduplicate(_frame(rows), index)
    assert result.kept.height == 2 and result.duplicates.height == 0 and result.quarantine.height == 0
    # the grey-only rule of a hash and grey thumbnails would call them the same picture
    grey = deduplicate(_frame(rows), {k: int(index.phash[index.row_of[k]]) for k in images},
                       thumbnail_of={k: index.thumbnails[index.thumbnail_slot[index.row_of[k]]].tobytes()
                                     for k in images})
    assert grey.quarantine.height == 1


def test_rescans_crops_and_margins_of_a_figure_are_found():
    from pipelines.clean.dedup import ImageMatcher

    page = _page(seed=3)
    wide = Image.new("RGB", (252, 206), (250, 248, 240))
    wide.paste(page, (9, 2))  # wider margins
    images = {
        "page": _encode(page, "PNG"),
        "rescan1": _rescanned(page, 1),
        "rescan2": _rescanned(page, 2),
        "margins": _encode(wide, "PNG"),
        "other": _encode(_page(seed=4), "PNG"),  # other marks: another figure
    }
    index = _descriptors(images)
    matcher = ImageMatcher(index)
    for name in ("rescan1", "rescan2", "margins"):
        assert matcher.distance("page", name) is not None, name
    assert matcher.distance("page", "other") is None
    rows = [
        _q("r1", "How many marks are on the square?", "page", ["4", "5", "3"]),
        _q("r2", "How many marks are on the square?", "rescan1", ["5", "3", "4"], answer=2),
        _q("r3", "How many marks are on the square?", "margins", ["3", "4", "5"], answer=1),
        _q("r4", "How many marks are on the square?", "other", ["4", "5", "3"]),
        _q("r5", "How many marks are on the square?", "rescan2", ["6", "3", "4"], answer=2),  # other options
    ]
    kept, dups, _ = _by_key(deduplicate(_frame(rows), index))
    assert set(kept) == {"r1", "r4", "r5"}
    assert json.loads(dups["r2"]["evidence"])["image"] == "re-scanned"


def test_content_box_ignores_margins_page_colour_and_transparency():
    from pipelines.clean.dedup import aligned_distance
    from pipelines.clean.dedup.phash import describe_bytes

    page = _page(seed=5)
    a = describe_bytes(_encode(page, "PNG"))
    rgba = Image.new("RGBA", (400, 300), (0, 0, 0, 0))
    rgba.paste(page.crop((60, 40, 170, 150)).convert("RGBA"), (150, 100))
    b = describe_bytes(_encode(rgba, "PNG"))
    blank = describe_bytes(_encode(Image.new("RGB", (50, 40), (255, 255, 255)), "PNG"))
    assert blank.content_box[0].tolist() == [0, 0, 1000, 1000]
    index = _descriptors({"page": _encode(page, "PNG"), "cut": _encode(rgba, "PNG")})
    fine = [index.fine_thumbnail(index.row_of[k]) for k in ("page", "cut")]
    assert aligned_distance(*fine) <= 3.5  # the same figure, whatever the page around it
    left, top, right, bottom = a.content_box[0].tolist()
    assert 230 < left < 260 and 180 < top < 210 and 700 < right < 740 and 740 < bottom < 790
    assert a.colours[0].dtype == np.uint8 and a.colours[0].sum() > 200  # mostly one hue (green)


def test_templated_siblings_with_real_images_stay_apart():
    images = {"p1": _encode(_page(seed=7), "PNG"), "p2": _encode(_page(seed=8, at=(60, 40)), "PNG")}
    index = _descriptors(images)
    rows = [
        _q("s1", "How many marks are on the square?", "p1", ["4", "5", "3"]),
        _q("s2", "How many marks are on the square?", "p2", ["4", "5", "3"]),  # other image
        _q("s3", "How many marks are on the square?", "p1", ["4", "6", "2"]),  # other options
    ]
    result = deduplicate(_frame(rows), index)
    assert result.kept.height == 3 and result.duplicates.height == 0


# ---- families: the unit of the split ---------------------------------------------------------

def test_families_join_a_shared_figure_and_stem_whatever_the_options():
    from pipelines.clean.dedup import figure_families

    page = _page(seed=11)
    images = {"fig": _encode(page, "PNG"), "fig_scan": _rescanned(page, 5), "other": _encode(_page(seed=12, at=(30, 70), side=80), "PNG"),
              "teal": _encode(_page((20, 150, 150), seed=11), "PNG")}
    index = _descriptors(images)
    rows = [
        _q("f1", "How many marks are on the square?", "fig", ["4", "5", "3"]),
        _q("f2", "How many marks are on the square?", "fig", ["4", "6", "2"]),  # other distractors
        _q("f3", "how many marks are on the square", "fig_scan", ["4", "7"]),  # re-scanned figure
        _q("f4", "What color is the square?", "fig", ["green", "red"]),  # other stem
        _q("f5", "How many marks are on the square?", "other", ["4", "5", "3"]),  # other figure
        _q("f6", "How many marks are on the square?", "teal", ["4", "5", "3"]),  # other colour
        _q("f7", "How many marks are on the square?", None, None, ["fig", "other"]),  # no problem image
    ]
    kept = deduplicate(_frame(rows), index).kept
    assert kept.height == 7 and kept["duplicate_group"].to_list() == kept["question_id"].to_list()
    families = figure_families(kept, index)
    group = dict(zip(families["source_key"].to_list(), families["duplicate_group"].to_list()))
    qid = dict(zip(families["source_key"].to_list(), families["question_id"].to_list()))
    assert group["f1"] == group["f2"] == group["f3"] == min(qid["f1"], qid["f2"], qid["f3"])
    for alone in ("f4", "f5", "f6", "f7"):
        assert group[alone] == qid[alone]
    assert families.select("question_id", "duplicate_group").equals(
        figure_families(kept.reverse(), index).sort("question_id").select("question_id", "duplicate_group"))


SCEMQA = SCEMQA_JSON


def test_canonical_text_on_a_real_corpus():
    """SceMQA (840 questions, TeX in $...$): canonical forms merge only questions that differ in
    white space or dollar signs, and the same TeX typed another way (operators spaced,
    \\left( \\right), x^2, \\frac ab, other delimiters) keeps its canonical form."""
    import re
    from collections import defaultdict

    from pipelines.clean.dedup import canonical_text
    from pipelines.ingest.demo_site.generator import respell_tex
    from pipelines.clean.latex.convert import find_tex_math

    questions = [q["Question"] for rows in json.loads(SCEMQA.read_text(encoding="utf-8")).values() for q in rows]
    assert len(questions) == 840
    by_form = defaultdict(set)
    for text in questions:
        by_form[canonical_text(text)].add(text)
    merged = [sorted(v) for v in by_form.values() if len(v) > 1]
    assert len(by_form) >= len(set(questions)) - 10
    for a, b in merged:
        assert re.sub(r"[\s$]", "", a) == re.sub(r"[\s$]", "", b)
    respelled = same = 0
    for text in questions:
        regions = [r for r in find_tex_math(text) if r.delimiter == "$"]
        if text.count("$") != 2 * len(regions):
            continue  # a dollar that is no delimiter would pair anew once the others are gone
        out, pos = [], 0
        for region in regions:
            out.append(text[pos:region.start] + "\\(" + respell_tex(region.inner) + "\\)")
            pos = region.end
        typed = "".join(out) + text[pos:]
        if typed != text:
            respelled += 1
            same += canonical_text(typed) == canonical_text(text)
    assert respelled >= 100 and same == respelled


def test_families_need_an_agreeing_answer():
    """The same figure and stem cannot have two answers: look-alike figures (two number lines)
    whose questions answer differently are two figures, however close their pictures."""
    from pipelines.clean.dedup import figure_families

    images = {"fig": _encode(_page(seed=21), "PNG"), "scan": _rescanned(_page(seed=21), 3)}
    index = _descriptors(images)
    rows = [
        _q("n1", "What number is shown?", "fig", ["7", "8", "6"], answer=0),
        _q("n2", "What number is shown?", "scan", ["12", "7", "13"], answer=0),  # answers 12
        _q("n3", "What number is shown?", "scan", ["7", "9"], answer=0),  # answers 7: the same figure
    ]
    families = figure_families(deduplicate(_frame(rows), index).kept, index)
    group = dict(zip(families["source_key"].to_list(), families["duplicate_group"].to_list()))
    assert group["n1"] == group["n3"] != group["n2"]


@pytest.mark.parametrize("images_per_worker", [1, 256])  # 1: worker processes; 256: in process
def test_batched_descriptors_equal_single_ones(tmp_path, monkeypatch, images_per_worker):
    from pipelines.clean.dedup import describe_bytes, image_descriptors

    monkeypatch.setattr("pipelines.clean.dedup.phash.MIN_IMAGES_PER_WORKER", images_per_worker)
    paths = []
    for seed in range(6):
        fmt, ext = ("JPEG", "jpg") if seed % 2 else ("PNG", "png")
        path = tmp_path / f"{seed}.{ext}"
        path.write_bytes(_encode(_page(seed=seed), fmt))
        paths.append(path)
    batch = image_descriptors(paths, workers=2, batch=4)
    assert batch.phash.tolist() == phash_files(paths).tolist()
    for i, path in enumerate(paths):
        one = describe_bytes(path.read_bytes())
        for field in ("phash", "thumbnail", "content_phash", "content_thumbnail", "content_box", "colours"):
            assert np.array_equal(getattr(batch, field)[i], getattr(one, field)[0]), field


def test_text_forms_made_in_workers_are_the_ones_made_in_process(monkeypatch):
    from pipelines.clean.dedup import dedup as module

    texts = [rf"Find $x$ if $\frac{{{i}}}{{2}} = x$ ({i} cm)" for i in range(40)] + ["  Plain   words ", "x² − 1"]
    in_process = {kind: module.TextForms().map(kind, texts) for kind in module.TextForms.KINDS}
    monkeypatch.setattr(module, "MIN_TEXTS_PER_WORKER", 1)
    monkeypatch.setattr("pipelines.parallel.os.cpu_count", lambda: 2)  # workers on any machine
    forked = []
    plain = module.forked_pool
    monkeypatch.setattr(module, "forked_pool", lambda workers: forked.append(workers) or plain(workers))
    for kind in module.TextForms.KINDS:
        assert module.TextForms().map(kind, texts) == in_process[kind]
    assert forked and min(forked) > 1


def test_star_groups_let_a_record_wait_for_its_closest_and_keep_the_first_offer():
    from pipelines.clean.dedup.dedup import _star_groups

    # 3 is near 0 and 2, and copies 2 more closely; 2 is near 1 and 3, and copies 1 more closely
    neighbours = {0: [3], 1: [2], 2: [1, 3], 3: [0, 2]}
    # 3 waits for 2, which 1 takes as a member: 3 joins 0, the first to let it wait
    assert sorted(_star_groups(neighbours, {3: 2, 2: 1}, None)) == [(0, 3), (1, 2)]
    # 2 may still become a representative: it takes 3, and 0 stays alone
    assert sorted(_star_groups({0: [3], 2: [3], 3: [0, 2]}, {3: 2}, None)) == [(2, 3)]
    # with no preference (the descriptors alone) the rank decides, as greedy groups always did
    assert sorted(_star_groups({0: [3], 2: [3], 3: [0, 2]}, {}, None)) == [(0, 3)]
    # a group holds one record of each deduplicated source: 3 cannot join 0, and waits in vain
    claims = np.array([1, 0, 0, 1], dtype=np.int64)
    assert sorted(_star_groups(neighbours, {3: 2, 2: 1}, claims)) == [(1, 2)]
