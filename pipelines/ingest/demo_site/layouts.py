"""HTML of the demo site in three layouts, as three different quiz sites would write it.

- ``ixl`` (science, math, engineering): div-based practice page; subject, grade and skill
  in ``data-*`` attributes of ``<main id="practice">`` and in the breadcrumbs; options in
  ``.choice-tile`` elements; the answer in ``<section class="explanation">`` as
  ``data-answer-index``.
- ``proprofs`` (technology, part 1): XHTML-era tables; options in ``table.options_table``
  rows lettered A., B., ...; the answer revealed as a letter in ``div.answer_box``.
- ``triviaplaza`` (technology, part 2): ``<article class="trivia-question">`` with an
  ``<ol class="trivia-answers">`` of buttons; the answer in the page's schema.org JSON-LD
  (``acceptedAnswer.position``, 1-based).

Every page links to ``/members/`` and ``/print/`` (disallowed in robots.txt).
"""

from __future__ import annotations

import json
from html import escape

from pipelines.ingest.demo_site.generator import DemoQuestion, DemoSite, SkillInfo, question_path
from pipelines.ingest.demo_site.imagespec import ImageSpec

SUBJECT_TITLE = {"science": "Science", "technology": "Technology", "engineering": "Engineering", "math": "Math"}
PAGE_SIZE = 10


def grade_title(grade: str | None) -> str:
    if grade is None:
        return ""
    special = {"pre-k": "Pre-K", "kindergarten": "Kindergarten"}
    return special.get(grade, grade.replace("-", " ").title())


def skill_title(slug: str) -> str:
    t = slug.replace("-", " ")
    return t[:1].upper() + t[1:]


def e(text: str) -> str:
    return escape(text, quote=True)


def image_path(layout: str, index: int, slot: str, spec: ImageSpec) -> str:
    """URL path of an image on a question page; ``slot`` is 'p' or the option position."""
    if layout == "ixl":
        return f"/img/{index}/{slot}-{spec.key}.{spec.extension}"
    if layout == "proprofs":
        return f"/quiz-school/images/{index}_{slot}_{spec.key}.{spec.extension}"
    return f"/en/media/{index}/{slot}-{spec.key}.{spec.extension}"


def skill_path(sk: SkillInfo) -> str:
    if sk.layout == "ixl":
        return f"/{sk.subject}/{sk.grade}/{sk.skill}/"
    if sk.layout == "proprofs":
        return f"/quiz-school/{sk.skill}/"
    return f"/en/trivia/{sk.skill}/"


def _img(src: str, alt: str, spec: ImageSpec, extra: str = "") -> str:
    return f'<img src="{e(src)}" alt="{e(alt)}"{extra}>'


def _problem_html(text: str, nbsp_entity: bool) -> str:
    out = e(text)
    if nbsp_entity:
        out = out.replace("\u00a0", "&nbsp;")
    return out


def question_page(site: DemoSite, q: DemoQuestion) -> str:
    if q.layout == "ixl":
        return _ixl_question(site, q)
    if q.layout == "proprofs":
        return _proprofs_question(site, q)
    return _trivia_question(site, q)


def _alts(q: DemoQuestion):
    alts = list(q.image_alts)
    palt = alts.pop(0) if q.problem_image is not None else None
    return palt, alts


