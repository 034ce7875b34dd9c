"""Automatic CogME tagger for STEM multiple-choice questions (rules, no network).

Evidence used per question: the question text with LaTeX applied (``\\( ... \\)`` spans are
formulas), the option texts, the skill slug, the subject, and which images are present
(``pic_prob``, ``pic_choice``, ``num_choices``). TARGET and CONTENT are scored by cue
lexicons and the best three of each kept; THINKING is the highest level any rule fires,
with the paper's context rule: discriminating one candidate among several perceived ones
(several image options, or "Which object ..." over a picture) is Grasping, not Recall.

The rules are written for the ``stem`` taxonomy; other taxonomies are rejected.
"""

from __future__ import annotations

import re
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Any, Mapping

import polars as pl
import pyarrow as pa

from pipelines.parallel import contiguous_ranges, forked_pool, shared, sharing, worker_count
from pipelines.profiles.cogme.tags import TAG_SCHEMA, empty_tags, highest_thinking, tag_rows, validate_tags
from pipelines.profiles.cogme.taxonomy import Taxonomy

RULES_SOURCE = "auto:rules-v1"

REQUIRED_COLUMNS = ("question_id", "subject", "skill", "problem", "pic_prob", "pic_choice", "num_choices")

_FORMULA = re.compile(r"\\\((.*?)\\\)", re.S)
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")


class TaggerError(ValueError):
    """The tagger cannot run on its input (one-line message)."""


def _cues(*patterns: str) -> re.Pattern:
    return re.compile(r"\b(?:" + "|".join(patterns) + r")", re.I)


