"""Where the real corpora are: ``../shared/corpora`` beside the repository (read in place, never
copied; see its README)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPORA = (REPO / ".." / "shared" / "corpora").resolve()
SCEMQA_JSON = CORPORA / "scemqa" / "Multiple_Choice" / "multiple_choice.json"
GAOKAO_DATA = CORPORA / "gaokao-mm" / "Data"
