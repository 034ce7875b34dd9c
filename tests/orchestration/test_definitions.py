"""The asset graph is wired as designed, and loading the definitions stays cheap."""

import subprocess
import sys

import dagster as dg

from pipelines.orchestration.definitions import all_asset_checks, all_assets, defs

GROUPS = {
    "ingest": {"crawled_pages", "raw_questions"},
    "clean": {"multimodal_questions", "image_index", "deduplicated_questions", "latex_questions"},
    "dataset": {"shuffled_questions", "questions", "dataset_statistics", "stem_export", "warehouse"},
    "evaluation": {"model_predictions", "evaluation_metrics"},
    "profiles": {"question_tags", "cogme_profiles", "report"},
}


def test_groups_and_keys():
    graph = defs.resolve_asset_graph()
    found: dict[str, set[str]] = {}
    for key in graph.get_all_asset_keys():
        found.setdefault(graph.get(key).group_name, set()).add(key.to_user_string())
    assert found == GROUPS


def test_lineage_follows_the_design():
    graph = defs.resolve_asset_graph()

    def parents(name):
        return {k.to_user_string() for k in graph.get(dg.AssetKey(name)).parent_keys}

    assert parents("raw_questions") == {"crawled_pages"}
    assert parents("deduplicated_questions") == {"multimodal_questions", "image_index"}
    assert parents("latex_questions") == {"deduplicated_questions"}
    assert parents("shuffled_questions") == {"latex_questions"}
    assert parents("questions") == {"shuffled_questions"}
    assert {"questions", "raw_questions", "model_predictions", "evaluation_metrics", "cogme_profiles"} <= parents("warehouse")


def test_every_asset_has_a_description_owner_and_kinds():
    for asset in all_assets:
        for spec in asset.specs:
            assert spec.description, spec.key
            assert spec.owners == ["team:stemforge"], spec.key
            assert spec.kinds, spec.key


def test_checks_are_attached():
    keys = {key.name for checks in all_asset_checks for key in checks.check_keys}
    assert {"no_identity_twice", "kept_questions_are_valid", "latex_is_valid", "answer_position_uniform",
            "answer_content_unchanged", "kept_order_keys_match_source", "no_split_leakage", "split_proportions",
            "export_invariants"} <= keys


def test_warehouse_writer_is_in_its_pool():
    warehouse = next(a for a in all_assets if dg.AssetKey("warehouse") in a.keys)
    assert warehouse.op.pool == "duckdb_write"


def test_definitions_import_fast_and_without_heavy_modules():
    code = (
        "import sys, time\n"
        "import dagster\n"
        "t = time.perf_counter()\n"
        "import pipelines.orchestration.definitions\n"
        "elapsed = time.perf_counter() - t\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers', 'polars', 'duckdb', 'pyarrow', 'requests', 'PIL') if m in sys.modules]\n"
        "print(elapsed, ','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    elapsed, heavy = out.stdout.split()[0], out.stdout.split()[1:] 
    assert float(elapsed) < 1.0
    assert heavy == []


def test_the_resource_carries_every_build_setting():
    import dataclasses

    from assets.resources import StemforgeSettings
    from pipelines.settings import BuildSettings

    missing = {f.name for f in dataclasses.fields(BuildSettings)} - set(StemforgeSettings.model_fields)
    assert missing == set()
    custom = BuildSettings(home="/tmp/x", sources=("demo", "jsonl:/a"), seed=3, models=("random",), crawl_timeout=3.0)
    assert StemforgeSettings.from_settings(custom).settings() == custom


def test_every_published_table_comes_from_an_asset_the_warehouse_depends_on():
    from pipelines.store.lineage import WAREHOUSE_TABLE_ASSETS
    from pipelines.store.warehouse import WAREHOUSE_TABLES

    assert set(WAREHOUSE_TABLE_ASSETS) == set(WAREHOUSE_TABLES)
    graph = defs.resolve_asset_graph()
    parents = {key.to_user_string() for key in graph.get(dg.AssetKey("warehouse")).parent_keys}
    every_asset = {key.to_user_string() for key in graph.get_all_asset_keys()}
    for table, writers in WAREHOUSE_TABLE_ASSETS.items():
        assert writers and set(writers) <= every_asset, table
        assert set(writers) <= parents, f"warehouse publishes {table} but does not depend on {set(writers) - parents}"
    assert "dataset_statistics" in parents and "stem_export" in parents