# TARGET cue lexicons: (pattern, score). Matched on question text, options and the skill slug.
TARGET_CUES: dict[str, list[tuple[re.Pattern, float]]] = {
    "Object": [
        (_cues(r"objects?\b", r"tools?\b", r"spoon", r"pencil", r"crayon", r"ball\b", r"balls\b", r"coin", r"penny",
               r"nickel", r"dime", r"quarter\b", r"cylinder\b(?!.*\bshape)", r"beaker", r"flask", r"test tube",
               r"graduated", r"balance\b", r"thermometer", r"ruler", r"magnifying", r"microscope", r"battery",
               r"bulb", r"switch\b", r"wire", r"screw", r"hammer", r"saw\b", r"lever", r"pulley", r"wheel",
               r"ramp", r"device", r"computer", r"keyboard", r"mouse\b(?! and)", r"monitor", r"printer", r"speaker",
               r"cable", r"console", r"motherboard", r"hard drive", r"usb", r"disk", r"logo", r"icon", r"phone",
               r"telephone", r"car\b", r"bridge", r"airplane", r"turbine", r"cooler", r"raincoat", r"filter",
               r"guitar", r"string", r"lamp", r"mirror", r"marker", r"book", r"toy", r"cup", r"bottle", r"box",
               r"can\b", r"machine", r"design(?:s|ed)?\b", r"invent", r"storage", r"app\b"), 1.0),
    ],
    "Living thing": [
        (_cues(r"living", r"animals?", r"plants?\b", r"organism", r"mammal", r"bird", r"fish", r"reptile",
               r"amphibian", r"insect", r"frog", r"duck", r"dog", r"cat\b", r"cow", r"hare", r"fox", r"elephant",
               r"grasshopper", r"snake", r"tree", r"flower", r"leaf", r"leaves", r"root", r"seed", r"cell\b",
               r"cells\b", r"nucleus", r"membrane", r"fossil", r"offspring", r"trait", r"inherit", r"gene",
               r"allele", r"phenotype", r"genotype", r"habitat", r"food chain", r"food web", r"life cycle",
               r"tadpole", r"photosynthesis", r"body", r"organ", r"bacteria", r"fur\b", r"feet", r"species",
               r"predator", r"prey", r"children", r"people"), 1.5),
    ],
    "Substance/Material": [
        (_cues(r"materials?", r"made of", r"substance", r"solid", r"liquid", r"gas\b", r"matter", r"mixture",
               r"solution", r"particles?", r"concentration", r"element", r"compound", r"molecule", r"atom",
               r"mineral", r"rock", r"quartz", r"granite", r"metal", r"wood", r"plastic", r"glass\b", r"rubber",
               r"paper", r"cotton", r"water", r"ice\b", r"milk", r"oxygen", r"carbon", r"sodium", r"chemical",
               r"evaporat", r"condens", r"melt", r"freez", r"dissolv", r"burning", r"texture", r"rough",
               r"flexible", r"conductor", r"insulator", r"soil", r"sand"), 1.2),
    ],
    "Shape/Figure": [
        (_cues(r"shapes?\b", r"figure", r"circles?\b", r"squares?\b(?! (?:units|meters|centimeters|feet|inches))",
               r"triangles?", r"rectangles?", r"rectangular", r"hexagon", r"pentagon", r"octagon", r"rhombus",
               r"quadrilateral", r"polygon", r"cube", r"cylinder", r"cone", r"sphere", r"prism", r"pyramid",
               r"3d", r"2d", r"three-dimensional", r"net\b", r"angles?\b", r"acute", r"obtuse", r"perpendicular",
               r"parallel", r"lines?\b(?! (?:graph|plot))", r"line segment", r"ray\b", r"symmetry", r"hypotenuse",
               r"perimeter", r"area\b", r"volume of", r"transformation", r"reflection", r"rotation",
               r"translation", r"vertices", r"edges", r"faces", r"radius", r"diameter", r"circumference",
               r"stars?\b", r"arrays?\b"), 1.5),
        (re.compile(r"\\(?:angle|triangle|pi)\b"), 1.0),
    ],
    "Number/Quantity": [
        (_cues(r"how many", r"how much", r"numbers?\b", r"count", r"digit", r"place value", r"tens\b",
               r"hundreds", r"even or odd", r"odd or even", r"estimate", r"measure", r"inch", r"centimeter",
               r"meters?\b", r"kilometers?", r"grams?\b", r"kilograms?", r"liters?", r"mass\b", r"weight",
               r"money", r"cents?\b", r"dollars?", r"¢", r"ratio", r"round\b", r"tally", r"data\b", r"mean\b",
               r"median", r"mode\b", r"speed", r"binary", r"decimal", r"fraction", r"kilobytes?", r"megabytes?",
               r"gigabytes?", r"\bgb\b", r"\btb\b", r"most data", r"m/s"), 1.2),
    ],
    "Diagram/Chart/Table": [
        (_cues(r"graphs?\b", r"charts?\b", r"tables?\b", r"plot", r"diagram", r"model\b", r"models\b",
               r"number line", r"map\b", r"maps\b", r"coordinate", r"grid", r"punnett", r"food chain",
               r"food web", r"life cycle", r"circuit", r"periodic table", r"tally", r"spinner", r"arrows?\b",
               r"labell?ed", r"key\b", r"point [A-Z]\b", r"slope", r"base.ten", r"place value models"), 1.5),
    ],
    "Symbol/Formula": [
        (_cues(r"equations?", r"expressions?", r"formula", r"symbol", r"sign\b", r"variable", r"solve for",
               r"simplify", r"evaluate", r"code\b", r"program", r"output of", r"sentence describes",
               r"multiplication sentence", r"subtraction sentence", r"addition sentence", r"genotype",
               r"notation"), 1.2),
    ],
    "Force/Energy/Motion": [
        (_cues(r"force", r"magnet", r"attract", r"repel", r"push", r"pull\b", r"motion", r"moving", r"speed",
               r"velocity", r"accelerat", r"energy", r"heat", r"temperature", r"light\b", r"sunlight",
               r"sound", r"pitch", r"vibrat", r"electric", r"circuit", r"power source", r"battery", r"conductor",
               r"gravity", r"friction", r"spin", r"wind\b", r"simple machine", r"lever", r"pulley", r"travels?"), 1.5),
    ],
    "Place/Direction": [
        (_cues(r"north", r"south", r"east", r"west", r"map\b", r"maps\b", r"location", r"where\b", r"habitat",
               r"states?\b(?! of matter)", r"country", r"continent", r"ocean", r"earth", r"moon", r"sun\b",
               r"planet", r"hemisphere", r"coordinates", r"left\b", r"right of", r"above", r"below", r"position",
               r"direction", r"weather", r"climate", r"snow", r"desert", r"forest", r"transformation",
               r"moves? figure", r"water cycle"), 1.2),
    ],
    "Time": [
        (_cues(r"what time", r"times?\b", r"clocks?", r"o'clock", r"a\.m\.", r"p\.m\.", r"hours?",
               r"minutes?", r"seconds?\b", r"days?\b", r"weeks?", r"months?", r"years?\b", r"calendar",
               r"season", r"summer", r"winter", r"elapsed", r"released first", r"first website", r"started at",
               r"\d{1,2}:\d\d"), 1.2),
    ],
    "Scenario": [
        (_cues(r"experiment", r"investigat", r"engineers?", r"design process", r"criteri", r"constraint",
               r"tests?\b", r"tested", r"testing", r"measured", r"team\b", r"designing", r"designed",
               r"is placed", r"was placed", r"travels", r"buys?", r"gives?", r"based on this information"), 1.0),
    ],
    "Commonsense": [
        (_cues(r"better estimate", r"best estimate", r"would be best", r"everyday", r"usually", r"company",
               r"logo", r"icon", r"invent", r"weather", r"first website", r"released", r"app\b",
               r"social media", r"in real life"), 1.2),
    ],
}

