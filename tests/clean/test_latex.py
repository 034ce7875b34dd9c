"""The offline Unicode/plain-text math to Mathpix-style LaTeX converter."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.clean.latex.convert import (
    GREEK,
    OPERATORS,
    SUBSCRIPTS,
    SUPERSCRIPTS,
    VULGAR_FRACTIONS,
    LatexConverter,
    LatexValidationError,
    changed_math,
    convert_line,
    convert_text,
    extract_math,
    find_tex_math,
    invalid_formulas,
    latex_to_text,
    validate_formula,
)
from support.corpora import CORPORA

# input -> expected output; formulas in \( \), everything else byte-identical
CASES = [
    # arithmetic with Unicode operators
    ("3 × 4 = 12", r"\( 3 \times 4=12 \)"),
    ("3 × 4 = ?", r"\( 3 \times 4 \) = ?"),
    ("What is 3 × 4?", r"What is \( 3 \times 4 \)?"),
    ("8 ÷ 2", r"\( 8 \div 2 \)"),
    ("5 − 3", r"\( 5-3 \)"),
    ("2 · 3 = 6", r"\( 2 \cdot 3=6 \)"),
    ("x ± 2", r"\( x \pm 2 \)"),
    ("7 ≠ 8", r"\( 7 \neq 8 \)"),
    ("π ≈ 3.14", r"\( \pi \approx 3.14 \)"),
    ("x ≤ 5", r"\( x \leq 5 \)"),
    ("y ≥ −2", r"\( y \geq -2 \)"),
    ("Is 7 > 5?", r"Is \( 7>5 \)?"),
    ("Is 0.5 < 0.75?", r"Is \( 0.5<0.75 \)?"),
    ("10 ÷ (5 − 3) = 5", r"\( 10 \div (5-3)=5 \)"),
    ("(2 + 3) × 4", r"\( (2+3) \times 4 \)"),
    ("6.02 × 10²³", r"\( 6.02 \times 10^{23} \)"),
    # plain ASCII expressions
    ("2 + 3", r"\( 2+3 \)"),
    ("4 - 1 = 3", r"\( 4-1=3 \)"),
    ("x = 5", r"\( x=5 \)"),
    ("2x + 3 = 7", r"\( 2 x+3=7 \)"),
    ("f(x) = 2x + 1", r"\( f(x)=2 x+1 \)"),
    ("y = mx + b", r"\( y=m x+b \)"),
    ("x^2 + 2x + 1", r"\( x^{2}+2 x+1 \)"),
    ("2^(n+1)", r"\( 2^{n+1} \)"),
    ("x + y = 10 and x - y = 2", r"\( x+y=10 \) and \( x-y=2 \)"),
    ("1,000 + 2,000 = 3,000", r"\( 1,000+2,000=3,000 \)"),
    # superscripts, subscripts, chemistry
    ("a² + b² = c²", r"\( a^{2}+b^{2}=c^{2} \)"),
    ("10³", r"\( 10^{3} \)"),
    ("x⁻¹", r"\( x^{-1} \)"),
    ("x₁ + x₂", r"\( x_{1}+x_{2} \)"),
    ("Water (H₂O) is a liquid.", r"Water (\( \mathrm{H}_{2} \mathrm{O} \)) is a liquid."),
    ("2H₂O", r"\( 2 \mathrm{H}_{2} \mathrm{O} \)"),
    ("CO₂ and C₆H₁₂O₆", r"\( \mathrm{CO}_{2} \) and \( \mathrm{C}_{6} \mathrm{H}_{12} \mathrm{O}_{6} \)"),
    ("V₁ = 3", r"\( V_{1}=3 \)"),
    # fractions and roots
    ("½ + ¼ = ¾", r"\( \frac{1}{2}+\frac{1}{4}=\frac{3}{4} \)"),
    ("She ate ⅓ of the pie.", r"She ate \( \frac{1}{3} \) of the pie."),
    ("3/4 + 1/4 = 1", r"\( \frac{3}{4}+\frac{1}{4}=1 \)"),
    ("Which is greater, 3/4 or 2/3?", r"Which is greater, \( \frac{3}{4} \) or \( \frac{2}{3} \)?"),
    ("(x+1)/2", r"\( \frac{x+1}{2} \)"),
    ("2 1/2 cups", r"\( 2 \frac{1}{2} \) cups"),
    ("1½ cups", r"\( 1 \frac{1}{2} \) cups"),
    ("√16 = 4", r"\( \sqrt{16}=4 \)"),
    ("√(x+1)", r"\( \sqrt{x+1} \)"),
    ("√x", r"\( \sqrt{x} \)"),
    ("∛8 = 2", r"\( \sqrt[3]{8}=2 \)"),
    ("T = 2π√(L/g)", r"\( T=2 \pi \sqrt{\frac{L}{g}} \)"),
    # degrees, percent, Greek, geometry, infinity
    ("45°", r"\( 45^{\circ} \)"),
    # an ASCII apostrophe is a prime on a one-letter function, and prose elsewhere
    ("If f'(x) > 0 then", r"If \( f^{\prime}(x)>0 \) then"),
    ("f''(x) = 6x", r"\( f^{\prime \prime}(x)=6 x \)"),
    ("Mike's f(x) is Ana's", "Mike's f(x) is Ana's"),
    ("y' = 3 and don't (x)", "y' = 3 and don't (x)"),
    ("It is 20 °C outside.", r"It is \( 20^{\circ} \mathrm{C} \) outside."),
    ("Water boils at 212°F.", r"Water boils at \( 212^{\circ} \mathrm{F} \)."),
    ("−5°C", r"\( -5^{\circ} \mathrm{C} \)"),
    ("What is 25% of 80?", r"What is \( 25 \% \) of 80?"),
    ("π r²", r"\( \pi r^{2} \)"),
    ("2πr", r"\( 2 \pi r \)"),
    ("θ = 30°", r"\( \theta=30^{\circ} \)"),
    ("Δx = 5", r"\( \Delta x=5 \)"),
    ("What is the measure of ∠ABC?", r"What is the measure of \( \angle A B C \)?"),
    ("In △ABC, what is ∠C?", r"In \( \triangle A B C \), what is \( \angle C \)?"),
    ("△ABC ≅ △DEF", r"\( \triangle A B C \cong \triangle D E F \)"),
    ("x → ∞", r"\( x \rightarrow \infty \)"),
    ("sin x + cos x", r"\( \sin x+\cos x \)"),
    # sequences, negatives, ratios, points, units
    ("2, 4, 6, 8, ...", r"\( 2,4,6,8, \ldots \)"),
    ("What comes next: 1, 3, 5, …?", r"What comes next: \( 1,3,5, \ldots \)?"),
    ("1 + 2 + … + 10", r"\( 1+2+\ldots+10 \)"),
    ("The answer is −2.", r"The answer is \( -2 \)."),
    ("The temperature is -5 degrees.", r"The temperature is \( -5 \) degrees."),
    ("the ratio 3:4", r"the ratio \( 3:4 \)"),
    ("a ratio of 1 : 2", r"a ratio of \( 1:2 \)"),
    ("Plot (2, −1).", r"Plot \( (2,-1) \)."),
    ("12 cm²", r"\( 12 \mathrm{~cm}^{2} \)"),
    ("5 cm + 3 cm = 8 cm", r"\( 5 \mathrm{~cm}+3 \mathrm{~cm}=8 \mathrm{~cm} \)"),
    ("9 − 3 = □", r"\( 9-3=\square \)"),
    # prose that must not change
    ("There are 5 apples.", "There are 5 apples."),
    ("5 apples", "5 apples"),
    ("It happened on 3/4/2020.", "It happened on 3/4/2020."),
    ("Due 2020-03-04", "Due 2020-03-04"),
    ("and/or", "and/or"),
    ("Write a 3-page report.", "Write a 3-page report."),
    ("Skills for grade-3 students", "Skills for grade-3 students"),
    ("See https://example.com/a/b?x=1+2&y=3 for more.", "See https://example.com/a/b?x=1+2&y=3 for more."),
    ("Meet at 3:45 p.m. today.", "Meet at 3:45 p.m. today."),
    ("School starts at 10:30.", "School starts at 10:30."),
    ("Born in 2020", "Born in 2020"),
    ("She came 1st in the race.", "She came 1st in the race."),
    ("Use a tool, e.g. a ruler.", "Use a tool, e.g. a ruler."),
    ("A/B testing", "A/B testing"),
    ("Find the x-axis.", "Find the x-axis."),
    ("Read pages 5-7.", "Read pages 5-7."),
    ("Step 1: 5 apples", "Step 1: 5 apples"),
    ("Call 555-1234", "Call 555-1234"),
    ("Choose A, B, or C.", "Choose A, B, or C."),
    ("Is x a variable?", "Is x a variable?"),
    ("I have a dog.", "I have a dog."),
    ("It weighs 3.5 kg.", "It weighs 3.5 kg."),
    ("Figure 3(a) shows it.", "Figure 3(a) shows it."),
    ("C++ and C# are languages; A+ is a grade.", "C++ and C# are languages; A+ is a grade."),
    ("Question 5 of 10", "Question 5 of 10"),
    ("Wait... what?", "Wait... what?"),
    ("□ Yes □ No", "□ Yes □ No"),
    ("Ελληνικά: γλώσσα", "Ελληνικά: γλώσσα"),
    ("X-RAY AND T-SHIRT", "X-RAY AND T-SHIRT"),
    # a list of items separated by spaced dashes, one of them a word, is no subtraction (We-Math)
    ("Cone - 3cm - 4cm", "Cone - 3cm - 4cm"),
    ("Cylinder - 2 cm - 6 cm, Cone - 6 cm - 2 cm", "Cylinder - 2 cm - 6 cm, Cone - 6 cm - 2 cm"),
    ("圆锥 - 3cm - 4cm", "圆锥 - 3cm - 4cm"),
    ("What is 10 cm - 4 cm?", r"What is \( 10 \mathrm{~cm}-4 \mathrm{~cm} \)?"),
    ("Cone - 3cm - 4cm = x", r"Cone - 3cm - \( 4 \mathrm{~cm}=x \)"),
    ("AB - 3cm", r"\( A B-3 \mathrm{~cm} \)"),
    # a function's power or base before its argument; before, the rest became a false formula
    # ("cos^2 \( x=1 \)", "log_2 \( 8=3 \)")
    ("sin^2 x + cos^2 x = 1", r"\( \sin^{2} x+\cos^{2} x=1 \)"),
    ("sin²x + cos²x = 1", r"\( \sin^{2} x+\cos^{2} x=1 \)"),
    ("log_2 8 = 3", r"\( \log_{2} 8=3 \)"),
    ("log₂ 8 = 3", r"\( \log_{2} 8=3 \)"),
    # a piece of a longer expression stays as written (SceMQA options and texts)
    ("rotational inertia I = 0.5 kg.m2 is", "rotational inertia I = 0.5 kg.m2 is"),
    ("3,000 ± 3 N.cm", "3,000 ± 3 N.cm"),
    ("ŷ= -0.6442x+ 22.94", r"\( \hat{y}=-0.6442 x+22.94 \)"),  # the sign is no longer left out
    # a letter under a statistics or vector accent, combined or precomposed
    ("the sample mean x\u0304 = 5.2 and p\u0302 = 0.45", r"the sample mean \( \bar{x}=5.2 \) and \( \hat{p}=0.45 \)"),
    ("ŷ= 22.94 + 0.5466x", r"\( \hat{y}=22.94+0.5466 x \)"),
    ("the vector v\u20d7 has length 3", r"the vector \( \vec{v} \) has length 3"),
    ("café and pâte, Ñ and ā", "café and pâte, Ñ and ā"),
    ("Height = 5.31 + 3.34 Percentage", "Height = 5.31 + 3.34 Percentage"),
    ("3′-ATGCGACCAGCACGT-5′", "3′-ATGCGACCAGCACGT-5′"),
    ("x = 5 + five", "x = 5 + five"),
    ("a:b = 2:3", "a:b = 2:3"),  # a ratio of letters: "a:\( b=2:3 \)" before
    ("test H0 : β = 0 versus Ha : β > 0", r"test H0 : \( \beta=0 \) versus Ha : \( \beta>0 \)"),  # labels (SceMQA)
    ("F = G m1 m2 / r^2", r"\( F=G \) m1 m2 / r^2"),  # a spaced division joins its sides
    ("∑ i = 55", "∑ i = 55"),  # beside a math symbol the rules do not read, a span is its operand
    # a root or angle sign, an index or a bracket's operator left outside: SceMQA's μ0I/(2πd) was
    # "μ0I/(\( 2 \pi d \))"
    ("μ0I/(2πd), out of the plane", "μ0I/(2πd), out of the plane"),
    ("∠1:∠2 = 2:3", "∠1:∠2 = 2:3"),
    ("a_1 + a_2 = 5", r"\( a_{1}+a_{2}=5 \)"),  # an index written with "_"
    ("the file data_2020.csv", "the file data_2020.csv"),
    ("3 × (x + 1) = y", r"\( 3 \times (x+1)=y \)"),
    # scientific notation is one number (before: "1.5 e-3", Euler's e minus 3), and a span does
    # not stop before a power ("\( k=1.5 e-3 \mathrm{~s} \)^-1" before)
    ("k = 1.5e-3 s^-1", r"\( k=1.5e-3 \) \( s^{-1} \)"),
    ("N = 6.02E23", r"\( N=6.02E23 \)"),
    # Chinese, Japanese and Korean write math with no space around it
    ("若x=2，则2x+1=?", r"若\( x=2 \)，则\( 2 x+1 \)=?"),
    ("已知a>0，b<0", r"已知\( a>0 \)，\( b<0 \)"),
    ("圆的面积S=πr²", r"圆的面积\( S=\pi r^{2} \)"),
    ("2019年3月5日，小明有3个苹果", "2019年3月5日，小明有3个苹果"),
    # full-width operators (We-Math's options were "3.14×(\( 24^{2} \)－\( 20^{2} \))÷2")
    ("3.14×(24^2－20^2)÷2", r"\( 3.14 \times (24^{2}-20^{2}) \div 2 \)"),
    ("x＋1＝3", r"\( x+1=3 \)"),
    ("2019－2020学年", "2019－2020学年"),  # a range, as with "-"
    # code is not math: a block of lines where a line reads as code stays as written
    ("for (int i = 0; i < n; i++) sum += a[i];", "for (int i = 0; i < n; i++) sum += a[i];"),
    ("What is the output?\nx = 5\ny = x + 2\nprint(y)", "What is the output?\nx = 5\ny = x + 2\nprint(y)"),
    ("def f(n): return n * 2", "def f(n): return n * 2"),
    ("Code:\nwhile (x > 0) {\n  x -= 2;\n}\n\nIs x = 3 + 4 true?", "Code:\nwhile (x > 0) {\n  x -= 2;\n}\n\nIs \\( x=3+4 \\) true?"),
    ("If we let x = 5, then 2x = 10.", r"If we let \( x=5 \), then \( 2 x=10 \)."),
    # a block of code inside what an unclosed \( leaves as written changes nothing after it
    ("int b = 3; \\(a\n\ny = 2 + 3", "int b = 3; \\(a\n\ny = 2 + 3"),
    # units and names are not products of variables ("1 mol" was "1 \( m o l=... \)")
    ("1 mol = 6.02 × 10^23 particles", r"\( 1 \mathrm{~mol}=6.02 \times 10^{23} \) particles"),
    ("ΔH = -285 kJ/mol", r"\( \Delta H=-285 \mathrm{~kJ} / \mathrm{mol} \)"),
    ("x = max + 1", "x = max + 1"),
    ("arr = [1, 2, 3]", "arr = [1, 2, 3]"),
    # ohms after a number, with a prefix that is no variable ("12 kΩ" was "12 \( k \Omega \)")
    ("The resistance is 4.7 kΩ.", r"The resistance is \( 4.7 \mathrm{k} \Omega \)."),
    ("R = 5 Ω", r"\( R=5 \Omega \)"),
    ("3 MΩ", r"\( 3 \mathrm{M} \Omega \)"),
    ("ω = 2πf", r"\( \omega=2 \pi f \)"),
    # scientific notation with a letter x for the times sign ("3 x \( 10^{8} ... \)" before)
    ("The speed of light is 3 x 10^8 m/s.", r"The speed of light is \( 3 \times 10^{8} \mathrm{~m} / \mathrm{s} \)."),
    ("6.02x10^23 per mol", r"\( 6.02 \times 10^{23} \) per mol"),
    ("1.5 X 10^-3 kg", r"\( 1.5 \times 10^{-3} \mathrm{~kg} \)"),
    ("Let x = 10^2", r"Let \( x=10^{2} \)"),
    ("the 3 x 10 grid", r"the \( 3 \times 10 \) grid"),  # standing apart between two numbers
    ("2 x 3 = 6", r"\( 2 \times 3=6 \)"),  # was "2 x \( 3=6 \)"
    ("3x4", "3x4"),
    # a date with its year first is no fraction ("\frac{\frac{2020}{03}}{15}" before)
    ("On 2020/03/15 we met.", "On 2020/03/15 we met."),
    ("2020/3 = 673.3", r"\( \frac{2020}{3}=673.3 \)"),
    # Roman numerals rank statements, they are no products of I, V and X (SceMQA Physics/103 was
    # "\( I I I>I=I V>I I \)"); other upper-case runs are still points and segments
    ("III > I = IV > II", "III > I = IV > II"),
    ("Rank: II > IV > III > I", "Rank: II > IV > III > I"),
    ("VI = 6", "VI = 6"),
    ("AB = 3 cm", r"\( A B=3 \mathrm{~cm} \)"),
    ("XY + YZ = 5", r"\( X Y+Y Z=5 \)"),
    # blanks and prose punctuation are no operands
    ("∠1 = ( )°", r"\( \angle 1 \) = ( )°"),
    ("Solve: 2x + 3 = 7", r"Solve: \( 2 x+3=7 \)"),
    # already converted text is left alone
    (r"\( 3 \times 4 \) is 12", r"\( 3 \times 4 \) is 12"),
    (r"Is \( x^{2} \) a square? 2 + 2", r"Is \( x^{2} \) a square? \( 2+2 \)"),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_conversion_table(text, expected):
    result = convert_text(text)
    assert result.text == expected
    assert result.error is None
    assert result.changed == (expected != text)
    assert convert_line(text) == expected


def test_table_is_large_enough():
    assert len(CASES) >= 60
    assert sum(1 for text, expected in CASES if text == expected) >= 20


def test_formulas_list_original_spans_and_latex_in_order():
    result = convert_text("If 3 × 4 = 12, is ½ < ¾ and x² ≥ 0?")
    assert result.formulas == [
        ("3 × 4 = 12", r"3 \times 4=12"),
        ("½ < ¾", r"\frac{1}{2}<\frac{3}{4}"),
        ("x² ≥ 0", r"x^{2} \geq 0"),
    ]
    assert result.text == r"If \( 3 \times 4=12 \), is \( \frac{1}{2}<\frac{3}{4} \) and \( x^{2} \geq 0 \)?"


def test_superscripts_survive_unlike_nfkc():
    # NFKC would have turned x² into x2 before conversion
    assert convert_text("x² + 1").formulas == [("x² + 1", "x^{2}+1")]


def test_prose_around_formulas_is_byte_identical():
    text = "Zoë\u00a0has  3 × 4 =\u00a012 stickers.\nLéa: ½."
    result = convert_text(text)
    assert result.text == "Zoë\u00a0has  \\( 3 \\times 4=12 \\) stickers.\nLéa: \\( \\frac{1}{2} \\)."


class _BrokenRenderer(LatexConverter):
    """Corrupts the LaTeX of one formula, as a buggy rule would."""

    def render(self, original, latex):
        return latex.replace(r"\times", r"\timez").replace(r"\frac{1}{2}", r"\frac{1}{3}")


def test_failed_validation_keeps_original_text_and_reports_one_line():
    result = _BrokenRenderer().convert("Compute 3 × 4 and add ½, then 2 + 2.")
    assert result.text == r"Compute 3 × 4 and add ½, then \( 2+2 \)."
    assert result.formulas == [("2 + 2", "2+2")]
    assert result.changed
    assert result.error is not None and "\n" not in result.error
    assert "'3 × 4'" in result.error and r"\timez" in result.error
    assert "'½'" in result.error and "round trip" in result.error


@pytest.mark.parametrize(
    ("original", "latex", "reason"),
    [
        ("x² + 1", "x^{2+1", "pylatexenc"),
        ("3 × 4", r"3 \timez 4", "unknown command"),
        ("3 × 4", "3+4", "round trip"),
        ("12", "21", "round trip"),
        ("√16", r"\sqrt{}16", "empty argument"),
        ("½", r"\frac{1}{}2", "empty argument"),
        ("x", r"\frac{x}", "pylatexenc"),
    ],
)
def test_validate_formula_rejects(original, latex, reason):
    with pytest.raises(LatexValidationError, match=reason) as info:
        validate_formula(original, latex)
    assert "\n" not in str(info.value)


def test_validate_formula_accepts_equivalent_unicode():
    validate_formula("x⁻¹ − ½ ≤ 45°", r"x^{-1}-\frac{1}{2} \leq 45^{\circ}")
    validate_formula("2 ... 3", r"2 \ldots 3")
    assert latex_to_text(r"\( \angle A B C=\sqrt[3]{8} \)").replace(" ", "") == "∠ABC=∛8"


def test_invalid_formulas_checks_converted_and_imported_text():
    converted = convert_text("If 3 × 4 = 12, is ½ < ¾ and x² ≥ 0?").text
    assert invalid_formulas(converted) == []
    mathpix = r"\( \frac{2 p-2}{p} \div \frac{4 p-4}{9 p^{2}} \) and \[ \left( x \right) \]"
    assert invalid_formulas(mathpix) == []
    problems = invalid_formulas(r"a \( \frac{1}{2 \) b \( x")
    assert [formula for formula, _ in problems] == [r"\( \frac{1}{2 \)", r"\("]
    assert all("\n" not in reason for _, reason in problems)


def test_pathological_input_neither_raises_nor_hangs():
    deep = "(" * 3000 + "1+2" + ")" * 3000
    # nesting beyond the parser's depth stays text; the innermost expression is still found
    assert convert_text(deep).text == "(" * 3000 + r"\( 1+2 \)" + ")" * 3000
    chained = convert_text("1/" * 3000 + "2")
    assert not chained.changed and "too deeply nested" in chained.error
    long_sum = "1+" * 5000 + "1"
    assert convert_text(long_sum).formulas == [(long_sum, long_sum)]
    assert not convert_text("a" * 20000 + "@").changed


def test_rejects_non_text():
    with pytest.raises(LatexValidationError):
        convert_text(b"3 + 4")  # type: ignore[arg-type]


def test_idempotent_on_table():
    for text, _ in CASES:
        once = convert_text(text).text
        assert convert_text(once).text == once


# ---- properties --------------------------------------------------------------------------

_MATH_CHARS = (
    set("0123456789+-*/=<>^:%°√∛∜∠△∆∞□′″…·⋅") | set(OPERATORS) | set(SUPERSCRIPTS) | set(SUBSCRIPTS)
    | set(VULGAR_FRACTIONS) | set(GREEK) | {"℃", "℉", "\u2212"} | set("ŷŶȳȲ")
)
_NO_MATH_TEXT = st.text(
    alphabet=st.characters(
        categories=("Lu", "Ll", "Lm", "Lo", "Zs", "Po", "Ps", "Pe", "Pi", "Pf", "Pd", "Cc"),
        exclude_characters="".join(c for c in _MATH_CHARS if len(c) == 1),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(max_size=120))
def test_never_raises_on_any_text(text):
    result = convert_text(text)
    assert isinstance(result.text, str)
    assert result.error is None or "\n" not in result.error


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_NO_MATH_TEXT)
def test_text_without_math_comes_back_unchanged(text):
    result = convert_text(text)
    assert result.text == text and not result.changed and result.formulas == []


_MATHY = st.lists(
    st.sampled_from(
        list("0123456789 +-−×÷·=<>≤≥≠≈±/^:%°√∛∠△∞²³⁻¹₁₂½¾πθ()[],.?…xyabABCHOcm")
        + ["sin ", "...", "3:45", " and ", r"\( x \)", "H₂O", "12 cm²", "\n", "3/4/2020", "apples"]
    ),
    max_size=25,
).map("".join)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_MATHY)
def test_idempotent_and_prose_preserving(text):
    result = convert_text(text)
    assert convert_text(result.text).text == result.text
    rebuilt = result.text
    for span, latex in result.formulas:
        wrapped = "\\( " + latex + " \\)"
        assert wrapped in rebuilt
        rebuilt = rebuilt.replace(wrapped, span, 1)
    assert rebuilt == text
    for span, latex in result.formulas:
        validate_formula(span, latex)
        assert re.search(r"\s", span[:1] + span[-1:]) is None


# ---- TeX math already in the text ----------------------------------------------------------

# input -> expected output: the TeX inside math is byte-identical, dollars become \( \) / \[ \]
TEX_CASES = [
    # the damage seen on a real corpus (issue 17): formulas were found inside $...$
    ("$3 a+4 b$", r"\( 3 a+4 b \)"),
    (r"$3 \cdot 7 +1 = 22$", r"\( 3 \cdot 7 +1 = 22 \)"),
    ("$f(x)=(a-x)(b-x)^{2}$", r"\( f(x)=(a-x)(b-x)^{2} \)"),
    # every kind of delimiter
    ("Solve $$x^2 - 1 = 0$$ for x.", r"Solve \[ x^2 - 1 = 0 \] for x."),
    (r"Solve \[ x^2 - 1 = 0 \] for x.", r"Solve \[ x^2 - 1 = 0 \] for x."),
    (r"Is \(2 x+1=7\) true?", r"Is \(2 x+1=7\) true?"),
    ("\\begin{align} x + 1 &= 3 \\\\ 2 x &= 4 \\end{align}", "\\begin{align} x + 1 &= 3 \\\\ 2 x &= 4 \\end{align}"),
    (r"$\left\{\begin{array}{l} x+y=1 \\ x-y=3 \end{array}\right.$",
     r"\( \left\{\begin{array}{l} x+y=1 \\ x-y=3 \end{array}\right. \)"),
    ("$ 1<x<5 $", r"\(  1<x<5  \)"),
    ("若 $k-j=4$ 且 $j-$$i=3$, 则", r"若 \( k-j=4 \) 且 \( j- \)\( i=3 \), 则"),
    ("O$_x$ and $\\text{Ag}^+ (\\text{aq})$", r"O\( _x \) and \( \text{Ag}^+ (\text{aq}) \)"),
    # dollars that are not math
    (r"It costs \$5 and \$7.", r"It costs \$5 and \$7."),
    (r"Pay \$3 for $x$ pens.", r"Pay \$3 for \( x \) pens."),
    ("It costs $5 and $7.", "It costs $5 and $7."),
    ("A ticket is $3.50.", "A ticket is $3.50."),
    ("between $500,000 and $750,000.", "between $500,000 and $750,000."),
    ("A. $2000\nB. $2250\nC. $2500\nD. $2750", "A. $2000\nB. $2250\nC. $2500\nD. $2750"),
    ("A pen costs $4 and $x$ is the number of pens.", r"A pen costs $4 and \( x \) is the number of pens."),
    ("the parts denoted by $:\n\nIf $h$ is the depth", "the parts denoted by $:\n\nIf \\( h \\) is the depth"),
    ("Pay $5; then $3 × 4 more", r"Pay $5; then $\( 3 \times 4 \) more"),
    # Unicode math in the prose around TeX is still converted
    ("If $f(x)=x^{2}$, is f(3) = 9 or 3 × 3 + 1?",
     r"If \( f(x)=x^{2} \), is \( f(3)=9 \) or \( 3 \times 3+1 \)?"),
    (r"Area \( \pi r^{2} \) with r = 2 cm costs $4.50", r"Area \( \pi r^{2} \) with \( r=2 \mathrm{~cm} \) costs $4.50"),
    # an unclosed \( would capture anything written after it: the rest stays as written
    (r"a \( b and 3 × 4 and $x$", r"a \( b and 3 × 4 and $x$"),
]


@pytest.mark.parametrize(("text", "expected"), TEX_CASES, ids=[c[0] for c in TEX_CASES])
def test_existing_tex_math_is_kept(text, expected):
    result = convert_text(text)
    assert result.text == expected
    assert result.error is None
    assert convert_text(result.text).text == result.text  # idempotent
    assert changed_math(text, result.text) == []


def test_extract_math_is_delimiter_independent():
    text = r"$a$, $$b$$, \( c \), \[d\], \begin{align*} e \end{align*}, \$5, $6 and $7"
    assert extract_math(text) == ["a", "b", "c", "d", r"\begin{align*} e \end{align*}"]
    assert [m.delimiter for m in find_tex_math(text)] == ["$", "$$", "\\(", "\\[", "env"]
    assert extract_math(convert_text(text).text) == extract_math(text)
    assert convert_text(text).tex_math == [("$a$", "a"), ("$$b$$", "b"), (r"\( c \)", "c"), (r"\[d\]", "d"),
                                           (r"\begin{align*} e \end{align*}", r"\begin{align*} e \end{align*}")]
    nested = r"\begin{tabular}{c} \begin{tabular}{c} $x$ \end{tabular} \end{tabular} $y$"
    assert extract_math(nested) == [r"\begin{tabular}{c} \begin{tabular}{c} $x$ \end{tabular} \end{tabular}", "y"]


def test_changed_math_finds_damaged_and_lost_formulas():
    assert changed_math("$3 a+4 b$", r"$3 \( a+4 \) b$") == ["3 a+4 b"]
    assert changed_math(r"$3 \cdot 7 +1 = 22$", r"$3 \cdot \( 7+1=22 \)$") == [r"3 \cdot 7 +1 = 22"]
    assert changed_math("$f(x)=(a-x)(b-x)^{2}$", r"$\( f(x)=(a-x)(b-x) \)^{2}$") == ["f(x)=(a-x)(b-x)^{2}"]
    assert changed_math("$x$ and $y$", "x and \\( y \\)") == ["x"]
    assert changed_math("$x$ and $y$", "\\( x \\) and \\( 2 \\) and \\(y\\)") == []
    assert changed_math("no math", "no \\( 3 \\) math") == []


_DOLLARY = st.lists(
    st.sampled_from(
        ["$", "$", "$$", r"\$", r"\(", r"\)", r"\[", r"\]", r"\begin{a}", r"\end{a}", "\\\\", "{", "}", " ", "\n",
         "\n\n", "5", "3.50", "2,500", "x", "+", "=", "3 × 4", "½", "²", "and ", "costs ", "A. ", r"\frac{1}{2}"]
    ),
    max_size=30,
).map("".join)


@settings(max_examples=500, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_DOLLARY)
def test_tex_math_survives_conversion_and_conversion_is_idempotent(text):
    result = convert_text(text)
    assert changed_math(text, result.text) == []
    assert convert_text(result.text).text == result.text


def _corpus_texts() -> dict[str, list[str]]:
    """Every question text of SceMQA and GAOKAO-MM (the options are inside the question text)."""
    corpora = CORPORA
    scemqa = json.loads((corpora / "scemqa" / "Multiple_Choice" / "multiple_choice.json").read_text(encoding="utf-8"))
    gaokao = [json.loads(path.read_text(encoding="utf-8"))
              for path in sorted((corpora / "gaokao-mm" / "Data").glob("*.json"))]
    return {
        "scemqa": [q["Question"] for subject in scemqa.values() for q in subject],
        "gaokao-mm": [q["question"] for data in gaokao for q in data["example"]],
    }


def test_real_corpora_keep_every_formula():
    texts = _corpus_texts()
    assert len(texts["scemqa"]) == 840 and len(texts["gaokao-mm"]) > 300
    figures = {}
    for name, corpus in texts.items():
        with_tex = damaged = converted_outside = 0
        for text in corpus:
            result = convert_text(text)
            with_tex += bool(extract_math(text))
            damaged += bool(changed_math(text, result.text))
            converted_outside += bool(result.formulas)
            assert convert_text(result.text).text == result.text
            assert invalid_formulas(result.text) == []
        figures[name] = {"texts": len(corpus), "with_tex": with_tex, "damaged": damaged,
                         "changed_outside_math": converted_outside}
    print(figures)
    assert all(f["damaged"] == 0 for f in figures.values())
    assert figures["scemqa"]["with_tex"] > 150 and figures["gaokao-mm"]["with_tex"] > 250
    # prices in a real option list stay prose
    price_list = next(t for t in texts["scemqa"] if "A. $2000" in t)
    assert convert_text(price_list).text == price_list


def test_the_stage_converts_in_batches_with_the_same_result(monkeypatch):
    import dataclasses

    import polars as pl

    from pipelines.clean import stage as clean_stage

    questions = pl.DataFrame({
        "question_id": [f"q{i}" for i in range(7)],
        "problem": ["What is 3 x 4?", "Solve x^2 = 9.", "Name it.", "", "Is 1/2 > 1/3?", "sqrt(16) = ?", "Bad \\frac{1"],
        "choices": [["12", "7"], None, [], ["a^2", "b"], ["yes", "no"], ["4", "2^2", "8"], ["1/2"]],
    }, schema={"question_id": pl.String, "problem": pl.String, "choices": pl.List(pl.String)})
    real = clean_stage.convert_text
    monkeypatch.setattr(clean_stage, "convert_text", lambda text: dataclasses.replace(
        real(text), error="broken on purpose" if "x" in text or "b" in text else None))
    whole = clean_stage._convert_rows(questions)
    assert whole[1]["field"].to_list() == ["problem", "problem", "choice 1"]
    monkeypatch.setattr(clean_stage, "LATEX_BATCH_ROWS", 3)
    batched = clean_stage._convert_rows(questions)
    assert batched[0].equals(whole[0]) and batched[1].equals(whole[1])
    assert batched[0].n_chunks() == 3


def test_stage_converts_each_distinct_text_once_with_the_row_by_row_result(monkeypatch):
    import polars as pl

    from pipelines.clean import stage
    from pipelines.clean.latex import convert as convert_module

    real_validate = convert_module.validate_formula

    def validate(original, latex):  # a validator that refuses some formulas: the failures path
        if "7" in original:
            raise convert_module.LatexValidationError("refused for the test")
        return real_validate(original, latex)

    monkeypatch.setattr(convert_module, "validate_formula", validate)
    problems = ["Solve x^2 + 7 = 0", "Compute 3 * 4 = ?", "What is E = mc^2?", "plain words", "Solve x^2 + 7 = 0"]
    choices = [["x_1 = 7", "x_2 = 2", "none"], None, [], ["a^2", "b^7", "a^2"], ["x_1 = 7", "x_2 = 2", "none"]]
    questions = pl.DataFrame({
        "question_id": [f"q{i}" for i in range(40)],
        "problem": [problems[i % 5] for i in range(40)],
        "choices": [choices[i % 5] for i in range(40)],
    }, schema_overrides={"choices": pl.List(pl.String)})
    convert_module.forget_conversions()
    converted, failures = stage._convert_rows(questions)
    convert_module.forget_conversions()
    expected, expected_failures = stage._convert_batch_row_by_row(questions)
    convert_module.forget_conversions()
    assert converted.equals(expected)
    assert failures.height > 0 and set(failures["field"]) == {"problem", "choice 0", "choice 1"}
    assert failures.equals(expected_failures)
