"""Issue 30, point 7: a ``python:`` source spec is data. Whoever can write a spec (a run config
in the UI, ``--source`` on the command line) must not run code the operator did not allow: never
the standard library, never a module only the spec names; only ``plugins/`` of the project or
the home, or what ``STEMFORGE_PYTHON_SOURCES`` names."""

from __future__ import annotations

import pytest

from pipelines.ingest.importers import iter_import_records
from pipelines.ingest.importers.common import ImportSourceError
from pipelines.ingest.sources import SourceSpec
from pipelines.ingest.spec import SourceSpecError, parse_source_spec
from pipelines.orchestration.run import run_build
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from support.builds import home_instance

PLUGIN = '''
def rows(n="2"):
    for i in range(int(n)):
        yield {"question": f"plugin question {i}?", "options": ["a", "b"], "answer": 0,
               "subject": "math", "skill": "plugin"}
'''


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STEMFORGE_PYTHON_SOURCES", raising=False)
    return tmp_path


def _read(spec: SourceSpec, home: DataHome):
    return list(iter_import_records(spec, ImageStore(home.images)))


@pytest.mark.parametrize("text", [
    "python:os:system?command=touch {marker}",
    "python:subprocess:getoutput?cmd=touch {marker}",
    "python:os.path:exists?path={marker}",
])
def test_the_standard_library_is_never_a_source(cwd, monkeypatch, text):
    marker = cwd / "ran"
    monkeypatch.setenv("STEMFORGE_PYTHON_SOURCES", "os,subprocess")  # even when the operator names it
    with pytest.raises(SourceSpecError, match="standard library"):
        parse_source_spec(text.format(marker=marker))
    module, _, function = text.partition("?")[0].removeprefix("python:").rpartition(":")
    spec = SourceSpec(text, "python", f"{module}:{function}", {"command": f"touch {marker}"})
    with pytest.raises(ImportSourceError, match="standard library"):
        _read(spec, DataHome(cwd / "home"))
    assert not marker.exists()


def test_a_run_config_cannot_run_a_shell_command(cwd):
    marker = cwd / "ran"
    home = DataHome(cwd / "home")
    settings = BuildSettings(home=str(home.root), sources=(f"python:os:system?command=touch {marker}",), models=("random",))
    with home_instance(home):
        try:
            outcome = run_build(settings, progress=False)
        except SourceSpecError as exc:
            assert "standard library" in str(exc)
        else:
            assert not outcome.success
    assert not marker.exists()


def test_modules_and_files_outside_allowed_places_are_refused(cwd):
    home = DataHome(cwd / "home")
    (cwd / "loose.py").write_text(PLUGIN + "\nimport pathlib; pathlib.Path('imported').touch()\n")
    (cwd / "sub").mkdir()
    (cwd / "sub" / "loose2.py").write_text(PLUGIN)
    for text in ("python:loose:rows", f"python:{cwd / 'loose.py'}:rows", "python:pytest:main", "python:sub.loose2:rows"):
        with pytest.raises(ImportSourceError, match="not in a place allowed"):
            _read(parse_source_spec(text), home)
    assert not (cwd / "imported").exists()
    # a plugins folder is not a way out: ../ resolves first
    (cwd / "plugins").mkdir()
    with pytest.raises(ImportSourceError, match="not in a place allowed"):
        _read(parse_source_spec(f"python:{cwd / 'plugins' / '..' / 'loose.py'}:rows"), home)


def test_plugins_folders_and_the_operator_setting_are_allowed(cwd, monkeypatch):
    home = DataHome(cwd / "home")
    (cwd / "plugins").mkdir()
    (cwd / "plugins" / "project_rows.py").write_text(PLUGIN)
    (home.root / "plugins").mkdir(parents=True)
    (home.root / "plugins" / "home_rows.py").write_text(PLUGIN)
    (cwd / "elsewhere").mkdir()
    (cwd / "elsewhere" / "named_rows.py").write_text(PLUGIN)
    for text in ("python:project_rows:rows?n=2", "python:plugins/project_rows.py:rows?n=2",
                 f"python:{home.root / 'plugins' / 'home_rows.py'}:rows?n=2", "python:home_rows:rows?n=2"):
        records = _read(parse_source_spec(text), home)
        assert [r.source_key for r in records if hasattr(r, "choices")] == ["rows#0", "rows#1"], text
    with pytest.raises(ImportSourceError, match="not in a place allowed"):
        _read(parse_source_spec(f"python:{cwd / 'elsewhere' / 'named_rows.py'}:rows"), home)
    monkeypatch.setenv("STEMFORGE_PYTHON_SOURCES", str(cwd / "elsewhere"))
    assert len([r for r in _read(parse_source_spec(f"python:{cwd / 'elsewhere' / 'named_rows.py'}:rows"), home)
                if hasattr(r, "choices")]) == 2
