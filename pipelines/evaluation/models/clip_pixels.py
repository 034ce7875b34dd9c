"""CLIP's picture preprocessing, fast, with the very pixels of transformers' Pillow CLIP processor.

The processor (``CLIPImageProcessorPil``) converts to RGB, resizes the shortest edge to
``size`` (Pillow, bicubic), crops the centre ``crop_size``, rescales by 1/255 and normalizes
by the mean and std, through several float64/float32 copies of the whole resized picture.
Here, per picture (issue 26: the DataLoader workers were the suspected limit on a GPU):

- decode: an 8-bit PNG without a transparent colour by libspng (``pyspng``, a dependency of
  the project) straight to RGB, the same bytes as Pillow's ``convert("RGB")``
  (tests/evaluation/test_clip_pixels.py); any other file, and any PNG libspng refuses, by
  Pillow as before (same errors);
- resize: the same Pillow call on the uint8 picture, cropped as a numpy view (no round trip
  through numpy, channel-first copies and back into Pillow);
- the pixels leave the worker as uint8 (a quarter of float32's bytes to pass between
  processes, pin and copy to the GPU); ``normalize`` / ``normalize_numpy`` then apply the
  processor's own arithmetic (float64 rescale, float32 subtract and divide), bit for bit.

A processor that is not the Pillow backend, or that asks for anything else (padding, no
crop, a longest edge, a crop larger than the resize), goes through the processor unchanged.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FAST = True  # tests turn it off to compare with the processor's own path


class Plan:
    """The standard CLIP steps read from a Pillow processor."""

    def __init__(self, processor):
        self.shortest_edge = int(processor.size.shortest_edge)
        self.crop = (int(processor.crop_size.height), int(processor.crop_size.width))
        self.resample = int(processor.resample)
        scale = float(processor.rescale_factor) if processor.do_rescale else None
        mean = np.asarray(processor.image_mean, dtype=np.float32) if processor.do_normalize else None
        std = np.asarray(processor.image_std, dtype=np.float32) if processor.do_normalize else None
        self.scale, self.mean, self.std = scale, mean, std
        # the processor's rescale (float64, then float32) and normalize (float32) of every value
        values = np.arange(256, dtype=np.float64)
        x = (values * scale).astype(np.float32) if scale is not None else values.astype(np.float32)
        x = np.repeat(x[None, :], 3, axis=0)
        self.table = (x - mean[:, None]) / std[:, None] if mean is not None else x


def plan_for(processor) -> Plan | None:
    """A Plan when ``processor`` is the Pillow CLIP processor doing the standard steps, else None."""
    try:
        if getattr(processor, "backend", None) != "pil":
            return None
        size, crop = processor.size, processor.crop_size
        if not (processor.do_convert_rgb and processor.do_resize and processor.do_center_crop):
            return None
        if not size.shortest_edge or size.longest_edge or size.height or size.width or size.max_height:
            return None
        if getattr(processor, "do_pad", None) or getattr(processor, "default_to_square", False):
            return None
        if not (crop.height and crop.width) or max(crop.height, crop.width) > size.shortest_edge:
            return None
        if processor.do_normalize and (len(processor.image_mean) != 3 or len(processor.image_std) != 3):
            return None
        return Plan(processor)
    except (AttributeError, TypeError, ValueError):
        return None


def _png_8bit_opaque(data: bytes) -> bool:
    """An 8-bit PNG (IHDR: bit depth at byte 24, colour type at 25: grey, RGB, palette,
    grey+alpha, RGBA) without a tRNS chunk (which comes before the first IDAT)."""
    if not (len(data) > 33 and data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"):
        return False
    if data[24] != 8 or data[25] not in (0, 2, 3, 4, 6):
        return False
    first_data = data.find(b"IDAT")
    return first_data > 0 and data.find(b"tRNS", 33, first_data) < 0


def decode_rgb(path):
    """The picture as the adapter always gave it to the processor: ``convert("RGB")`` (an alpha
    channel dropped), then, as the processor does, a transparent colour (PNG tRNS, GIF) laid
    on white. libspng for 8-bit PNGs without tRNS (the same bytes), Pillow otherwise (and for
    whatever libspng refuses, so that a broken file fails as it did)."""
    from PIL import Image

    data = Path(path).read_bytes()
    if FAST and _png_8bit_opaque(data):
        try:
            import pyspng

            return Image.fromarray(pyspng.load(data, "RGB"))
        except Exception:  # libspng refuses: Pillow decides, and words the error
            pass
    with Image.open(io.BytesIO(data)) as im:
        rgb = im.convert("RGB")
    if rgb.info.get("transparency") is not None:  # the processor's convert_to_rgb
        white = Image.new("RGBA", rgb.size, (255, 255, 255, 255))
        rgb = Image.alpha_composite(white, rgb.convert("RGBA")).convert("RGB")
    return rgb


def crop_resized(image, plan: Plan) -> np.ndarray:
    """(3, crop h, crop w) uint8: the processor's shortest-edge resize (its sizes: ``int`` of the
    long edge; the same Pillow call) and centre crop (offsets floored). ``plan_for`` admits no
    crop larger than the resize, so no padding is needed.

    The whole picture is resized, then cropped: resizing only the crop's source box
    (``Image.resize(box=...)``) saves 0.5-1.3 ms a picture but is not the same: Pillow 13 then
    may run its two passes in the other order, up to 36 grey levels off on a few pixels of
    some pictures (found on the corpora's pictures)."""
    width, height = image.size
    size = plan.shortest_edge
    if width <= height:
        new_w, new_h = size, int(size * height / width)
    else:
        new_h, new_w = size, int(size * width / height)
    crop_h, crop_w = plan.crop
    top, left = (new_h - crop_h) // 2, (new_w - crop_w) // 2
    if (new_w, new_h) != (width, height):
        image = image.resize((new_w, new_h), resample=plan.resample, reducing_gap=None)
    pixels = np.asarray(image)[top : top + crop_h, left : left + crop_w]
    return pixels.transpose(2, 0, 1)


class ClipPixels:
    """Paths -> (paths read, pixels or None, {path: error}). Pixels: (N, 3, H, W) uint8 with
    ``as_uint8`` on the fast path (``normalize`` finishes them), float32 as the processor gives
    them otherwise."""

    def __init__(self, processor):
        self.processor = processor
        self.plan = plan_for(processor)

    def __call__(self, paths, as_uint8: bool = False):
        plan = self.plan if FAST else None
        loaded, pictures, errors = [], [], {}
        for path in paths:
            try:
                image = decode_rgb(path)
                pictures.append(crop_resized(image, plan) if plan is not None else image)
                loaded.append(path)
            except Exception as exc:  # Pillow raises many types for a bad file
                errors[path] = f"unreadable image {path}: {type(exc).__name__}"
        if not pictures:
            return loaded, None, errors
        if plan is None:
            pixels = self.processor(images=pictures, return_tensors="np")["pixel_values"]
            return loaded, np.ascontiguousarray(pixels, dtype=np.float32), errors
        stacked = np.stack(pictures)
        return loaded, (stacked if as_uint8 else normalize_numpy(stacked, plan)), errors


def normalize_numpy(pixels: np.ndarray, plan: Plan) -> np.ndarray:
    """(N, 3, H, W) uint8 -> the processor's float32 pixels, by a table of its 3 x 256 values."""
    out = np.empty(pixels.shape, dtype=np.float32)
    for channel in range(pixels.shape[1]):
        np.take(plan.table[channel], pixels[:, channel], out=out[:, channel])
    return out


def normalize(pixels, plan: Plan | None, dtype):
    """Torch (N, 3, H, W) uint8 pixels (on any device) -> the processor's float pixels (its
    arithmetic: float64 rescale, float32 subtract and divide), cast to ``dtype``; float pixels
    (the processor's path) are only cast."""
    import torch

    if pixels.dtype != torch.uint8:
        return pixels.to(dtype=dtype)
    if pixels.device.type not in ("cpu", "cuda"):  # float64 is not everywhere (MPS): on the CPU
        return normalize(pixels.cpu(), plan, dtype).to(pixels.device)
    if plan.scale is not None:
        x = (pixels.to(torch.float64) * plan.scale).to(torch.float32)
    else:
        x = pixels.to(torch.float32)
    if plan.mean is not None:
        mean = torch.as_tensor(plan.mean, device=x.device)[None, :, None, None]
        std = torch.as_tensor(plan.std, device=x.device)[None, :, None, None]
        x = (x - mean) / std
    return x.to(dtype=dtype)