def _ixl_question(site: DemoSite, q: DemoQuestion) -> str:
    palt, oalts = _alts(q)
    sk = site.skill_info(q.subject, q.grade, q.skill)
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        f"<title>{e(skill_title(q.skill))} | {e(grade_title(q.grade))} {SUBJECT_TITLE[q.subject]} | LearnDemo</title>\n",
        f"<link rel=\"canonical\" href=\"{e(q.path)}\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n</head>\n",
        "<body class=\"practice-page\">\n<header class=\"site-header\"><a class=\"logo\" href=\"/\">LearnDemo</a>\n",
        "<nav class=\"top-nav\"><a href=\"/math/\">Math</a> <a href=\"/science/\">Science</a> ",
        "<a href=\"/engineering/\">Engineering</a> <a href=\"/members/progress\">My progress</a></nav></header>\n",
        "<nav class=\"breadcrumbs\" aria-label=\"breadcrumb\"><ol>",
        f"<li><a href=\"/{q.subject}/\">{SUBJECT_TITLE[q.subject]}</a></li>",
        f"<li><a href=\"/{q.subject}/{q.grade}/\">{e(grade_title(q.grade))}</a></li>",
        f"<li><a href=\"{e(skill_path(sk))}\">{e(skill_title(q.skill))}</a></li></ol></nav>\n",
        f"<main id=\"practice\" data-subject=\"{q.subject}\" data-grade=\"{e(q.grade)}\" data-skill=\"{e(q.skill)}\">\n",
        f"<div class=\"question-area\" data-question-id=\"{q.index}\">\n",
        f"  <div class=\"question-text\"><p>{_problem_html(q.problem, True)}</p></div>\n",
    ]
    if q.problem_image is not None:
        src = image_path("ixl", q.index, "p", q.problem_image)
        parts.append(f"  <div class=\"question-image\">{_img(src, palt, q.problem_image)}</div>\n")
    kind = "text" if q.choices is not None else "image"
    parts.append(f"  <div class=\"answer-choices choices-{kind}\" role=\"radiogroup\">\n")
    for j in range(q.num_choices):
        if q.choices is not None:
            inner = f"<span class=\"choice-text\">{e(q.choices[j])}</span>"
        else:
            spec = q.choice_images[j]
            inner = _img(image_path("ixl", q.index, str(j), spec), oalts[j], spec)
        parts.append(f"    <div class=\"choice-tile\" role=\"radio\" data-index=\"{j}\">{inner}</div>\n")
    parts.append("  </div>\n  <button class=\"submit-button\" type=\"button\">Submit</button>\n</div>\n")
    answer = (f"<span class=\"answer-text\">{e(q.choices[q.answer_idx])}</span>" if q.choices is not None
              else f"<span class=\"answer-text\">option {q.answer_idx + 1}</span>")
    parts += [
        "<section class=\"explanation\" aria-label=\"Explanation\" hidden>\n<h2>Solution</h2>\n",
        f"<div class=\"correct-answer\" data-answer-index=\"{q.answer_idx}\">The correct answer is: {answer}</div>\n",
        "</section>\n",
        f"<p class=\"tools\"><a class=\"print-link\" href=\"/print{e(q.path)}\">Print this question</a></p>\n",
        "</main>\n<footer class=\"site-footer\">&copy; LearnDemo &middot; a demo site for testing</footer>\n</body>\n</html>\n",
    ]
    return "".join(parts)


LETTERS = "ABCDE"