CONTENT_CUES: dict[str, list[tuple[re.Pattern, float]]] = {
    "Identity": [
        (_cues(r"what is the name", r"what is this", r"what is th(?:is|e) \w+ called", r"called\b",
               r"name of", r"identify the (?!question)", r"which (?:company|element|mineral|animal|coin|shape)",
               r"select the (?!better|best)", r"what kind", r"what type", r"which (?:of these|one) is an?\b",
               r"is (?:a|an) \w+ or (?:a|an)", r"what (?:shape|simple machine|process|transformation)",
               r"who invented", r"which \w+ is an?\b", r"classify", r"which three-dimensional"), 1.5),
        (_cues(r"identify", r"classify", r"names?\b", r"logos?", r"kinds?"), 0.6),
    ],
    "Feature": [
        (_cues(r"colou?r", r"texture", r"rough", r"smooth", r"flexible", r"hard\b", r"soft", r"describes?",
               r"property", r"properties", r"even or odd", r"odd or even", r"solid, a liquid", r"state of matter",
               r"made of", r"traits?", r"adapted", r"acute, right", r"phenotype", r"criterion",
               r"gives off its own", r"shows? a function", r"line of symmetry", r"conductor", r"heavier", r"lighter",
               r"materials?"), 1.2),
    ],
    "Relationship": [
        (_cues(r"compare", r"comparison", r"greater", r"less\b", r"more\b", r"fewer", r"most\b", r"least",
               r"fewest", r"bigger", r"smaller", r"longer", r"shorter", r"taller", r"heavier", r"lighter",
               r"higher", r"lower", r"farthest", r"closest", r"nearest", r"same\b", r"equal", r"equivalent",
               r"similar", r"differ", r"statement is true", r"following statements", r"ratio", r"perpendicular",
               r"parallel", r"supplementary", r"complementary", r"matches", r"describes this", r"outlier",
               r"better\b", r"best\b", r"than\b", r"eat\b", r"eats\b", r"moves? figure"), 1.0),
        (re.compile(r"(?:\\[lg]eq|[<>=]\s*$|\?\s*\\\()"), 1.0),
    ],
    "Quantity": [
        (_cues(r"how many", r"how much", r"what is the (?:value|sum|difference|product|quotient|area|perimeter|"
               r"volume|mean|median|mode|range|slope|length|probability|ratio|output|average|total)",
               r"what number", r"what fraction", r"fraction of", r"what time", r"which year", r"what year",
               r"solve", r"evaluate", r"multiply", r"add\b", r"subtract", r"divide", r"round\b", r"estimate",
               r"how long", r"how far", r"how tall", r"coordinates", r"what are the", r"in decimal", r"average",
               r"expected ratio", r"simplify", r"what is the \w+ of"), 1.5),
        (_cues(r"measure", r"count", r"concentration", r"data"), 0.5),
    ],
    "Means": [
        (_cues(r"tools?\b", r"used to", r"use to", r"measure the", r"method", r"how can", r"how could",
               r"procedure", r"experiment", r"investigat", r"test\b", r"tests?\b", r"design", r"criteri",
               r"would be best for", r"best for making", r"need to make", r"what does this icon do", r"does this",
               r"in order to", r"purpose"), 1.2),
    ],
    "Sequence/Pattern": [
        (_cues(r"comes? next", r"what comes", r"next\b", r"pattern", r"sequence", r"order\b", r"first\b",
               r"after\b", r"before\b", r"stage", r"steps?\b", r"life cycle", r"cycle", r"phase",
               r"released first", r"output of this code"), 1.2),
    ],
    "Causality": [
        (_cues(r"why\b", r"caus", r"because", r"happen", r"effect", r"predict", r"attract or repel",
               r"what would", r"what will", r"most likely"), 1.5),
        (_cues(r"result", r"will\b", r"would\b", r"change", r"if\b", r"expected", r"higher pitch",
               r"tilted", r"more kinetic", r"phenotype", r"magnitude", r"tell us"), 1.0),
    ],
    "Structure": [
        (_cues(r"parts?\b", r"place value", r"\w+ place\b", r"digit", r"structure", r"organ\b", r"cells?\b",
               r"component", r"circuit", r"made up of", r"composed", r"faces", r"edges", r"vertices", r"net\b",
               r"hundreds", r"tens\b", r"compound", r"elementary substance", r"molecule", r"of the shape is"), 1.2),
    ],
}

