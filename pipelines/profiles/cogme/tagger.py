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
from typing import Any, Mapping, NamedTuple, Sequence

import polars as pl

from pipelines.parallel import contiguous_ranges, forked_pool, shared, sharing, worker_count
from pipelines.profiles.cogme.tags import TAG_SCHEMA, empty_tags, highest_thinking, tag_rows, validate_tags
from pipelines.profiles.cogme.taxonomy import Taxonomy

RULES_SOURCE = "auto:rules-v1"

REQUIRED_COLUMNS = ("question_id", "subject", "skill", "problem", "pic_prob", "pic_choice", "num_choices")

_FORMULA = re.compile(r"\\\((.*?)\\\)", re.S)
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")


class TaggerError(ValueError):
    """The tagger cannot run on its input (one-line message)."""


# the alternatives of each cue pattern (``_CueIndex`` reads their first letters)
_CUE_ALTERNATIVES: dict[re.Pattern, tuple[str, ...]] = {}


def _cues(*patterns: str) -> re.Pattern:
    compiled = re.compile(r"\b(?:" + "|".join(patterns) + r")", re.I)
    _CUE_ALTERNATIVES[compiled] = patterns
    return compiled


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

# Characters outside ASCII that ``re.I`` matches to an ASCII letter (İ ı ſ K): on a text with one
# of them, ``str.lower`` does not say what a case-insensitive cue matches, and every cue is scanned.
_CASE_TRAPS = re.compile("[\u0130\u0131\u017f\u212a]")
_WORD = re.compile(r"\w+")


def _literal_prefix(alternative: str) -> str:
    """The characters every match of a cue alternative starts with ('' if it starts otherwise)."""
    if alternative.startswith("\\b"):
        alternative = alternative[2:]
    prefix = []
    i = 0
    while i < len(alternative):
        char = alternative[i]
        if char == "\\":
            escaped = alternative[i + 1 : i + 2]
            if not escaped or escaped.isalnum():
                break  # a class (\d, \w, ...) or an assertion (\b)
            char, width = escaped, 2
        elif char in ".^$*+?{}[]()|":
            break
        else:
            width = 1
        following = alternative[i + width : i + width + 1]
        if following and following in "?*{":
            break  # the character is optional
        prefix.append(char)
        i += width
    return "".join(prefix)


class _CueIndex:
    """Which alternatives of a lexicon's cue patterns can match a text, read from the first
    letters of its words.

    ``_cues`` puts ``\\b`` before every alternative: one that starts with a letter or digit can
    match only at the start of a word, and that word's first (up to four) letters must be its own;
    one that starts with another character can match only where that character sequence is. An
    alternative that cannot match anywhere in a text never decides a match there, so the pattern
    of the others finds the same matches (none if there are no others); an alternative the index
    cannot read is always kept, and a pattern not built by ``_cues`` always scanned whole."""

    def __init__(self, cues: Mapping[str, list[tuple[re.Pattern, float]]]):
        # per pattern in lexicon order: (sub-component, key, pattern, weight, alternatives always
        # kept (None: scanned whole), the pattern of those alone)
        self.slots: list[tuple[str, tuple[str, int], re.Pattern, float, frozenset[int] | None, re.Pattern | None]]
        self.slots = []
        self.by_word_start: dict[str, list[tuple[tuple[str, int], int]]] = {}
        self.by_substring: dict[str, list[tuple[tuple[str, int], int]]] = {}
        for name, patterns in cues.items():
            for number, (pattern, weight) in enumerate(patterns):
                key = (name, number)
                if pattern not in _CUE_ALTERNATIVES:
                    self.slots.append((name, key, pattern, weight, None, None))
                    continue
                kept = set()
                for alternative_number, alternative in enumerate(_CUE_ALTERNATIVES[pattern]):
                    prefix = _literal_prefix(alternative)
                    letters = len(_ASCII_WORD_START.match(prefix).group())
                    if not prefix or any(not c.isascii() and c.lower() != c.upper() for c in prefix):
                        kept.add(alternative_number)
                    elif letters:
                        start = prefix[: min(letters, 4)].lower()  # as _word_starts keeps them
                        self.by_word_start.setdefault(start, []).append((key, alternative_number))
                    else:
                        self.by_substring.setdefault(prefix.lower(), []).append((key, alternative_number))
                kept_pattern = _pattern_of(pattern, tuple(sorted(kept))) if kept else None
                self.slots.append((name, key, pattern, weight, frozenset(kept), kept_pattern))
        self.word_start_keys = frozenset(self.by_word_start)

    def candidates(self, text: str) -> dict[tuple[str, int], set[int]] | None:
        """The alternatives of each pattern that may match ``text``, besides those always kept;
        None: every alternative."""
        starts = _word_starts(text)
        if starts is None:
            return None
        found: dict[tuple[str, int], set[int]] = {}
        for start in starts & self.word_start_keys:
            for key, number in self.by_word_start[start]:
                found.setdefault(key, set()).add(number)
        if self.by_substring:
            lowered = text.lower()
            for needle, entries in self.by_substring.items():
                if needle in lowered:
                    for key, number in entries:
                        found.setdefault(key, set()).add(number)
        return found


