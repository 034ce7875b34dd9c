"""Dedup reusing the previous run's graphs (``graph_state``): after any change the result is the
one a run from scratch gives, and only what the change touches is computed."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipelines.clean.dedup import DedupConfig, ImageIndex, deduplicate
from pipelines.clean.dedup.dedup import QuestionIds, TextForms, family_groups
from pipelines.clean.dedup.graph_state import GraphState, SavedState
from pipelines.clean.filtering import cap_per_skill
from pipelines.store.records import RAW_QUESTION_SCHEMA


def _q(key, problem, image=None, choices=("1", "2", "3"), pics=None, answer=0, skill="add"):
    return {
        "source": "site", "source_key": key, "subject": "math", "grade": "grade-3", "skill": skill,
        "problem": problem, "problem_image": image, "choices": None if pics else list(choices),
        "choice_images": pics, "answer_idx": answer, "source_split": None, "extra": "{}",
    }


def _flip(h: int, *bits: int) -> int:
    for b in bits:
        h ^= 1 << b
    return h


RNG = np.random.default_rng(3)
IMAGES = {f"t{i}": int(v) for i, v in enumerate(RNG.integers(0, 2**63, 120, dtype=np.int64))}
IMAGES.update({f"t{i}_jpeg": _flip(IMAGES[f"t{i}"], 5) for i in range(0, 120, 7)})
IMAGES.update({
    "star": 0x9A3C_55F0_1E2D_7B41, "star_jpeg": _flip(0x9A3C_55F0_1E2D_7B41, 3, 40),
    "moon": 0x1234_5678_9ABC_DEF0, "sun": 0xF0E1_D2C3_B4A5_9687,
    "ca": 0, "cb": _flip(0, 1, 17, 33), "cc": _flip(0, 1, 17, 33, 49, 60, 62),
    "o1": 0x0F0F_0F0F_0F0F_0F0F, "o1_jpeg": _flip(0x0F0F_0F0F_0F0F_0F0F, 7), "o2": 0x7777_1111_AAAA_5555,
})


def _base_rows() -> list[dict]:
    rows = [
        _q("a01", "How many stars are there?", "star"),
        _q("a02", "How many stars are there?", "star_jpeg"),
        _q("a03", "how many  stars are there?", "star"),  # exact duplicate of a01
        _q("a04", "How many moons are there?", "moon"),
        _q("a05", "What is shown?", "ca"),
        _q("a06", "What is shown?", "cb"),
        _q("a07", "What is shown?", "cc"),
        _q("a08", "Which sun?", "sun", answer=0),
        _q("a09", "Which sun?", "sun", answer=1),  # conflict: quarantined
        _q("a10", "Pick the picture", None, pics=["o1", "o2"]),
        _q("a11", "Pick the picture", None, pics=["o2", "o1_jpeg"]),
        _q("a12", "Same figure, other options", "star", choices=("4", "5")),
        _q("a13", "Which option matches the moon?", "moon", pics=["o1", "o2"], answer=0, skill="moon"),
        _q("a14", "Which option matches the moon?", "moon", pics=["o1_jpeg", "sun"], answer=0, skill="moon"),  # same family
    ]
    # a large templated block (more than small_block questions), with near copies
    rows += [_q(f"b{i:03d}", "Which shape is this?", f"t{i}") for i in range(120)]
    rows += [_q(f"c{i:03d}", "Which shape is this?", f"t{i}_jpeg") for i in range(0, 120, 7)]
    return rows


def _frame(rows):
    return pl.DataFrame(rows, schema=pl.Schema(RAW_QUESTION_SCHEMA))


def _run(rows, images=IMAGES, previous=None, cap=60):
    index = ImageIndex(images)
    config = DedupConfig()
    texts = TextForms.from_frame(previous["texts"] if previous else None)
    question_ids = QuestionIds.from_frame(previous["question_ids"] if previous else None)
    result = deduplicate(_frame(rows), index, config, previous=previous and previous["near"], texts=texts,
                         question_ids=question_ids)
    kept, over = cap_per_skill(result.kept, cap, 0)
    families = family_groups(kept.sort("question_id"), index, config,
                             previous=previous and previous["families"], texts=texts)
    return {
        "kept": families.kept, "duplicates": result.duplicates, "quarantine": result.quarantine, "over": over,
        "near": result.state, "families": families.state, "texts": texts.frame(), "question_ids": question_ids.frame(),
        "computed": (result.nodes_computed, families.nodes_computed),
    }


def _assert_same(incremental, scratch):
    for name in ("kept", "duplicates", "quarantine", "over"):
        assert incremental[name].equals(scratch[name]), name
    for name in ("near", "families"):
        assert incremental[name].nodes.equals(scratch[name].nodes), name
        assert incremental[name].edges.sort("a", "b").equals(scratch[name].edges.sort("a", "b")), name
    joined = [r["families"].edges.with_columns(joined=r["families"].joined).sort("a", "b") for r in (incremental, scratch)]
    assert joined[0].equals(joined[1])


def _edit(rows, key, **changes):
    return [{**r, **changes} if r["source_key"] == key else r for r in rows]


CHANGES = {
    "changed text joins a group": lambda rows: _edit(rows, "a04", problem="How many stars are there?",
                                                     problem_image="star_jpeg"),
    "changed text leaves a group": lambda rows: _edit(rows, "a02", problem="How many suns are there?"),
    "the kept question removed": lambda rows: [r for r in rows if r["source_key"] not in ("a01", "a03")],
    "chain's middle removed": lambda rows: [r for r in rows if r["source_key"] != "a06"],
    "an image changed": lambda rows: _edit(rows, "b014", problem_image="t21_jpeg"),
    "new duplicate of an old one": lambda rows: rows + [_q("a00", "How many stars are there?", "star_jpeg")],
    "conflict resolved": lambda rows: _edit(rows, "a09", answer_idx=0),
    "option images changed": lambda rows: _edit(rows, "a11", choice_images=["o2", "star"]),
    "block shrinks below small_block": lambda rows: [r for r in rows if not r["source_key"].startswith("b0")],
    "answer changed in a family": lambda rows: _edit(rows, "a12", answer_idx=1),
    "an unknown answer enters the large block": lambda rows: _edit(rows, "b007", answer_idx=-1),
    "answers vary in the large block": lambda rows: [
        {**r, "answer_idx": i % 3} if r["source_key"][0] in "bc" else r for i, r in enumerate(rows)
    ],
    "a record made equal to another": lambda rows: _edit(rows, "a05", problem="How many stars are there?",
                                                         problem_image="star"),
    "records added and removed": lambda rows: [r for r in rows if r["source_key"] not in ("a07", "b003")] + [
        _q("z01", "A new question?", "t3"), _q("z02", "Which shape is this?", "t3_jpeg")],
    "many edits": lambda rows: [
        {**r, "problem": r["problem"] + " (revised)"} if i % 9 == 0 else r for i, r in enumerate(rows)
    ],
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_rebuild_after_a_change_equals_a_run_from_scratch(change):
    before = _run(_base_rows())
    rows = CHANGES[change](_base_rows())
    _assert_same(_run(rows, previous=before), _run(rows))


def test_question_ids_are_looked_up_for_unchanged_records_only():
    before = _run(_base_rows())
    rows = _edit(_base_rows(), "a04", problem="How many suns are there?")
    derived = []
    ids = QuestionIds.from_frame(before["question_ids"])
    frame = _frame(rows)
    from pipelines.clean.dedup.dedup import _Questions

    class Counting(QuestionIds):
        def ids(self, digest_a, digest_b, derive):
            return super().ids(digest_a, digest_b, lambda todo: derived.append(len(todo)) or derive(todo))

    reused = _Questions(frame, TextForms(), Counting(ids.known)).question_id
    assert derived == [1]
    assert reused.equals(_Questions(frame, TextForms()).question_id)


@pytest.mark.parametrize("damage", ["older format", "unsorted", "nulls"])
def test_saved_question_ids_not_in_the_expected_form_are_recomputed(damage):
    before = _run(_base_rows())
    saved = before["question_ids"]
    saved = {"older format": saved.drop("digest_b"),
             "unsorted": saved.reverse(),
             "nulls": saved.with_columns(pl.lit(None, dtype=pl.UInt64).alias("id"))}[damage]
    assert QuestionIds.from_frame(saved).known.height == 0
    rows = _edit(_base_rows(), "a02", problem="How many suns are there?")
    _assert_same(_run(rows, previous={**before, "question_ids": saved}), _run(rows))


@pytest.mark.parametrize("joined", [None, "short"])
def test_family_join_results_missing_are_judged_again(joined):
    """Saved join results of family edges count only when there is one per edge (a stage refuses
    a state whose files are not the ones saved)."""
    varied = [{**r, "answer_idx": i % 3} if r["source_key"][0] in "bc" else r for i, r in enumerate(_base_rows())]
    before = _run(varied, cap=10_000)
    families = before["families"]
    assert families.edges.height and len(families.joined) == families.edges.height
    assert families.joined.any() and not families.joined.all()
    rows = _edit(varied, "b014", problem_image="t21_jpeg")
    damaged = GraphState(families.nodes, families.edges, None if joined is None else families.joined[:-1])
    _assert_same(_run(rows, previous={**before, "families": damaged}, cap=10_000), _run(rows, cap=10_000))


def test_image_descriptors_changing_is_a_change():
    before = _run(_base_rows())
    images = {**IMAGES, "t28": IMAGES["t28_jpeg"] ^ 1}  # the image table describes t28 anew
    _assert_same(_run(_base_rows(), images, previous=before), _run(_base_rows(), images))


def test_an_answer_image_described_anew_is_a_change():
    before = _run(_base_rows())
    assert before["kept"].filter(pl.col("problem") == "Which option matches the moon?")["duplicate_group"].n_unique() == 1
    images = {**IMAGES, "o1_jpeg": IMAGES["o2"] ^ 0xFFFF}  # no longer near o1: the answers disagree
    after = _run(_base_rows(), images, previous=before)
    _assert_same(after, _run(_base_rows(), images))
    assert after["kept"].filter(pl.col("problem") == "Which option matches the moon?")["duplicate_group"].n_unique() == 2


def test_only_touched_components_are_computed():
    uncapped = 10_000  # the edited question must reach the families pass, whichever the cap keeps
    before = _run(_base_rows(), cap=uncapped)
    assert before["computed"][0] > 100
    after = _run(_edit(_base_rows(), "b050", problem_image="t63_jpeg"), previous=before, cap=uncapped)
    near, families = after["computed"]
    assert 0 < near < 10 and 0 < families < 10
    unchanged = _run(_base_rows(), previous=before, cap=uncapped)
    assert unchanged["computed"] == (0, 0)


def test_saved_state_is_refused_when_settings_or_code_change(tmp_path):
    frames = {"x": pl.DataFrame({"a": [1, 2]})}
    SavedState(tmp_path, ("x",), {"settings": {"cap": 1}, "code": "c1"}).save(frames)
    loaded, why = SavedState(tmp_path, ("x",), {"settings": {"cap": 1}, "code": "c1"}).load()
    assert why == "" and loaded["x"].equals(frames["x"])
    for context in ({"settings": {"cap": 2}, "code": "c1"}, {"settings": {"cap": 1}, "code": "c2"}):
        loaded, why = SavedState(tmp_path, ("x",), context).load()
        assert loaded is None and "changed" in why


def test_saved_state_is_refused_when_a_file_is_not_the_one_saved(tmp_path, monkeypatch):
    context = {"code": "c"}
    SavedState(tmp_path, ("x", "y"), context).save({"x": pl.DataFrame({"a": [1]}), "y": pl.DataFrame({"b": [2]})})
    (tmp_path / "y.parquet").unlink()
    assert SavedState(tmp_path, ("x", "y"), context).load() == (None, "state file changed or missing: y")
    monkeypatch.setenv("STEMFORGE_ROW_REUSE", "0")
    assert SavedState(tmp_path, ("x", "y"), context).load()[0] is None


def _families_by_brute_force(kept: pl.DataFrame, index: ImageIndex) -> list[str]:
    """figure_families' definition over every pair of kept questions."""
    from pipelines.clean.dedup.dedup import _answers_agree
    from pipelines.clean.dedup.image_match import ImageMatcher
    from pipelines.clean.dedup.normalize import canonical_text

    matcher = ImageMatcher(index, DedupConfig().rule)
    rows = kept.to_dicts()
    parent = list(range(len(rows)))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    def answer(r):
        if r["answer_idx"] < 0:
            return None
        if r["choice_images"] is not None:
            return r["choice_images"][r["answer_idx"]]
        return canonical_text(r["choices"][r["answer_idx"]], option=True)

    for i, x in enumerate(rows):
        for j, y in enumerate(rows[:i]):
            if x["problem_image"] is None or y["problem_image"] is None:
                continue
            pictured = x["choice_images"] is not None
            if canonical_text(x["problem"]) == canonical_text(y["problem"]) and \
                    pictured == (y["choice_images"] is not None) and \
                    _answers_agree(answer(x), answer(y), pictured, matcher) and \
                    matcher.near(x["problem_image"], y["problem_image"]):
                parent[find(i)] = find(j)
    smallest: dict[int, str] = {}
    for i, r in enumerate(rows):
        root = find(i)
        smallest[root] = min(smallest.get(root, r["question_id"]), r["question_id"])
    return [smallest[find(i)] for i in range(len(rows))]


