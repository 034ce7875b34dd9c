"""No regressions on the real corpora, by construction: every corpus of ../shared/corpora is
built whole by the real build (bench/corpus_quality.py) and each figure of the committed
baseline (bench/corpus_baseline.json) must be as good or better. A change that makes a figure
worse updates the baseline in the same commit, with its reason:

    .venv/bin/python bench/corpus_quality.py --update-baseline --reason "why"
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "bench" / "corpus_baseline.json"

_spec = importlib.util.spec_from_file_location("corpus_quality", ROOT / "bench" / "corpus_quality.py")
corpus_quality = sys.modules.setdefault("corpus_quality", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(corpus_quality)


def _stored() -> dict:
    return json.loads(BASELINE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def whole_corpora(tmp_path_factory) -> dict[str, dict]:
    return corpus_quality.run(list(corpus_quality.CORPORA), tmp_path_factory.mktemp("corpora"))


def test_every_corpus_is_in_the_baseline_with_a_reason():
    stored = _stored()
    assert set(stored["corpora"]) == set(corpus_quality.CORPORA)
    for figures in stored["corpora"].values():
        assert set(corpus_quality.BASELINE_FIGURES) <= set(figures)
    assert stored["history"] and all(entry["reason"].strip() for entry in stored["history"])


def test_no_figure_of_any_real_corpus_got_worse(whole_corpora):
    worse = corpus_quality.regressions(_stored()["corpora"], whole_corpora)
    assert worse == [], "worse than bench/corpus_baseline.json (update it with --reason if intended):\n" + "\n".join(worse)


def test_every_real_corpus_builds_and_loses_nothing(whole_corpora):
    for name, figures in whole_corpora.items():
        assert figures["build_exit"] == 0, (name, figures.get("no_warehouse"), figures["build_failures"])
        assert figures["kept"] > 0 and corpus_quality.problems(figures) == [], (name, corpus_quality.problems(figures))


def test_the_comparison_fails_on_each_figure_made_worse():
    baseline = {name: figures for name, figures in _stored()["corpora"].items()}
    assert corpus_quality.regressions(baseline, baseline) == []
    for figure, better in corpus_quality.BASELINE_FIGURES.items():
        name = next(iter(baseline))
        worse = {**baseline[name], figure: baseline[name][figure] + (-1 if better == "higher" else 1)}
        assert corpus_quality.regressions(baseline, {name: worse}) == [
            f"{name}: {figure.replace('_', ' ')} {baseline[name][figure]} -> {worse[figure]}"
        ]
        better_figures = {**baseline[name], figure: baseline[name][figure] + (1 if better == "higher" else -1)}
        assert corpus_quality.regressions(baseline, {name: better_figures}) == []
    assert corpus_quality.regressions({}, {"new": {}}) == ["new: not in the baseline (add it with --update-baseline)"]


def test_updating_the_baseline_needs_a_reason_and_keeps_it(tmp_path, capsys):
    with pytest.raises(SystemExit):
        corpus_quality.main(["--corpus", "scemqa", "--update-baseline"])
    assert "--update-baseline needs --reason" in capsys.readouterr().err
    path = tmp_path / "baseline.json"
    figures = {figure: 1 for figure in corpus_quality.BASELINE_FIGURES} | {"quarantined": [("import: x", 2)], "duplicates": {}}
    changed = corpus_quality.update_baseline(path, {"c": figures}, "first")
    assert "c: kept None -> 1" in changed
    changed = corpus_quality.update_baseline(path, {"c": {**figures, "kept": 0}}, "a rule that proves records unusable")
    stored = json.loads(path.read_text())
    assert changed == ["c: kept 1 -> 0"] and stored["corpora"]["c"]["kept"] == 0
    assert [entry["reason"] for entry in stored["history"]] == ["first", "a rule that proves records unusable"]


def test_option_form_faults_are_found_as_a_reader_sees_them():
    form = corpus_quality.option_form
    # We-Math's ";" left on every option but the last
    assert form(["Radius;", "Diameter;", "Cannot be determined;", "No correct answer"])["separator_ends"] == 3
    # code that ends every option in ";" (OpenDSA) is no separator left behind
    assert form(["Tree.prepareForWinter();", "super(this);", "super.this();"])["separator_ends"] == 0
    # a genus abbreviation is no label; an option's own letter is
    assert form(["B. musculus and B. brydei", "B. physalus"])["label_starts"] == 0
    assert form(["A. musculus", "B. physalus", "C"], [2, 1, 0])["label_starts"] == 0  # at B by chance
    assert form(["A. 300", "B. 400"])["label_starts"] == 2
    assert form(["x; C. There is no obtuse angle.;", "b", "c"])["holding_labels"] == 1
    # a letter ending an option is its text: the angle ABC, shape C
    assert form(["There is an obtuse angle ∠AB;C.", "to get Shape ;C.", "c"])["holding_labels"] == 0
    assert form(["2", "3", "2 "])["identical"] == 1 and form(["$Mg$", "$mg$"])["identical"] == 0
    sign = corpus_quality.signature
    assert sign("Cone - 3cm - 4cm") == sign(r"Cone - \( 3 \mathrm{~cm}-4 \mathrm{~cm} \)")
    assert sign("Δx = 20 sin(πt)") == sign(r"\( \Delta x=20 \) \( \sin (\pi t) \)")
    assert sign("Radius;") == sign("Radius") and sign("300, 400") != sign("3000, 4000")
    # an accent written in TeX is the accented letter, not the bare one (SceMQA's ŷ options)
    assert sign("ŷ= 22.94 + 0.5466x") == sign(r"\( \hat{y}=22.94+0.5466 x \)") != sign("y= 22.94 + 0.5466x")
