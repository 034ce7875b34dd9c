"""Deduplication of quiz questions by text and images, question families, and the perceptual image hash."""

from pipelines.clean.dedup.dedup import (
    DedupConfig,
    DedupInputError,
    DedupResult,
    deduplicate,
    figure_families,
)
from pipelines.clean.dedup.image_index import MultiIndexHashIndex
from pipelines.clean.dedup.image_match import ImageIndex, ImageMatcher, MatchRule, aligned_distance
from pipelines.clean.dedup.normalize import (
    canonical_text,
    math_tokens,
    normalize_text,
    question_id_of,
    question_identity,
)
from pipelines.clean.dedup.phash import (
    ImageDescriptors,
    PhashError,
    describe_bytes,
    hamming,
    image_descriptors,
    image_signature_bytes,
    image_signatures,
    phash_bytes,
    phash_files,
    phash_image,
    phash_many,
    thumbnail_distance,
)

__all__ = [
    "DedupConfig", "DedupInputError", "DedupResult", "deduplicate", "figure_families", "MultiIndexHashIndex",
    "ImageIndex", "ImageMatcher", "MatchRule", "aligned_distance",
    "canonical_text", "math_tokens", "normalize_text", "question_id_of", "question_identity",
    "ImageDescriptors", "PhashError", "describe_bytes", "hamming", "image_descriptors", "image_signature_bytes",
    "image_signatures", "phash_bytes", "phash_files", "phash_image", "phash_many", "thumbnail_distance",
]