@pytest.mark.parametrize("unknown", [False, True])
def test_families_of_a_large_templated_block_with_varied_answers_are_the_definitions(unknown):
    """Candidates are split by answer (two differing text answers never join); a block with an
    unknown answer (it agrees with any) is not split. The families are those of every pair."""
    # other options each (not duplicates); answers "p" and "q" repeat, "d<i>" does not
    rows = [_q(f"d{i:03d}", "Which tile is this?", f"t{i % 40}", choices=(f"d{i}", "p", "q"), answer=i % 3)
            for i in range(100)]
    rows += [_q(f"e{i:03d}", "Which tile is this?", f"t{i}_jpeg", choices=(f"e{i}", "p", "q"), answer=i % 3)
             for i in range(0, 120, 7)]
    if unknown:
        rows[5]["answer_idx"] = -1
    index = ImageIndex(IMAGES)
    kept = deduplicate(_frame(rows), index).kept.sort("question_id")
    families = family_groups(kept, index, DedupConfig()).kept
    assert families["duplicate_group"].to_list() == _families_by_brute_force(kept, index)
    assert families["duplicate_group"].n_unique() < kept.height


@pytest.mark.parametrize("n,edges", [(0, 0), (1, 0), (7, 0), (50, 30), (400, 380), (400, 2000)])
def test_component_labels_are_the_smallest_node_of_each_component(n, edges):
    from pipelines.clean.dedup.graph_state import components

    rng = np.random.default_rng(n + edges)
    a, b = rng.integers(0, max(n, 1), edges), rng.integers(0, max(n, 1), edges)  # loops and repeats included
    neighbours = {i: set() for i in range(n)}
    for x, y in zip(a.tolist(), b.tolist()):
        neighbours[x].add(y)
        neighbours[y].add(x)
    expected = [-1] * n
    for start in range(n):  # the smallest node of a component is the first one met in order
        if expected[start] < 0:
            stack, expected[start] = [start], start
            while stack:
                for y in neighbours[stack.pop()]:
                    if expected[y] < 0:
                        expected[y] = start
                        stack.append(y)
    assert components(n, a, b).tolist() == expected


