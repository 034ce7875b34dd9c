"""Options drawn as separate pictures (``image_options=``), for a question that has several
pictures and no options of its own (none in its text with ``options_in_text=1``, no
``choices`` field, no ``choice_images`` field).

The setting says how the pictures hold the options; nothing is inferred from the pictures:

- ``none`` (the default): such a question is quarantined as ``several images``.
- ``labelled:N``: N options whose pictures each show their own label (``A.`` drawn beside
  the graph), in any order (GAOKAO-MM lists Chemistry #0's option pictures as C, B, A, D and
  puts the problem figure first or last). The question's figure becomes all its pictures
  joined into one (``join_pictures``, in source order, so every drawn label stays beside its
  picture), and its options are the labels ``A``, ``B``, ... (kept in order downstream, as
  figure labels). Correct whatever the picture order, provided each option picture shows
  its label.
- ``ordered:N``: the pictures are in option order: with N pictures they are options A, B, ...
  (``choice_images``); with N + 1 the first is the problem figure and the others the options.
  Only for sources known to list pictures that way (GAOKAO-MM does not).

Either way the question must have N or N + 1 pictures; any other count is quarantined
(``pictures do not fit image_options``) rather than guessed. N is 2 to 5 (the STEM schema's
option counts).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Sequence

from PIL import Image

from pipelines.store.images import MAX_PIXELS, MAX_SIDE, ImageRejected, inspect_image
from pipelines.ingest.importers.common import ImportSourceError, RecordProblem, one_line

MODES = ("labelled", "ordered")
GAP = 16  # white pixels between joined pictures and around them
PICTURES_DO_NOT_FIT = "pictures do not fit image_options"


@dataclass(frozen=True)
class ImageOptions:
    mode: str  # "labelled" or "ordered"
    count: int

    @property
    def text(self) -> str:
        return f"{self.mode}:{self.count}"

    def labels(self) -> list[str]:
        return [chr(ord("A") + i) for i in range(self.count)]

    def check_fits(self, pictures: int) -> None:
        if pictures not in (self.count, self.count + 1):
            raise RecordProblem(
                PICTURES_DO_NOT_FIT,
                f"{pictures} pictures; image_options={self.text} takes {self.count} or {self.count + 1}",
            )


def parse_image_options(value: str | None, kind: str) -> ImageOptions | None:
    """The ``image_options`` setting, or None for ``none`` / unset; ImportSourceError if malformed."""
    if value in (None, "", "none"):
        return None
    mode, sep, count = value.partition(":")
    if mode in MODES and sep and count.isdigit() and 2 <= int(count) <= 5:
        return ImageOptions(mode, int(count))
    raise ImportSourceError(
        f"image_options={value!r} in {kind} mapping: expected none, labelled:N or ordered:N with N from 2 to 5"
    )


def picture_layout(sizes: Sequence[tuple[int, int]]) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Top-left corners of pictures of ``sizes`` joined in a grid of ceil(sqrt(n)) columns,
    row by row in the given order, GAP pixels apart and from the edges; and the joined size."""
    columns = max(1, math.ceil(math.sqrt(len(sizes))))
    rows = [sizes[i : i + columns] for i in range(0, len(sizes), columns)]
    corners, y, width = [], GAP, 0
    for row in rows:
        x = GAP
        for w, _ in row:
            corners.append((x, y))
            x += w + GAP
        width = max(width, x)
        y += max(h for _, h in row) + GAP
    return corners, (width, y)


def join_pictures(pictures: Sequence[bytes]) -> bytes:
    """One PNG holding every picture at its own size on white (``picture_layout``);
    transparent parts become white. Bytes that are no acceptable image, or a joined picture
    over the image store's limits, raise RecordProblem."""
    sizes = []
    for i, data in enumerate(pictures):
        try:
            info = inspect_image(data)
        except ImageRejected as exc:
            raise RecordProblem("picture rejected", f"picture {i}: {one_line(exc, 160)}") from None
        sizes.append((info.width, info.height))
    corners, size = picture_layout(sizes)
    if max(size) > MAX_SIDE or size[0] * size[1] > MAX_PIXELS:
        raise RecordProblem("joined pictures too large", f"{size[0]}x{size[1]} pixels")
    joined = Image.new("RGB", size, (255, 255, 255))
    for data, corner in zip(pictures, corners):
        with Image.open(io.BytesIO(data)) as im:
            rgba = im.convert("RGBA")
        joined.paste(rgba.convert("RGB"), corner, mask=rgba.getchannel("A"))
    out = io.BytesIO()
    joined.save(out, format="PNG")
    return out.getvalue()