@lru_cache(maxsize=8)
def _word_starts(text: str) -> frozenset[str] | None:
    """The first one to four letters (lowercase) of every word of ``text``; None if it has a case trap."""
    if _CASE_TRAPS.search(text):
        return None
    starts = set()
    for word in set(_WORD.findall(text)):
        word = word.lower()
        starts.update((word[:1], word[:2], word[:3], word[:4]))
    return frozenset(starts)


@lru_cache(maxsize=8192)
def _pattern_of(pattern: re.Pattern, alternatives: tuple[int, ...]) -> re.Pattern:
    """The cue pattern with only the given alternatives (in their order)."""
    every = _CUE_ALTERNATIVES[pattern]
    if len(alternatives) == len(every):
        return pattern
    return re.compile(r"\b(?:" + "|".join(every[i] for i in alternatives) + r")", re.I)


_ASCII_WORD_START = re.compile(r"[A-Za-z0-9_]*")
_CUE_INDEXES = {id(TARGET_CUES): _CueIndex(TARGET_CUES), id(CONTENT_CUES): _CueIndex(CONTENT_CUES)}


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


# A number written in the words of a question (not part of a word, a decimal or a time).
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?(?![\w:])")
_NUMERIC_OPTION_FOR_TARGET = re.compile(r"\s*[\d.,:/¢$%]+\s*(?:\w+\s*){0,3}")
_NUMERIC_OPTION_FOR_CONTENT = re.compile(r"\s*-?[\d.,:¢$%]+\s*(?:[a-z]+\s*){0,3}")
_ASKS_FORMULA_VALUE = re.compile(r"=\s*$")


class ProblemFacts(NamedTuple):
    """What the rules read from a question's text alone: the same for every question with that text."""

    target_scores: tuple[tuple[str, float], ...]
    content_scores: tuple[tuple[str, float], ...]
    word_count: int
    numbers: int  # numbers in the words (outside formulas)
    formula: bool
    digit_formula: bool
    asks_formula_value: bool  # the first formula ends in "="
    grasping_stem: bool
    candidate_among_pictured: bool  # "Which object ...", not one thing shown and not a recall stem
    formula_step: bool  # a one-step formula or an equation to solve
    reads_scale: bool
    prediction: bool  # a prediction or an inferred quantity
    heavier_or_lighter: bool
    triangle_angle: bool
    reasoning_stem: bool
    multi_step_formula: bool
    word_problem: bool  # several numbers and a question for a value
    recall_stem: bool  # a recall stem, and no most/least/farthest/fewest
    math_fact: bool


class OptionsFacts(NamedTuple):
    """What the rules read from a question's options (joined as ``a | b | c``)."""

    target_scores: tuple[tuple[str, float], ...]
    formula: bool
    digit_formula: bool
    asks_formula_value: bool
    numeric_for_target: bool
    numeric_for_content: bool


class SkillFacts(NamedTuple):
    target_hints: tuple[str, ...]
    content_hints: tuple[str, ...]
    balance: bool