def _pair_set(chunks) -> set[tuple[int, int]]:
    return {(a, b) for part_a, part_b in chunks for a, b in zip(part_a.tolist(), part_b.tolist())}


@pytest.mark.parametrize("dirty", [1, 3, 20, 60])
def test_pairs_touching_some_items_are_those_of_all_pairs(dirty):
    """A large block's pairs with an endpoint among a few items (a scan for their bands) or many
    (sorted bands) are the pairs of the whole block that touch them."""
    from pipelines.clean.dedup.dedup import _Candidates

    rng = np.random.default_rng(dirty)
    base = int(rng.integers(0, 2**63))
    # look-alike pictures (a few bits apart: many share bands, some are within the radius), some asked twice
    names = [f"p{i}" for i in range(300)]
    images = {name: base ^ int(sum(1 << int(b) for b in rng.choice(64, int(rng.integers(1, 12)), replace=False)))
              for name in names}
    problem_images = [names[int(i)] for i in rng.integers(0, 300, 400)]
    config = DedupConfig()
    candidates = _Candidates(np.zeros(400, dtype=np.uint64), problem_images, None, ImageIndex(images), config)
    assert candidates.large.all()
    only = np.zeros(400, dtype=bool)
    only[rng.choice(400, dirty, replace=False)] = True
    every = _pair_set(candidates.pairs())
    touching = {(a, b) for a, b in every if only[a] or only[b]}
    assert len(touching) > dirty
    assert _pair_set(candidates.pairs(only)) == touching