# Skill-slug hints: the skill says what the question is about even when the stem is terse.
SKILL_TARGET_HINTS = {
    "money": "Number/Quantity", "coin": "Object", "clock": "Time", "time": "Time", "shape": "Shape/Figure",
    "angle": "Shape/Figure", "graph": "Diagram/Chart/Table", "chart": "Diagram/Chart/Table",
    "table": "Diagram/Chart/Table", "plot": "Diagram/Chart/Table", "number-line": "Diagram/Chart/Table",
    "magnet": "Force/Energy/Motion", "energy": "Force/Energy/Motion", "force": "Force/Energy/Motion",
    "material": "Substance/Material", "matter": "Substance/Material", "rock": "Substance/Material",
    "animal": "Living thing", "plant": "Living thing", "organism": "Living thing", "cell": "Living thing",
    "map": "Place/Direction", "weather": "Place/Direction", "equation": "Symbol/Formula",
    "expression": "Symbol/Formula", "engineering": "Scenario", "experiment": "Scenario",
    "investigat": "Scenario", "design": "Scenario", "tool": "Object", "logo": "Object", "hardware": "Object",
    "device": "Object", "count": "Number/Quantity", "fraction": "Number/Quantity",
}
SKILL_CONTENT_HINTS = {
    "compare": "Relationship", "identify": "Identity", "classify": "Identity", "pattern": "Sequence/Pattern",
    "next": "Sequence/Pattern", "cycle": "Sequence/Pattern", "predict": "Causality", "cause": "Causality",
    "place-value": "Structure", "parts": "Structure", "count": "Quantity", "measure": "Quantity",
    "area": "Quantity", "perimeter": "Quantity", "volume": "Quantity", "properties": "Feature",
    "traits": "Feature", "tools": "Means", "design": "Means", "equivalent": "Relationship",
}

