"""The image descriptors (page and content hashes, thumbnails, content box, colours, size) pinned bit
for bit on real pictures and on every decoder path: a faster implementation must give the same
bytes, or every stored image index would be stale."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pytest
from PIL import Image, ImageDraw

from pipelines.clean.dedup.phash import colour_histogram, content_box, describe_bytes, image_descriptors
from support.corpora import CORPORA
from support.images import real_png

CORPUS_IMAGES = (
    "scemqa/Multiple_Choice/Chemistry/26.jpg",          # JPEG, grey, small
    "scemqa/Multiple_Choice/Math/29.jpg",               # JPEG, grey
    "scemqa/Multiple_Choice/Biology/102.jpg",           # JPEG RGB
    "scemqa/Multiple_Choice/Chemistry_extra/7.png",     # PNG RGB, reduced 5x for the box
    "scemqa/Multiple_Choice/Biology/1.png",             # PNG RGBA
    "gaokao-mm/Data/2010-2023_Biology_MCQs/2010-2023_Biology_MCQs_0_0.png",   # PNG RGB
    "gaokao-mm/Data/2010-2023_Biology_MCQs/2010-2023_Biology_MCQs_10_0.png",  # PNG RGBA
    "opendsa-html/Exercises/MengBridgeCourse/BagsCheckpointImages/Checkpoint4_Q1_Answer1F_Wrong3.png",  # 1914x154 RGBA
    "scemqa/Multiple_Choice/Chemistry/86.jpg",          # JPEG, coloured
    "scemqa/Multiple_Choice/Math/16.png",               # PNG, coloured
    "gaokao-mm/Data/2010-2023_Chemistry_MCQs/2010-2023_Chemistry_MCQs_60_0.png",  # PNG, coloured, tall
    "opendsa-html/Exercises/CMP/DatatypeCM.png",        # PNG RGBA, coloured
)


def _png(im: Image.Image, **params) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "PNG" if "gif" not in params else "GIF", **{k: v for k, v in params.items() if k != "gif"})
    return buf.getvalue()


def _palette_image(width: int, height: int) -> Image.Image:
    y, x = np.mgrid[0:height, 0:width]
    im = Image.fromarray(((x // 9 + 2 * (y // 7)) % 6).astype(np.uint8), "P")
    im.putpalette([255, 255, 255, 200, 30, 30, 30, 140, 60, 20, 60, 200, 240, 200, 40, 0, 0, 0])
    return im


def _drawing(width: int, height: int) -> Image.Image:
    im = Image.new("RGB", (width, height), (250, 248, 240))
    d = ImageDraw.Draw(im)
    d.rectangle([width // 5, height // 4, width * 3 // 4, height * 4 // 5], outline=(20, 20, 20), width=5)
    d.ellipse([width // 3, height // 3, width // 2, height // 2], fill=(46, 160, 67))
    d.line([0, height - 1, width - 1, 0], fill=(200, 40, 40), width=3)
    return im


def synthetic_images() -> dict[str, bytes]:
    """Lossless files of the modes the decoders treat apart (their pixels do not depend on the encoder)."""
    y, x = np.mgrid[0:100, 0:150]
    alpha = np.where((x // 30) % 2 == 1, 255, 60).astype(np.uint8)
    la = Image.fromarray(np.stack([(x + y).astype(np.uint8), alpha], -1), "LA")
    return {
        "support_rgb": real_png(3, 48),
        "palette_4bit_transparent": _png(_palette_image(90, 70), bits=4, transparency=0),
        "palette_8bit": _png(_palette_image(130, 140)),
        "grey_alpha": _png(la),
        "gif_transparent": _png(_palette_image(120, 80), gif=True, transparency=0),
        "grey_16bit": _png(Image.fromarray(((x * 397 + y * 211) % 65536).astype(np.uint16)).resize((300, 260))),
        "rgb_reduced_3x": _png(_drawing(700, 400)),
    }


# (width, height, page phash, content phash, content box, colours hex,
#  sha256[:16] of page thumbnail + content thumbnail), computed before the descriptors were vectorized
PINNED_CORPUS = {
    "scemqa/Multiple_Choice/Chemistry/26.jpg":
        (273, 33, "0x81e6e45d55e6205f", "0x8121fe5e01a1fe5e", [4, 0, 1000, 1000],
         "00000000000000000000000000000000", "a860adff58245170"),
    "scemqa/Multiple_Choice/Math/29.jpg":
        (436, 257, "0x85907bdf261da15a", "0x8590fb6fa428d9c6", [5, 0, 986, 1000],
         "00000000000000000000000000000000", "20157edf1aea647c"),
    "scemqa/Multiple_Choice/Biology/102.jpg":
        (498, 266, "0xc65391895c0ff8f8", "0xc613b1cc6e7613d1", [4, 8, 996, 992],
         "00000000000000000000000000000000", "18aa4720057210ee"),
    "scemqa/Multiple_Choice/Chemistry_extra/7.png":
        (778, 643, "0x821f974fa711e92c", "0x8019bf4be3b1d86c", [19, 23, 955, 977],
         "00000000000000000000000000000000", "2dd10d8cbfce9ece"),
    "scemqa/Multiple_Choice/Biology/1.png":
        (640, 304, "0xae666666a5a6a5a4", "0xe666d19999586666", [16, 13, 962, 980],
         "00000000000000000000000000000000", "7f46d23bceb1107f"),
    "gaokao-mm/Data/2010-2023_Biology_MCQs/2010-2023_Biology_MCQs_0_0.png":
        (512, 387, "0x8281f79866de625d", "0x8081ff5d9c66d923", [12, 47, 971, 992],
         "00000000000000000000000000000000", "3313beaa7e13b730"),
    "gaokao-mm/Data/2010-2023_Biology_MCQs/2010-2023_Biology_MCQs_10_0.png":
        (241, 512, "0xbb69946791949659", "0xe3249b66839a93cd", [145, 61, 846, 973],
         "00000000000000000000000000000000", "dde7f8c628dc07e2"),
    "opendsa-html/Exercises/MengBridgeCourse/BagsCheckpointImages/Checkpoint4_Q1_Answer1F_Wrong3.png":
        (1914, 154, "0xb32a5c595559545b", "0xbb71448ebb71448e", [1, 0, 999, 1000],
         "00000000000000000000000000000000", "5f4f46e1e9a75637"),
    "scemqa/Multiple_Choice/Chemistry/86.jpg":
        (155, 79, "0xb300330133fbd9f9", "0xe65599aaa8ac6655", [0, 0, 994, 1000],
         "0f25000000000000094f040000000000", "03b2145cd237c93e"),
    "scemqa/Multiple_Choice/Math/16.png":
        (138, 216, "0xaa4bd1e3b6264a0f", "0xb94dc3c792056d3c", [29, 28, 964, 954],
         "08240000000000000a31010000000000", "d07a4dd6c9cf736f"),
    "gaokao-mm/Data/2010-2023_Chemistry_MCQs/2010-2023_Chemistry_MCQs_60_0.png":
        (412, 770, "0xb1ce8633714c3c97", "0x93cc9c33736c329a", [7, 8, 993, 996],
         "050e0000000000000007000000000000", "29ad2ae909e34d58"),
    "opendsa-html/Exercises/CMP/DatatypeCM.png":
        (605, 466, "0xf8101ec2a3d23d7d", "0xfd1096c2a3b4dc2d", [25, 19, 980, 981],
         "00001d08000000000000000000000000", "4929a0945b18f0d4"),
}

PINNED_SYNTHETIC = {
    "support_rgb":
        (48, 48, "0xb896d9dae483866c", "0xbab699daeda08264", [0, 42, 958, 1000],
         "000000000b090d3f412e002108000701", "031d93064a69e39b"),
    "palette_4bit_transparent":
        (90, 70, "0xdf007e00fe04fea3", "0xff5c2a5c2ab300b3", [0, 0, 1000, 1000],
         "1f1b260500192000041a21000203001f", "8a9bcff2a27667ee"),
    "palette_8bit":
        (130, 140, "0xff2d062d06ad06ad", "0xffac06ad062c06bd", [8, 7, 992, 993],
         "201a2c090612170103191b070000061c", "2b06d335a9c44599"),
    "grey_alpha":
        (150, 100, "0x8000000000000000", "0x8f0abe0a650aff0e", [193, 0, 807, 990],
         "00000000000000000000000000000000", "b5d20233e696cd2f"),
    "gif_transparent":
        (120, 80, "0xffac04ac04af05af", "0xffaf84af9050f210", [8, 0, 992, 1000],
         "201b2a0700171d0305191c000103001d", "83f3ec7b3acfe4c1"),
    "grey_16bit":
        (300, 260, "0xd2b5aa92555555aa", "0xd2b5aa4a5559b4aa", [0, 0, 1000, 1000],
         "00000000000000000000000000000000", "18dc0297705801f8"),
    "rgb_reduced_3x":
        (700, 400, "0xbb71cccc933189cc", "0xbb71c48c33316cce", [13, 15, 983, 985],
         "3e000000007937000000000000000010", "c0d4c036f24e483b"),
}


def _fingerprints(d, n: int) -> list[tuple]:
    return [
        (int(d.width[i]), int(d.height[i]), f"{int(d.phash[i]):#018x}", f"{int(d.content_phash[i]):#018x}",
         d.content_box[i].tolist(), d.colours[i].tobytes().hex(),
         hashlib.sha256(d.thumbnail[i].tobytes() + d.content_thumbnail[i].tobytes()).hexdigest()[:16])
        for i in range(n)
    ]


def test_pins_cover_the_listed_images():
    assert set(PINNED_CORPUS) == set(CORPUS_IMAGES)
    assert set(PINNED_SYNTHETIC) == set(synthetic_images())


@pytest.mark.parametrize("workers", [1, 2])
def test_descriptors_of_real_corpus_pictures_are_pinned(workers, monkeypatch):
    monkeypatch.setattr("pipelines.clean.dedup.phash.MIN_IMAGES_PER_WORKER", 1)
    paths = [CORPORA / rel for rel in CORPUS_IMAGES]
    got = _fingerprints(image_descriptors(paths, workers=workers), len(paths))
    assert dict(zip(CORPUS_IMAGES, got)) == PINNED_CORPUS
    assert [g[:2] for g in got] == [Image.open(p).size for p in paths]  # the declared size, not a JPEG draft's


@pytest.mark.parametrize("name", sorted(PINNED_SYNTHETIC))
def test_descriptors_of_every_decoder_path_are_pinned(name):
    data = synthetic_images()[name]
    assert _fingerprints(describe_bytes(data), 1)[0] == PINNED_SYNTHETIC[name]
    assert _fingerprints(describe_bytes(data), 1)[0][:2] == Image.open(io.BytesIO(data)).size


def _reference_content_box(rgb: np.ndarray) -> tuple[int, int, int, int]:
    """content_box as first written: float strength, channel maximum by a reduction."""
    a = rgb.astype(np.int16)
    h, w = a.shape[:2]
    strength = np.zeros((h, w), dtype=np.float64)
    if w > 1:
        dx = np.abs(np.diff(a, axis=1)).max(axis=2)
        strength[:, 1:] += dx
        strength[:, :-1] += dx
    if h > 1:
        dy = np.abs(np.diff(a, axis=0)).max(axis=2)
        strength[1:, :] += dy
        strength[:-1, :] += dy
    strength = np.maximum(strength - 48, 0.0)
    total = strength.sum()
    if total <= 0:
        return 0, 0, w, h

    def bounds(mass):
        cumulative = np.cumsum(mass) / total
        lo = int(np.searchsorted(cumulative, 0.005, side="right"))
        hi = int(np.searchsorted(cumulative, 1.0 - 0.005, side="left")) + 1
        return lo, max(hi, lo + 1)

    left, right = bounds(strength.sum(axis=0))
    top, bottom = bounds(strength.sum(axis=1))
    return left, top, right, bottom


def _reference_colour_histogram(rgb: np.ndarray) -> np.ndarray:
    """colour_histogram as first written: float64 throughout, np.add.at."""
    a = rgb.reshape(-1, 3).astype(np.float64)
    top, low = a.max(axis=1), a.min(axis=1)
    saturation = top - low
    coloured = saturation >= 48
    out = np.zeros(16, dtype=np.float64)
    mass = max(int(coloured.sum()), 0.03 * len(a))
    a, top, saturation = a[coloured], top[coloured], saturation[coloured]
    if len(a):
        r, g, b = a.T
        hue = np.where(top == r, ((g - b) / saturation) % 6, np.where(top == g, (b - r) / saturation + 2,
                                                                        (r - g) / saturation + 4)) / 6.0
        position = hue * 16 - 0.5
        lower = np.floor(position).astype(np.int64)
        weight = position - lower
        np.add.at(out, lower % 16, 1.0 - weight)
        np.add.at(out, (lower + 1) % 16, weight)
    return out / mass


def _test_pictures(rng: np.random.Generator) -> list[np.ndarray]:
    shapes = [(1, 1), (1, 9), (7, 1), (2, 2), (48, 48), (33, 250), (200, 131)]
    pictures = []
    for h, w in shapes:
        pictures.append(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))  # noise: every pixel an edge
        flat = np.full((h, w, 3), 240, dtype=np.uint8)
        pictures.append(flat)  # no edge, no colour
        drawn = flat.copy()
        drawn[h // 4 : max(h // 4 + 1, 3 * h // 4), w // 3 : max(w // 3 + 1, 2 * w // 3)] = rng.integers(0, 256, 3)
        pictures.append(drawn)
        pictures.append(np.clip(drawn.astype(np.int16) + rng.integers(-40, 40, drawn.shape), 0, 255).astype(np.uint8))
    return pictures


def test_content_box_equals_the_float_reference():
    for rgb in _test_pictures(np.random.default_rng(5)):
        assert content_box(rgb) == _reference_content_box(rgb), rgb.shape
        assert content_box(rgb.astype(np.int16)) == _reference_content_box(rgb), rgb.shape


def test_colour_histogram_equals_the_add_at_reference_bit_for_bit():
    for rgb in _test_pictures(np.random.default_rng(6)):
        got, want = colour_histogram(rgb), _reference_colour_histogram(rgb)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), rgb.shape
        assert colour_histogram(rgb.astype(np.float64)).tobytes() == want.tobytes(), rgb.shape


def test_a_page_in_a_darker_surround_is_described_without_it():
    """A scan's black margin or a table around a photographed page is not the figure's content:
    the content box, hash and colours are those of the page inside (``phash._page_in_surround``),
    so the copy is a candidate of its original (hard cases: 5 of 60 such copies merged before,
    53 now). A figure on white paper to its edges is described as before."""
    from pipelines.clean.dedup.phash import describe_bytes
    from support import picture_pairs as pp

    apart = []
    figures = pp.real_figures(12, seed=0)
    for path in figures:
        data = path.read_bytes()
        im = pp.rgb(data)
        framed = pp.Image.new("RGB", (im.width + 40, im.height + 30), (40, 32, 28))
        framed.paste(im, (22, 12))
        a, b = describe_bytes(data), describe_bytes(pp.png(framed))
        if int(a.content_phash[0] ^ b.content_phash[0]).bit_count() > 6 or \
                np.abs(a.content_box[0].astype(int) - b.content_box[0].astype(int)).max() > 20:
            apart.append(path.name)
    # (SceMQA Physics 120.jpg, framed to its edges in black and grey, was apart until the page's
    # paper was read from the whole page: a quarter of its ring lighter than the surround suffices)
    assert apart == [], apart
    white = pp.real_figures(1, seed=0)[0].read_bytes()
    from pipelines.clean.dedup import phash

    assert phash._page_in_surround(np.asarray(pp.rgb(white)), pp.rgb(white), None) is None


def test_a_jpeg_of_a_page_in_a_darker_surround_is_described_without_it_at_its_reduced_scale():
    """A JPEG is described from its draft (decoded at a reduced scale): the page's edge, between
    two of the draft's pixels, blends the paper with the surround in a line all round the page,
    and that line was the content's box (the whole page) and the padding of its thumbnail (8 of
    12 real figures apart from their original; hard cases: 3 of 60 copies on a surround never
    candidates). The blended lines are left out of the page (``ink._unblended``)."""
    from pipelines.clean.dedup import ink
    from pipelines.clean.dedup.phash import describe_bytes
    from support import picture_pairs as pp

    apart = []
    for path in pp.real_figures(12, seed=0):
        data = path.read_bytes()
        im = pp.rgb(data)
        framed = pp.Image.new("RGB", (im.width + 40, im.height + 30), (40, 32, 28))
        framed.paste(im, (22, 12))
        a, b = describe_bytes(data), describe_bytes(pp.jpeg(framed, 85))
        if int(a.content_phash[0] ^ b.content_phash[0]).bit_count() > 6 or \
                np.abs(a.content_box[0].astype(int) - b.content_box[0].astype(int)).max() > 20:
            apart.append(path.name)
    assert len(apart) <= 1, apart
    # a blend is left out only where the pixels were resampled: a page's own edge lines stay
    page = np.full((60, 80), 255, np.uint8)
    page[0, :], page[:, 0] = 150, 150
    grey = np.full((80, 100), 30, np.uint8)
    grey[10:70, 10:90] = page
    assert ink.page_box(grey) == (10, 10, 90, 70)
    assert ink.page_box(grey, resampled=True) == (11, 11, 90, 70)
