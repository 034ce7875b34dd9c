"""The demo quiz site's question generator: O(1) random access, nothing stored.

Usage::

    from pipelines.ingest.demo_site.generator import SiteConfig, DemoSite, render_image
    site = DemoSite(SiteConfig(seed=0, questions=3000))
    q = site.question(17)              # DemoQuestion, derived from (seed, 17) alone
    for i in site.indices(): ...       # the indices present at this revision, ascending
    png = render_image(q.problem_image) if q.problem_image else None

Shape (REFERENCE.md, Table 1): 448 skills (science 82, technology 9, engineering 6,
math 351); per-subject question counts proportional to Table 1 (exactly Table 1 at
``questions=1_073_146``), at least one question per subject; average options per subject
close to 2.8 / 4.0 / 2.5 / 2.8. Within a subject, skills get counts proportional to a
fixed weight; every skill whose position within its subject is 5 mod 12 is *oversized*
(weight x6, ``SkillInfo.oversized``; 38 skills), so a per-skill cap bites on those first:
at 3,000 questions oversized math skills hold 16-44 questions (median skill 5); at paper
scale 5,600-15,600 (median 1,837; 171 skills exceed 2,000).

Indices ``0 .. questions-1`` are the base site, contiguous per skill in catalog order.
Planted problems, per base index, decided by a hash of (seed, index) (rates below):

- ``exact``: the same question (text, images, options, order) on another URL; ``dup_of``
  names the original, an earlier ``normal`` question of the same skill.
- ``near``: the original with one change (``near_variant``): ``jpeg`` / ``resize`` (image
  re-encoded / scaled), ``rescan`` (the page printed and scanned again: rescaled, margins cut or
  widened, grain, JPEG; text options in another order), ``whitespace``, ``case``, ``nbsp``,
  ``zero_width``, ``nfd`` (Unicode decomposition of the prose), ``option_order`` (same options,
  another order), ``tex_spacing`` (TeX on the page typed another way: operator spacing,
  ``\\left( \\right)``, ``\\frac ab``, ``x^2``, ``$ $`` / ``\\( \\)``), ``label_punct`` (figure-label
  options punctuated another way: ``A`` / ``(A)`` / ``A.``).
- ``template``: NOT a duplicate: the same text as ``template_of`` with a different image
  (``template_change='image'``) or the same text and image with different options
  (``'options'``; the same answer: such siblings must share a split), or, in families with
  ``colour_variants``, two colours swapped in the words and the pictures (``'colour'``: the
  text differs in one colour word, or not at all when only the options name colours, and the
  pictures differ only in colour). Normal questions of one family share texts too (``family``
  says which). Families in ``NEAR_BOOST`` / ``TEMPLATE_BOOST`` plant near copies / siblings
  that many times more often.
- ``text_only``: text question with text options (the pipeline must exclude it).
- ``normal``: everything else.

Revisions (``SiteConfig.revision = R``, R=0 is the base): at each revision r = 1..R,
``ADD_RATE`` of the base size is added (new indices after the previous ones), each present
question is removed with probability ``REMOVE_RATE`` and each present ``normal`` or
``text_only`` question is edited (new content, same URL) with probability ``EDIT_RATE``.
Duplicates and templated siblings follow their original's edits. ``lastmod`` is the date of
the revision that last changed a question (revision r is ``BASE_DATE`` + r days).
"""

from __future__ import annotations

import bisect
import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import lru_cache

from pipelines.ingest.demo_site import families as F
from pipelines.ingest.demo_site.drawing import RGB, render
from pipelines.ingest.demo_site.imagespec import ImageSpec
from pipelines.ingest.demo_site.rng import Rng, hash64, unit

SUBJECT_TABLE1 = {"science": 186_740, "technology": 8_566, "engineering": 18_981, "math": 858_859}
SKILLS_TABLE1 = {"science": 82, "technology": 9, "engineering": 6, "math": 351}
PAPER_QUESTIONS = 1_073_146
SUBJECT_ORDER = ("science", "technology", "engineering", "math")

EXACT_RATE = 0.03
NEAR_RATE = 0.03
TEMPLATE_RATE = 0.03
TEMPLATE_IMAGE_ATTEMPTS = 4  # content redraws tried for an image-changed templated sibling
TEXT_ONLY_RATE = 0.03
ADD_RATE = 0.02
REMOVE_RATE = 0.02
EDIT_RATE = 0.02
OVERSIZED_WEIGHT = 6.0
BASE_DATE = date(2026, 1, 5)

