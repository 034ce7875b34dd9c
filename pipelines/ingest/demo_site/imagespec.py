"""What an image on the demo site shows, without drawing it.

An ``ImageSpec`` names a drawing (``kind`` and its ``params``) and an encoding ``variant``:
``""`` (PNG, the default), ``"jpeg"`` (the same drawing re-encoded as JPEG), ``"resize"``
(the same drawing scaled by 3/4, PNG) or ``"rescan"`` (the page printed and scanned again:
slightly rescaled, each margin cut or widened a little, grain, JPEG). Two equal specs always
render to the same bytes, so ``key`` identifies the image bytes and ``content_key`` the drawing
(equal for an image and its re-encoded, resized or re-scanned near-duplicate).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

VARIANTS = ("", "jpeg", "resize", "rescan")


@dataclass(frozen=True, slots=True)
class ImageSpec:
    kind: str
    params: tuple
    variant: str = ""

    @property
    def content_key(self) -> str:
        """16 hex characters naming the drawing, whatever its encoding."""
        return hashlib.blake2b(repr((self.kind, self.params)).encode(), digest_size=8).hexdigest()

    @property
    def key(self) -> str:
        """16 hex characters naming the exact image bytes (drawing and encoding)."""
        return hashlib.blake2b(repr((self.kind, self.params, self.variant)).encode(), digest_size=8).hexdigest()

    @property
    def extension(self) -> str:
        return "jpg" if self.variant in ("jpeg", "rescan") else "png"

    @property
    def mime_type(self) -> str:
        return "image/jpeg" if self.variant in ("jpeg", "rescan") else "image/png"

    def with_variant(self, variant: str) -> "ImageSpec":
        if variant not in VARIANTS:
            raise ValueError(f"unknown image variant {variant!r}")
        return ImageSpec(self.kind, self.params, variant)
