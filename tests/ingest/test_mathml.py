"""Presentation MathML without a TeX annotation read as TeX (``pipelines.ingest.mathml``): each
formula, written as MathML by latex2mathml, reads back as TeX that latex2mathml writes as the
same MathML; what the reading does not know leaves the formula to the page's text."""

from __future__ import annotations

import re

import pytest
from latex2mathml.converter import convert
from selectolax.lexbor import LexborHTMLParser

from pipelines.clean.latex.convert import invalid_formulas
from pipelines.ingest.html_dom import node_text
from pipelines.ingest.mathml import mathml_tex

FORMULAS = [
    r"x^2 + y^2 = r^2", r"\frac{a+b}{2}", r"\sqrt{x+1}", r"\sqrt[3]{8} = 2", r"x_1 + x_2", r"a_{n}^{2}",
    r"\alpha + \beta \leq \gamma", r"\sin x + \cos^{2} x", r"\sum_{i=1}^{n} i", r"\int_0^1 x\,dx",
    r"30^\circ", r"\angle ABC = 45^{\circ}", r"\overline{AB}", r"\vec{v}", r"\hat{x}", r"3 \times 4 \div 2",
    r"\lim_{x \to 0} f(x)", r"\left( \frac{1}{2} \right)^{2}", r"\begin{matrix} 1 & 2 \\ 3 & 4 \end{matrix}",
    r"\pi r^{2}", r"\Delta x", r"x \neq 0", r"f'(x)", r"\log_{2} 8 = 3", r"\{1, 2\}", r"|x| \geq 1",
    r"\text{speed} = 5\text{ m/s}", r"10^{-3}", r"\pm 2", r"\infty", r"a \cdot b", r"\frac{\sqrt{2}}{2}",
]


def canonical(mathml: str) -> str:
    """MathML without attributes, row elements or white space: what a reader sees."""
    return re.sub(r"</?mrow>|\s+", "", re.sub(r"<(\w+)[^>]*>", r"<\1>", mathml))


def math_node(markup: str):
    return LexborHTMLParser(markup).css_first("math")


@pytest.mark.parametrize("tex", FORMULAS)
def test_mathml_reads_back_as_tex_that_writes_the_same_mathml(tex):
    mathml = convert(tex)
    read = mathml_tex(math_node(mathml))
    assert read is not None
    assert canonical(convert(read)) == canonical(mathml), read
    assert invalid_formulas(rf"\( {read} \)") == []


def test_a_page_s_formula_without_annotation_is_its_tex_and_one_it_cannot_read_stays_text():
    page = ("<p>Solve <math><msup><mi>x</mi><mn>2</mn></msup><mo>=</mo><mfrac><mn>1</mn><mn>4</mn></mfrac></math>"
            " for <math display='block'><mi>x</mi></math> if <math><mi>α</mi><mo>≤</mo><msqrt><mn>3</mn></msqrt></math>"
            " and <math><mmultiscripts><mi>C</mi><mn>14</mn><none/></mmultiscripts></math>.</p>")
    text = node_text(LexborHTMLParser(page).css_first("p"))
    assert text == r"Solve \( x^{2}=\frac{1}{4} \) for \[ x \] if \( \alpha\leq\sqrt{3} \) and C14."


def test_a_tex_annotation_is_still_preferred():
    page = ('<p><math><semantics><mrow><mi>x</mi></mrow>'
            '<annotation encoding="application/x-tex">x_{\\text{written}}</annotation></semantics></math></p>')
    assert node_text(LexborHTMLParser(page).css_first("p")) == r"\( x_{\text{written}} \)"


@pytest.mark.parametrize("markup", [
    "<math><mi>ο</mi></math>",  # omicron: no TeX command
    "<math><mi>x</mi>stray text</math>",
    "<math><mtext>a_b</mtext></math>",  # TeX's specials in text
    "<math><msup><mi>x</mi></msup></math>",  # a script without its script
])
def test_what_the_reading_does_not_know_gives_none(markup):
    assert mathml_tex(math_node(markup)) is None