# families built as hard cases for dedup plant near copies (TeX typed another way, labels
# punctuated another way) or templated siblings (colour variants) that many times more often
NEAR_BOOST = {"tex-fractions": 5.0, "tex-on-page": 3.0, "figure-labels": 6.0}
TEMPLATE_BOOST = {"colors": 4.0, "probability": 2.0}


@dataclass(frozen=True)
class SiteConfig:
    seed: int = 0
    questions: int = 3000
    faults: bool = False
    revision: int = 0

    def __post_init__(self):
        if self.questions < 4:
            raise ValueError(f"the demo site needs at least 4 questions, got {self.questions}")
        if self.revision < 0:
            raise ValueError(f"revision must be >= 0, got {self.revision}")


@dataclass(frozen=True)
class SkillInfo:
    position: int          # index in the catalog (0..447)
    subject: str
    grade: str | None
    skill: str             # slug
    family: str
    level: int             # difficulty knob used by the family (0..3)
    layout: str            # ixl | proprofs | triviaplaza
    weight: float
    oversized: bool
    count: int = 0         # base questions of this skill
    start: int = 0         # first base index


@dataclass(slots=True)
class DemoQuestion:
    index: int
    path: str                           # URL path of the question page
    subject: str
    grade: str | None
    skill: str
    layout: str
    problem: str                        # text exactly as shown on the page (Unicode)
    problem_latex: str                  # problem with each formula span as \( latex \)
    formulas: tuple                     # ((unicode span, latex), ...) in text order
    problem_image: ImageSpec | None
    choices: tuple | None               # option texts, or None for image options
    choices_latex: tuple | None
    choice_formulas: tuple | None       # per option: ((span, latex), ...)
    choice_images: tuple | None         # ImageSpec per option, or None for text options
    answer_idx: int
    family: str                         # template family id: "<family>/<text template>"
    role: str                           # normal | exact | near | template | text_only
    dup_of: int | None                  # exact/near: the original's index
    near_variant: str | None
    template_of: int | None
    template_change: str | None         # image | options
    text_only: bool
    cogme_target: tuple
    cogme_content: tuple
    cogme_thinking: str
    version: int                        # number of edits so far
    lastmod: str                        # YYYY-MM-DD
    image_alts: tuple = field(default=())  # alt of the problem image (if any), then of each option image
    option_order: str = "shuffled"      # or "kept-order:<reason>": the options only read right in this order

    @property
    def num_choices(self) -> int:
        return len(self.choices if self.choices is not None else self.choice_images)

    @property
    def images(self) -> tuple:
        """Every image spec on the page: the problem image first, then option images."""
        out = (self.problem_image,) if self.problem_image is not None else ()
        return out + (self.choice_images or ())

    @property
    def answer(self):
        """The answer's text, or its ImageSpec for image options."""
        return self.choices[self.answer_idx] if self.choices is not None else self.choice_images[self.answer_idx]


def _largest_remainder(total: int, weights: list[float], minimum: int = 0) -> list[int]:
    s = sum(weights)
    raw = [total * w / s for w in weights]
    out = [max(minimum, int(r)) for r in raw]
    rest = total - sum(out)
    order = sorted(range(len(weights)), key=lambda j: (-(raw[j] - int(raw[j])), j))
    j = 0
    while rest > 0:
        out[order[j % len(order)]] += 1
        rest -= 1
        j += 1
    while rest < 0:  # the minimum pushed us over: take from the largest
        big = max(range(len(out)), key=lambda x: (out[x], -x))
        out[big] -= 1
        rest += 1
    return out


