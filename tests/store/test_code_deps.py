"""Stage code digests come from the imports: a stage sees changes in every module it uses, and
only in those."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from pipelines.clean import stage as clean_stage
from pipelines.dataset import stage as dataset_stage
from pipelines.evaluation import stage as evaluation_stage
from pipelines.store.code_deps import code_modules

REPO = Path(__file__).resolve().parents[2]


def closure_of(function) -> set[str]:
    return set(code_modules(function))


def test_each_stage_depends_on_the_modules_it_calls_and_not_on_the_others():
    dedup = closure_of(clean_stage._dedup)
    latex = closure_of(clean_stage._latex)
    export = closure_of(dataset_stage._export)
    assert "pipelines.clean.dedup.dedup" in dedup and "pipelines.clean.filtering" in dedup
    assert "pipelines.clean.latex.convert" in latex and "pipelines.clean.dedup.dedup" not in latex
    assert "pipelines.ingest.stage" not in dedup | latex  # the stage module's other imports are not followed
    # the export's imports reach the modules the hand-typed lists used to forget
    assert {"pipelines.dataset.export", "pipelines.parallel", "pipelines.store.images", "pipelines.store.lake",
            "pipelines.store.records"} <= export
    assert not any(m.startswith(("pipelines.evaluation", "pipelines.profiles")) for m in dedup | latex | export)


def test_a_constant_imported_at_the_top_brings_its_module():
    """``coverage_rows`` names only constants of the metrics module (no ``__module__`` on them):
    an edit to that module must still change its digest."""
    assert "pipelines.evaluation.metrics" in closure_of(evaluation_stage.coverage_rows)


def test_a_lambda_reaches_the_function_it_calls():
    """Stages pass ``lambda: _dedup(home, settings)`` to the memo, written in the stage module."""
    compute = eval("lambda: _dedup(home, settings)", {**vars(clean_stage), "home": None, "settings": None})
    assert compute.__module__ == clean_stage.__name__
    assert closure_of(compute) == closure_of(clean_stage._dedup)


def test_an_edit_to_an_imported_module_changes_the_digest_of_its_stages_only(tmp_path):
    """In a copy of the library: touching the split module changes the split stage's digest,
    not the shuffle stage's."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "pipelines", copy / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    program = (
        "from pipelines.dataset import stage as s; from pipelines.store.code_deps import code_digest_of;"
        "print(code_digest_of(s._split), code_digest_of(s._shuffle))"
    )

    def digests() -> list[str]:
        out = subprocess.run([sys.executable, "-c", program], cwd=copy, capture_output=True, text=True,
                             env={"PYTHONPATH": str(copy)}, check=True)
        return out.stdout.split()

    split_before, shuffle_before = digests()
    module = copy / "pipelines" / "dataset" / "split.py"
    module.write_text(module.read_text() + "\n# a change\n")
    split_after, shuffle_after = digests()
    assert split_after != split_before
    assert shuffle_after == shuffle_before


def test_an_import_is_found_in_every_kind_of_statement_body(tmp_path):
    """Imports are read from statements only (never from expressions): one nested in each kind
    of body — a function in a class, if/else, try/except/else/finally, with, for, while, match —
    is found, in a copy of the library holding such a module."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "pipelines", copy / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "pipelines" / "nested_imports.py").write_text(
        "class A:\n    def f(self):\n        import pipelines.store.lake\n"
        "if True:\n    pass\nelse:\n    import pipelines.store.atomic\n"
        "try:\n    pass\nexcept ImportError:\n    import pipelines.store.images\n"
        "else:\n    from pipelines.store import records\nfinally:\n    from pipelines import parallel\n"
        "with open(__file__):\n    from pipelines.dataset import split\n"
        "for _ in ():\n    import pipelines.dataset.shuffle\n"
        "while False:\n    import pipelines.dataset.export\n"
        "match 1:\n    case 1:\n        import pipelines.store.memo\n"
    )
    program = ("from pipelines.store.code_deps import imported_modules;"
               "print(' '.join(sorted(imported_modules('pipelines.nested_imports'))))")
    out = subprocess.run([sys.executable, "-c", program], cwd=copy, capture_output=True, text=True,
                         env={"PYTHONPATH": str(copy)}, check=True)
    assert set(out.stdout.split()) == {
        "pipelines", "pipelines.store", "pipelines.store.lake", "pipelines.store.atomic", "pipelines.store.images",
        "pipelines.store.records", "pipelines.parallel", "pipelines.dataset", "pipelines.dataset.split",
        "pipelines.dataset.shuffle", "pipelines.dataset.export", "pipelines.store.memo"}