def problem_facts(problem: str) -> ProblemFacts:
    question = _plain(problem)
    lowered = question.lower()
    formulas = _FORMULA.findall(problem)
    numbers = len(_NUMBER.findall(question))
    multi_step, one_step, equation = _formula_kinds(problem)
    return ProblemFacts(
        target_scores=tuple(_score(TARGET_CUES, question).items()),
        content_scores=tuple(_score(CONTENT_CUES, question).items()),
        word_count=len(question.split()),
        numbers=numbers,
        formula=bool(formulas),
        digit_formula=any(re.search(r"\d", f) for f in formulas),
        asks_formula_value=bool(formulas) and _ASKS_FORMULA_VALUE.search(formulas[0].strip()) is not None,
        grasping_stem=GRASPING_STEMS.search(question) is not None,
        candidate_among_pictured=bool(
            SELECT_AMONG_PICTURED.search(question)
            and not SINGLE_THING_SHOWN.search(question)
            and not RECALL_STEMS.search(question)
        ),
        formula_step=one_step or equation,
        reads_scale=READ_A_SCALE.search(problem) is not None,
        prediction=bool(PREDICTION_STEM.search(question) or INFERRED_QUANTITY.search(question)),
        heavier_or_lighter=re.search(r"\b(?:heavier|lighter)\b", lowered) is not None,
        triangle_angle="\\triangle" in problem and "measure of" in lowered,
        reasoning_stem=REASONING_STEMS.search(question) is not None,
        multi_step_formula=multi_step,
        word_problem=numbers >= 2 and re.search(r"\b(?:how many|how much|what is|what time)\b", lowered) is not None,
        recall_stem=bool(RECALL_STEMS.search(question))
        and not re.search(r"\b(?:most|least|farthest|fewest)\b", lowered),
        math_fact=_is_math_fact(problem),
    )


def options_facts(choices: Sequence[Any] | None) -> OptionsFacts:
    joined = " | ".join(str(c) for c in choices) if choices is not None else ""
    formulas = _FORMULA.findall(joined) if joined else []
    options = _plain(joined)
    return OptionsFacts(
        target_scores=tuple(_score(TARGET_CUES, options).items()),
        formula=bool(formulas),
        digit_formula=any(re.search(r"\d", f) for f in formulas),
        asks_formula_value=bool(formulas) and _ASKS_FORMULA_VALUE.search(formulas[0].strip()) is not None,
        numeric_for_target=bool(options)
        and all(_NUMERIC_OPTION_FOR_TARGET.fullmatch(o) for o in options.split("|")),
        numeric_for_content=bool(options)
        and all(_NUMERIC_OPTION_FOR_CONTENT.fullmatch(o) for o in options.split("|")),
    )


def skill_facts(skill: Any) -> SkillFacts:
    words = str(skill or "").rsplit("/", 1)[-1].replace("-", " ").replace("_", " ")
    return SkillFacts(_skill_hints(words, True), _skill_hints(words, False), "balance" in words)


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
    index = _CUE_INDEXES.get(id(cues))
    candidates = index.candidates(text) if index is not None else None
    if candidates is None:
        return _score_whole(cues, text)
    scores: dict[str, float] = {}
    # the families' patterns in lexicon order: each family's sum adds its patterns' terms in order
    for name, key, pattern, weight, kept, kept_pattern in index.slots:
        if kept is None:
            hits = len(pattern.findall(text))
        else:
            found = candidates.get(key)
            if found:
                hits = len(_pattern_of(pattern, tuple(sorted(found | kept))).findall(text))
            elif kept:
                hits = len(kept_pattern.findall(text))
            else:
                continue  # no alternative can match
        if hits:
            scores[name] = scores.get(name, 0.0) + weight * min(hits, 3) ** 0.5
    return scores


def _score_whole(cues: Mapping[str, list[tuple[re.Pattern, float]]], text: str) -> dict[str, float]:
    """The cue scores of ``text``, every cue pattern scanned whole."""
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


def _plain(text: str) -> str:
    """Text with formula spans replaced by a placeholder word, for the word rules."""
    return _FORMULA.sub(" FORMULA ", text)


@lru_cache(maxsize=4096)
def _skill_hints(skill_words: str, target: bool) -> tuple[str, ...]:
    slug = skill_words.replace(" ", "-")
    hints = SKILL_TARGET_HINTS if target else SKILL_CONTENT_HINTS
    return tuple(name for hint, name in hints.items() if hint in slug)


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