@pytest.mark.parametrize("unknown", [False, True])
def test_image_ranks_from_the_index_are_polars_dense_ranks(unknown):
    from pipelines.clean.dedup.dedup import _dense_ranks

    rng = np.random.default_rng(5)
    index = ImageIndex({f"img{i:03d}": int(v) for i, v in enumerate(rng.integers(0, 2**63, 200, dtype=np.int64))})
    names = [None if k % 7 == 0 else f"img{int(i):03d}" for k, i in enumerate(rng.integers(0, 150, 500))]
    if unknown:
        names[3] = "not-described"
    series = pl.Series(names, dtype=pl.String)
    ranks = _dense_ranks(series, index.rows(series))
    expected = series.rank("dense").fill_null(0).to_numpy()
    assert ranks.dtype == expected.dtype and ranks.tolist() == expected.tolist()


def _stage_home(tmp_path, rows):
    from pipelines.store.home import DataHome
    from pipelines.store.lake import lake, write_table
    from pipelines.store.records import IMAGES_SCHEMA

    home = DataHome(tmp_path)
    home.lake.mkdir(parents=True, exist_ok=True)
    write_table(_frame(rows), lake(home, "multimodal"))
    write_table(pl.DataFrame(schema=IMAGES_SCHEMA), lake(home, "images"))
    return home