# THINKING cues.
REASONING_STEMS = _cues(
    r"why\b", r"predict", r"what (?:will|would) happen", r"will these", r"which change would", r"most likely",
    r"best explains?", r"conclude", r"infer", r"based on (?:this|the) information", r"expected",
    r"probability", r"what comes next", r"comes next", r"next (?:number|shape|picture|term)", r"pattern",
    r"can best answer", r"could their test show", r"which of the following could", r"criterion",
    r"would be best", r"simplify", r"evaluate\b", r"output of", r"in decimal", r"mean of", r"slope",
    r"hypotenuse", r"volume of", r"decimal number", r"perimeter", r"how much money", r"left\?", r"in all\?", r"altogether",
    r"what time did", r"will it", r"would it", r"what will", r"released first", r"phenotype", r"genotype",
    r"magnitude", r"kinetic energy", r"higher pitch", r"attract or repel", r"is tilted", r"when it is",
    r"following statements is true", r"net (?:make|form|fold)", r"does this net",
    r"area of the (?:circle|triangle|parallelogram|trapezoid)", r"circumference",
)
GRASPING_STEMS = _cues(
    r"compare", r"which (?:is|are) (?:bigger|smaller|longer|shorter|taller|heavier|lighter|greater|less)",
    r"greater", r"fewest", r"most\b", r"least\b", r"farthest", r"closest", r"how many", r"what time is shown",
    r"what time", r"look at the", r"the (?:table|graph|chart|map|diagram|model|tally chart|number line)",
    r"in (?:the|this) (?:picture|figure|model|diagram|food chain|food web|life cycle|graph|table|map)",
    r"comes? (?:after|before)", r"number of \w+ (?:is|are)? ?(?:even|odd|shown)", r"the number of",
    r"which \w+(?: \w+)? (?:has|have|is|are) (?:the )?(?:higher|lower|more|fewer|larger|smaller|greater|better)", r"matches the picture", r"describes this",
    r"best estimate", r"better estimate", r"round\b", r"what fraction", r"coordinates", r"ratio",
    r"which sign", r"estimate", r"measure\b", r"how long is", r"which pair", r"equivalent", r"outlier",
    r"what number is shown", r"which (?:picture|graph) shows", r"which step", r"which part of the circuit",
    r"transformation", r"what is the area", r"how far", r"average speed", r"which of these is an? ",
    r"is this angle", r"which process", r"what process", r"what are the",
)
# Predictions and comparisons of quantities that are not seen directly but inferred
# (force from distance, energy from temperature, speed from distance and time): Reasoning.
PREDICTION_STEM = re.compile(r"^\s*(?:will|would|does|do)\b[^?]*\?|\bwill the\b", re.I)
INFERRED_QUANTITY = re.compile(
    r"\b(?:more|less|most|least|higher|lower|greater|stronger|weaker|smaller|larger)\b[^?]*"
    r"\b(?:energy|force|speed|pressure)\b|\b(?:energy|force|speed|pressure)\b[^?]*"
    r"\b(?:more|less|most|least|higher|lower|greater|stronger|weaker|smaller|larger)\b",
    re.I,
)
# Reading one value off a scale, dial, number line or model: Grasping.
READ_A_SCALE = re.compile(
    r"\bwhat (?:temperature|volume|number|time|mass|length|value|reading|decimal number)\b[^?]*\b(?:shows?|shown)\b"
    r"|\bwhich number does the \w+ show\b|\bacute, right,? or obtuse\b|\bmeasure of \\\(",
    re.I,
)
RECALL_STEMS = _cues(
    r"what is the name", r"what is this", r"what is th(?:is|e) \w+ called", r"who invented", r"which company",
    r"what kind of", r"what type of", r"in which year", r"what does this icon", r"is (?:a|an)? ?\w+ (?:a|an) ",
    r"which tool", r"which element", r"select the mineral", r"which of these is an? (?:inherited|mineral)",
)
SELECT_AMONG_PICTURED = re.compile(
    r"^\s*(?:which|select|choose|pick|find)\s+(?:of\s+)?(?:the\s+|these\s+)?(?:\w+\s+)?"
    r"(?:objects?|animals?|pictures?|things?|ones?|coins?|fossils?|living things?|mammals?|balls?|fruits?|"
    r"people|persons?|children|cars?|plants?|shapes?)\b",
    re.I,
)
# "Which object is this?" names the single thing shown: Recall.
SINGLE_THING_SHOWN = re.compile(r"\b(?:this|is shown|in the picture\?$)", re.I)


@dataclass
class QuestionEvidence:
    """What the rules see of one question (kept for explanations in tests and docs)."""

    text: str
    options: str
    skill_words: str
    formulas: list[str]
    pic_prob: bool
    pic_choice: bool
    num_choices: int
    notes: list[str] = field(default_factory=list)


def _formula_operators(formula: str) -> int:
    body = formula.replace("\\left", "").replace("\\right", "")
    explicit = re.findall(r"\\times|\\div|\\cdot|\\sqrt|\^|(?<=[\w)}])\s*[+\-]\s*(?=[\w(\\{])", body)
    fractions = len(re.findall(r"\\frac", body))
    implicit_products = re.findall(r"\d\s*[a-z](?![a-z])|\)\s*\(", _LATEX_COMMAND.sub(" ", body))
    # a lone fraction is a number, not an operation; fractions combined with others are
    return len(explicit) + len(implicit_products) + (fractions if fractions > 1 or explicit else 0)