def _is_math_fact(text: str) -> bool:
    """A single basic multiplication fact (the times tables) is retrieved, not worked out."""
    formulas = _FORMULA.findall(text)
    if len(formulas) != 1:
        return False
    return re.fullmatch(r"\s*\d\s*\\times\s*\d{1,2}\s*=?\s*", formulas[0]) is not None


def classify_question(row: Mapping[str, Any], taxonomy: Taxonomy) -> tuple[list[str], list[str], str]:
    """TARGET (<= limit), CONTENT (<= limit) and the single highest THINKING level of one question."""
    choices = row.get("choices")
    num = row.get("num_choices")
    if num is None:
        num = len(choices) if choices is not None else 0
    pic_choice = bool(row.get("pic_choice"))
    return _classify(
        problem_facts(str(row.get("problem") or "")), options_facts(choices), skill_facts(row.get("skill")),
        str(row.get("subject") or "") == "math", bool(row.get("pic_prob")), pic_choice, pic_choice and int(num) >= 2,
        taxonomy,
    )


def _classify(
    problem: ProblemFacts,
    options: OptionsFacts,
    skill: SkillFacts,
    math: bool,
    pic_prob: bool,
    pic_choice: bool,
    several_pictured_options: bool,
    taxonomy: Taxonomy,
) -> tuple[list[str], list[str], str]:
    # ---- TARGET ---- (float sums in this order: ties between scores decide the top three)
    t_scores = dict(problem.target_scores)
    for name, s in options.target_scores:
        t_scores[name] = t_scores.get(name, 0.0) + 0.5 * s
    for name in skill.target_hints:
        t_scores[name] = t_scores.get(name, 0.0) + 0.8
    if problem.formula or options.formula:
        t_scores["Symbol/Formula"] = t_scores.get("Symbol/Formula", 0.0) + 2.5
    if problem.numbers or problem.digit_formula or options.digit_formula:
        t_scores["Number/Quantity"] = t_scores.get("Number/Quantity", 0.0) + 0.6 * min(problem.numbers + 1, 3)
    if options.numeric_for_target:
        t_scores["Number/Quantity"] = t_scores.get("Number/Quantity", 0.0) + 1.0
    if problem.word_count >= 25:
        t_scores["Scenario"] = t_scores.get("Scenario", 0.0) + 1.0 + 0.5 * (problem.word_count >= 40)
    elif problem.word_count < 14:
        t_scores.pop("Scenario", None)
    if math and not t_scores:
        t_scores["Number/Quantity"] = 1.0
    t_order = taxonomy.sub_components("TARGET")
    target = _top(t_scores, t_order, taxonomy.limits["TARGET"], floor=1.0)
    if not target:
        target = [max(t_scores, key=lambda n: (t_scores[n], -t_order.index(n)))] if t_scores else ["Commonsense"]

    # ---- CONTENT ---- (the options rarely say what is asked)
    c_scores = dict(problem.content_scores)
    for name in skill.content_hints:
        c_scores[name] = c_scores.get(name, 0.0) + 0.6
    if options.numeric_for_content:
        c_scores["Quantity"] = c_scores.get("Quantity", 0.0) + 1.2
    if problem.asks_formula_value if problem.formula else options.asks_formula_value:
        c_scores["Quantity"] = c_scores.get("Quantity", 0.0) + 1.5
    c_order = taxonomy.sub_components("CONTENT")
    content = _top(c_scores, c_order, taxonomy.limits["CONTENT"], floor=1.2)
    if not content:
        content = [max(c_scores, key=lambda n: (c_scores[n], -c_order.index(n)))] if c_scores else ["Identity"]

    # ---- THINKING ----
    levels = ["Recall"]
    if problem.grasping_stem:
        levels.append("Grasping")
    if several_pictured_options:
        levels.append("Grasping")  # choosing one of several pictured candidates
    elif pic_prob and problem.candidate_among_pictured:
        levels.append("Grasping")  # one candidate among several in the picture
    if problem.formula_step or problem.reads_scale:
        levels.append("Grasping")
    if problem.prediction or (skill.balance and problem.heavier_or_lighter) or problem.triangle_angle:
        levels.append("Reasoning")  # a missing angle of a triangle; weight inferred from a balance
    if problem.reasoning_stem or problem.multi_step_formula or problem.word_problem:
        levels.append("Reasoning")
    if problem.recall_stem and not pic_choice and "Reasoning" not in levels:
        levels = ["Recall"]
    if problem.math_fact:
        levels = ["Recall"]  # a basic fact
    thinking = highest_thinking(levels, taxonomy)
    if problem.prediction and "Causality" not in content and len(content) < taxonomy.limits["CONTENT"]:
        content.append("Causality")  # a prediction asks for the consequence of a change
    return target, content, thinking


