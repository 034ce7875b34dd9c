"""CogME profiles: taxonomies, question tags (rules and manual), agreement, profiles, report section."""

from .agreement import agreement, agreement_by_sub_component, cohen_kappa
from .manual import ManualTagsError, load_manual_tags
from .tagger import RULES_SOURCE, TaggerError, classify_question, tag_questions
from .tags import TAG_SCHEMA, TagRuleError, validate_tags
from .taxonomy import Taxonomy, TaxonomyError, load_taxonomy

__all__ = [
    "RULES_SOURCE", "TAG_SCHEMA", "ManualTagsError", "TagRuleError", "TaggerError", "Taxonomy", "TaxonomyError",
    "agreement", "agreement_by_sub_component", "classify_question", "cohen_kappa", "load_manual_tags",
    "load_taxonomy", "tag_questions", "validate_tags",
]