def _proprofs_question(site: DemoSite, q: DemoQuestion) -> str:
    palt, oalts = _alts(q)
    sk = site.skill_info(q.subject, q.grade, q.skill)
    title = skill_title(q.skill)
    parts = [
        "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\" \"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n",
        "<html xmlns=\"http://www.w3.org/1999/xhtml\">\n<head>\n",
        "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=utf-8\" />\n",
        f"<title>{e(title)} Quiz - Question {q.index} - QuizSchool Demo</title>\n</head>\n<body>\n",
        "<div id=\"wrapper\">\n<div id=\"header\"><a href=\"/quiz-school/\"><b>QuizSchool</b></a> | <a href=\"/members/login.php\">Login</a></div>\n",
        "<div class=\"bread_crumb\"><a href=\"/quiz-school/\">Quizzes</a> &raquo; ",
        f"<a href=\"/quiz-school/topic/{q.subject}/\">{SUBJECT_TITLE[q.subject]}</a> &raquo; ",
        f"<a href=\"{e(skill_path(sk))}\">{e(title)}</a></div>\n",
        "<div id=\"quiz_container\">\n<table class=\"question_table\" cellpadding=\"4\" cellspacing=\"0\" border=\"0\">\n",
        f"<tr><td class=\"qnum\" valign=\"top\">Q{q.index}.</td><td class=\"question_text\">{_problem_html(q.problem, False)}</td></tr>\n",
    ]
    if q.problem_image is not None:
        src = image_path("proprofs", q.index, "p", q.problem_image)
        parts.append(f"<tr><td></td><td class=\"question_pic\"><img alt=\"{e(palt)}\" border=\"0\" src=\"{e(src)}\" /></td></tr>\n")
    parts.append("</table>\n<table class=\"options_table\" cellpadding=\"3\" width=\"100%\">\n")
    for j in range(q.num_choices):
        if q.choices is not None:
            cell = f"<td class=\"opt_text\">{e(q.choices[j])}</td>"
        else:
            spec = q.choice_images[j]
            src = image_path("proprofs", q.index, str(j), spec)
            cell = f"<td class=\"opt_pic\"><img alt=\"{e(oalts[j])}\" border=\"0\" src=\"{e(src)}\" /></td>"
        parts.append(f"<tr class=\"option_row\"><td class=\"opt_letter\" width=\"24\">"
                     f"<input type=\"radio\" name=\"q{q.index}\" value=\"{LETTERS[j]}\" /> {LETTERS[j]}.</td>{cell}</tr>\n")
    answer_text = q.choices[q.answer_idx] if q.choices is not None else "(see picture)"
    parts += [
        "</table>\n<div class=\"answer_box\"><span class=\"lbl\">Correct Answer</span><br />\n",
        f"<span class=\"correct_opt\">{LETTERS[q.answer_idx]}.</span> <span class=\"correct_text\">{e(answer_text)}</span></div>\n",
        f"<p><a href=\"/print/quiz-school/{e(q.skill)}/question-{q.index}.html\">Printable version</a></p>\n",
        "</div>\n<div id=\"footer\">QuizSchool Demo</div>\n</div>\n</body>\n</html>\n",
    ]
    return "".join(parts)


def _trivia_question(site: DemoSite, q: DemoQuestion) -> str:
    palt, oalts = _alts(q)
    sk = site.skill_info(q.subject, q.grade, q.skill)
    title = skill_title(q.skill)
    accepted = {"@type": "Answer", "position": q.answer_idx + 1}
    if q.choices is not None:
        accepted["text"] = q.choices[q.answer_idx]
    ld = {"@context": "https://schema.org", "@type": "Quiz", "name": f"{title} trivia",
          "about": {"@type": "Thing", "name": SUBJECT_TITLE[q.subject]},
          "hasPart": [{"@type": "Question", "eduQuestionType": "Multiple choice", "text": q.problem,
                       "acceptedAnswer": accepted}]}
    ld_text = json.dumps(ld, ensure_ascii=False).replace("</", "<\\/")
    parts = [
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        f"<title>{e(title)} trivia question {q.index} | TriviaDemo</title>\n",
        f"<script type=\"application/ld+json\">{ld_text}</script>\n</head>\n<body>\n",
        "<div class=\"trivia-page\">\n<ul class=\"crumbs\">",
        "<li><a href=\"/en/\">Trivia</a></li>",
        f"<li><a href=\"/en/trivia/category/{q.subject}/\">{SUBJECT_TITLE[q.subject]}</a></li>",
        f"<li><a href=\"{e(skill_path(sk))}\">{e(title)}</a></li></ul>\n",
        f"<article class=\"trivia-question\" id=\"question-{q.index}\">\n",
    ]
    if q.problem_image is not None:
        src = image_path("triviaplaza", q.index, "p", q.problem_image)
        parts.append(f"<figure class=\"trivia-question__media\"><img class=\"trivia-img\" alt=\"{e(palt)}\" src=\"{e(src)}\" loading=\"lazy\">"
                     f"<figcaption>{e(palt)}</figcaption></figure>\n")
    parts.append(f"<p class=\"trivia-question__text\">{_problem_html(q.problem, False)}</p>\n<ol class=\"trivia-answers\" type=\"A\">\n")
    for j in range(q.num_choices):
        if q.choices is not None:
            inner = e(q.choices[j])
        else:
            spec = q.choice_images[j]
            inner = f"<img alt=\"{e(oalts[j])}\" src=\"{e(image_path('triviaplaza', q.index, str(j), spec))}\">"
        parts.append(f"<li class=\"trivia-answer\"><button type=\"button\" class=\"trivia-answer__btn\" data-pos=\"{j + 1}\">{inner}</button></li>\n")
    parts += [
        "</ol>\n<div class=\"trivia-reveal\" hidden><p>Did you know? Check your answer above.</p></div>\n</article>\n",
        f"<aside><a href=\"/members/scores\">My scores</a> &middot; <a href=\"/print/en/trivia/{e(q.skill)}/{q.index}/\">Print</a></aside>\n",
        "</div>\n</body>\n</html>\n",
    ]
    return "".join(parts)


