"""CogME profiles: taxonomies, question tags (rules and manual), agreement, profiles, report section."""

from pipelines.profiles.cogme.agreement import agreement, agreement_by_sub_component, cohen_kappa
from pipelines.profiles.cogme.manual import ManualTagsError, load_manual_tags
from pipelines.profiles.cogme.tagger import RULES_SOURCE, TaggerError, classify_question, tag_questions
from pipelines.profiles.cogme.tags import TAG_SCHEMA, TagRuleError, validate_tags
from pipelines.profiles.cogme.taxonomy import Taxonomy, TaxonomyError, load_taxonomy

__all__ = [
    "RULES_SOURCE", "TAG_SCHEMA", "ManualTagsError", "TagRuleError", "TaggerError", "Taxonomy", "TaxonomyError",
    "agreement", "agreement_by_sub_component", "classify_question", "cohen_kappa", "load_manual_tags",
    "load_taxonomy", "tag_questions", "validate_tags",
]
