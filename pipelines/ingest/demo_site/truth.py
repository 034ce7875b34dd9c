"""Ground truth of the demo quiz site, for tests and benchmarks of every later stage.

``write_truth(config, path)`` writes JSON Lines (UTF-8, one object per line, keys sorted):

Line 1, ``{"type": "site", ...}``:
  ``format`` ("stemforge-demo-truth/1"), ``seed``, ``questions`` (base size), ``faults``,
  ``revision``, ``base_url`` ("http://demo.localhost/", the canonical base: every ``url``
  below is a path to join to it), ``num_questions`` (present at this revision),
  ``subjects`` ({subject: questions}), ``avg_options`` ({subject: mean}), ``skills``
  ([{subject, grade, skill, layout, family, count, oversized}], count = present
  questions), ``rates`` (planted-problem, revision and fault rates), ``disallowed``
  (robots.txt prefixes), ``permanent_faults`` ({kind: [url, ...]}), ``changes``
  ({"added", "edited", "removed": [url, ...]} relative to revision - 1; empty at 0),
  ``duplicate_pairs`` (number of (original, copy) pairs, accidental copies included),
  ``layouts`` ({layout: count}).

Then one ``{"type": "question", ...}`` line per present question, ascending index:
  ``index``, ``url`` (path), ``subject``, ``grade`` (null for technology), ``skill``,
  ``layout`` (ixl | proprofs | triviaplaza), ``problem`` (as shown on the page),
  ``problem_latex`` (formulas as ``\\( latex \\)``, prose byte-identical), ``formulas``
  ([[unicode span, latex], ...]; [] for text without math; a span the page already writes
  in TeX, ``$latex$`` or ``\\( latex \\)``, has the TeX inside as its latex, kept byte for
  byte; a price such as ``$4.50`` is prose), ``problem_image``
  (null or {key, content_key, kind, format}), ``choices`` (texts or null),
  ``choices_latex``, ``choice_formulas``, ``choice_images`` (null or [{key, content_key,
  kind, format}]), ``answer_idx`` (0-based), ``answer`` (the answer's text, or its image
  key), ``image_alts``, ``family`` (template family id "<family>/<text template>"),
  ``role`` (normal | exact | near | template | text_only), ``duplicate_group``
  ("dup-<index of the original>", or null: the planted copies of an original joined with every
  question identical to one of them by construction, planted or not: the same text, the same
  drawings however the page places, scales or encodes them, the same options in any order and
  the same answer; see ``identical_groups``), ``duplicate_kind`` ("original" for the kept
  original, "exact" or "near" for planted copies, "identical" for a question the generator drew
  twice by accident, null otherwise; a group without a planted original is named by its
  smallest index; a group whose other members are all removed by a revision is not a group),
  ``near_variant`` (jpeg | resize | rescan |
  whitespace | case | nbsp | zero_width | nfd | option_order | tex_spacing | label_punct |
  null), ``template_of`` (url of the question it is a templated sibling of, NOT a duplicate:
  same text, or for colour variants the text with one colour word swapped, or null),
  ``template_change`` (image | options | colour | null), ``split_group`` ("split-<index>":
  the family that must land in one split: a duplicate group joined with the siblings that
  keep its figure, text and answer with other distractors; null when alone), ``text_only``
  (bool), ``permanent_fault``
  (truncated_html | missing_image | corrupt_image | redirect_loop | null; only with
  faults), ``cogme`` ({target: [...<=3], content: [...<=3], thinking}), ``version``
  (edits so far), ``lastmod`` (YYYY-MM-DD), ``revision_status`` (added | edited |
  unchanged, relative to revision - 1), ``option_order`` ("shuffled", or
  "kept-order:figure-labels" when the options are the labels of figures drawn in the picture,
  "kept-order:refers-to-options" when an option refers to the others: the value the
  pipeline's ``questions.shuffle`` must record; the order and key of such options must stay).

A question URL with a permanent fault cannot be stored by a crawler: stored + quarantined
must equal the set of question URLs here.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterator

import numpy as np

from pipelines.ingest.demo_site import faults as FT
from pipelines.ingest.demo_site import generator as G
from pipelines.ingest.demo_site.drawing import draw
from pipelines.ingest.demo_site.faults import Faults
from pipelines.ingest.demo_site.generator import DemoQuestion, DemoSite, SiteConfig
from pipelines.ingest.demo_site.imagespec import ImageSpec
from pipelines.store.atomic import atomic_write

FORMAT = "stemforge-demo-truth/1"
CANONICAL_BASE = "http://demo.localhost/"


def _image(spec) -> dict | None:
    if spec is None:
        return None
    return {"key": spec.key, "content_key": spec.content_key, "kind": spec.kind, "format": spec.extension}


def _drawing_params(spec: ImageSpec) -> str:
    """The drawing a spec asks for, without its per-image seed (the last parameter, which also
    sets how the page places the picture; many drawings ignore it or draw alike with another)."""
    last = spec.params[-1] if spec.params else None
    params = spec.params[:-1] if isinstance(last, int) and not isinstance(last, bool) else spec.params
    return repr((spec.kind, params))


def _drawn(spec: ImageSpec, cache: dict) -> str:
    """What the picture shows: a digest of the drawing's pixels before the page places, scales and
    encodes it (equal for the same drawing under another seed, margin, scale or encoding)."""
    if spec.content_key not in cache:
        im = draw(spec)
        cache[spec.content_key] = hashlib.blake2b(f"{im.mode}{im.size}".encode() + im.tobytes(), digest_size=16).hexdigest()
    return cache[spec.content_key]


def _question_identity(q: DemoQuestion, picture) -> tuple:
    """(text, picture, options as a set, answer), each picture named by ``picture(spec)``."""
    options = q.choices if q.choices is not None else tuple(picture(s) for s in q.choice_images)
    image = picture(q.problem_image) if q.problem_image is not None else ""
    return q.problem, image, tuple(sorted(options)), options[q.answer_idx]


def identical_groups(site: DemoSite) -> list[list[int]]:
    """Present questions identical by construction, planted or not, in groups of >= 2 (ascending
    indices, groups by first index): the same problem text, the same drawings in the problem and
    option pictures (however the page places, scales or encodes them), the same options in any order
    and the same answer. Candidates share the text, options, answer and drawing parameters; their
    drawings are then compared pixel for pixel."""
    indices = list(site.indices())
    digests = np.fromiter(
        (int.from_bytes(hashlib.blake2b(repr(_question_identity(site.question(i), _drawing_params)).encode(),
                                        digest_size=8).digest(), "little") for i in indices),
        dtype=np.uint64, count=len(indices))
    _, inverse, counts = np.unique(digests, return_inverse=True, return_counts=True)
    candidates = [i for i, c in zip(indices, counts[inverse].tolist()) if c > 1]
    cache: dict = {}
    same: dict[tuple, list[int]] = defaultdict(list)
    for i in candidates:
        same[_question_identity(site.question(i), lambda spec: _drawn(spec, cache))].append(i)
    return sorted(members for members in same.values() if len(members) > 1)


class _Joined:
    """Disjoint sets of question indices (union-find; a set's root is its smallest index)."""

    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        parent = self.parent
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def sets(self) -> list[list[int]]:
        """Every set, its members in the order they were first named."""
        members: dict[int, list[int]] = defaultdict(list)
        for i in list(self.parent):
            members[self.find(i)].append(i)
        return list(members.values())


def duplicate_groups(site: DemoSite) -> dict[int, tuple[str, str]]:
    """index -> (group id, kind) for every present member of a group with >= 2 present members.

    A group joins the planted copies of one original and every question identical to a member
    (``identical_groups``). Its id names the smallest planted original (present or not), else the
    smallest member; kinds: "original" (that original), "exact" / "near" (planted copies),
    "identical" (any other member: the same question on another page, not planted as a copy)."""
    members: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for i in site.indices():
        role, ref = site.role(i)
        if role in ("exact", "near"):
            members[ref].append((i, role))
    joined = _Joined()

    kind_of: dict[int, str] = {}
    for root, copies in members.items():
        for i, kind in copies:
            joined.union(root, i)
            kind_of[i] = kind
        kind_of.setdefault(root, "original")
    for same in identical_groups(site):
        for i in same[1:]:
            joined.union(same[0], i)
    out: dict[int, tuple[str, str]] = {}
    for everyone in joined.sets():
        present = sorted(i for i in everyone if site.is_present(i))
        if len(present) < 2:
            continue
        originals = [i for i in everyone if i in members]
        root = min(originals) if originals else present[0]
        group = f"dup-{root}"
        for i in present:
            kind = kind_of.get(i, "identical")
            out[i] = (group, "original" if i == root else "identical" if kind == "original" else kind)
    return out


def split_groups(site: DemoSite, groups: dict[int, tuple[str, str]]) -> dict[int, str]:
    """index -> "split-<smallest index>" for every present member of a family of >= 2 present
    questions: duplicate groups joined with their templated siblings that keep figure, text and
    answer and change only the other options (``template_change='options'``)."""
    joined = _Joined()

    for i, (group, _) in groups.items():
        joined.union(i, int(group.removeprefix("dup-")))
    for i in site.indices():
        role, ref = site.role(i)
        if role == "template" and site.question(i).template_change == "options":
            joined.union(i, ref)
    members = [[i for i in ms if site.is_present(i)] for ms in joined.sets()]
    return {i: f"split-{min(ms)}" for ms in members if len(ms) >= 2 for i in ms}


def question_record(site: DemoSite, q: DemoQuestion, groups: dict, faults: Faults, status: str,
                    families: dict | None = None) -> dict:
    group, kind = groups.get(q.index, (None, None))
    tpl = None
    if q.template_of is not None:
        tpl = site.question(q.template_of).path
    return {
        "type": "question", "index": q.index, "url": q.path, "subject": q.subject, "grade": q.grade,
        "skill": q.skill, "layout": q.layout, "problem": q.problem, "problem_latex": q.problem_latex,
        "formulas": [list(f) for f in q.formulas], "problem_image": _image(q.problem_image),
        "choices": list(q.choices) if q.choices is not None else None,
        "choices_latex": list(q.choices_latex) if q.choices_latex is not None else None,
        "choice_formulas": [[list(f) for f in fs] for fs in q.choice_formulas] if q.choice_formulas is not None else None,
        "choice_images": [_image(s) for s in q.choice_images] if q.choice_images is not None else None,
        "answer_idx": q.answer_idx,
        "answer": q.choices[q.answer_idx] if q.choices is not None else q.choice_images[q.answer_idx].key,
        "image_alts": list(q.image_alts), "family": q.family, "role": q.role,
        "duplicate_group": group, "duplicate_kind": kind, "near_variant": q.near_variant,
        "template_of": tpl, "template_change": q.template_change, "text_only": q.text_only,
        "permanent_fault": faults.permanent(q.index),
        "cogme": {"target": list(q.cogme_target), "content": list(q.cogme_content), "thinking": q.cogme_thinking},
        "version": q.version, "lastmod": q.lastmod, "revision_status": status, "option_order": q.option_order,
        "split_group": (families or {}).get(q.index),
    }


def revision_changes(config: SiteConfig) -> dict[str, list[str]]:
    """URLs added, edited and removed by ``config.revision`` relative to the revision before."""
    if config.revision == 0:
        return {"added": [], "edited": [], "removed": []}
    now = DemoSite(config)
    before = DemoSite(SiteConfig(config.seed, config.questions, config.faults, config.revision - 1))
    added, edited, removed = [], [], []
    for i in range(now.num_indices):
        was, isn = before.is_present(i), now.is_present(i)
        if isn and not was:
            added.append(now.question(i).path)
        elif was and not isn:
            removed.append(before.question(i).path)
        elif isn and was:
            a, b = before.question(i), now.question(i)
            if (a.problem, a.problem_image, a.choices, a.choice_images, a.answer_idx) != (
                    b.problem, b.problem_image, b.choices, b.choice_images, b.answer_idx):
                edited.append(b.path)
    return {"added": added, "edited": edited, "removed": removed}


class _Summary:
    """Site-level aggregates gathered while question records stream by."""

    def __init__(self, site: DemoSite):
        self.site = site
        self.count = 0
        self.subjects: Counter = Counter()
        self.options: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.skill_counts: Counter = Counter()
        self.layouts: Counter = Counter()
        self.permanent: dict[str, list[str]] = {k: [] for k in FT.PERMANENT_KINDS}

    def add(self, q: DemoQuestion, rec: dict) -> None:
        self.count += 1
        self.subjects[q.subject] += 1
        acc = self.options[q.subject]
        acc[0] += q.num_choices
        acc[1] += 1
        self.skill_counts[(q.subject, q.grade, q.skill)] += 1
        self.layouts[q.layout] += 1
        if rec["permanent_fault"]:
            self.permanent[rec["permanent_fault"]].append(q.path)

    def record(self, groups: dict, changes: dict) -> dict:
        config, site = self.site.config, self.site
        return {
            "type": "site", "format": FORMAT, "seed": config.seed, "questions": config.questions,
            "faults": config.faults, "revision": config.revision, "base_url": CANONICAL_BASE,
            "num_questions": self.count, "subjects": dict(self.subjects),
            "avg_options": {s: round(v[0] / v[1], 4) for s, v in self.options.items()},
            "skills": [{"subject": sk.subject, "grade": sk.grade, "skill": sk.skill, "layout": sk.layout,
                        "family": sk.family, "count": self.skill_counts[(sk.subject, sk.grade, sk.skill)],
                        "oversized": sk.oversized} for sk in site.skills()],
            "rates": {"exact": G.EXACT_RATE, "near": G.NEAR_RATE, "template": G.TEMPLATE_RATE,
                      "text_only": G.TEXT_ONLY_RATE, "add": G.ADD_RATE, "remove": G.REMOVE_RATE, "edit": G.EDIT_RATE,
                      "429": FT.RATE_429, "5xx": FT.RATE_5XX, "slow": FT.RATE_SLOW, "permanent": FT.RATE_PERMANENT},
            "disallowed": ["/members/", "/print/"],
            "permanent_faults": self.permanent if config.faults else {},
            "changes": changes,
            "duplicate_pairs": sum(1 for g in groups.values() if g[1] != "original"),
            "layouts": dict(self.layouts),
        }


def _question_records(config: SiteConfig):
    """(site, groups, changes, summary, iterator of question records); the summary fills as it runs."""
    site = DemoSite(config)
    faults = Faults(site)
    groups = duplicate_groups(site)
    families = split_groups(site, groups)
    changes = revision_changes(config)
    added, edited = set(changes["added"]), set(changes["edited"])
    summary = _Summary(site)

    def records():
        for i in site.indices():
            q = site.question(i)
            status = "added" if q.path in added else "edited" if q.path in edited else "unchanged"
            rec = question_record(site, q, groups, faults, status, families)
            summary.add(q, rec)
            yield rec

    return site, groups, changes, summary, records()


def iter_truth(config: SiteConfig) -> Iterator[dict]:
    """The truth records: the site record first, then one per present question (held in memory)."""
    _, groups, changes, summary, records = _question_records(config)
    questions = list(records)
    yield summary.record(groups, changes)
    yield from questions


def write_truth(config: SiteConfig, path: str | os.PathLike) -> Path:
    """Write the truth as JSON Lines atomically, streaming (paper scale fits in little memory)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _, groups, changes, summary, records = _question_records(config)
    # the site record (the first line) is complete only after the last question: they wait in an unnamed file
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n", dir=path.parent) as qf:
        for rec in records:
            qf.write(json.dumps(rec, ensure_ascii=False, sort_keys=True))
            qf.write("\n")
        qf.seek(0)
        with atomic_write(path, "w", encoding="utf-8", newline="\n", checksum=False) as f:
            f.write(json.dumps(summary.record(groups, changes), ensure_ascii=False, sort_keys=True))
            f.write("\n")
            while chunk := qf.read(1 << 20):
                f.write(chunk)
    return path


def read_truth(path: str | os.PathLike) -> tuple[dict, list[dict]]:
    """(site record, question records) of a truth file."""
    site, questions = None, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("type") == "site":
                site = rec
            else:
                questions.append(rec)
    if site is None:
        raise ValueError(f"{path}: not a demo-site truth file (no site record)")
    return site, questions