def _stage_outputs(home) -> dict[str, bytes]:
    names = ("deduplicated.parquet", "duplicates.parquet", "quarantine/dedup.parquet", "quarantine/cap.parquet")
    return {name: (home.lake / name).read_bytes() for name in names}


@pytest.mark.parametrize("damaged", ["question_ids", "family_joined"])
def test_stage_recomputes_when_a_saved_state_file_is_not_the_one_saved(tmp_path, damaged):
    from pipelines.clean import stage as clean_stage
    from pipelines.settings import BuildSettings
    from pipelines.store.lake import lake, write_table

    settings = BuildSettings()
    rows = _edit(_base_rows(), "a02", problem="How many suns are there?")
    scratch = _stage_home(tmp_path / "scratch", rows)
    clean_stage._dedup(scratch, settings)
    home = _stage_home(tmp_path / "rebuilt", _base_rows())
    clean_stage._dedup(home, settings)
    state = home.lake / "state" / "dedup" / f"{damaged}.parquet"
    saved = pl.read_parquet(state)
    # well-formed but wrong: every id or join result flipped
    write_table(saved.with_columns(pl.col(saved.columns[-1]).reverse()), state, dictionary=False, compression="lz4")
    write_table(_frame(rows), lake(home, "multimodal"))
    figures = clean_stage._dedup(home, settings)
    assert figures["reuse_refused"] == f"state file changed or missing: {damaged}"
    assert _stage_outputs(home) == _stage_outputs(scratch)
    again = _stage_home(tmp_path / "again", _base_rows())
    clean_stage._dedup(again, settings)
    write_table(_frame(rows), lake(again, "multimodal"))
    assert "reuse_refused" not in clean_stage._dedup(again, settings)
    assert _stage_outputs(again) == _stage_outputs(scratch)