# ---- listings and indexes ------------------------------------------------------------


def _simple_page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{e(title)}</title>\n</head>\n<body>\n<header><a href=\"/\">Home</a> "
            "<a href=\"/members/progress\">My progress</a></header>\n"
            f"<h1>{e(title)}</h1>\n{body}\n</body>\n</html>\n")


def home_page(site: DemoSite) -> str:
    items = "".join(f"<li><a href=\"/{s}/\">{SUBJECT_TITLE[s]}</a></li>" for s in ("math", "science", "engineering"))
    items += ("<li><a href=\"/quiz-school/topic/technology/\">Technology quizzes (QuizSchool)</a></li>"
              "<li><a href=\"/en/trivia/category/technology/\">Technology trivia (TriviaDemo)</a></li>")
    return _simple_page("Demo quiz sites", f"<ul class=\"subjects\">{items}</ul>")


def subject_page(site: DemoSite, subject: str) -> str | None:
    grades: list[str] = []
    for sk in site.skills():
        if sk.subject == subject and sk.layout == "ixl" and site.skill_questions(sk) and sk.grade not in grades:
            grades.append(sk.grade)
    if not grades:
        return None
    items = "".join(f"<li><a href=\"/{subject}/{g}/\">{e(grade_title(g))}</a></li>" for g in grades)
    return _simple_page(f"{SUBJECT_TITLE[subject]}", f"<ul class=\"grades\">{items}</ul>")


def grade_page(site: DemoSite, subject: str, grade: str) -> str | None:
    skills = [sk for sk in site.skills() if sk.subject == subject and sk.grade == grade and sk.layout == "ixl"
              and site.skill_questions(sk)]
    if not skills:
        return None
    items = "".join(f"<li><a href=\"{e(skill_path(sk))}\">{e(skill_title(sk.skill))}</a> "
                    f"<span class=\"count\">({len(site.skill_questions(sk))} questions)</span></li>" for sk in skills)
    return _simple_page(f"{grade_title(grade)} {SUBJECT_TITLE[subject]}", f"<ul class=\"skills\">{items}</ul>")


def topic_page(site: DemoSite, layout: str, subject: str) -> str | None:
    skills = [sk for sk in site.skills() if sk.subject == subject and sk.layout == layout and site.skill_questions(sk)]
    if not skills:
        return None
    items = "".join(f"<li><a href=\"{e(skill_path(sk))}\">{e(skill_title(sk.skill))}</a></li>" for sk in skills)
    return _simple_page(f"{SUBJECT_TITLE[subject]} quizzes", f"<ul class=\"quizzes\">{items}</ul>")


def skill_listing(site: DemoSite, sk: SkillInfo, page: int) -> str | None:
    """Page ``page`` (1-based) of a skill's questions, or None past the end."""
    idx = site.skill_questions(sk)
    pages = max(1, (len(idx) + PAGE_SIZE - 1) // PAGE_SIZE)
    if not idx or not 1 <= page <= pages:
        return None

    chunk = idx[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    items = "".join(f"<li><a href=\"{e(question_path(sk.layout, sk.subject, sk.grade, sk.skill, i))}\">Question {i}</a></li>"
                    for i in chunk)
    nav = []
    if page > 1:
        nav.append(f"<a rel=\"prev\" href=\"?page={page - 1}\">Previous</a>")
    if page < pages:
        nav.append(f"<a rel=\"next\" href=\"?page={page + 1}\">Next</a>")
    body = (f"<ul class=\"question-list\">{items}</ul>\n<nav class=\"pagination\">Page {page} of {pages} "
            + " ".join(nav) + "</nav>")
    return _simple_page(f"{skill_title(sk.skill)} ({grade_title(sk.grade) or SUBJECT_TITLE[sk.subject]})", body)
