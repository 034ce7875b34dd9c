"""The paper's published exam scores, as data: Table 8 (exam score and accuracy per subject and
method) and Table 10 (exam score per sampled skill of Random, CLIP zero-shot and CLIP finetuned
on the real IXL site). Source: /work/shared/papers/stem-iclr2024.txt (an OCR text).

Table 10's skill names are restored from the OCR ("fi" and "fl" ligatures were lost: ` sh` is
"fish", ` nd` "find", ` gures` "figures"; `pre-kitriangles` is `pre-k/triangles`). Values the
OCR garbled beyond doubt are None and listed in ``TABLE_10_UNREADABLE``; values read with one
obvious letter-for-digit slip are kept (`6Q` 60, `4Q` 40, `50|` 50, `51]` 51).
"""

from __future__ import annotations

# Table 8: (method, subject, accuracy %, exam score). Science / engineering / math only:
# technology's "exam score" is Triviaplaza's human accuracy, i.e. the accuracy itself.
TABLE_8: tuple[tuple[str, str, float, float], ...] = (
    ("Human", "science", 90.7, 90.0), ("Human", "engineering", 86.4, 90.0), ("Human", "math", 92.1, 90.0),
    ("Random", "science", 38.3, 26.7), ("Random", "engineering", 40.0, 16.1), ("Random", "math", 36.8, 51.1),
    ("GPT-3", "science", 48.4, 45.7), ("GPT-3", "engineering", 65.2, 50.2), ("GPT-3", "math", 42.4, 51.4),
    ("GPT-3.5-Turbo", "science", 48.5, 48.9), ("GPT-3.5-Turbo", "engineering", 62.5, 58.7), ("GPT-3.5-Turbo", "math", 40.6, 53.5),
    ("CLIP zero-shot", "science", 53.8, 33.9), ("CLIP zero-shot", "engineering", 65.5, 19.0), ("CLIP zero-shot", "math", 44.3, 52.9),
    ("CLIP few-shot", "science", 77.3, 39.1), ("CLIP few-shot", "engineering", 55.5, 43.9), ("CLIP few-shot", "math", 67.8, 67.6),
    ("CLIP finetuning", "science", 91.9, 57.8), ("CLIP finetuning", "engineering", 60.3, 37.4), ("CLIP finetuning", "math", 83.5, 75.7),
    ("CLIP multi-task", "science", 90.9, 61.9), ("CLIP multi-task", "engineering", 70.2, 50.3), ("CLIP multi-task", "math", 82.5, 72.0),
)
# Table 8's technology column (accuracy = exam score for every method).
TABLE_8_TECHNOLOGY: dict[str, float] = {
    "Human": 68.6, "Random": 25.0, "GPT-3": 22.1, "GPT-3.5-Turbo": 26.3, "CLIP zero-shot": 68.7,
    "CLIP few-shot": 70.9, "CLIP finetuning": 71.9, "CLIP multi-task": 60.4,
}

# Table 10's columns and the Table 8 row whose subject accuracy goes with each.
TABLE_10_METHODS: tuple[tuple[str, str], ...] = (
    ("random", "Random"), ("zero_shot", "CLIP zero-shot"), ("finetune", "CLIP finetuning"),
)