def _formula_has_variable(formula: str) -> bool:
    stripped = _LATEX_COMMAND.sub(" ", formula)
    return re.search(r"(?<![A-Za-z])[a-z](?![A-Za-z])", stripped) is not None


def _score(cues: Mapping[str, list[tuple[re.Pattern, float]]], text: str) -> dict[str, float]:
    if cues is TARGET_CUES or cues is CONTENT_CUES:
        # quiz texts are templated and repeat many times; the lexicon scan is the hot spot
        return dict(_score_lexicon(cues is TARGET_CUES, text))
    return _score_uncached(cues, text)


@lru_cache(maxsize=1 << 17)
def _score_lexicon(target: bool, text: str) -> tuple[tuple[str, float], ...]:
    return tuple(_score_uncached(TARGET_CUES if target else CONTENT_CUES, text).items())


def _score_uncached(cues: Mapping[str, list[tuple[re.Pattern, float]]], text: str) -> dict[str, float]:
    scores: dict[str, float] = {}
    for name, patterns in cues.items():
        total = 0.0
        for pattern, weight in patterns:
            hits = len(pattern.findall(text))
            if hits:
                total += weight * min(hits, 3) ** 0.5
        if total:
            scores[name] = total
    return scores


def _top(scores: dict[str, float], order: tuple[str, ...], limit: int, floor: float) -> list[str]:
    ranked = sorted(
        (name for name, s in scores.items() if s >= floor),
        key=lambda name: (-scores[name], order.index(name)),
    )
    return ranked[:limit]


def evidence_of(row: Mapping[str, Any]) -> QuestionEvidence:
    problem = str(row.get("problem") or "")
    choices = row.get("choices")
    options = " | ".join(str(c) for c in choices) if choices is not None else ""
    formulas = _FORMULA.findall(problem) + (_FORMULA.findall(options) if options else [])
    skill = str(row.get("skill") or "")
    skill = skill.rsplit("/", 1)[-1]
    num = row.get("num_choices")
    if num is None:
        num = len(choices) if choices is not None else 0
    return QuestionEvidence(
        text=problem,
        options=options,
        skill_words=skill.replace("-", " ").replace("_", " "),
        formulas=formulas,
        pic_prob=bool(row.get("pic_prob")),
        pic_choice=bool(row.get("pic_choice")),
        num_choices=int(num),
    )


@lru_cache(maxsize=1 << 17)
def _plain(text: str) -> str:
    """Text with formula spans replaced by a placeholder word, for the word rules."""
    return _FORMULA.sub(" FORMULA ", text)


@lru_cache(maxsize=4096)
def _skill_hints(skill_words: str, target: bool) -> tuple[str, ...]:
    slug = skill_words.replace(" ", "-")
    hints = SKILL_TARGET_HINTS if target else SKILL_CONTENT_HINTS
    return tuple(name for hint, name in hints.items() if hint in slug)


@lru_cache(maxsize=1 << 17)
def _formula_kinds(text: str) -> tuple[bool, bool, bool]:
    """(multi-step formula, one-step formula, equation to solve) among the text's formulas."""
    formulas = _FORMULA.findall(text)
    multi_step = any(
        _formula_operators(f) >= 2 or (_formula_has_variable(f) and "=" in f and _formula_operators(f) >= 2)
        for f in formulas
    )
    one_step = any(_formula_operators(f) >= 1 for f in formulas)
    equation = any(_formula_has_variable(f) and "=" in f for f in formulas)
    return multi_step, one_step, equation


