"""Where questions come from: the crawler's web sources and the corpus importers."""

from .spec import SourceSpec, SourceSpecError, parse_source_spec

__all__ = ["SourceSpec", "SourceSpecError", "parse_source_spec"]
