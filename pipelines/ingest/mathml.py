"""Presentation MathML as TeX, for a page's ``<math>`` that keeps no TeX annotation (MathJax 3's
assistive MathML, MathML written by hand or by an editor).

``mathml_tex(node)`` is the TeX of a ``<math>`` element (selectolax node), or None when it holds
an element or a character this reading does not know: the formula is then read as the page's
text, as before. The elements are those quiz pages write: tokens (``mi``, ``mn``, ``mo``,
``mtext``, ``ms``, ``mspace``), rows and styles, scripts (``msup``, ``msub``, ``msubsup``,
``mover``, ``munder``, ``munderover``, ``mmultiscripts`` left out), ``mfrac``, ``msqrt``,
``mroot``, ``mfenced``, ``menclose`` (its content) and ``mtable`` (a ``matrix``). A formula read
so gives back the same MathML through ``latex2mathml`` (tests/ingest/test_mathml.py).
"""

from __future__ import annotations

import unicodedata

from selectolax.lexbor import LexborNode

_SYMBOLS = {
    "−": "-", "–": "-", "×": r"\times", "÷": r"\div", "·": r"\cdot", "⋅": r"\cdot", "∙": r"\cdot",
    "±": r"\pm", "∓": r"\mp", "≤": r"\leq", "≥": r"\geq", "⩽": r"\leq", "⩾": r"\geq", "≠": r"\neq",
    "≈": r"\approx", "≡": r"\equiv", "∼": r"\sim", "≅": r"\cong", "∝": r"\propto", "→": r"\rightarrow",
    "←": r"\leftarrow", "↔": r"\leftrightarrow", "⇒": r"\Rightarrow", "⇔": r"\Leftrightarrow",
    "∞": r"\infty", "∠": r"\angle", "△": r"\triangle", "∆": r"\triangle", "⊥": r"\perp", "∥": r"\parallel",
    "∑": r"\sum", "∏": r"\prod", "∫": r"\int", "∮": r"\oint", "∂": r"\partial", "∇": r"\nabla",
    "∈": r"\in", "∉": r"\notin", "⊂": r"\subset", "⊆": r"\subseteq", "⊃": r"\supset", "⊇": r"\supseteq",
    "∪": r"\cup", "∩": r"\cap", "∅": r"\emptyset", "∀": r"\forall", "∃": r"\exists", "¬": r"\neg",
    "∧": r"\wedge", "∨": r"\vee", "°": r"\circ", "∘": r"\circ", "′": r"\prime", "″": r"\prime\prime", "…": r"\ldots",
    "⋯": r"\cdots", "ℝ": r"\mathbb{R}", "ℕ": r"\mathbb{N}", "ℤ": r"\mathbb{Z}", "ℚ": r"\mathbb{Q}",
    "{": r"\{", "}": r"\}", "%": r"\%", "#": r"\#", "&": r"\&", "$": r"\$", "_": r"\_",
    "\u2061": "", "\u2062": "", "\u2063": ",", "\u2064": "+",  # function application, invisible times
}
_ALLOWED = frozenset("+-=<>()[]|/.,:;!?'*^")
_GREEK_CAPITALS = frozenset("Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split())
_FUNCTIONS = frozenset("sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln lg exp lim max min "
                       "det gcd deg arg sup inf ker dim mod".split())
_ACCENTS = {"¯": r"\overline", "‾": r"\overline", "―": r"\overline", "_": r"\overline", "→": r"\vec", "⃗": r"\vec",
            "^": r"\hat", "ˆ": r"\hat", "~": r"\tilde", "˜": r"\tilde", "˙": r"\dot", "¨": r"\ddot"}
_UNDER_ACCENTS = {"¯": r"\underline", "_": r"\underline", "‾": r"\underline", "―": r"\underline"}
_ROWS = frozenset({"math", "mrow", "mstyle", "mpadded", "menclose", "mphantom"})
_SKIPPED = frozenset({"annotation", "annotation-xml", "mprescripts", "none"})


class _Unknown(Exception):
    pass


def mathml_tex(node: LexborNode) -> str | None:
    """The TeX of a ``<math>`` element, or None (see the module docstring)."""
    try:
        tex = _tex(node).strip()
    except _Unknown:
        return None
    return tex or None


def _children(node: LexborNode) -> list[LexborNode]:
    out = []
    for child in node.iter(include_text=True):
        if child.is_text_node:
            if (child.text_content or "").strip():
                raise _Unknown  # text outside a token element
            continue
        if child.tag not in _SKIPPED and not child.tag.startswith("#"):
            out.append(child)
    return out


def _symbol(ch: str) -> str:
    if ch.isascii() and (ch.isalnum() or ch in _ALLOWED or ch == " "):
        return ch
    if ch in _SYMBOLS:
        return _SYMBOLS[ch]
    name = unicodedata.name(ch, "")
    for prefix, capital in (("GREEK SMALL LETTER ", False), ("GREEK CAPITAL LETTER ", True)):
        if name.startswith(prefix):
            letter = name[len(prefix):].replace("FINAL SIGMA", "VARSIGMA").lower()
            if capital:
                letter = letter.capitalize()
                if letter not in _GREEK_CAPITALS:
                    raise _Unknown
            if letter == "omicron":
                raise _Unknown
            return "\\" + letter
    raise _Unknown


def _token(text: str) -> str:
    return _joined(_symbol(ch) for ch in text.strip())


def _joined(parts) -> str:
    """TeX parts one after another, a space after a command that a letter or digit follows
    (``\\alpha x``, not ``\\alphax``)."""
    out = ""
    for part in parts:
        if part[:1].isalnum() and _ends_command(out):
            out += " "
        out += part
    return out


def _ends_command(text: str) -> bool:
    k = len(text)
    while k and text[k - 1].isalpha():
        k -= 1
    return k > 0 and text[k - 1] == "\\"


def _group(tex: str) -> str:
    """``tex`` as the base of a script: braced unless one character or command."""
    return tex if len(tex) == 1 or (tex.startswith("\\") and tex[1:].isalpha()) else "{" + tex + "}"


def _text(node: LexborNode) -> str:
    return node.text(deep=True) or ""


def _row(nodes: list[LexborNode]) -> str:
    return _joined(_tex(node) for node in nodes)


def _tex(node: LexborNode) -> str:
    tag = node.tag
    if tag in _ROWS:
        return "" if tag == "mphantom" else _row(_children(node))
    if tag == "semantics":
        children = _children(node)
        return _tex(children[0]) if children else ""
    if tag == "mi":
        text = _text(node).strip()
        if len(text) > 1 and text.isascii() and text.isalpha():
            return "\\" + text if text in _FUNCTIONS else r"\mathrm{" + text + "}"
        return _token(text)
    if tag in ("mn", "mo"):
        text = _text(node).strip()
        if tag == "mo" and text in _FUNCTIONS:
            return "\\" + text
        return _token(text)
    if tag in ("mtext", "ms"):
        text = _text(node)
        if not text.strip():
            return " "
        if any(ch in "{}\\$%&#_^~" for ch in text):
            raise _Unknown
        return r"\text{" + text.replace("\xa0", " ") + "}"
    if tag == "mspace":
        return r"\," if (node.attributes.get("width") or "") in ("0.167em", "thinmathspace") else " "
    children = _children(node)
    if tag in ("msup", "msub", "mfrac", "mroot", "mover", "munder") and len(children) != 2:
        raise _Unknown
    if tag in ("msubsup", "munderover") and len(children) != 3:
        raise _Unknown
    if tag == "msup":
        return _group(_tex(children[0])) + "^{" + _tex(children[1]) + "}"
    if tag == "msub":
        return _group(_tex(children[0])) + "_{" + _tex(children[1]) + "}"
    if tag in ("msubsup", "munderover"):
        base, below, above = (_tex(child) for child in children)
        return _group(base) + "_{" + below + "}^{" + above + "}"
    if tag == "mfrac":
        return r"\frac" + "".join("{" + _tex(child) + "}" for child in children)
    if tag == "msqrt":
        return r"\sqrt{" + _row(children) + "}"
    if tag == "mroot":
        return r"\sqrt[" + _tex(children[1]) + "]{" + _tex(children[0]) + "}"
    if tag == "mover":
        mark = _text(children[1]).strip()
        if children[1].tag == "mo" and mark in _ACCENTS:
            base = _tex(children[0])
            accent = r"\overrightarrow" if _ACCENTS[mark] == r"\vec" and len(base) > 1 else _ACCENTS[mark]
            return accent + "{" + base + "}"
        return r"\overset{" + _tex(children[1]) + "}{" + _tex(children[0]) + "}"
    if tag == "munder":
        mark = _text(children[1]).strip()
        if children[1].tag == "mo" and mark in _UNDER_ACCENTS:
            return _UNDER_ACCENTS[mark] + "{" + _tex(children[0]) + "}"
        return _group(_tex(children[0])) + "_{" + _tex(children[1]) + "}"
    if tag == "mfenced":
        opening = node.attributes.get("open", "(") or ""
        closing = node.attributes.get("close", ")") or ""
        separators = (node.attributes.get("separators", ",") or "").replace(" ", "") or ","
        parts = [_tex(child) for child in children]
        inner = "".join(part + (separators[min(k, len(separators) - 1)] if k < len(parts) - 1 else "")
                        for k, part in enumerate(parts))
        return _token(opening) + inner + _token(closing)
    if tag == "mtable":
        rows = []
        for row in children:
            if row.tag not in ("mtr", "mlabeledtr"):
                raise _Unknown
            cells = _children(row)[1:] if row.tag == "mlabeledtr" else _children(row)
            rows.append(" & ".join(_row(_children(cell)) if cell.tag == "mtd" else _tex(cell) for cell in cells))
        return r"\begin{matrix}" + r" \\ ".join(rows) + r"\end{matrix}"
    raise _Unknown