def classify_question(row: Mapping[str, Any], taxonomy: Taxonomy) -> tuple[list[str], list[str], str]:
    """TARGET (<= limit), CONTENT (<= limit) and the single highest THINKING level of one question."""
    ev = evidence_of(row)
    question = _plain(ev.text)
    options = _plain(ev.options)
    subject = str(row.get("subject") or "")
    word_count = len(question.split())

    # ---- TARGET ----
    t_scores = _score(TARGET_CUES, question)
    for name, s in _score(TARGET_CUES, options).items():
        t_scores[name] = t_scores.get(name, 0.0) + 0.5 * s
    for name in _skill_hints(ev.skill_words, True):
        t_scores[name] = t_scores.get(name, 0.0) + 0.8
    if ev.formulas:
        t_scores["Symbol/Formula"] = t_scores.get("Symbol/Formula", 0.0) + 2.5
    numbers_in_text = re.findall(r"(?<![\w.])\d+(?:[.,]\d+)?(?![\w:])", question)
    if numbers_in_text or any(re.search(r"\d", f) for f in ev.formulas):
        t_scores["Number/Quantity"] = t_scores.get("Number/Quantity", 0.0) + 0.6 * min(len(numbers_in_text) + 1, 3)
    if options and all(re.fullmatch(r"\s*[\d.,:/¢$%]+\s*(?:\w+\s*){0,3}", o) for o in options.split("|")):
        t_scores["Number/Quantity"] = t_scores.get("Number/Quantity", 0.0) + 1.0
    if word_count >= 25:
        t_scores["Scenario"] = t_scores.get("Scenario", 0.0) + 1.0 + 0.5 * (word_count >= 40)
    elif word_count < 14:
        t_scores.pop("Scenario", None)
    if subject == "math" and not t_scores:
        t_scores["Number/Quantity"] = 1.0
    t_order = taxonomy.sub_components("TARGET")
    target = _top(t_scores, t_order, taxonomy.limits["TARGET"], floor=1.0)
    if not target:
        target = [max(t_scores, key=lambda n: (t_scores[n], -t_order.index(n)))] if t_scores else ["Commonsense"]

    # ---- CONTENT ----
    c_scores = _score(CONTENT_CUES, question)  # the options rarely say what is asked
    for name in _skill_hints(ev.skill_words, False):
        c_scores[name] = c_scores.get(name, 0.0) + 0.6
    if options and all(re.fullmatch(r"\s*-?[\d.,:¢$%]+\s*(?:[a-z]+\s*){0,3}", o) for o in options.split("|")):
        c_scores["Quantity"] = c_scores.get("Quantity", 0.0) + 1.2
    if ev.formulas and re.search(r"=\s*$", ev.formulas[0].strip()):
        c_scores["Quantity"] = c_scores.get("Quantity", 0.0) + 1.5
    c_order = taxonomy.sub_components("CONTENT")
    content = _top(c_scores, c_order, taxonomy.limits["CONTENT"], floor=1.2)
    if not content:
        content = [max(c_scores, key=lambda n: (c_scores[n], -c_order.index(n)))] if c_scores else ["Identity"]

    # ---- THINKING ----
    levels = ["Recall"]
    lowered = question.lower()
    multi_step_formula, one_step_formula, equation_to_solve = _formula_kinds(ev.text)
    word_problem = len(numbers_in_text) >= 2 and re.search(r"\b(?:how many|how much|what is|what time)\b", lowered)

    if GRASPING_STEMS.search(question):
        levels.append("Grasping")
        ev.notes.append("grasping stem")
    if ev.pic_choice and ev.num_choices >= 2:
        levels.append("Grasping")  # choosing one of several pictured candidates
        ev.notes.append("several image options")
    elif (
        ev.pic_prob
        and SELECT_AMONG_PICTURED.search(question)
        and not SINGLE_THING_SHOWN.search(question)
        and not RECALL_STEMS.search(question)
    ):
        levels.append("Grasping")  # one candidate among several in the picture
        ev.notes.append("candidate among several in the picture")
    if one_step_formula or equation_to_solve:
        levels.append("Grasping")
    if READ_A_SCALE.search(ev.text):
        levels.append("Grasping")
        ev.notes.append("reads a scale")
    if PREDICTION_STEM.search(question) or INFERRED_QUANTITY.search(question):
        levels.append("Reasoning")
        ev.notes.append("prediction or inferred quantity")
    if "balance" in ev.skill_words and re.search(r"\b(?:heavier|lighter)\b", lowered):
        levels.append("Reasoning")
        ev.notes.append("weight inferred from a balance")
    if "\\triangle" in ev.text and "measure of" in lowered:
        levels.append("Reasoning")
        ev.notes.append("missing angle of a triangle")
    if REASONING_STEMS.search(question):
        levels.append("Reasoning")
        ev.notes.append("reasoning stem")
    if multi_step_formula:
        levels.append("Reasoning")
        ev.notes.append("multi-step formula")
    if word_problem:
        levels.append("Reasoning")
        ev.notes.append("word problem over several numbers")
    if (
        RECALL_STEMS.search(question)
        and not ev.pic_choice
        and "Reasoning" not in levels
        and not re.search(r"\b(?:most|least|farthest|fewest)\b", lowered)
    ):
        levels = ["Recall"]
        ev.notes.append("recall stem")
    if _is_math_fact(ev):
        levels = ["Recall"]
        ev.notes.append("basic fact")
    thinking = highest_thinking(levels, taxonomy)
    if (
        "prediction or inferred quantity" in ev.notes
        and "Causality" not in content
        and len(content) < taxonomy.limits["CONTENT"]
    ):
        content.append("Causality")  # a prediction asks for the consequence of a change
    return target, content, thinking