@lru_cache(maxsize=1)
def catalog() -> tuple[SkillInfo, ...]:
    """The 448 skills, fixed for every seed and size (counts are filled in by DemoSite)."""
    skills: list[SkillInfo] = []
    used: set[str] = set()
    for subject in SUBJECT_ORDER:
        fams = [f for f in F.FAMILIES if f.subject == subject]
        pools = []
        for f in fams:
            pool = []
            for qi, qual in enumerate(F.SKILL_QUALIFIERS):
                for stem in f.stems:
                    if qual and any(ch.isdigit() for ch in stem) and any(ch.isdigit() for ch in qual):
                        continue
                    pool.append((stem + qual, qi))
            pools.append(pool)
        made = 0
        per_family = [0] * len(fams)
        round_ = 0
        while made < SKILLS_TABLE1[subject]:
            for fi, f in enumerate(fams):
                if made >= SKILLS_TABLE1[subject]:
                    break
                pool = pools[fi]
                while per_family[fi] < len(pool) and pool[per_family[fi]][0] in used:
                    per_family[fi] += 1
                if per_family[fi] >= len(pool):
                    continue
                slug, qi = pool[per_family[fi]]
                j = per_family[fi]
                per_family[fi] += 1
                used.add(slug)
                grade = f.grades[j % len(f.grades)]
                pos_in_subject = made
                oversized = pos_in_subject % 12 == 5
                weight = (0.5 + unit("skill-weight", slug)) * (OVERSIZED_WEIGHT if oversized else 1.0)
                if subject == "technology":
                    layout = "proprofs" if slug in F.PROPROFS_SKILLS else "triviaplaza"
                else:
                    layout = "ixl"
                skills.append(SkillInfo(len(skills), subject, grade, slug, f.name, (qi + j) % 4, layout, weight, oversized))
                made += 1
            round_ += 1
            if round_ > 1000:
                raise RuntimeError(f"not enough skill slugs for {subject}")
    return tuple(skills)


FAMILY_BY_NAME = {f.name: f for f in F.FAMILIES}


def question_path(layout: str, subject: str, grade: str | None, skill: str, index: int) -> str:
    if layout == "ixl":
        return f"/{subject}/{grade}/{skill}/q/{index}"
    if layout == "proprofs":
        return f"/quiz-school/{skill}/question-{index}.html"
    return f"/en/trivia/{skill}/{index}/"