def tag_questions(questions: pl.DataFrame, taxonomy: Taxonomy, workers: int | None = None) -> pl.DataFrame:
    """Tag every question with the rules; returns a validated ``question_tags`` frame.

    Quiz texts are templated: the rules read each distinct problem text, option list and skill
    once (by ``workers`` processes when there are many; default: one per CPU) and each distinct
    combination of what they read once; the frame is the same whatever the count."""
    if taxonomy.sub_components("TARGET") != _STEM_TARGETS or taxonomy.sub_components("CONTENT") != _STEM_CONTENTS:
        raise TaggerError(f"the rule tagger is written for the 'stem' taxonomy, not {taxonomy.name!r}")
    missing = [c for c in REQUIRED_COLUMNS if c not in questions.columns]
    if missing:
        raise TaggerError(f"questions lack column(s) {', '.join(missing)}")
    if questions.height == 0:
        return empty_tags()
    if questions["question_id"].null_count() or questions["question_id"].is_duplicated().any():
        raise TaggerError("questions need unique, non-null question_id")
    has_choices = "choices" in questions.columns and questions.schema["choices"] != pl.Null
    frame = questions.select(
        *REQUIRED_COLUMNS,
        pl.col("choices") if has_choices else pl.lit(None, pl.List(pl.String)).alias("choices"),
    )
    problems = frame["problem"].unique(maintain_order=True)
    choice_lists = frame["choices"].unique(maintain_order=True)
    skills = frame["skill"].unique(maintain_order=True)
    problem_ids, problem_facts_by_id, option_ids, options_facts_by_id = _read_texts(problems, choice_lists, workers)
    skill_ids, skill_facts_by_id = _interned([skill_facts(s) for s in skills.to_list()])
    pic_choice = pl.col("pic_choice").cast(pl.Boolean).fill_null(False)
    num_choices = pl.col("num_choices").cast(pl.Int64).fill_null(pl.col("choices").list.len()).fill_null(0)
    keyed = (
        frame.join(pl.DataFrame([problems, pl.Series("_problem", problem_ids, pl.UInt32)]),
                   on="problem", how="left", nulls_equal=True)
        .join(pl.DataFrame([choice_lists, pl.Series("_options", option_ids, pl.UInt32)]),
              on="choices", how="left", nulls_equal=True)
        .join(pl.DataFrame([skills, pl.Series("_skill", skill_ids, pl.UInt32)]),
              on="skill", how="left", nulls_equal=True)
        .select(
            "question_id", "_problem", "_options", "_skill",
            _math=pl.col("subject").cast(pl.String).fill_null("") == "math",
            _pic_prob=pl.col("pic_prob").cast(pl.Boolean).fill_null(False),
            _pic_choice=pic_choice,
            _several=pic_choice & (num_choices >= 2),
        )
    )
    key = ["_problem", "_options", "_skill", "_math", "_pic_prob", "_pic_choice", "_several"]
    combinations = keyed.select(key).unique(maintain_order=True)
    outcome_ids, outcomes = _interned([
        _classify(problem_facts_by_id[p], options_facts_by_id[o], skill_facts_by_id[s], *flags, taxonomy)
        for p, o, s, *flags in combinations.iter_rows()
    ], key=lambda outcome: (tuple(outcome[0]), tuple(outcome[1]), outcome[2]))
    per_question = keyed.join(
        combinations.with_columns(pl.Series("_outcome", outcome_ids, pl.UInt32)), on=key, how="left"
    ).select("question_id", "_outcome")
    # each outcome is checked once, as the tags of its first question by id
    first_question = per_question.group_by("_outcome").agg(pl.col("question_id").min()).sort("_outcome")
    rows = []
    for outcome, question_id in first_question.iter_rows():
        rows += tag_rows(question_id, RULES_SOURCE, *outcomes[outcome], taxonomy)
    checked = validate_tags(pl.DataFrame(rows, schema=TAG_SCHEMA), taxonomy).join(
        first_question, on="question_id", how="left", maintain_order="left"
    )
    # rows in validate_tags' order: by question, then each outcome's rows in the taxonomy's order
    return (
        per_question.sort("question_id")
        .join(checked.drop("question_id"), on="_outcome", how="left", maintain_order="left_right")
        .select(list(TAG_SCHEMA))
    )