def _is_math_fact(ev: QuestionEvidence) -> bool:
    """A single basic multiplication fact (the times tables) is retrieved, not worked out."""
    formulas = _FORMULA.findall(ev.text)
    if len(formulas) != 1:
        return False
    return re.fullmatch(r"\s*\d\s*\\times\s*\d{1,2}\s*=?\s*", formulas[0]) is not None


def tag_questions(questions: pl.DataFrame, taxonomy: Taxonomy, workers: int | None = None) -> pl.DataFrame:
    """Tag every question with the rules; returns a validated ``question_tags`` frame.

    Large inputs are tagged in contiguous slices by ``workers`` processes (default: one per
    CPU); the frame is the same whatever the count."""
    if taxonomy.sub_components("TARGET") != _STEM_TARGETS or taxonomy.sub_components("CONTENT") != _STEM_CONTENTS:
        raise TaggerError(f"the rule tagger is written for the 'stem' taxonomy, not {taxonomy.name!r}")
    missing = [c for c in REQUIRED_COLUMNS if c not in questions.columns]
    if missing:
        raise TaggerError(f"questions lack column(s) {', '.join(missing)}")
    if questions.height == 0:
        return empty_tags()
    if questions["question_id"].null_count() or questions["question_id"].is_duplicated().any():
        raise TaggerError("questions need unique, non-null question_id")
    total = questions.height
    workers = worker_count(total, MIN_QUESTIONS_PER_WORKER, workers)
    ranges = contiguous_ranges(total, workers)
    with sharing({"cogme-questions": questions.to_arrow()}):  # workers get Arrow, not Polars
        if workers == 1:
            parts = [_tag_range(0, total, taxonomy)]
        else:
            with forked_pool(workers) as pool:
                parts = list(pool.map(_tag_range, *zip(*ranges), [taxonomy] * len(ranges)))
    tags = pl.from_arrow(pa.concat_tables(parts))
    return validate_tags(tags, taxonomy) if tags.height else empty_tags()


# Below this many questions per worker, forking workers costs more than it saves.
MIN_QUESTIONS_PER_WORKER = 20_000
# questions tagged at a time in one process: the Python objects of one batch are alive at once
TAG_BATCH_ROWS = 20_000


def _tag_range(start: int, length: int, taxonomy: Taxonomy) -> pa.Table:
    """The rule tags of questions ``start`` .. ``start + length - 1``, as columns (may run in a
    worker process)."""
    questions = shared("cogme-questions").slice(start, length)
    parts = []
    for offset in range(0, max(length, 1), TAG_BATCH_ROWS):  # one batch's Python objects alive at a time
        columns: dict[str, list] = {name: [] for name in TAG_SCHEMA}
        for record in questions.slice(offset, TAG_BATCH_ROWS).to_pylist():
            target, content, thinking = classify_question(record, taxonomy)
            for row in tag_rows(record["question_id"], RULES_SOURCE, target, content, thinking, taxonomy):
                for name in TAG_SCHEMA:
                    columns[name].append(row[name])
        parts.append(pa.Table.from_pydict({
            name: pa.array(values, type=pa.string() if name != "weight" else pa.int64())
            for name, values in columns.items()
        }))
    return pa.concat_tables(parts)


_STEM_TARGETS = (
    "Object", "Living thing", "Substance/Material", "Shape/Figure", "Number/Quantity", "Diagram/Chart/Table",
    "Symbol/Formula", "Force/Energy/Motion", "Place/Direction", "Time", "Scenario", "Commonsense",
)
_STEM_CONTENTS = (
    "Identity", "Feature", "Relationship", "Quantity", "Means", "Sequence/Pattern", "Causality", "Structure",
)