class DemoSite:
    """All questions of one configuration, each computed on demand from (seed, index)."""

    def __init__(self, config: SiteConfig | None = None):
        self.config = config = config or SiteConfig()
        n = config.questions
        subject_counts = _largest_remainder(n, [SUBJECT_TABLE1[s] for s in SUBJECT_ORDER], minimum=1)
        skills: list[SkillInfo] = []
        start = 0
        base = catalog()
        for subject, total in zip(SUBJECT_ORDER, subject_counts):
            subj = [s for s in base if s.subject == subject]
            counts = _largest_remainder(total, [s.weight for s in subj])
            for s, cnt in zip(subj, counts):
                skills.append(SkillInfo(s.position, s.subject, s.grade, s.skill, s.family, s.level, s.layout,
                                        s.weight, s.oversized, cnt, start))
                start += cnt
        assert start == n
        self._skills = tuple(skills)
        # skills with no questions share a start with the next one; bisect over the non-empty ones
        self._nonempty = [s for s in skills if s.count > 0]
        self._nonempty_starts = [s.start for s in self._nonempty]
        self._family = [FAMILY_BY_NAME[s.family] for s in self._nonempty]
        self._boost = [(NEAR_BOOST.get(f.name, 1.0), TEMPLATE_BOOST.get(f.name, 1.0)) for f in self._family]
        self.added_per_revision = max(1, round(n * ADD_RATE))
        self.num_indices = n + config.revision * self.added_per_revision
        self._skill_by_key = {(s.subject, s.grade, s.skill): s for s in skills}
        self._path_prefix, self._path_suffix = {}, {}
        for s in skills:
            prefix, _, suffix = question_path(s.layout, s.subject, s.grade, s.skill, 0).rpartition("0")
            self._path_prefix[s.position], self._path_suffix[s.position] = prefix, suffix
        self._present_cache: dict[int, list[int]] = {}
        self._added: dict[int, list[int]] | None = None

    # ---- catalog ---------------------------------------------------------------------
    def skills(self) -> tuple[SkillInfo, ...]:
        """All 448 skills with their base question counts (some may be 0 at small sizes)."""
        return self._skills

    def skill_info(self, subject: str, grade: str | None, skill: str) -> SkillInfo | None:
        return self._skill_by_key.get((subject, grade, skill))

    def _skill_slot(self, i: int) -> int:
        """Position in ``_nonempty`` of the skill that question ``i`` belongs to."""
        n = self.config.questions
        if i < n:
            return bisect.bisect_right(self._nonempty_starts, i) - 1
        return bisect.bisect_right(self._nonempty_starts, hash64(self.config.seed, "added-skill", i) % n) - 1

    def skill_of(self, i: int) -> SkillInfo:
        return self._nonempty[self._skill_slot(i)]

    # ---- revisions -------------------------------------------------------------------
    def birth(self, i: int) -> int:
        n = self.config.questions
        return 0 if i < n else 1 + (i - n) // self.added_per_revision

    def removed_at(self, i: int) -> int | None:
        for r in range(self.birth(i) + 1, self.config.revision + 1):
            if unit(self.config.seed, "remove", i, r) < REMOVE_RATE:
                return r
        return None

    def _edits(self, i: int) -> tuple[int, int]:
        """(number of edits, revision of the last edit) of a normal/text_only question."""
        if not self.config.revision:
            return 0, 0
        count, last = 0, self.birth(i)
        for r in range(self.birth(i) + 1, self.config.revision + 1):
            if unit(self.config.seed, "remove", i, r) < REMOVE_RATE:
                break
            if unit(self.config.seed, "edit", i, r) < EDIT_RATE:
                count, last = count + 1, r
        return count, last

    def is_present(self, i: int) -> bool:
        return 0 <= i < self.num_indices and self.removed_at(i) is None

    def indices(self):
        """Indices present at this revision, ascending."""
        if self.config.revision == 0:
            return iter(range(self.config.questions))
        return (i for i in range(self.num_indices) if self.removed_at(i) is None)

    def __len__(self) -> int:
        if self.config.revision == 0:
            return self.config.questions
        return sum(1 for _ in self.indices())

    def skill_questions(self, skill: SkillInfo) -> list[int]:
        """Present question indices of one skill, ascending (cached)."""
        cached = self._present_cache.get(skill.position)
        if cached is not None:
            return cached
        if self.config.revision == 0:
            out = list(range(skill.start, skill.start + skill.count))
        else:
            out = [i for i in range(skill.start, skill.start + skill.count) if self.removed_at(i) is None]
            out += [i for i in self._added_by_skill().get(skill.position, ()) if self.removed_at(i) is None]
        self._present_cache[skill.position] = out
        return out

    def _added_by_skill(self) -> dict[int, list[int]]:
        """Indices added by revisions, grouped by skill position (computed once)."""
        if self._added is None:
            added: dict[int, list[int]] = {}
            for i in range(self.config.questions, self.num_indices):
                added.setdefault(self.skill_of(i).position, []).append(i)
            self._added = added
        return self._added

    @staticmethod
    @lru_cache(maxsize=None)
    def revision_date(r: int) -> str:
        return (BASE_DATE + timedelta(days=r)).isoformat()

    # ---- roles -----------------------------------------------------------------------
    def _digest(self, i: int, version: int = 0) -> bytes:
        return hashlib.blake2b(f"{self.config.seed}|{i}|{version}".encode(), digest_size=32).digest()

    def _raw_role(self, i: int, digest: bytes | None = None) -> str:
        d = digest or self._digest(i)
        u = int.from_bytes(d[:7], "little") / 72057594037927936.0
        near_boost, template_boost = self._boost[self._skill_slot(i)]
        near, template = NEAR_RATE * near_boost, TEMPLATE_RATE * template_boost
        if u < EXACT_RATE:
            return "exact"
        if u < EXACT_RATE + near:
            return "near"
        if u < EXACT_RATE + near + template:
            return "template"
        if u < EXACT_RATE + near + template + TEXT_ONLY_RATE:
            return "text_only"
        return "normal"

    def _reference(self, i: int, slot: int) -> int | None:
        """An earlier normal question of the same skill for a planted copy, or None."""
        sk = self._nonempty[slot]
        span = (i - sk.start) if i < self.config.questions else sk.count
        if span <= 0:
            return None
        h = hash64(self.config.seed, "ref", i)
        for attempt in range(4):
            j = sk.start + (h >> (attempt * 13)) % span
            if self._raw_role(j) == "normal":
                return j
        return None

    def role(self, i: int, digest: bytes | None = None) -> tuple[str, int | None]:
        """(role, reference index) with the fallback to normal applied."""
        r = self._raw_role(i, digest)
        if r in ("exact", "near", "template"):
            ref = self._reference(i, self._skill_slot(i))
            if ref is None:
                return "normal", None
            return r, ref
        return r, None

    # ---- content ---------------------------------------------------------------------
    def _rngs(self, i: int, version: int, digest: bytes | None = None):
        d = digest if digest is not None else self._digest(i, version)
        fb = int.from_bytes
        return Rng(fb(d[8:16], "little")), Rng(fb(d[16:24], "little")), Rng(fb(d[24:32], "little"))

    def _content(self, slot: int, t: Rng, c: Rng, o: Rng) -> F.Content:
        fam = self._family[slot]
        k = fam.fixed_k or F.pick_k(o, fam.kdist)
        return fam.fn(t, c, o, self._nonempty[slot], k)

    def question(self, i: int) -> DemoQuestion:
        """The question at index ``i`` (present or not; see ``is_present``)."""
        if not 0 <= i < self.num_indices:
            raise IndexError(f"question index {i} out of range 0..{self.num_indices - 1}")
        slot = self._skill_slot(i)
        sk = self._nonempty[slot]
        digest = self._digest(i)
        role, ref = self.role(i, digest)
        near_variant = template_change = None
        dup_of = template_of = None
        if role == "normal" or role == "text_only":
            version, last = self._edits(i) if self.config.revision else (0, 0)
            t, c, o = self._rngs(i, version, digest if version == 0 else None)
            if role == "normal":
                content = self._content(slot, t, c, o)
            else:
                fam = self._family[slot]
                k = fam.fixed_k or F.pick_k(o, fam.kdist)
                content = F.text_only(sk.subject, t, c, o, k)
        else:
            version, last = self._edits(ref)
            last = max(last, self.birth(i))
            if role == "template":
                content, template_change = self._template(slot, i, ref, version)
                if content is None:
                    role, ref = "normal", None
                    version, last = self._edits(i)
                    content = self._content(slot, *self._rngs(i, version))
                else:
                    template_of = ref
            else:
                content = self._content(slot, *self._rngs(ref, version))
                dup_of = ref
                if role == "near":
                    near_variant = self._near(content, i)
        return self._assemble(i, sk, content, role, dup_of, near_variant, template_of, template_change, version, last)

    def _template(self, slot: int, i: int, ref: int, version: int):
        root = self._content(slot, *self._rngs(ref, version))
        root_id = _identity(root)
        root_shown = _semantic_images(root)
        if self._family[slot].colour_variants and self._first_sibling(i, ref):
            recoloured = _recolour(root, hash64(self.config.seed, "tcolour-pick", i))
            if recoloured is not None and _identity(recoloured) != root_id:
                return recoloured, "colour"
        first = "image" if hash64(self.config.seed, "tchange", i) & 1 else "options"
        for change in (first, "options" if first == "image" else "image"):
            # an image change may redraw the content a few times: a draw that only restyles
            # (same things, other colour or placement) is the same question, not a sibling
            for attempt in range(TEMPLATE_IMAGE_ATTEMPTS if change == "image" else 1):
                t, c, o = self._rngs(ref, version)
                if change == "image":
                    c = self._rngs(i, 0)[1] if attempt == 0 else self._template_content_rng(i, attempt)
                else:
                    o = self._rngs(i, 0)[2]
                content = self._content(slot, t, c, o)
                if compose_text(content) != compose_text(root):
                    continue  # the text must stay the same for a templated sibling
                if change == "options" and _image_keys(content) != _image_keys(root):
                    continue
                if change == "image" and _semantic_images(content) == root_shown:
                    continue  # only restyled: the pictures must show something else
                if _identity(content) != root_id:
                    return content, change
        return None, None

    def _first_sibling(self, i: int, ref: int) -> bool:
        """Whether no question between ``ref`` and ``i`` is a templated sibling of ``ref`` (only the
        first sibling of a question swaps colours: two would swap the same ones)."""
        sk = self.skill_of(i)
        between = range(ref + 1, min(i, sk.start + sk.count))
        added = [j for j in self._added_by_skill().get(sk.position, ()) if j < i] if i >= self.config.questions else []
        return not any(self.role(j) == ("template", ref) for j in (*between, *added))

    def _template_content_rng(self, i: int, attempt: int) -> Rng:
        d = hashlib.blake2b(f"{self.config.seed}|{i}|template-image|{attempt}".encode(), digest_size=8).digest()
        return Rng(int.from_bytes(d, "little"))

    def _near(self, content: F.Content, i: int) -> str:
        prose = "".join(s for s in content.segs if s.__class__ is str)
        applicable = ["whitespace", "case", "nbsp", "zero_width"]
        if content.option_order == "shuffled":  # "B, C, A" is no copy of labels "A, B, C" nor "All of the above" first
            applicable.append("option_order")
        if content.image is not None or any(isinstance(x, ImageSpec) for x in content.options):
            applicable += ["jpeg", "resize", "rescan"]
        if any(_page_tex(seg) for seg in _all_segments(content)):
            applicable += ["tex_spacing"] * 4
        if content.option_order == F.FIGURE_LABELS:
            applicable += ["label_punct"] * 8
        if unicodedata.normalize("NFD", prose) != prose:
            applicable += ["nfd", "nfd"]
        if " " not in prose:
            applicable = [v for v in applicable if v not in ("whitespace", "nbsp", "zero_width")]
        if prose.lower() == prose:
            applicable = [v for v in applicable if v != "case"]
        variant = applicable[hash64(self.config.seed, "near", i) % len(applicable)]
        if variant in ("jpeg", "resize", "rescan"):
            if content.image is not None:
                content.image = content.image.with_variant(variant)
            else:
                content.options = [x.with_variant(variant) if isinstance(x, ImageSpec) else x for x in content.options]
            if variant == "rescan" and content.option_order == "shuffled":  # a re-scanned copy of another page
                n = len(content.options)
                content.options = content.options[1:] + content.options[:1]
                content.answer = (content.answer - 1) % n
        elif variant == "option_order":
            n = len(content.options)
            content.options = content.options[1:] + content.options[:1]
            content.answer = (content.answer - 1) % n
        elif variant == "tex_spacing":
            content.segs = [_respell(seg) for seg in content.segs]
            content.options = [x if isinstance(x, ImageSpec) else [_respell(seg) for seg in x] for x in content.options]
        elif variant == "label_punct":
            content.options = _relabel(content.options, hash64(self.config.seed, "relabel", i))
        else:
            content.segs = _vary_prose(content.segs, variant)
        return variant

    def _assemble(self, i, sk, content, role, dup_of, near_variant, template_of, template_change, version, last):
        problem, problem_latex, formulas = F.compose(content.segs)
        options = content.options
        image = content.image
        alts = [ALT_BY_KIND.get(image.kind, "picture")] if image is not None else []
        if options[0].__class__ is ImageSpec:
            choices = choices_latex = choice_formulas = None
            choice_images = tuple(options)
            alts += [ALT_BY_KIND.get(x.kind, "picture") for x in choice_images]
        else:
            texts, latexes, forms = [], [], []
            for x in options:
                if len(x) == 1 and x[0].__class__ is str:
                    texts.append(x[0])
                    latexes.append(x[0])
                    forms.append(())
                else:
                    a, b, c = F.compose(x)
                    texts.append(a)
                    latexes.append(b)
                    forms.append(c)
            choices, choices_latex, choice_formulas = tuple(texts), tuple(latexes), tuple(forms)
            choice_images = None
        return DemoQuestion(
            i, self._path_prefix[sk.position] + str(i) + self._path_suffix[sk.position], sk.subject, sk.grade,
            sk.skill, sk.layout, problem, problem_latex, formulas, image, choices, choices_latex, choice_formulas,
            choice_images, content.answer, sk.family + "/" + content.tkey, role, dup_of, near_variant, template_of,
            template_change, role == "text_only", content.tags.target, content.tags.content, content.tags.thinking,
            version, self.revision_date(last), tuple(alts), content.option_order)