# Below this many distinct texts per worker, forking workers costs more than it saves.
MIN_TEXTS_PER_WORKER = 20_000
# distinct texts read at a time in one process: the Python objects of one batch are alive at once
TAG_BATCH_ROWS = 20_000


def _interned(values: list, key=lambda value: value) -> tuple[list[int], list]:
    """(the id of each value, the distinct values by id): equal values get one id."""
    ids: dict = {}
    distinct = []
    out = []
    for value in values:
        k = key(value)
        i = ids.get(k)
        if i is None:
            i = ids[k] = len(distinct)
            distinct.append(value)
        out.append(i)
    return out, distinct


def _read_texts(problems: pl.Series, choice_lists: pl.Series, workers: int | None) -> tuple[list, list, list, list]:
    """The facts of each distinct problem text and option list, interned: (problem ids, problem
    facts by id, option ids, options facts by id)."""
    total = problems.len() + choice_lists.len()
    workers = worker_count(total, MIN_TEXTS_PER_WORKER, workers)
    problem_tasks = [("problems", start, length) for start, length in contiguous_ranges(problems.len(), workers)]
    choice_tasks = [("choices", start, length) for start, length in contiguous_ranges(choice_lists.len(), workers)]
    tasks = problem_tasks + choice_tasks
    # workers get Arrow, not Polars
    with sharing({"cogme-problems": problems.to_arrow(), "cogme-choices": choice_lists.to_arrow()}):
        if workers == 1:
            parts = [_facts_of_range(*task) for task in tasks]
        else:
            with forked_pool(workers) as pool:
                parts = list(pool.map(_facts_of_range, *zip(*tasks)))
    return (*_merged(parts[: len(problem_tasks)]), *_merged(parts[len(problem_tasks) :]))


def _merged(parts: list[tuple[list[int], list]]) -> tuple[list[int], list]:
    """One (ids, distinct values by id) from several, read in order."""
    ids: list[int] = []
    index: dict = {}
    distinct: list = []
    for local_ids, local_values in parts:
        remap = []
        for value in local_values:
            if value not in index:
                index[value] = len(distinct)
                distinct.append(value)
            remap.append(index[value])
        ids += [remap[i] for i in local_ids]
    return ids, distinct


def _facts_of_range(kind: str, start: int, length: int) -> tuple[list[int], list]:
    """The facts of distinct texts ``start`` .. ``start + length - 1`` of one kind, interned (may
    run in a worker process: distinct facts are few, and only they and the ids are sent back)."""
    values = shared(f"cogme-{kind}").slice(start, length)
    facts = []
    for offset in range(0, length, TAG_BATCH_ROWS):  # one batch's Python objects alive at a time
        batch = values.slice(offset, TAG_BATCH_ROWS).to_pylist()
        if kind == "problems":
            facts += [problem_facts(str(p or "")) for p in batch]
        else:
            facts += [options_facts(c) for c in batch]
    return _interned(facts)


_STEM_TARGETS = (
    "Object", "Living thing", "Substance/Material", "Shape/Figure", "Number/Quantity", "Diagram/Chart/Table",
    "Symbol/Formula", "Force/Energy/Motion", "Place/Direction", "Time", "Scenario", "Commonsense",
)
_STEM_CONTENTS = (
    "Identity", "Feature", "Relationship", "Quantity", "Means", "Sequence/Pattern", "Causality", "Structure",
)