# Table 10: (subject, grade/skill, Random, Zero-shot, Finetune).
TABLE_10: tuple[tuple[str, str, int | None, int | None, int | None], ...] = (
    ("science", "grade-2/classify-matter-as-solid-liquid-or-gas", 28, 40, 100),
    ("science", "grade-2/identify-animals-with-and-without-backbones", 0, 70, 70),
    ("science", "grade-2/identify-mammals-birds-fish-reptiles-and-amphibians", 0, 0, 18),
    ("science", "grade-2/identify-materials-in-objects", 21, 40, 100),
    ("science", "grade-2/identify-properties-of-an-object", 35, 65, 65),
    ("science", "grade-3/compare-strengths-of-magnetic-forces", 0, 18, 63),
    ("science", "grade-3/describe-ecosystems", 65, 50, 100),
    ("science", "grade-3/find-evidence-of-changes-to-earths-surface", 17, 38, 100),
    ("science", "grade-3/identify-ecosystems", 35, 100, 100),
    ("science", "grade-3/identify-minerals-using-properties", 35, 11, 35),
    ("science", "grade-4/compare-properties-of-objects", 10, 17, 20),
    ("science", "grade-4/describe-ecosystems", 74, 100, 100),
    ("science", "grade-4/identify-minerals-using-properties", 35, 16, 35),
    ("science", "grade-4/use-evidence-to-classify-mammals-birds-fish-reptiles-and-amphibians", 26, None, 35),
    ("science", "grade-5/animal-adaptations-beaks-mouths-and-necks", 7, 27, 35),
    ("science", "grade-5/classify-elementary-substances-and-compounds-using-models", 75, 75, 75),
    ("science", "grade-5/compare-ancient-and-modern-organisms-use-observations-to-support-a-hypothesis", 32, 32, 50),
    ("science", "grade-5/identify-directions-of-forces", None, None, None),
    ("science", "grade-5/identify-the-photosynthetic-organism", 0, 0, 100),
    ("science", "grade-5/predict-temperature-changes", 0, 22, 0),
    ("science", "grade-5/use-evidence-to-classify-animals", 35, 35, 35),
    ("science", "grade-5/use-evidence-to-classify-mammals-birds-fish-reptiles-and-amphibians", 18, None, 35),
    ("science", "grade-5/weather-and-climate-around-the-world", 60, 36, 60),
    ("science", "grade-6/compare-concentrations-of-solutions", 15, 11, 100),
    ("science", "grade-6/describe-the-effects-of-gene-mutations-on-organisms", 52, 13, 69),
    ("science", "grade-6/diffusion-across-membranes", 50, 25, 50),
    ("science", "grade-7/describe-the-effects-of-gene-mutations-on-organisms", 42, 13, 69),
    ("science", "grade-8/classify-symbiotic-relationships", 25, 36, 45),
    ("science", "grade-8/diffusion-across-membranes", 0, 18, 35),
    ("science", "grade-8/moss-and-fern-life-cycles", 0, 12, 0),
    ("engineering", "grade-6/evaluate-tests-of-engineering-design-solutions", None, None, None),
    ("engineering", "grade-6/identify-control-and-experimental-groups", 0, 0, 0),
    ("engineering", "grade-6/identify-independent-and-dependent-variables", None, None, None),
    ("engineering", "grade-6/identify-the-experimental-question", 30, 30, 30),
    ("engineering", "grade-7/evaluate-tests-of-engineering-design-solutions", None, None, None),
    ("engineering", "grade-7/identify-control-and-experimental-groups", 0, 0, 40),
    ("engineering", "grade-7/identify-independent-and-dependent-variables", None, None, None),
    ("engineering", "grade-7/identify-the-experimental-question", 40, 0, 40),
    ("engineering", "grade-8/identify-control-and-experimental-groups", 0, 0, 0),
    ("engineering", "grade-8/identify-the-experimental-question", 60, 0, 40),
    ("engineering", "grade-5/identify-laboratory-tools", 21, 42, 31),
    ("engineering", "grade-6/identify-laboratory-tools", 21, 21, 21),
    ("engineering", "grade-6/laboratory-safety-equipment", 24, 65, 52),
    ("engineering", "grade-7/identify-laboratory-tools", 10, 28, 21),
    ("engineering", "grade-7/laboratory-safety-equipment", 9, 58, 52),
    ("engineering", "grade-8/identify-laboratory-tools", 49, 21, 21),
    ("engineering", "grade-8/laboratory-safety-equipment", 9, 58, 58),
    ("math", "algebra-2/factor-quadratics-using-algebra-tiles", 40, 51, 55),
    ("math", "algebra-2/outliers-in-scatter-plots", 55, 47, 97),
    ("math", "calculus/determine-continuity-using-graphs", 36, 63, 80),
    ("math", "calculus/find-limits-at-vertical-asymptotes-using-graphs", 60, 65, 85),
    ("math", "grade-1/subtraction-sentences-up-to-10-which-model-matches", 50, 0, 99),
    ("math", "grade-2/identify-halves-thirds-and-fourths", 65, 75, 97),
    ("math", "grade-2/identify-lines-of-symmetry", 70, 64, 99),
    ("math", "grade-2/interpret-bar-graphs-ii", 14, 23, 12),
    ("math", "grade-2/ordinal-numbers-up-to-10th", 32, 61, 28),
    ("math", "grade-3/compare-fractions-in-recipes", 55, 50, 68),
    ("math", "grade-3/identify-parallelograms", 51, 64, 70),
    ("math", "grade-3/is-it-a-polygon", 71, 60, 98),
    ("math", "grade-3/parallel-sides-in-quadrilaterals", 29, 66, 45),
    ("math", "grade-4/nets-of-three-dimensional-figures", 68, 40, 99),
    ("math", "grade-5/nets-of-three-dimensional-figures", 53, 40, 99),
    ("math", "grade-6/changes-in-mean-median-mode-and-range", 38, 14, 15),
    ("math", "grade-6/classify-triangles", 47, 38, 45),
    ("math", "grade-6/identify-polyhedra", 75, 75, 75),
    ("math", "grade-6/mean-median-mode-and-range-find-the-missing-number", 55, 41, 99),
    ("math", "grade-6/model-and-solve-equations-using-algebra-tiles", 36, 36, 57),
    ("math", "grade-6/rational-numbers-find-the-sign", 31, 78, 99),
    ("math", "grade-6/rotational-symmetry", 62, 56, 78),
    ("math", "grade-6/similar-and-congruent-figures", 34, 33, 46),
    ("math", "grade-6/which-figure-is-being-described", 36, 27, 86),
    ("math", "grade-7/rational-numbers-find-the-sign", 47, 58, 99),
    ("math", "grade-8/rotational-symmetry-amount-of-rotation", 47, 32, 63),
    ("math", "kindergarten/count-on-ten-frames-up-to-10", 15, 2, 49),
    ("math", "kindergarten/fewer-and-more-up-to-20", 80, 62, 97),
    ("math", "kindergarten/subtraction-sentences-up-to-5-which-model-matches", 41, 0, 96),
    ("math", "pre-k/addition-sentences-up-to-10-which-model-matches", 60, 55, 96),
    ("math", "pre-k/count-on-ten-frames-up-to-3", 84, 50, 51),
    ("math", "pre-k/fewer-and-more-compare-by-matching", 63, 52, 90),
    ("math", "pre-k/one-less-with-pictures-up-to-10", 61, 37, 66),
    ("math", "pre-k/one-more-with-pictures-up-to-5", 48, 36, 75),
    ("math", "pre-k/shapes-of-everyday-objects", 67, 96, 96),
    ("math", "pre-k/spheres", 67, 96, 96),
    ("math", "pre-k/triangles", 57, 75, 75),
    ("math", "pre-k/what-comes-next", 75, 56, 70),
    ("math", "pre-k/ordinal-numbers-up-to-tenth", 27, 84, 82),
    ("math", "kindergarten/are-there-enough", 40, 99, 96),
)

# (skill, what the OCR shows) for the None values above
TABLE_10_UNREADABLE: tuple[tuple[str, str], ...] = (
    ("grade-4/use-evidence-to-classify-mammals-birds-fish-reptiles-and-amphibians", "zero-shot printed 'B5'"),
    ("grade-5/use-evidence-to-classify-mammals-birds-fish-reptiles-and-amphibians", "zero-shot printed 'B5'"),
    ("grade-5/identify-directions-of-forces", "two values for three columns: '26 35'"),
    ("grade-6/evaluate-tests-of-engineering-design-solutions", "one value for three columns: '100'"),
    ("grade-6/identify-independent-and-dependent-variables", "'q 100'"),
    ("grade-7/evaluate-tests-of-engineering-design-solutions", "'[ 0'"),
    ("grade-7/identify-independent-and-dependent-variables", "'q 30'"),
)


def paper_skill_list() -> dict[str, tuple[str, ...]]:
    """Table 10's skills per subject (grade/skill keys): the paper's exam sample."""
    out: dict[str, list[str]] = {}
    for subject, skill, *_ in TABLE_10:
        out.setdefault(subject, []).append(skill)
    return {subject: tuple(skills) for subject, skills in out.items()}