def compose_text(content: F.Content) -> str:
    return F.compose(content.segs)[0]


def _image_keys(content: F.Content) -> tuple:
    keys = [content.image.key if content.image is not None else ""]
    keys += [x.key for x in content.options if isinstance(x, ImageSpec)]
    return tuple(keys)


def _semantic_images(content: F.Content) -> tuple:
    """What the images show, ignoring the style: the per-image seed (the last parameter) and
    the fill colour (a top-level colour-name parameter; a question never asks about it)."""
    specs = ([content.image] if content.image is not None else []) + [x for x in content.options if isinstance(x, ImageSpec)]
    return tuple(sorted(repr((s.kind, tuple(p for p in s.params[:-1] if not (p.__class__ is str and p in _STYLE_COLOURS)))) for s in specs))


_STYLE_COLOURS = frozenset(F.COLORS)


def _identity(content: F.Content) -> tuple:
    opts = sorted(x.key if isinstance(x, ImageSpec) else F.compose(x)[0] for x in content.options)
    return (compose_text(content), content.image.content_key if content.image else "", tuple(opts))


# ---- planted variants: TeX respelled, option labels repunctuated, colours swapped -----------------

def _all_segments(content: F.Content):
    yield from content.segs
    for x in content.options:
        if not isinstance(x, ImageSpec):
            yield from x


