"""Offline, rule-based conversion of math written in Unicode or plain text to Mathpix-style LaTeX.

``convert_text`` finds formula spans in a question text or option, rewrites each as inline
math ``\\( ... \\)`` (one space inside each delimiter) and leaves every other character
byte-identical, except the delimiters of TeX math already in the text (below). Converting
converted text changes nothing. NFKC is never applied (it would turn x² into x2).

TeX math already in the text (``find_tex_math``; ``extract_math`` lists its TeX) is kept
byte for byte inside; only dollar delimiters are rewritten, so that every ``$`` left in the
output is a literal dollar sign: ``$x$`` becomes ``\\( x \\)`` and ``$$x$$`` becomes
``\\[ x \\]`` (the TeX between the delimiters unchanged, one space added on each side);
``\\( \\)``, ``\\[ \\]`` and ``\\begin{name} ... \\end{name}`` blocks stay exactly as written.
No formula is ever found inside such math, so conversion never nests. The rules:
- A backslash escapes the next character: ``\\$`` is a literal dollar, ``\\\\`` one escaped
  backslash; ``\\(`` and ``\\[`` run to the first ``\\)`` / ``\\]``; ``\\begin{name}`` to its matching
  ``\\end{name}`` (the same name, nested ones counted). A region that is never closed is
  not math. A ``\\(`` or ``\\[`` that is never closed would capture any delimiter written
  after it, so the text from there on is left exactly as it is.
- ``$$`` opens display math closed by the next ``$$``; a single ``$`` opens inline math
  closed by the next unescaped ``$`` (so ``$a$$b$`` is two inline formulas).
- A pair of dollars is not math, and the opening dollar is prose, when: the closing
  dollar is directly followed by a digit (prices: "$5 and $7", "between $20,000 and
  $30,000", a list of options "A. $2000 B. $2250") or by ``\\(`` / ``\\[`` (a price whose
  amount became a formula: "$\\( 3 \\times 4 \\)"); the text between them starts with an
  amount and ends with white space ("costs $5 and $x$ more": $5 is a price, $x$ is math);
  that text is blank, holds a paragraph break (a blank line), another math delimiter, or an
  environment opened and not closed inside (or closed and not opened).
  A dollar with no closing one ("$3.50", "denoted by $:") is prose.

Output style (Mathpix-like, shared with the demo site's truth): × \\times, ÷ \\div, · \\cdot,
− -, ± \\pm, ≤ \\leq, ≥ \\geq, ≠ \\neq, ≈ \\approx, → \\rightarrow, x² x^{2}, x⁻¹ x^{-1},
x^2 x^{2}, x₁ x_{1}, ½ \\frac{1}{2}, a/b \\frac{a}{b} (a parenthesized numerator or denominator
loses its parentheses: (x+1)/2 \\frac{x+1}{2}), √16 \\sqrt{16}, √(x+1) \\sqrt{x+1}, ∛8
\\sqrt[3]{8}, 45° 45^{\\circ}, 20 °C 20^{\\circ} \\mathrm{C}, 50% 50 \\%, π \\pi (Greek letters
by name; ε \\varepsilon, φ \\varphi as Unicode defines them), ∠ABC \\angle A B C, △ABC
\\triangle A B C, ∞ \\infty, ... and … \\ldots, 12 cm² 12 \\mathrm{~cm}^{2}. Binary operators
written with ASCII characters are glued to their operands (``x^{2}+3 x=10``), operators
written as commands get one space on each side (``3 \\times 4``), juxtaposed factors are
separated by one space (``2 x``, ``2 \\pi r``). Exact comparisons ignore all white space.

What counts as math (the rules, in order):
- Never math: URLs and e-mail addresses, dates (3/4/2020, 2020-03-04, 2020/03/15, 04.03.2020), times
  (H:MM with minutes 00-59, optionally a.m./p.m.: "3:45 p.m."), ordinals (1st, 22nd),
  LaTeX already in the text (math regions above, and commands such as ``\\frac`` written
  without delimiters), hyphenated words ("3-page", "grade-3", "x-axis"), code: a block of
  lines (up to a blank line, holding no TeX math) where a line reads as code (``==``, ``+=``,
  ``++``, ``&&``, ``print(``, ``def f(``, ``int i =``, ``while (…) {``), since ``i = 0`` there
  is code and ``7 / 2`` in C is not ``\\frac{7}{2}``.
- A formula span is a maximal expression: operands (numbers, single ASCII letters, Greek
  letters, chemical formulas, vulgar fractions, ∞, parenthesized expressions, sin/cos/tan/
  cot/sec/csc/log/ln/exp applied to an operand, 2-3 capital letters such as segment AB)
  joined by binary operators, with prefixes (√ ∛ ∜ ∠ △, a sign) and suffixes (superscripts,
  subscripts, ^, °, %, primes, a unit directly after a number).
  It is kept only when it carries math evidence: any Unicode math character (operators,
  super/subscripts, vulgar fractions, √, °, Greek letters, ∠, △, ∞), an ASCII operator
  + = < > * ^ between operands, a spaced " - " between operands, a negative number
  ("-5"), a slash with a number on one side ("3/4", "x/2"; "A/B" and "and/or" are not),
  a percent sign after a number, or a ratio.
- A lone number, a number with a word ("5 apples"), or a range "1-2" is not math.
- Ratio vs time: "3:4" and "3 : 4" are ratios (math); "3:45" (two-digit minutes) is a time.
  "Step 1: 5" (space after the colon only) is prose.
- A question mark is never part of a formula (as in the demo site's truth): "3 × 4 = ?"
  gives "\\( 3 \\times 4 \\) = ?" and "What is 3 × 4?" gives "What is \\( 3 \\times 4 \\)?".
  A box □ after an operator is ``\\square``.
- Sequences: numbers separated by commas form one formula only when the list contains an
  ellipsis and at least two numbers ("2, 4, 6, 8, ..." becomes ``2,4,6,8, \\ldots``).
- Points: "(2, −1)" (two or three numbers) is one formula ``(2,-1)``; "(x, y)" alone is not.
- A formula entirely wrapped in one pair of parentheses loses them to the prose:
  "water (H₂O)" becomes "water (\\( \\mathrm{H}_{2} \\mathrm{O} \\))".
- Chemistry: a word made of element symbols with subscripts of 2 or more is a chemical
  formula, written the Mathpix way: H₂O ``\\mathrm{H}_{2} \\mathrm{O}``, CO₂ ``\\mathrm{CO}_{2}``,
  2H₂O ``2 \\mathrm{H}_{2} \\mathrm{O}``. A letter with subscript 1 (V₁, x₁) is a variable.
- Mixed numbers: "2 1/2" and "2½" are ``2 \\frac{1}{2}``.
- Roman numerals of two or more letters ("III > I = IV > II", statements ranked) are not
  products of variables: such a span stays as written.
- Ohms after a number are a unit with an optional prefix: "4.7 kΩ" ``4.7 \\mathrm{k} \\Omega``.
- A letter x between a number and a power of ten ("3 x 10^8" ``3 \\times 10^{8}``), or standing
  apart between two numbers ("2 x 3 = 6"), is the times sign.
- Variables: a single ASCII letter; a lower-case run of 2-3 letters that is not an English
  word, a unit or a name of math or code ("max", "gcd", "arr"): "mx" in "y = mx + b" is
  ``m x``. Greek letters inside Greek words are prose.
- Full-width operators are operators ("3.14×(24^2－20^2)÷2" is one formula); "－" joins ranges
  and words like "-" ("2019－2020").
- A letter under a statistics or vector accent, written with its combining mark (x̄, p̂, v⃗) or
  as ŷ, ȳ, is ``\\bar{x}``, ``\\hat{p}``, ``\\vec{v}``, ``\\hat{y}``.
- An index may be written with "_": "a_1" ``a_{1}``, "x_n" ``x_{n}``.
- A function may carry a power or base before its argument: "sin²x", "sin^2 x" ``\\sin^{2} x``,
  "log₂ 8", "log_2 8" ``\\log_{2} 8``.
- A formula never starts or ends inside a word ("x2", "½0", "45°Celsius" stay as written;
  Chinese, Japanese and Korean words end where Latin letters or digits start: "若x=2" gives
  "若\\( x=2 \\)"), nor is it a piece of a longer expression: a span that an operator joins to an
  operand outside it ("Height = 5.31 + 3.34 Percentage", "a:b = 2:3", "m1 m2 / r^2"), that
  leaves out a sign, root, angle or index glued to it ("rate= -0.64x", "∠1:∠2") or a power
  after it, whose brackets an operator joins to more ("μ0I/(2πd)"), that stands beside a math
  symbol the rules do not read ("∑ i = 55") or that a dot or hyphen with no space joins to a
  word ("0.5 kg.m2", "3′-ATGCG") stays as written. A number may be written in E notation ("1.5e-3", "6.02E23").
  After the spans are found, the prose left around them is searched again (found spans
  frozen) until nothing new turns up, so conversion is idempotent.

Every produced formula is validated: pylatexenc (strict parsing) and latex2mathml must
accept it, every command must be known, and the LaTeX read back to text must equal the
original span modulo white space, parentheses/braces and Unicode equivalents (² and ^2, ½
and 1/2, − and -, ... and …). A span that fails keeps its original text and
``LatexConversion.error`` says why on one line.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache

from pipelines.tex_math import TexMath, changed_math, extract_math, find_tex_math, scan_tex_math

__all__ = [
    "LatexConversion",
    "LatexValidationError",
    "LatexConverter",
    "convert_text",
    "convert_line",
    "TexMath",
    "find_tex_math",
    "extract_math",
    "changed_math",
    "validate_formula",
    "latex_to_text",
    "invalid_formulas",
]


class LatexValidationError(ValueError):
    """A produced formula is not valid LaTeX or does not read back to its original span."""


@dataclass(frozen=True)
class LatexConversion:
    text: str
    formulas: list[tuple[str, str]] = field(default_factory=list)
    changed: bool = False
    error: str | None = None
    # TeX math already in the text: (region as written, its TeX), kept as it was inside
    tex_math: list[tuple[str, str]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------
# Character tables

SUPERSCRIPTS = {
    "⁰": "0", "¹": "1", "²": "2", "³": "3", "⁴": "4", "⁵": "5", "⁶": "6", "⁷": "7",
    "⁸": "8", "⁹": "9", "⁺": "+", "⁻": "-", "⁼": "=", "⁽": "(", "⁾": ")", "ⁿ": "n", "ⁱ": "i",
}
SUBSCRIPTS = {
    "₀": "0", "₁": "1", "₂": "2", "₃": "3", "₄": "4", "₅": "5", "₆": "6", "₇": "7", "₈": "8",
    "₉": "9", "₊": "+", "₋": "-", "₌": "=", "₍": "(", "₎": ")", "ₐ": "a", "ₑ": "e", "ₒ": "o",
    "ₓ": "x", "ₕ": "h", "ₖ": "k", "ₗ": "l", "ₘ": "m", "ₙ": "n", "ₚ": "p", "ₛ": "s", "ₜ": "t",
    "ᵢ": "i", "ⱼ": "j",
}
VULGAR_FRACTIONS = {
    "½": ("1", "2"), "⅓": ("1", "3"), "⅔": ("2", "3"), "¼": ("1", "4"), "¾": ("3", "4"),
    "⅕": ("1", "5"), "⅖": ("2", "5"), "⅗": ("3", "5"), "⅘": ("4", "5"), "⅙": ("1", "6"),
    "⅚": ("5", "6"), "⅐": ("1", "7"), "⅛": ("1", "8"), "⅜": ("3", "8"), "⅝": ("5", "8"),
    "⅞": ("7", "8"), "⅑": ("1", "9"), "⅒": ("1", "10"), "↉": ("0", "3"),
}
GREEK = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "varepsilon", "ϵ": "epsilon",
    "ζ": "zeta", "η": "eta", "θ": "theta", "ϑ": "vartheta", "ι": "iota", "κ": "kappa",
    "λ": "lambda", "μ": "mu", "ν": "nu", "ξ": "xi", "π": "pi", "ϖ": "varpi", "ρ": "rho",
    "ϱ": "varrho", "σ": "sigma", "ς": "varsigma", "τ": "tau", "υ": "upsilon", "φ": "varphi",
    "ϕ": "phi", "χ": "chi", "ψ": "psi", "ω": "omega", "Γ": "Gamma", "Δ": "Delta",
    "Θ": "Theta", "Λ": "Lambda", "Ξ": "Xi", "Π": "Pi", "Σ": "Sigma", "Υ": "Upsilon",
    "Φ": "Phi", "Ψ": "Psi", "Ω": "Omega",
}
# full-width operators, as Chinese texts write them -> the ASCII operator they are
FULL_WIDTH_OPERATORS = {"＋": "+", "－": "-", "＝": "=", "＜": "<", "＞": ">"}
# operator as written -> LaTeX
OPERATORS = {
    "+": "+", "-": "-", "−": "-", "×": r"\times", "÷": r"\div", "·": r"\cdot", "⋅": r"\cdot",
    **FULL_WIDTH_OPERATORS,
    "*": "*", "=": "=", "<": "<", ">": ">", "≤": r"\leq", "≥": r"\geq", "⩽": r"\leq",
    "⩾": r"\geq", "<=": r"\leq", ">=": r"\geq", "≠": r"\neq", "≈": r"\approx", "±": r"\pm",
    "∓": r"\mp", ":": ":", "→": r"\rightarrow", "⊥": r"\perp", "∥": r"\parallel",
    "≅": r"\cong", "∼": r"\sim", "≡": r"\equiv", "∝": r"\propto", "/": "/", "^": "^",
}
ROOTS = {"√": "", "∛": "3", "∜": "4"}
ANGLE_PREFIXES = {"∠": r"\angle", "△": r"\triangle", "∆": r"\triangle"}
SYMBOL_ATOMS = {"∞": r"\infty", "□": r"\square"}
FUNCTIONS = frozenset({"sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp"})
UNITS = frozenset({
    "mm", "cm", "dm", "m", "km", "mg", "g", "kg", "mL", "ml", "L", "cL", "s", "ms", "h", "hr",
    "ft", "yd", "mi", "lb", "oz", "N", "J", "W", "V", "Pa", "kPa", "Hz", "cal", "kcal",
    "nm", "mol", "mmol", "kJ", "eV", "keV", "MeV", "atm", "mA", "kW", "kV", "mV", "kHz", "MHz", "GHz",
    "min", "sec", "yr", "mph",
})
OHM_PREFIXES = frozenset({"m", "k", "M", "G"})  # mΩ, kΩ, MΩ, GΩ
# Roman numerals of two or more letters (II, III, IV, IX, XII, ...), which name statements and cases
_ROMAN_NUMERAL = re.compile(r"(?=[IVX]{2})X{0,3}(?:IX|IV|V?I{0,3})")
# short lower-case names that are never a product of variables ("max" is not m·a·x): functions
# and abbreviations of math and of code
_NAMES = frozenset("max min gcd lcm mod abs det deg rad arg lim sgn var std cov avg arr idx len str num tmp val".split())
# short lower-case words that are English, never a product of variables such as "mx"
_ENGLISH_SHORT_WORDS = frozenset("""am an as at be by do go he if in is it me my no of oh ok on or
so to up us we ya ye and are but can did for had has her him his how its let may not now off
one our out see she the too two use was way who why yes yet you all any few new old own put say
set ten six get got per via add sum big car cat dog day end far fun hot man men red run sea
sun top try age ago air arm art ask bad bag bed box boy bus buy cup cut eat egg eye fly fox
hat ice job key kid lay leg lie lot low map mix net nor odd pen pet pig pot raw row sad sat
sit sky son tea tie toy van war wet win won yes zoo""".split())
ELEMENTS = frozenset("""H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co
Ni Cu Zn Ga Ge As Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr
Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa
U Np Pu Am Cm Bk Cf Es Fm Md No Lr""".split())

_SPECIAL_CHARS = "".join(SUPERSCRIPTS) + "".join(SUBSCRIPTS) + "".join(VULGAR_FRACTIONS) + "".join(GREEK)
_SPECIAL_CLASS = "[" + re.escape(_SPECIAL_CHARS) + "]"
_LETTER = rf"(?:(?!{_SPECIAL_CLASS})[^\W\d_])"

# a letter under a statistics or vector accent (x̄ the mean, ŷ the prediction, p̂ the
# proportion, v⃗): combining mark -> LaTeX command. Written with the combining mark (x + U+0304);
# precomposed only as ŷ and ȳ, since other precomposed letters (ñ, â, ā) are letters of words
ACCENTS = {"\u0302": "hat", "\u0304": "bar", "\u0305": "overline", "\u0307": "dot", "\u20d7": "vec"}
ACCENT_MARKS = {command: mark for mark, command in ACCENTS.items()}  # LaTeX command -> combining mark
_PRECOMPOSED_ACCENTED = "ŷŶȳȲ"

# Chinese, Japanese and Korean script: a word of it ends where Latin letters start (已知a>0)
_CJK = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
_CJK_CHAR = re.compile(_CJK)

_TOKEN_PATTERNS = [
    ("URL", r"(?:https?://|ftp://|www\.)[^\s<>\"]+|(?<![\w.+-])[\w.+-]{1,64}@[\w-]+\.[\w.-]+"),
    ("COMMAND", r"\\[A-Za-z]+|\\."),
    ("DATE", r"(?<![\w/.-])(?:\d{1,2}/\d{1,2}/\d{2,4}|\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}-\d{1,2}-\d{4}"
             r"|\d{1,2}\.\d{1,2}\.\d{4})(?![\w/])"),
    ("TIME", r"(?<![\w:])\d{1,2}:[0-5]\d(?::[0-5]\d)?(?![\d:])"
             r"(?:\s?(?:[aApP]\.\s?[mM]\.|[aApP][mM]\b))?"),
    ("ORDINAL", r"\d+(?:st|nd|rd|th)(?![^\W\d_])"),
    ("NUM", r"\d{1,3}(?:,\d{3})+(?![\d,])(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][-+]?\d+(?![\w.]))?"),
    ("ACCENTED", rf"(?<![^\W\d_])(?:[A-Za-z][{''.join(ACCENTS)}]|[{_PRECOMPOSED_ACCENTED}])(?![^\W\d_])"),
    ("CHEM", rf"(?:[A-Z][a-z]?[₀-₉]*)+(?!{_LETTER})"),
    ("GREEK", r"(?<![\u0370-\u03ff\u1f00-\u1fff])[" + "".join(GREEK) + r"](?![\u0370-\u03ff\u1f00-\u1fff])"),
    ("WORD", rf"{_CJK}+|(?:(?!{_CJK}){_LETTER})+"),
    ("SUP", "[" + re.escape("".join(SUPERSCRIPTS)) + "]+"),
    ("SUB", "[" + re.escape("".join(SUBSCRIPTS)) + "]+"),
    ("VFRAC", "[" + "".join(VULGAR_FRACTIONS) + "]"),
    ("ELLIPSIS", r"…|\.\.\."),
    ("NL", r"[\r\n\u2028\u2029]+"),
    ("WS", r"[^\S\r\n\u2028\u2029]+"),
    ("OP", r"<=|>=|[-+−" + "".join(FULL_WIDTH_OPERATORS) + r"×÷·⋅*=<>≤≥⩽⩾≠≈±∓:→⊥∥≅∼≡∝/^]"),
    ("ROOT", "[√∛∜]"),
    ("ANGLE", "[∠△∆]"),
    ("SYMBOL", "[∞□]"),
    ("DEGREE", "[°℃℉]"),
    ("PERCENT", "%"),
    # an ASCII apostrophe is a prime only on a one-letter function before its argument: f'(x), f''(x)
    ("PRIME", r"[′″]|(?<=\b[A-Za-z])'{1,2}(?=\()"),
    ("LPAR", r"[(\[]"),
    ("RPAR", r"[)\]]"),
    ("QMARK", r"\?"),
    ("COMMA", ","),
    ("PUNCT", r"."),
]
_NON_CJK_WORD = re.compile(rf"(?:(?!{_CJK}){_LETTER})+")
_TOKEN_RE = re.compile("|".join(f"(?P<{k}>{p})" for k, p in _TOKEN_PATTERNS), re.DOTALL)
_CHEM_PART_RE = re.compile(r"([A-Z][a-z]?)([₀-₉]*)")


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    start: int
    end: int


def _is_chemical(word: str) -> bool:
    parts = _CHEM_PART_RE.findall(word)
    if "".join(a + b for a, b in parts) != word:
        return False
    subscripts = [b for _, b in parts if b]
    if not subscripts or any(int("".join(SUBSCRIPTS[c] for c in s)) < 2 for s in subscripts):
        return False
    return all(symbol in ELEMENTS for symbol, _ in parts)


def _tokenize(text: str, opaque: list[tuple[int, int]] = ()) -> list[_Token]:
    """Tokens of ``text``; each (start, end) range in ``opaque`` (TeX math) is one OPAQUE token."""
    tokens: list[_Token] = []
    regions = dict(opaque)
    pos = 0
    while pos < len(text):
        if pos in regions:
            tokens.append(_Token("OPAQUE", text[pos:regions[pos]], pos, regions[pos]))
            pos = regions[pos]
            continue
        m = _TOKEN_RE.match(text, pos)
        kind = m.lastgroup
        end = m.end()
        if kind == "CHEM" and not _is_chemical(m.group()):
            # not a chemical formula: the capital-letter run is an ordinary word
            w = _NON_CJK_WORD.match(text, pos)
            kind, end = "WORD", w.end()
        tokens.append(_Token(kind, text[pos:end], pos, end))
        pos = end
    return tokens


# ---------------------------------------------------------------------------------------
# Parsing spans

def _is_point_name(word: str) -> bool:
    """Capital letters naming points of a figure: ABC in ∠ABC, △ABC."""
    return 1 <= len(word) <= 4 and word.isascii() and word.isupper()


@dataclass
class _Part:
    latex: str
    end: int                 # index of the token after the part
    strong: bool             # carries math evidence on its own
    bare: str | None = None  # for a parenthesized group: the LaTeX without the parentheses
    numeric: bool = False    # a number (possibly with suffixes)
    group_only: bool = False  # the whole part is one parenthesized group


def _join(pieces: list[str]) -> str:
    return " ".join(p for p in pieces if p)


class _SpanParser:
    MAX_DEPTH = 12  # nested parentheses followed; deeper text is left as written

    def __init__(self, tokens: list[_Token]):
        self.toks = tokens
        self.n = len(tokens)
        self.depth = 0

    # -- helpers
    def kind(self, i: int) -> str | None:
        return self.toks[i].kind if 0 <= i < self.n else None

    def tok(self, i: int) -> str:
        return self.toks[i].text if 0 <= i < self.n else ""

    def skip_ws(self, i: int) -> int:
        return i + 1 if self.kind(i) == "WS" else i

    # -- grammar
    def expression(self, i: int, after_op: bool = False) -> _Part | None:
        if self.depth >= self.MAX_DEPTH:
            return None
        self.depth += 1
        try:
            return self._expression(i, after_op)
        finally:
            self.depth -= 1

    def _expression(self, i: int, after_op: bool) -> _Part | None:
        first = self.signed_term(i, after_op)
        if first is None:
            return None
        pieces = [first.latex]
        strong = first.strong
        end = first.end
        count = 1
        last = first
        while True:
            j = self.skip_ws(end)
            if self.kind(j) != "OP" or self.tok(j) in ("/", "^"):
                break
            op = self.tok(j)
            k = self.skip_ws(j + 1)
            rhs = self.signed_term(k, after_op=True)
            if rhs is None:
                break
            spaced_left, spaced_right = j > end, k > j + 1
            if op == ":":
                if not (last.numeric and rhs.numeric and spaced_left == spaced_right):
                    break
                op_strong = True
            elif op in ("-", "－"):  # a hyphen joins ranges and words too ("1-2", "2019－2020")
                op_strong = spaced_left and spaced_right
            else:
                op_strong = True
            latex_op = OPERATORS[op]
            if latex_op.startswith("\\"):
                pieces.append(latex_op)
                pieces.append(rhs.latex)
            else:
                pieces[-1] = pieces[-1] + latex_op + rhs.latex
            strong = strong or op_strong or rhs.strong
            end = rhs.end
            last = rhs
            count += 1
        if count == 1:
            return first
        return _Part(_join(pieces), end, strong)

    def signed_term(self, i: int, after_op: bool) -> _Part | None:
        if self.kind(i) == "OP" and self.tok(i) in ("-", "−", "±", "∓"):
            sign = self.tok(i)
            if sign == "-" and not after_op:
                prev = self.toks[i - 1].text[-1] if i > 0 else " "
                if not (prev.isspace() or prev in "([=<>+−×÷·≤≥≈≠±:"):
                    return None
            if self.kind(i + 1) == "WS":
                return None
            term = self.term(i + 1, after_op)
            if term is None:
                return None
            strong = term.strong or sign != "-" or self.kind(i + 1) in ("NUM", "VFRAC")
            latex = OPERATORS[sign] + (" " if OPERATORS[sign].startswith("\\") else "") + term.latex
            return _Part(latex, term.end, strong, numeric=term.numeric)
        return self.term(i, after_op)

    def term(self, i: int, after_op: bool) -> _Part | None:
        left = self.product(i, after_op)
        if left is None:
            return None
        while True:
            j = self.skip_ws(left.end)
            if not (self.kind(j) == "OP" and self.tok(j) == "/"):
                break
            k = self.skip_ws(j + 1)
            if (j > left.end) != (k > j + 1):
                break
            right = self.product(k, after_op=True)
            if right is None:
                break
            numerator = left.bare if left.group_only else left.latex
            denominator = right.bare if right.group_only else right.latex
            strong = left.strong or right.strong or left.numeric or right.numeric
            left = _Part(rf"\frac{{{numerator}}}{{{denominator}}}", right.end, strong,
                         numeric=left.numeric and right.numeric)
        return left

    def product(self, i: int, after_op: bool) -> _Part | None:
        first = self.factor(i, after_op)
        if first is None:
            return None
        parts = [first]
        end = first.end
        while True:
            prev = parts[-1]
            k = self.kind(end)
            nxt = None
            if k == "WS" and prev.numeric and prev.latex.isdigit():
                nxt = self.mixed_fraction(end + 1)
            if nxt is None and prev.numeric:
                nxt = self.unit(end)
            if nxt is None and k != "WS" and k is not None:
                nxt = self.factor(end, after_op=False, juxtaposed_to=prev)
            if nxt is None and k == "WS" and self.kind(end - 1) == "GREEK" and (
                    self.kind(end + 1) == "GREEK"
                    or (self.kind(end + 1) == "WORD" and len(self.tok(end + 1)) == 1)):
                nxt = self.factor(end + 1, after_op=False)
            if nxt is None:
                break
            parts.append(nxt)
            end = nxt.end
        if len(parts) == 1:
            return first
        latex = ""
        for p in parts:
            if latex and not p.latex.startswith("(") and not p.latex.startswith("^"):
                latex += " "
            latex += p.latex
        numeric = all(p.numeric for p in parts)
        return _Part(latex, end, any(p.strong for p in parts), numeric=numeric)

    def mixed_fraction(self, i: int) -> _Part | None:
        if self.kind(i) == "VFRAC":
            a, b = VULGAR_FRACTIONS[self.tok(i)]
            return _Part(rf"\frac{{{a}}}{{{b}}}", i + 1, True, numeric=True)
        if (self.kind(i) == "NUM" and self.tok(i + 1) == "/" and self.kind(i + 2) == "NUM"
                and self.tok(i).isdigit() and self.tok(i + 2).isdigit()
                and self.kind(i + 3) not in ("OP", "NUM", "WORD")):
            return _Part(rf"\frac{{{self.tok(i)}}}{{{self.tok(i + 2)}}}", i + 3, True, numeric=True)
        return None

    def unit(self, i: int) -> _Part | None:
        j = self.skip_ws(i)
        if self.tok(j) == "Ω" or (self.tok(j) in OHM_PREFIXES and self.tok(j + 1) == "Ω"):
            # ohms after a number: "4.7 Ω", "12 kΩ" (k is kilo, not a variable k times Ω)
            prefix = r"\mathrm{" + self.tok(j) + "} " if self.tok(j) != "Ω" else ""
            end = j + (1 if not prefix else 2)
            if self.kind(end) in ("WORD", "NUM", "GREEK", "CHEM"):
                return None
            return _Part(prefix + r"\Omega", end, True)
        if self.kind(j) != "WORD" or self.tok(j) not in UNITS:
            return None
        latex = r"\mathrm{~" + self.tok(j) + "}"
        end = j + 1
        strong = False
        if self.tok(end) == "/" and self.kind(end + 1) == "WORD" and self.tok(end + 1) in UNITS:
            latex += r" / \mathrm{" + self.tok(end + 1) + "}"
            end += 2
        if self.kind(end) == "SUP":
            latex += "^{" + "".join(SUPERSCRIPTS[c] for c in self.tok(end)) + "}"
            end += 1
            strong = True
        if self.kind(end) in ("WORD", "NUM", "GREEK", "CHEM"):
            return None
        return _Part(latex, end, strong)

    def factor(self, i: int, after_op: bool, juxtaposed_to: _Part | None = None) -> _Part | None:
        k = self.kind(i)
        if k == "ROOT":
            if self.kind(i + 1) == "WS":
                return None
            radicand = self.atom(i + 1, after_op=False)
            if radicand is None:
                return None
            inner = radicand.bare if radicand.group_only else radicand.latex
            index = ROOTS[self.tok(i)]
            latex = (rf"\sqrt[{index}]" if index else r"\sqrt") + "{" + inner + "}"
            return self.suffixes(_Part(latex, radicand.end, True))
        if k == "ANGLE":
            j = i + 1
            if self.kind(j) == "WORD" and _is_point_name(self.tok(j)):
                named = " ".join(self.tok(j))
            elif self.kind(j) in ("NUM", "GREEK") or (self.kind(j) == "WORD" and len(self.tok(j)) == 1):
                named = self.tok(j) if self.kind(j) != "GREEK" else "\\" + GREEK[self.tok(j)]
            else:
                return None
            return self.suffixes(_Part(ANGLE_PREFIXES[self.tok(i)] + " " + named, j + 1, True))
        base = self.atom(i, after_op, juxtaposed_to)
        if base is None:
            return None
        return self.suffixes(base)

    def suffixes(self, base: _Part) -> _Part:
        latex, end, strong = base.latex, base.end, base.strong
        changed = False
        while True:
            k = self.kind(end)
            if k == "SUP":
                latex += "^{" + "".join(SUPERSCRIPTS[c] for c in self.tok(end)) + "}"
                end += 1
            elif k == "SUB":
                latex += "_{" + "".join(SUBSCRIPTS[c] for c in self.tok(end)) + "}"
                end += 1
            elif k == "OP" and self.tok(end) == "^":
                exponent = self.exponent(end + 1)
                if exponent is None:
                    break
                latex += "^{" + exponent.latex + "}"
                end = exponent.end
            elif self.tok(end) == "_" and (self.kind(end + 1) == "NUM" and self.tok(end + 1).isdigit()
                                          or self.kind(end + 1) == "WORD" and len(self.tok(end + 1)) == 1):
                latex += "_{" + self.tok(end + 1) + "}"  # an index written with "_": a_1, x_n
                end += 2
            elif k == "PRIME":
                latex += "^{" + " ".join([r"\prime"] * (1 if self.tok(end) in ("′", "'") else 2)) + "}"
                end += 1
            elif k == "DEGREE" or (k == "WS" and base.numeric and self.kind(end + 1) == "DEGREE" and (
                    self.tok(end + 1) != "°" or self.tok(end + 2) in ("C", "F"))):
                if k == "WS":
                    end += 1
                sign = self.tok(end)
                latex += r"^{\circ}"
                end += 1
                scale = {"℃": "C", "℉": "F"}.get(sign)
                if scale is None and self.kind(end) == "WORD" and self.tok(end) in ("C", "F"):
                    scale = self.tok(end)
                    end += 1
                if scale:
                    latex += r" \mathrm{" + scale + "}"
            elif k == "PERCENT" and base.numeric:
                latex += r" \%"
                end += 1
            else:
                break
            changed = True
        if not changed:
            return base
        return _Part(latex, end, True, numeric=base.numeric)

    def exponent(self, i: int) -> _Part | None:
        k = self.kind(i)
        if k == "NUM" or (k == "WORD" and len(self.tok(i)) == 1) or k == "GREEK":
            atom = self.atom(i, after_op=False)
            return atom
        if k == "OP" and self.tok(i) in ("-", "−") and self.kind(i + 1) in ("NUM", "WORD"):
            atom = self.atom(i + 1, after_op=False)
            if atom is None:
                return None
            return _Part("-" + atom.latex, atom.end, True)
        if k == "LPAR":
            atom = self.atom(i, after_op=False)
            if atom is None:
                return None
            return _Part(atom.bare, atom.end, True)
        return None

    def atom(self, i: int, after_op: bool, juxtaposed_to: _Part | None = None) -> _Part | None:
        k = self.kind(i)
        t = self.tok(i)
        glued_after_word = juxtaposed_to is not None
        if k == "NUM":
            if glued_after_word:
                return None  # "x2" is not a product
            return _Part(t, i + 1, False, numeric=True)
        if k == "VFRAC":
            a, b = VULGAR_FRACTIONS[t]
            return _Part(rf"\frac{{{a}}}{{{b}}}", i + 1, True, numeric=True)
        if k == "ACCENTED":
            letter, mark = unicodedata.normalize("NFD", t)[:2]
            return _Part("\\" + ACCENTS[mark] + "{" + letter + "}", i + 1, True)
        if k == "GREEK":
            if t == "Δ" and self.kind(i + 1) == "WORD" and _is_point_name(self.tok(i + 1)):
                return _Part(r"\Delta " + " ".join(self.tok(i + 1)), i + 2, True)  # ΔABC
            return _Part("\\" + GREEK[t], i + 1, True)
        if k == "CHEM":
            pieces = []
            pending = ""
            for symbol, sub in _CHEM_PART_RE.findall(t):
                pending += symbol
                if sub:
                    pieces.append(r"\mathrm{" + pending + "}_{" + "".join(SUBSCRIPTS[c] for c in sub) + "}")
                    pending = ""
            if pending:
                pieces.append(r"\mathrm{" + pending + "}")
            return _Part(" ".join(pieces), i + 1, True)
        if k == "SYMBOL" and (t != "□" or after_op):  # a lone □ is a check box, not math
            return _Part(SYMBOL_ATOMS[t], i + 1, True)
        if k == "WORD":
            return self.word(i, juxtaposed_to)
        if k == "LPAR":
            closing = ")" if t == "(" else "]"
            inner = self.expression(self.skip_ws(i + 1), after_op=True)
            if inner is None:
                return None
            j = self.skip_ws(inner.end)
            if self.kind(j) == "COMMA":
                return self.point(t, inner, j, closing)
            if self.tok(j) != closing:
                return None
            return _Part(t + inner.latex + closing, j + 1, inner.strong, bare=inner.latex,
                         numeric=inner.numeric, group_only=True)
        if juxtaposed_to is not None:
            return None
        if k == "ELLIPSIS" and after_op:
            return _Part(r"\ldots", i + 1, False)
        return None

    def point(self, opening: str, first: _Part, comma: int, closing: str) -> _Part | None:
        """Coordinates "(2, −1)" or "(x, y, z)": 2-3 numbers or variables; math when numeric."""
        items = [first]
        j = comma
        while self.kind(j) == "COMMA" and len(items) < 3:
            item = self.expression(self.skip_ws(j + 1), after_op=True)
            if item is None:
                return None
            items.append(item)
            j = self.skip_ws(item.end)
        if self.tok(j) != closing:
            return None
        if any("," in item.latex or "=" in item.latex for item in items):
            return None
        strong = all(item.numeric for item in items) or any(item.strong for item in items)
        latex = opening + ",".join(item.latex for item in items) + closing
        return _Part(latex, j + 1, strong)

    def word(self, i: int, juxtaposed_to: _Part | None) -> _Part | None:
        t = self.tok(i)
        if not t.isascii():
            return None
        if juxtaposed_to is not None:
            # "2x", "3xy", "2ab": a number (or group) followed by a few variables
            if t in UNITS or len(t) > 3 or not t.islower() or t in FUNCTIONS or t in _NAMES:
                return None
            if juxtaposed_to.latex.endswith("}") and juxtaposed_to.latex.startswith(r"\mathrm"):
                return None
            return _Part(" ".join(t), i + 1, False)
        if t in FUNCTIONS:
            index, j = self.function_index(i + 1)
            argument = self.factor(self.skip_ws(j), after_op=False)
            if argument is None:
                return None
            return _Part("\\" + t + index + " " + argument.latex, argument.end, argument.strong or bool(index))
        if len(t) == 1:
            return _Part(t, i + 1, False)
        if _ROMAN_NUMERAL.fullmatch(t):
            return None  # "III > I = IV > II" ranks statements: numerals, not products of I and V
        if 2 <= len(t) <= 3 and t.isupper():
            return _Part(" ".join(t), i + 1, False)
        if 2 <= len(t) <= 3 and t.islower() and t not in _ENGLISH_SHORT_WORDS and t not in UNITS and t not in _NAMES:
            return _Part(" ".join(t), i + 1, False)  # "mx" in "y = mx + b"
        return None

    def function_index(self, i: int) -> tuple[str, int]:
        """A power or base written between a function's name and its argument (``sin²x``,
        ``sin^2 x``, ``log₂ 8``, ``log_2 8``) as LaTeX, and the token after it; ("", i) for none."""
        k = self.kind(i)
        if k == "SUP":
            return "^{" + "".join(SUPERSCRIPTS[c] for c in self.tok(i)) + "}", i + 1
        if k == "SUB":
            return "_{" + "".join(SUBSCRIPTS[c] for c in self.tok(i)) + "}", i + 1
        if k == "OP" and self.tok(i) == "^":
            exponent = self.exponent(i + 1)
            if exponent is not None:
                return "^{" + exponent.latex + "}", exponent.end
        if self.tok(i) == "_" and (self.kind(i + 1) == "NUM" or (self.kind(i + 1) == "WORD" and len(self.tok(i + 1)) == 1)):
            return "_{" + self.tok(i + 1) + "}", i + 2
        return "", i

    def sequence(self, first: _Part) -> _Part | None:
        """Extend a number to '1, 2, 3, ...': only a list containing an ellipsis is math."""
        items = [first.latex]
        numeric_items: list[bool] = []
        end = first.end
        has_ellipsis = False
        while True:
            if self.kind(end) != "COMMA":
                break
            j = self.skip_ws(end + 1)
            if self.kind(j) == "ELLIPSIS":
                items.append(r" \ldots")
                has_ellipsis = True
                end = j + 1
                continue
            item = self.expression(j)
            if item is None or "," in item.latex and not item.numeric:
                break
            items.append(item.latex)
            numeric_items.append(item.numeric)
            end = item.end
        numbers = sum(1 for item in numeric_items if item) + (1 if first.strong or first.numeric else 0)
        if not has_ellipsis or numbers < 2:
            return None
        return _Part(",".join(items), end, True)


_START_KINDS = {"NUM", "WORD", "ACCENTED", "GREEK", "CHEM", "VFRAC", "SYMBOL", "LPAR", "OP", "ROOT", "ANGLE"}
# A formula never starts or ends between two glued word-like tokens ("x2", "½0", "3rd"):
# checking both ends the same way keeps conversion idempotent.
_WORDLIKE = {"NUM", "WORD", "ACCENTED", "CHEM", "GREEK", "VFRAC", "ORDINAL", "DATE", "TIME", "URL", "COMMAND", "SUP", "SUB"}
_LEFT_OF_WORD = _WORDLIKE | {"DEGREE", "PERCENT", "PRIME"}
_RIGHT_OF_WORD = _WORDLIKE | {"LPAR"}


def _inside_word(left: _Token, right: _Token) -> bool:
    if _CJK_CHAR.match(left.text[-1:]) or _CJK_CHAR.match(right.text[:1]):
        return False  # Chinese, Japanese or Korean writes no space between words and math (计算3+5)
    return left.kind in _LEFT_OF_WORD and right.kind in _RIGHT_OF_WORD


# what may stand between two dashes of one list ("Cone - 3 cm - 4 cm"): no sentence punctuation,
# line break or other operator
_LIST_BREAKS = {"NL", "PUNCT", "COMMA", "QMARK", "OP", "ELLIPSIS"}


def _is_prose_word(token: _Token) -> bool:
    """A word that is no operand: not a variable, point name, function or unit ("Cone", "圆锥")."""
    if token.kind != "WORD" or token.text in UNITS or token.text in FUNCTIONS:
        return False
    return _SpanParser([token]).word(0, None) is None


# "3 x 10^8", "6.02x10²³": a letter x between a number and a power of ten is the times sign, and
# so is one standing apart between two numbers ("2 x 3 = 6", "a 3 x 4 grid")
_TIMES_X = re.compile(r"(?<=\d)( ?)[xX]\1(?=10(?:\^|[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]))|(?<=\d) [xX] (?=\d)")


def _times_signs(text: str, tokens: list[_Token]) -> list[_Token]:
    """``tokens`` with each x that is a times sign (``_TIMES_X``) an operator ×."""
    signs = {m.start() + m.group().lower().index("x") for m in _TIMES_X.finditer(text)}
    if not signs:
        return tokens
    return [_Token("OP", "×", t.start, t.end) if t.kind == "WORD" and t.start in signs and len(t.text) == 1 else t
            for t in tokens]


def _list_dashes(tokens: list[_Token]) -> list[_Token]:
    """``tokens`` with the dashes of a list made DASH tokens, which no formula crosses: a list is
    items separated by an ASCII "-" with white space on both sides, on one line, and one of the
    dashes has a prose word beside it ("Cone - 3cm - 4cm": a cone's two measures, not 3 cm
    minus 4 cm). "10 cm - 4 cm" and "x - 3" have no such word and stay subtractions."""
    spaced = [
        i for i in range(1, len(tokens) - 1)
        if tokens[i].kind == "OP" and tokens[i].text == "-" and tokens[i - 1].kind == "WS" and tokens[i + 1].kind == "WS"
    ]
    if not spaced:
        return tokens
    chains: list[list[int]] = []
    for i in spaced:
        if chains and not any(t.kind in _LIST_BREAKS for t in tokens[chains[-1][-1] + 1 : i]):
            chains[-1].append(i)
        else:
            chains.append([i])
    dashes = set()
    for chain in chains:
        if any(_is_prose_word(tokens[i - 2]) if i >= 2 else False for i in chain) or any(
            _is_prose_word(tokens[i + 2]) if i + 2 < len(tokens) else False for i in chain
        ):
            dashes.update(chain)
    if not dashes:
        return tokens
    return [_Token("DASH", t.text, t.start, t.end) if i in dashes else t for i, t in enumerate(tokens)]


# operators that join their two sides into one expression; ":", "/" and "-" are also prose
# punctuation ("Solve: 2x = 6", "and/or", "x-axis")
_JOINING_OPERATORS = frozenset(OPERATORS) - {":", "/", "-", "－"}
_OPERAND_END = {"NUM", "WORD", "ACCENTED", "GREEK", "CHEM", "VFRAC", "SYMBOL", "RPAR", "SUP", "SUB", "PERCENT", "DEGREE",
                "PRIME", "OPAQUE"}
_OPERAND_START = {"NUM", "WORD", "ACCENTED", "GREEK", "CHEM", "VFRAC", "SYMBOL", "ROOT", "ANGLE", "OPAQUE"}


def _piece_of_more(tokens: list[_Token], start: int, end: int) -> bool:
    """Whether the span ``tokens[start:end]`` is a piece of a longer expression the rules could not
    read whole, which alone would say something else: an operator joins it, or the brackets it
    fills, to an operand beside it (``Height = 5.31 + 3.34 Percentage``, ``μ0I/(2πd)``;
    ``joining``); a sign, root, angle or index glued to it, an exponent or index just before it or
    a power after it is left out (``rate= -0.64x``, ``∠1:∠2``, ``x^2 10⁻³``, ``s^-1``); a math
    symbol the rules do not read stands beside it (``∑ i = 55``); or a dot or hyphen with no
    space joins it to a word (``0.5 kg.m2``: a unit's second half; ``3′-ATGCG``, like
    ``3-page``). Such a span stays as written. A blank after the operator (``3 × 4 = ?``,
    ``∠1 = ( )°``) is no operand."""
    def kind(i: int) -> str | None:
        return tokens[i].kind if 0 <= i < len(tokens) else None

    def text(i: int) -> str:
        return tokens[i].text if 0 <= i < len(tokens) else ""

    def skip_ws(i: int, step: int) -> int:
        return i + step if kind(i) == "WS" else i

    def joining(i: int) -> bool:
        """An operator joining its sides: always, "/" and "-" with space on both sides or none
        (``m1 m2 / r^2``), ":" between a letter or digit and what follows with no space (``a:b``;
        ``H0 : β = 0`` and ``Solve:2x`` are labels)."""
        if kind(i) != "OP":
            return False
        if text(i) in _JOINING_OPERATORS:
            return True
        if text(i) == ":":
            return kind(i - 1) in _OPERAND_END and len(text(i - 1)) == 1 and kind(i + 1) != "WS"
        return (kind(i - 1) == "WS") == (kind(i + 1) == "WS")

    def operand_start(i: int) -> bool:
        """An operand starts at ``i``: a bracket does unless it is a blank (``( )``)."""
        return kind(i) in _OPERAND_START or (kind(i) == "LPAR" and kind(skip_ws(i + 1, 1)) != "RPAR")

    def math_symbol(i: int) -> bool:
        """A math symbol the rules do not read (∑, ∫, ∪, ∈): what stands beside it is its operand."""
        return kind(i) == "PUNCT" and len(text(i)) == 1 and unicodedata.category(text(i)) == "Sm"

    if kind(start - 1) == "OP" and (text(start - 1) != ":" or joining(start - 1)):
        return True
    if kind(start - 1) in ("ROOT", "ANGLE") or text(start - 1) == "_":
        return True
    if (kind(end) == "OP" and text(end) == "^") or text(end) == "_":
        return True
    tail = skip_ws(start - 1, -1)
    if kind(tail) in _OPERAND_END and text(tail - 1) in ("^", "_"):
        return True
    # the span, and the brackets around it when it is all their inside ("± (x+1) ∈")
    bounds = [(start, end)]
    if kind(start - 1) == "LPAR" and kind(end) == "RPAR":
        bounds.append((start - 1, end + 1))
    for first, stop in bounds:
        before = skip_ws(first - 1, -1)
        if (joining(before) and kind(skip_ws(before - 1, -1)) in _OPERAND_END) or math_symbol(before):
            return True
        after = skip_ws(stop, 1)
        if (joining(after) and operand_start(skip_ws(after + 1, 1))) or math_symbol(after):
            return True
    if kind(end) == "PUNCT" and text(end) == "." and kind(end + 1) in _WORDLIKE:
        return True
    if kind(end) == "OP" and text(end) in ("-", "−") and kind(end + 1) in _WORDLIKE:
        return True
    return kind(start - 1) == "PUNCT" and text(start - 1) == "." and kind(start - 2) in _WORDLIKE


def _find_spans(tokens: list[_Token]) -> list[tuple[int, int, str]]:
    """(start token, end token, LaTeX) of every formula span, left to right."""
    parser = _SpanParser(tokens)
    spans = []
    i = 0
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        part = None
        if tok.kind in _START_KINDS and not (i > 0 and _inside_word(tokens[i - 1], tok)):
            part = parser.expression(i)
            if part is not None:
                part = parser.sequence(part) or part
            if part is not None and (part.group_only or not part.strong):
                part = None
            if part is not None and part.end < n and _inside_word(tokens[part.end - 1], tokens[part.end]):
                part = None
            if part is not None and _piece_of_more(tokens, i, part.end):
                part = None
        if part is None:
            i += 1
            continue
        spans.append((i, part.end, part.latex))
        i = part.end
    return spans


# ---------------------------------------------------------------------------------------
# Validation

_LATEX_TO_TEXT = {
    "times": "×", "div": "÷", "cdot": "·", "pm": "±", "mp": "∓", "leq": "≤", "geq": "≥",
    "neq": "≠", "approx": "≈", "rightarrow": "→", "perp": "⊥", "parallel": "∥", "cong": "≅",
    "sim": "∼", "equiv": "≡", "propto": "∝", "circ": "°", "angle": "∠", "triangle": "△",
    "infty": "∞", "square": "□", "ldots": "…", "%": "%", "prime": "′",
}
_LATEX_TO_TEXT.update({name: char for char, name in GREEK.items()})
for _fn in FUNCTIONS:
    _LATEX_TO_TEXT[_fn] = _fn


def _render_nodes(nodes) -> str:
    from pylatexenc.latexwalker import (
        LatexCharsNode, LatexCommentNode, LatexGroupNode, LatexMacroNode, LatexMathNode,
        LatexSpecialsNode,
    )

    out = []
    for node in nodes or []:
        if isinstance(node, LatexCharsNode):
            out.append(node.chars.replace("~", ""))
        elif isinstance(node, (LatexGroupNode, LatexMathNode)):
            out.append(_render_nodes(node.nodelist))
        elif isinstance(node, LatexMacroNode):
            name = node.macroname
            args = node.nodeargd.argnlist if node.nodeargd is not None else []
            if name == "frac":
                if len(args) != 2 or None in args:
                    raise LatexValidationError(r"\frac needs two arguments")
                numerator, denominator = _render_nodes([args[0]]), _render_nodes([args[1]])
                if not numerator.strip() or not denominator.strip():
                    raise LatexValidationError(r"\frac with an empty argument")
                out.append(numerator + "/" + denominator)
            elif name == "sqrt":
                index = _render_nodes([args[0]]) if args and args[0] is not None else ""
                if len(args) < 2 or args[1] is None:
                    raise LatexValidationError(r"\sqrt needs an argument")
                root = {"": "√", "3": "∛", "4": "∜"}.get(index)
                if root is None:
                    raise LatexValidationError(f"unsupported root index {index!r}")
                radicand = _render_nodes([args[1]])
                if not radicand.strip():
                    raise LatexValidationError(r"\sqrt with an empty argument")
                out.append(root + radicand)
            elif name == "mathrm":
                if not args or args[0] is None:
                    raise LatexValidationError(r"\mathrm needs an argument")
                out.append(_render_nodes([args[0]]))
            elif name in ACCENT_MARKS:
                if not args or args[0] is None:
                    raise LatexValidationError(f"\\{name} needs an argument")
                out.append(_render_nodes([args[0]]) + ACCENT_MARKS[name])
            elif name in _LATEX_TO_TEXT:
                out.append(_LATEX_TO_TEXT[name])
            else:
                raise LatexValidationError(f"unknown command \\{name}")
        elif isinstance(node, LatexSpecialsNode):
            out.append("" if node.specials_chars == "~" else node.specials_chars)
        elif isinstance(node, LatexCommentNode):
            raise LatexValidationError("comment inside a formula")
        else:
            raise LatexValidationError(f"unexpected {type(node).__name__} in a formula")
    return "".join(out)


def latex_to_text(latex: str) -> str:
    """Read a formula (the inside of \\( \\)) back to plain Unicode text, braces dropped."""
    from pylatexenc.latexwalker import LatexWalker, LatexWalkerError

    try:
        nodes, _, _ = LatexWalker(latex, tolerant_parsing=False).get_latex_nodes()
    except LatexWalkerError as exc:
        raise LatexValidationError("pylatexenc: " + str(exc).splitlines()[0]) from None
    return _render_nodes(nodes)


_CANONICAL_CHARS = {"'": "′", "−": "-", "⋅": "·", "∆": "△", "⩽": "≤", "⩾": "≥", "℃": "°C", "℉": "°F", "″": "′′",
                    **FULL_WIDTH_OPERATORS}


def _canonical(text: str) -> str:
    text = unicodedata.normalize("NFD", text)  # ŷ and y + U+0302 alike
    text = _TIMES_X.sub("×", text)
    text = text.replace("...", "…").replace("<=", "≤").replace(">=", "≥")
    out = []
    for run in re.finditer(
        "([" + re.escape("".join(SUPERSCRIPTS)) + "]+)|([" + re.escape("".join(SUBSCRIPTS)) + "]+)|(.)",
        text, re.DOTALL,
    ):
        sup, sub, char = run.groups()
        if sup:
            out.append("^" + "".join(SUPERSCRIPTS[c] for c in sup))
        elif sub:
            out.append("_" + "".join(SUBSCRIPTS[c] for c in sub))
        elif char in VULGAR_FRACTIONS:
            a, b = VULGAR_FRACTIONS[char]
            out.append(a + "/" + b)
        else:
            out.append(_CANONICAL_CHARS.get(char, char))
    canonical = "".join(out).replace("^°", "°").replace("^′", "′")
    return re.sub(r"[\s(){}\[\]]", "", canonical)


def validate_formula(original: str, latex: str) -> None:
    """Raise LatexValidationError (one line) unless ``latex`` is a faithful formula for ``original``."""
    reason = _validation_failure(original, latex)
    if reason is not None:
        raise LatexValidationError(reason)


@lru_cache(maxsize=65536)
def _validation_failure(original: str, latex: str) -> str | None:
    """Why the formula is rejected, or None (cached: quiz formulas repeat a lot)."""
    try:
        _check_formula(original, latex)
    except LatexValidationError as exc:
        return _shorten(" ".join(str(exc).splitlines()))
    except RecursionError:
        return "formula too deeply nested to validate"
    return None


def _shorten(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_formula(original: str, latex: str) -> None:
    from latex2mathml.converter import convert as latex_to_mathml

    read_back = latex_to_text(r"\( " + latex + r" \)")
    try:
        mathml = latex_to_mathml(latex)
    except Exception as exc:  # latex2mathml raises assorted exception types
        raise LatexValidationError(f"latex2mathml: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    if "\\" in mathml:
        raise LatexValidationError("latex2mathml left a command untranslated")
    if _canonical(read_back) != _canonical(original):
        raise LatexValidationError(f"round trip gives {read_back.strip()!r}")


_INLINE_MATH_RE = re.compile(r"\\\((.*?)\\\)|\\\[(.*?)\\\]", re.DOTALL)


def invalid_formulas(text: str) -> list[tuple[str, str]]:
    """(formula, one-line reason) for every inline formula of ``text`` that does not parse.

    For asset checks on converted or imported text (e.g. the STEM release's Mathpix LaTeX):
    each ``\\( ... \\)`` / ``\\[ ... \\]`` must parse with pylatexenc (strict) and
    latex2mathml; a delimiter left open is reported too. Commands are not restricted here.
    """
    from latex2mathml.converter import convert as latex_to_mathml
    from pylatexenc.latexwalker import LatexWalker, LatexWalkerError

    problems: list[tuple[str, str]] = []
    for match in _INLINE_MATH_RE.finditer(text):
        formula = match.group(0)
        try:
            LatexWalker(formula, tolerant_parsing=False).get_latex_nodes()
            latex_to_mathml(match.group(1) if match.group(1) is not None else match.group(2))
        except LatexWalkerError as exc:
            problems.append((formula, "pylatexenc: " + " ".join(str(exc).splitlines()[:1])))
        except Exception as exc:  # latex2mathml raises assorted exception types
            problems.append((formula, f"latex2mathml: {type(exc).__name__}: " + " ".join(str(exc).splitlines()[:1])))
    rest = _INLINE_MATH_RE.sub("", text)
    for opening in (r"\(", r"\)", r"\[", r"\]"):
        if opening in rest:
            problems.append((opening, f"unmatched {opening}"))
    return problems


# ---------------------------------------------------------------------------------------
# Public API

class LatexConverter:
    """Converts formula spans; ``render`` is the one step that turns a span into LaTeX."""

    def render(self, original: str, latex: str) -> str:
        return latex

    def convert(self, text: str) -> LatexConversion:
        if not isinstance(text, str):
            raise LatexValidationError(f"expected text, got {type(text).__name__}")
        math, unclosed = scan_tex_math(text)
        if not math and _MATH_HINT.search(text) is None:
            return LatexConversion(text, [], False, None)
        tex_math = [(text[m.start:m.end], m.inner.strip()) for m in math]
        opaque = [(m.start, m.end) for m in math]
        if unclosed is not None:
            # a \( or \[ never closed would capture any delimiter written after it: the
            # rest of the text stays as it is
            math = [m for m in math if m.start < unclosed]
            opaque = [(m.start, m.end) for m in math] + [(unclosed, len(text))]
        opaque = _merged(opaque + _code_blocks(text, math))
        tokens = _list_dashes(_times_signs(text, _tokenize(text, opaque)))
        converted_spans: list[tuple[int, int, str]] = []  # (start, end, latex), char offsets
        errors: list[tuple[int, str]] = []
        # Spans are searched again in the prose left around the ones found until nothing new
        # turns up, with found spans frozen as opaque tokens: this makes conversion idempotent.
        while True:
            found = _find_spans(tokens)
            if not found:
                break
            frozen: list[_Token] = []
            cursor = 0
            for start, end, latex in found:
                frozen.extend(tokens[cursor:start])
                span_start, span_end = tokens[start].start, tokens[end - 1].end
                original = text[span_start:span_end]
                latex = self.render(original, latex)
                try:
                    validate_formula(original, latex)
                    converted_spans.append((span_start, span_end, latex))
                except LatexValidationError as exc:
                    errors.append((span_start, f"formula {_shorten(original, 60)!r} kept as text: {exc}"))
                frozen.append(_Token("OPAQUE", original, span_start, span_end))
                cursor = end
            frozen.extend(tokens[cursor:])
            tokens = frozen
        out: list[str] = []
        formulas: list[tuple[str, str]] = []
        replacements = [(start, end, r"\( " + latex + r" \)", latex) for start, end, latex in converted_spans]
        replacements += [(m.start, m.end, m.output(text), None) for m in math]
        cursor = 0
        for start, end, replacement, latex in sorted(replacements):
            out.append(text[cursor:start])
            out.append(replacement)
            if latex is not None:
                formulas.append((text[start:end], latex))
            cursor = end
        out.append(text[cursor:])
        converted = "".join(out)
        error = None
        if errors:
            error = "; ".join(message for _, message in sorted(errors))
            error = " ".join(error.splitlines())
        return LatexConversion(converted, formulas, converted != text, error, tex_math)


# what only code writes: comparison and compound assignment, increments, logical operators, a
# call of print, a definition, a declaration, a loop or condition opening its block
_CODE = re.compile(
    r"==|!=|[-+*/%]=|\+\+|&&|\|\||\bprint\(|\bdef\s+\w+\s*\(|\bfunction\s+\w+\s*\("
    r"|\b(?:int|float|double|char|bool|var|const|auto)\s+\w+\s*[=;\[]|\b(?:while|for|if|switch)\s*\([^\n]{0,200}\)\s*[{:]"
)


def _merged(regions: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping (start, end) regions joined, in order."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(regions):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _code_blocks(text: str, math: list[TexMath]) -> list[tuple[int, int]]:
    """(start, end) of each block of lines (up to a blank line) where a line reads as code
    (``_CODE``, outside TeX math): no formula is found there, since ``i = 0`` in ``for (int i = 0;
    i < n; i++)`` is code, and ``7 / 2`` in C is not ``\\frac{7}{2}``. A block that holds TeX math
    is a math text, not code."""
    if _CODE.search(text) is None:
        return []
    blocks = []
    for block in re.finditer(r"(?:[^\n]*\S[^\n]*(?:\n|$))+", text):
        start, end = block.start(), block.end()
        if any(m.start < end and start < m.end for m in math):
            continue
        if _CODE.search(block.group()) is not None:
            blocks.append((start, end))
    return blocks


# Without one of these characters no rule can fire (fast path for plain prose).
_MATH_HINT = re.compile(
    "[0-9" + re.escape("".join({op[0] for op in OPERATORS}) + _SPECIAL_CHARS + "".join(ROOTS)
                        + "".join(ANGLE_PREFIXES) + "".join(SYMBOL_ATOMS) + "°℃℉%′″"
                        + "".join(ACCENTS) + _PRECOMPOSED_ACCENTED) + "]"
)

_DEFAULT_CONVERTER = LatexConverter()


def convert_text(text: str) -> LatexConversion:
    """Wrap every formula span of ``text`` in Mathpix-style ``\\( ... \\)``; prose is kept byte for byte."""
    if not isinstance(text, str):
        return _DEFAULT_CONVERTER.convert(text)
    converted, formulas, changed, error, tex_math = _convert_cached(text)
    return LatexConversion(converted, list(formulas), changed, error, list(tex_math))


@lru_cache(maxsize=1 << 18)
def _convert_cached(text: str) -> tuple[str, tuple[tuple[str, str], ...], bool, str | None, tuple]:
    # quiz texts are templated: the same problem and option texts recur thousands of times
    result = _DEFAULT_CONVERTER.convert(text)
    return result.text, tuple(result.formulas), result.changed, result.error, tuple(result.tex_math)


def forget_conversions() -> None:
    """Empty the cache of converted texts (it holds up to 2**18 texts; a stage empties it when done)."""
    _convert_cached.cache_clear()


def convert_line(line: str) -> str:
    """The converted text of one line (for ``stemforge latex``); failed spans stay as written."""
    return convert_text(line).text
