"""Issue 30, point 2: an ``hf:`` source watches what it reads. A ``save_to_disk`` split folder that
is a symlink (a walk does not follow it) or that ``dataset_dict.json`` lists as ``../x`` (outside
the walk) was read but not watched, so its edits never reached the warehouse."""

from __future__ import annotations

import json

import datasets

from pipelines.ingest.importers.hf_dataset import find_data_files
from pipelines.ingest.spec import parse_source_spec
from pipelines.ingest.stage import source_files
from pipelines.store.home import DataHome


def _saved(folder):
    rows = {"question": ["1 + 1?", "2 + 2?"], "options": [["2", "3"], ["4", "5"]], "answer": [0, 0]}
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows), "test": datasets.Dataset.from_dict(rows)}).save_to_disk(str(folder))
    return folder


def _watched_covers_read(location, home):
    spec = parse_source_spec(f"hf:{location}")
    watched = set(source_files(spec, home))
    read = find_data_files(spec.location)
    assert read
    missing = [data.path for data in read if data.path not in watched]
    assert not missing, missing
    return watched


def test_a_symlinked_split_folder_is_watched(tmp_path):
    real = _saved(tmp_path / "real")
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "dataset_dict.json").write_text((real / "dataset_dict.json").read_text())
    (ds / "train").symlink_to(real / "train", target_is_directory=True)
    (ds / "test").symlink_to(real / "test", target_is_directory=True)
    watched = _watched_covers_read(ds, DataHome(tmp_path / "home"))
    assert ds / "train" / "state.json" in watched


def test_a_split_listed_as_dotdot_is_watched(tmp_path):
    real = _saved(tmp_path / "real")
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "dataset_dict.json").write_text(json.dumps({"splits": ["../real/train", "../real/test"]}))
    _watched_covers_read(ds, DataHome(tmp_path / "home"))