def _page_tex(seg) -> bool:
    """A formula the page already writes in TeX (``$...$`` or ``\\( ... \\)``)."""
    return seg.__class__ is tuple and seg[0].startswith(("$", "\\("))


def respell_tex(latex: str) -> str:
    """The same formula as another writer would type it: operators spaced the other way,
    ``( )`` as ``\\left( \\right)``, braces dropped around one-token scripts and fractions."""
    s = re.sub(r"\^\{(\w)\}", r"^\1", latex)
    s = re.sub(r"\\frac\{(\w)\}\{(\w)\}", r"\\frac \1\2", s)
    s = _bare_denominators(s)
    if "(" in s and ")" in s and "\\left" not in s:
        s = s.replace("(", "\\left(").replace(")", "\\right)")
    if re.search(r" [+=-] ", s):
        s = re.sub(r" *([+=-]) *", r"\1", s)
    else:
        s = re.sub(r"(?<=[\w})])([+=])(?=[\w\\({])", r" \1 ", s)
    return s


def _bare_denominators(s: str) -> str:
    """``\\frac{...}{2}`` as ``\\frac{...}2``."""
    out, pos = [], 0
    while (start := s.find("\\frac{", pos)) >= 0:
        depth, j = 0, start + 5
        while j < len(s):
            depth += {"{": 1, "}": -1}.get(s[j], 0)
            j += 1
            if depth == 0:
                break
        if re.match(r"\{\w\}", s[j:j + 3]):
            out.append(s[pos:j] + s[j + 1])
            pos = j + 3
        else:
            out.append(s[pos:j])
            pos = j
    out.append(s[pos:])
    return "".join(out)


