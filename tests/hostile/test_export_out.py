"""Issue 30, point 4: ``stemforge export --out`` inside the data home is refused (an lmms-eval
export into ``export/stem`` made every later build fail ``export_invariants``), and the harness
formats never overwrite a file in ``--out`` that an earlier export did not write."""

from __future__ import annotations

import json

import pytest

from pipelines.dataset.harness_export import HarnessExportError, export_for_harness
from pipelines.orchestration.run import run_build
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from support.builds import home_instance
from support.images import real_png

SUBJECTS = ("science", "technology", "engineering", "math")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("export-out")
    (root / "src" / "img").mkdir(parents=True)
    lines = []
    for i in range(40):
        (root / "src" / "img" / f"{i}.png").write_bytes(real_png(500 + i, size=48))
        lines.append(json.dumps({"question": f"Which picture {i} shows idea {i * 7} of {SUBJECTS[i % 4]}?",
                                 "options": [f"yes {i}", f"no {i}", f"maybe {i}"], "answer": i % 3,
                                 "subject": SUBJECTS[i % 4], "skill": f"skill {i % 3}", "image": f"img/{i}.png"}))
    (root / "src" / "q.jsonl").write_text("\n".join(lines) + "\n")
    home = DataHome(root / "home")
    with home_instance(home):
        outcome = run_build(BuildSettings(home=str(home.root), sources=(f"jsonl:{root / 'src' / 'q.jsonl'}",),
                                          models=("random",)), progress=False)
    assert outcome.success, outcome.summary
    return home


@pytest.mark.parametrize("fmt", ["lmms-eval", "vlmevalkit", "stem"])
@pytest.mark.parametrize("inside", ["export/stem", "export/stem/data", "lake", "images", ".", "reports/x"])
def test_out_inside_the_home_is_refused(home, fmt, inside):
    if fmt == "stem" and inside == "export/stem":
        return  # the release itself: nothing is copied
    before = sorted(p.relative_to(home.root) for p in home.root.rglob("*") if "dagster" not in p.parts)
    with pytest.raises(HarnessExportError, match="inside the data home"):
        export_for_harness(home, fmt, home.root / inside, split="test")
    assert sorted(p.relative_to(home.root) for p in home.root.rglob("*") if "dagster" not in p.parts) == before


def test_default_folders_and_re_exports_still_work(home, tmp_path):
    for fmt in ("lmms-eval", "vlmevalkit"):
        export_for_harness(home, fmt, None, split="test")
        export_for_harness(home, fmt, home.root / "export" / fmt, split="test")
        export_for_harness(home, fmt, tmp_path / fmt, split="test")
        export_for_harness(home, fmt, tmp_path / fmt, split="test")  # its own earlier export


def test_harness_formats_do_not_overwrite_other_files(home, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "utils.py").write_text("# my own helpers\n")
    with pytest.raises(HarnessExportError, match="holds utils.py, which this export would overwrite"):
        export_for_harness(home, "lmms-eval", out, split="test")
    assert (out / "utils.py").read_text() == "# my own helpers\n"
    export_for_harness(home, "vlmevalkit", tmp_path / "v", split="test")
    (tmp_path / "v" / "stemforge_test.tsv").write_text("edited by hand\n")
    with pytest.raises(HarnessExportError, match="changed since"):
        export_for_harness(home, "vlmevalkit", tmp_path / "v", split="test")
