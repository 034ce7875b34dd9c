"""The clip adapter's fast picture path (clip_pixels.py) gives the very pixels of the way it
read pictures before: Pillow ``convert("RGB")`` then transformers' Pillow CLIP processor. Bit
for bit, on pictures of every PNG colour type and depth, JPEG, GIF, with and without a
transparent colour, larger and smaller than the crop, and on real pictures of the corpora."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from pipelines.evaluation.models import clip_pixels
from support.corpora import CORPORA

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def processor(size=336, crop=(336, 336), **kwargs):
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    return CLIPImageProcessorPil(size={"shortest_edge": size}, crop_size={"height": crop[0], "width": crop[1]},
                                 **kwargs)


def reference(proc, path) -> np.ndarray:
    """The adapter's pixels before the fast path."""
    with Image.open(path) as im:
        return proc(images=[im.convert("RGB")], return_tensors="np")["pixel_values"][0]


def drawing(size, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w, h = size
    pixels = np.full((h, w, 3), 255, np.uint8)
    for _ in range(12):  # lines and blocks, as in figures: sharp edges test the filters
        x0, y0 = rng.integers(0, w), rng.integers(0, h)
        pixels[y0 : y0 + rng.integers(1, max(2, h // 3)), x0 : x0 + rng.integers(1, max(2, w // 3))] = \
            rng.integers(0, 256, 3)
    return pixels


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kinds")
    made = {}

    def save(name, image, **kwargs):
        made[name] = folder / name
        image.save(made[name], **kwargs)

    base = drawing((480, 360), 0)
    save("rgb-landscape.png", Image.fromarray(base))
    save("rgb-portrait-tall.png", Image.fromarray(drawing((351, 736), 1)))
    save("rgb-small-upscaled.png", Image.fromarray(drawing((170, 628), 2)))
    save("rgb-square.png", Image.fromarray(drawing((336, 336), 3)))
    save("rgb-large.png", Image.fromarray(drawing((2874, 1021), 4)))
    rgba = np.dstack([drawing((300, 200), 5), np.random.default_rng(5).integers(0, 256, (200, 300), dtype=np.uint8)])
    save("rgba.png", Image.fromarray(rgba))
    save("grey.png", Image.fromarray(drawing((200, 300), 6)[..., 0]))
    save("grey-alpha.png", Image.fromarray(np.dstack([drawing((200, 300), 7)[..., 0]] * 2)))
    palette = Image.fromarray(drawing((400, 250), 8)).convert("P")  # the web palette: 8 bits a pixel
    save("palette.png", palette)
    save("palette-transparent.png", palette, transparency=int(np.asarray(palette)[0, 0]))
    save("palette-4bit.png", Image.fromarray(drawing((400, 250), 8)).convert("P", palette=Image.Palette.ADAPTIVE,
                                                                             colors=16))
    save("rgb-colour-key.png", Image.fromarray(base), transparency=(255, 255, 255))
    save("grey-16bit.png", Image.fromarray(drawing((220, 180), 9)[..., 0].astype(np.uint16) * 257))
    save("one-bit.png", Image.fromarray(drawing((220, 180), 10)[..., 0] > 128))
    save("photo.jpg", Image.fromarray(drawing((640, 480), 11)), quality=85)
    save("grey.jpg", Image.fromarray(drawing((300, 500), 12)[..., 0]))
    save("anim.gif", palette, transparency=3)
    return made


# made in the test, not at collection: transformers' import costs seconds in every worker
@pytest.mark.parametrize("shape", [(336, (336, 336)), (40, (32, 24)), (224, (224, 224))],
                         ids=["336", "40-crop32x24", "224"])
def test_pixels_are_the_processors_bit_for_bit(pictures, shape):
    proc = processor(*shape)
    fast = clip_pixels.ClipPixels(proc)
    assert fast.plan is not None
    paths = list(pictures.values())
    loaded, pixels, errors = fast(paths)
    assert loaded == paths and not errors and pixels.dtype == np.float32
    as_uint8 = fast(paths, as_uint8=True)[1]
    on_torch = clip_pixels.normalize(torch.from_numpy(as_uint8), fast.plan, torch.float32).numpy()
    for name, path, got, got_torch in zip(pictures, paths, pixels, on_torch):
        expected = reference(proc, path)
        assert got.shape == expected.shape, name
        assert np.array_equal(got, expected), name
        assert np.array_equal(got_torch, expected), name


def test_real_pictures_of_the_corpora_bit_for_bit():
    if not CORPORA.is_dir():
        pytest.skip(f"the real corpora are not at {CORPORA}")
    files = sorted(p for p in CORPORA.rglob("*") if p.suffix.lower() in (".png", ".jpg", ".jpeg"))[::40]
    assert len(files) > 50
    proc = processor()
    _, pixels, errors = clip_pixels.ClipPixels(proc)(files)
    assert not errors
    for path, got in zip(files, pixels):
        assert np.array_equal(got, reference(proc, path)), path


def test_unreadable_pictures_fail_as_before(tmp_path, pictures):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)  # a PNG signature, then nothing valid
    truncated = tmp_path / "truncated.png"
    data = pictures["rgb-landscape.png"].read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    cut_end = tmp_path / "cut-end.png"  # libspng refuses it, Pillow reads it (as before)
    cut_end.write_bytes(data[:-20])
    missing = tmp_path / "missing.png"
    fast = clip_pixels.ClipPixels(processor())
    loaded, pixels, errors = fast([str(broken), str(truncated), str(missing), str(cut_end), str(pictures["grey.png"])])
    assert loaded == [str(cut_end), str(pictures["grey.png"])] and pixels.shape == (2, 3, 336, 336)
    assert np.array_equal(pixels[0], reference(processor(), cut_end))
    for path in (broken, truncated, missing):
        try:
            reference(processor(), path)
        except Exception as exc:
            assert errors[str(path)] == f"unreadable image {path}: {type(exc).__name__}"
        else:
            raise AssertionError(f"{path} should not be readable")


def test_processors_the_fast_path_does_not_know_go_through_the_processor(pictures):
    assert clip_pixels.plan_for(processor(do_center_crop=False)) is None
    assert clip_pixels.plan_for(processor(32, (64, 64))) is None  # a crop larger than the resize pads
    assert clip_pixels.plan_for(object()) is None
    proc = processor(do_center_crop=False)
    loaded, pixels, _ = clip_pixels.ClipPixels(proc)([pictures["rgb-landscape.png"]], as_uint8=True)
    assert pixels.dtype == np.float32
    assert np.array_equal(pixels[0], reference(proc, pictures["rgb-landscape.png"]))


def test_png_fast_path_admits_only_8bit_pictures_without_a_transparent_colour(pictures):
    admitted = {name for name, path in pictures.items() if clip_pixels._png_8bit_opaque(path.read_bytes())}
    assert admitted == {"rgb-landscape.png", "rgb-portrait-tall.png", "rgb-small-upscaled.png", "rgb-square.png",
                        "rgb-large.png", "rgba.png", "grey.png", "grey-alpha.png", "palette.png"}
    assert not clip_pixels._png_8bit_opaque(io.BytesIO(b"GIF89a").getvalue())