def _respell(seg):
    if not _page_tex(seg):
        return seg
    latex = respell_tex(seg[1])
    shown = f"\\( {latex} \\)" if seg[0].startswith("$") else f"${latex}$"
    return (shown, latex)


_OPTION_LABEL = re.compile(r"^\(?([A-Ea-e])\)?\.?$")


def _relabel(options: list, h: int) -> list:
    """Figure-label options ("A", "(A)", "A.", "(a)") in another of the label styles."""
    styles = [style for style, _ in F.LABEL_STYLES]
    shown = options[0][0] if options and options[0] and options[0][0].__class__ is str else ""
    letter = _OPTION_LABEL.match(shown)
    current = next((j for j, st in enumerate(styles) if letter and st.format(L=letter.group(1).upper(),
                                                                              l=letter.group(1).lower()) == shown), 0)
    style = styles[(current + 1 + h % (len(styles) - 1)) % len(styles)]
    out = []
    for x in options:
        m = _OPTION_LABEL.match(x[0]) if len(x) == 1 and x[0].__class__ is str else None
        out.append([style.format(L=m.group(1).upper(), l=m.group(1).lower())] if m else x)
    return out


SWAP_COLOURS = (*F.COLORS, "yellow")
_COLOUR_WORD = re.compile(r"\b(" + "|".join(SWAP_COLOURS) + r")\b")


def _swap_deep(x, a: str, b: str):
    if x.__class__ is str:
        return b if x == a else a if x == b else x
    if x.__class__ is tuple:
        return tuple(_swap_deep(y, a, b) for y in x)
    return x


def _swap_words(text: str, a: str, b: str) -> str:
    return _COLOUR_WORD.sub(lambda m: b if m.group(1) == a else a if m.group(1) == b else m.group(1), text)


