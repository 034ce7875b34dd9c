"""The answer-extraction rule chain: each rule, the order between them, ambiguity."""

from __future__ import annotations

import pytest

from pipelines.evaluation.models.extraction import RULES, extract_answer

OPTIONS = ("a red circle", "a blue square", "a green triangle", "dark red")


@pytest.mark.parametrize(
    "response, index, rule",
    [
        ("B", 1, "exact-letter"),
        ("  (c) \n", 2, "exact-letter"),
        ("D.", 3, "exact-letter"),
        ("**A**", 0, "exact-letter"),
        ("The answer is C because it has three sides.", 2, "answer-phrase"),
        ("Answer: B", 1, "answer-phrase"),
        ("I think the correct answer is (D).", 3, "answer-phrase"),
        ("ANSWER: option A", 0, "answer-phrase"),
        ("The answer is: **B**", 1, "answer-phrase"),
        ("<think>A or B? A looks red. (A)</think> Answer: B", 1, "answer-phrase"),
        ("Looking at the picture, (B) fits best.", 1, "parenthesized-letter"),
        ("It must be a green triangle.", 2, "option-text"),
        ("It is  A BLUE\nsquare", 1, "option-text"),
        ("dark red", 3, "option-text"),  # "red" alone is not an option; "a red circle" not present
        ("2", 1, "option-number"),
        ("Option 3.", 2, "option-number"),
    ],
)
def test_each_rule(response, index, rule):
    extraction = extract_answer(response, len(OPTIONS), OPTIONS)
    assert (extraction.index, extraction.rule, extraction.error) == (index, rule, None)
    assert rule in RULES


def test_nested_option_texts_prefer_the_longer_match():
    options = ("red", "dark red", "blue")
    assert extract_answer("The flower is dark red.", 3, options).index == 1
    assert extract_answer("The flower is red.", 3, options).index == 0


def test_option_text_beats_number_for_numeric_options():
    # "3" is the text of option B, not the third option.
    extraction = extract_answer("3", 3, ("1", "3", "5"))
    assert (extraction.index, extraction.rule) == (1, "option-text")


@pytest.mark.parametrize(
    "response, rule, message",
    [
        ("The answer is A. No wait, the answer is B.", "answer-phrase", "ambiguous"),
        ("Either (A) or (C).", "parenthesized-letter", "ambiguous"),
        ("a red circle or a blue square", "option-text", "ambiguous"),
        ("E", "exact-letter", "out of range"),
        ("Answer: E", "answer-phrase", "out of range"),
        ("7", "option-number", "out of range"),
    ],
)
def test_ambiguous_or_out_of_range_fails_without_falling_through(response, rule, message):
    extraction = extract_answer(response, len(OPTIONS), OPTIONS)
    assert extraction.index == -1 and extraction.rule == rule and message in extraction.error


@pytest.mark.parametrize("response", ["", "   ", None, "I do not know.", "<think>(A)</think>"])
def test_no_answer(response):
    extraction = extract_answer(response, len(OPTIONS), OPTIONS)
    assert extraction.index == -1 and extraction.rule is None and extraction.error


def test_lowercase_letter_inside_prose_is_not_an_answer():
    # "a" is an article here, not option A.
    extraction = extract_answer("the answer is a mystery to me", 4, None)
    assert extraction.index == -1


def test_image_options_skip_the_option_text_rule():
    assert extract_answer("a blue square", 4, None).index == -1
    assert extract_answer("(B)", 4, None).rule == "exact-letter"
