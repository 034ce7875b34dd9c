"""Multiple-choice model adapters (see ``base.py`` for the interface, ``registry.py`` for specs).

Heavy libraries (torch, transformers, sentence_transformers, scikit-learn) are imported only
when an adapter that needs them is used.
"""

from pipelines.evaluation.models.base import EvalQuestion, MultipleChoiceModel, Prediction, rotate_options
from pipelines.evaluation.models.registry import available_baselines, build_model

__all__ = [
    "EvalQuestion",
    "MultipleChoiceModel",
    "Prediction",
    "available_baselines",
    "build_model",
    "rotate_options",
]