def _recolour(content: F.Content, h: int) -> F.Content | None:
    """The same question with two colours swapped everywhere, in the words and in the pictures
    (so the pictures differ only in colour): a colour named in the text (or the answer), and
    another that the pictures or options use, or any other. None when no colour named in the
    words is drawn."""
    def strings(x):
        if x.__class__ is str:
            yield x
        elif x.__class__ is tuple:
            for y in x:
                yield from strings(y)

    specs = ([content.image] if content.image is not None else []) + [x for x in content.options if isinstance(x, ImageSpec)]
    drawn = {w for spec in specs for w in strings(spec.params) if w in SWAP_COLOURS}
    words = [m.group(1) for seg in content.segs if seg.__class__ is str for m in _COLOUR_WORD.finditer(seg)]
    answer = content.options[content.answer]
    if not isinstance(answer, ImageSpec):
        words += [m.group(1) for seg in answer if seg.__class__ is str for m in _COLOUR_WORD.finditer(seg)]
    named = [w for w in words if w in drawn]
    if not named:
        return None
    a = named[0]
    used = sorted({*drawn, *(m.group(1) for x in content.options if not isinstance(x, ImageSpec)
                             for seg in x if seg.__class__ is str for m in _COLOUR_WORD.finditer(seg))} - {a})

    def grey(name: str) -> float:
        r, g, b_ = RGB[name]
        return 0.299 * r + 0.587 * g + 0.114 * b_

    # the partner nearest in grey: the pictures then differ in colour and hardly in grey
    pool = used or [c for c in SWAP_COLOURS if c != a]
    b = min(pool, key=lambda c: (round(abs(grey(c) - grey(a)) / 8), (hash64(h, c) & 0xFFFF)))

    def segs(xs):
        return [_swap_words(seg, a, b) if seg.__class__ is str else seg for seg in xs]

    def spec(x):
        return ImageSpec(x.kind, _swap_deep(x.params, a, b), x.variant)

    options = [spec(x) if isinstance(x, ImageSpec) else segs(x) for x in content.options]
    image = spec(content.image) if content.image is not None else None
    return F.Content(segs(content.segs), image, options, content.answer, content.tags, content.tkey, content.option_order)


def _vary_prose(segs: list, variant: str) -> list:
    out = []
    done = False
    for s in segs:
        if s.__class__ is not str:
            out.append(s)
            continue
        if variant == "case":
            s = s.lower() if s.lower() != s else s.upper()
        elif variant == "nfd":
            s = unicodedata.normalize("NFD", s)
        elif not done and " " in s:
            if variant == "whitespace":
                a, _, b = s.partition(" ")
                s = a + "  " + b
                if " " in s.strip():
                    head, _, tail = s.rpartition(" ")
                    s = head + "\n" + tail
            elif variant == "nbsp":
                s = s.replace(" ", "\u00a0", 1)
            elif variant == "zero_width":
                s = s.replace(" ", "\u200b ", 1)
            done = True
        out.append(s)
    return out


ALT_BY_KIND = {
    "objects": "a group of pictures", "two_groups": "two groups of pictures", "shape": "a shape",
    "fraction": "a shape divided into equal parts", "bars": "a bar graph", "clock": "an analog clock",
    "numberline": "a number line", "array": "an array of dots", "angle": "an angle", "triangle": "triangle ABC",
    "grid_rect": "a rectangle on a grid", "line_graph": "a graph on a coordinate plane",
    "coord": "a point on a coordinate plane", "spinner": "a spinner", "pattern": "a pattern of shapes",
    "inequality": "a number line", "square_model": "a square made of unit squares", "magnets": "two bar magnets",
    "magnet_pairs": "two pairs of magnets", "tool": "a laboratory tool", "thermometer": "a thermometer",
    "thermometers": "thermometers", "icon": "a picture", "moon": "the Moon", "cylinder": "a graduated cylinder",
    "circuit": "an electric circuit", "balance": "a pan balance", "map": "a map", "cars": "two cars",
    "gears": "gears", "machine": "a simple machine", "bridges": "towers", "device": "a device",
    "keys": "keyboard keys", "fileicon": "a file icon", "gate": "a logic gate symbol", "leds": "a row of lamps",
    "flowshape": "a flowchart", "network": "a network diagram", "labelled_figures": "labelled figures",
}


def render_image(spec: ImageSpec) -> bytes:
    """The image's bytes (PNG, or JPEG for the ``jpeg`` variant); deterministic."""
    return render(spec)
