"""The ``utils.py`` of the lmms-eval task that ``stemforge export --format lmms-eval`` writes.

This file is copied verbatim into the task folder, so it imports nothing of stemforge (only
the standard library; lmms-eval hands it PIL images). stemforge imports ``infer_letter``
from here when it reads VLMEvalKit and lmms-eval outputs back, so a response is turned into
an option letter by the same code on the GPU machine and at import.

``infer_letter`` follows VLMEvalKit's ``can_infer`` (``vlmeval/utils/matching_util.py``):
first a lone option letter among the last tokens of the answer, then a unique option text
contained in the answer. ``Z`` (VLMEvalKit's "refused / none of these") and no match give
``None``, which stemforge scores as "no answer" (wrong). VLMEvalKit would then ask an LLM
judge; stemforge does not.
"""

from __future__ import annotations

import string

REFUSALS = (
    "Sorry, I can't help with images of people yet.",
    "I can't process this file.",
    "I'm sorry, but without the image provided",
    "Cannot determine the answer",
)
API_FAILURE = "Failed to obtain answer via API"
PUNCTUATION = ".()[],:;!*#{}"
DEFAULT_POST_PROMPT = "\nAnswer with the option's letter from the given choices directly."


def _option_letter(answer: str, options: dict) -> str | None:
    if API_FAILURE in answer:
        return None
    if any(refusal in answer for refusal in REFUSALS):
        return "Z"
    for mark in PUNCTUATION:
        answer = answer.replace(mark, " ")
    tokens = [t.strip() for t in answer.split()]
    named = [letter for letter in options if letter in tokens]
    if len(named) == 1:
        for letter in options:
            if letter in tokens and tokens.index(letter) > len(tokens) - 5:
                return letter
    elif not named and "Z" in tokens:
        return "Z"
    return None


def _option_text(answer: str, options: dict) -> str | None:
    answer = answer.lower()
    if len(answer) > 2 * sum(len(str(v)) for v in options.values()):
        return None
    found = [letter for letter, text in options.items() if str(text).lower() in answer]
    return found[0] if len(found) == 1 else None


def infer_letter(answer, options: dict) -> str | None:
    """The option letter ``answer`` (a model's free text) picks among ``options`` (letter ->
    option text), or None (no letter, several, or a refusal)."""
    answer = str(answer)
    letter = _option_letter(answer, options) or _option_text(answer, options)
    return None if letter in (None, "Z") else letter


def option_dict(doc) -> dict:
    return {string.ascii_uppercase[i]: text for i, text in enumerate(doc["options"])}


# ---- lmms-eval task functions (named in the task YAML with !function utils.NAME) ----------

def doc_to_visual(doc):
    """The problem's picture, then the option pictures, in the order the prompt numbers them."""
    images = []
    if doc.get("image") is not None:
        images.append(doc["image"])
    images.extend(image for image in (doc.get("option_images") or []) if image is not None)
    return [image.convert("RGB") for image in images]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    kwargs = lmms_eval_specific_kwargs or {}
    lines = []
    if doc.get("hint"):
        lines.append(f"Hint: {doc['hint']}")
    lines.append(f"Question: {doc['question']}")
    lines.append("Options:")
    lines.extend(f"{letter}. {text}" for letter, text in option_dict(doc).items())
    post_prompt = kwargs.get("post_prompt", DEFAULT_POST_PROMPT)
    return f"{kwargs.get('pre_prompt', '')}" + "\n".join(lines) + f"{post_prompt}"


def doc_to_target(doc):
    return doc["answer"]


def process_results(doc, results):
    response = results[0] if results else ""
    letter = infer_letter(response, option_dict(doc))
    return {
        "stemforge_accuracy": {
            "question_id": doc["question_id"],
            "prediction": letter or "",
            "answer": doc["answer"],
            "correct": letter is not None and letter == doc["answer"],
        }
    }


def aggregate_accuracy(results):
    """Percent of the docs answered with the keyed letter."""
    if not results:
        return 0.0
    return 100.0 * sum(1 for r in results if r["correct"]) / len(results)
