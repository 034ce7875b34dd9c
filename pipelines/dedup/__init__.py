"""Deduplication of quiz questions by text and images, and the perceptual image hash."""

from .dedup import DedupConfig, DedupInputError, DedupResult, deduplicate
from .image_index import MultiIndexHashIndex
from .minhash import LshParams, MinHasher, band_keys, candidate_pairs, shingle_hashes
from .normalize import math_tokens, normalize_text, question_id_of, question_identity
from .phash import (
    PhashError, hamming, image_signature_bytes, image_signatures, phash_bytes, phash_files, phash_image,
    phash_many, thumbnail_distance,
)

__all__ = [
    "DedupConfig", "DedupInputError", "DedupResult", "deduplicate", "MultiIndexHashIndex",
    "LshParams", "MinHasher", "band_keys", "candidate_pairs", "shingle_hashes",
    "math_tokens", "normalize_text", "question_id_of", "question_identity",
    "PhashError", "hamming", "image_signature_bytes", "image_signatures", "phash_bytes", "phash_files",
    "phash_image", "phash_many", "thumbnail_distance",
]
