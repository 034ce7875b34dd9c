"""Issue 30, point 1: a crawled site that stops matching its layout must fail the build, like a
file source that lands nothing usable, and the previous release stays (warehouse and export).

A loopback site with a layout file is built once (40 question pages); then every page changes
its markup so the layout's ``match`` finds nothing, and the rebuild must fail naming the source,
leaving the lake's export and the warehouse's questions as they were."""

from __future__ import annotations

import pytest

from pipelines.orchestration.run import run_build
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.warehouse import run_query
from support.builds import data_file_digests, home_instance
from support.images import real_png
from support.loopback_site import Site, page

LAYOUT = ("name: quizsite\nmatch: div.exercise\nquestion: div.exercise\ntext: p.question\nimage: img\n"
          "options: ul.choices > li\nanswer: {css: div.answer, is: text, joins_options: true}\n"
          "subject: {value: math}\nskill: {value: counting}\n")
SUBJECTS = ("science", "technology", "engineering", "math")


def _question(i: int, wrapper: str) -> str:
    return (f'<!doctype html><html><body><div class="{wrapper}"><p class="question">How many marbles are in bag {i} '
            f'if it holds {i * 3} and {i * 5} more were added?</p><img src="/img/{i}.png"><ul class="choices"><li>{i * 8}</li><li>{i * 8 + 1}</li>'
            f'<li>{i * 8 + 7}</li></ul><div class="answer">{i * 8}</div></div></body></html>')


def _routes(wrapper: str) -> dict:
    pages = [f"/q{i}.html" for i in range(40)]
    routes = {"/": page("<!doctype html><html><body>" + "".join(f'<a href="{p}">{p}</a>' for p in pages) + "</body></html>")}
    routes.update({p: page(_question(i, wrapper)) for i, p in enumerate(pages)})
    routes.update({f"/img/{i}.png": page(real_png(2000 + i, size=64), "image/png") for i in range(len(pages))})
    return routes


def test_a_site_that_stops_matching_its_layout_fails_the_build_and_keeps_the_release(tmp_path):
    layout = tmp_path / "quizsite.yaml"
    layout.write_text(LAYOUT)
    home = DataHome(tmp_path / "home")
    with Site(_routes("exercise")) as site, home_instance(home):
        settings = BuildSettings(home=str(home.root), sources=(f"{site.base_url}?layout={layout}",), models=("random",),
                                 crawl_revalidate="all")
        first = run_build(settings, progress=False)
        assert first.success, first.summary
        questions = run_query(home, "SELECT count(*) AS n FROM questions").rows[0][0]
        assert questions == 40, run_query(home, "SELECT stage, reason, count(*) FROM quarantine GROUP BY ALL").rows
        before = data_file_digests(home)
        site.routes.update(_routes("exercise-v2"))  # the site's redesign: the layout matches nothing
        second = run_build(settings, progress=False)
    assert not second.success, second.summary
    assert site.base_url in second.summary and "no question" in second.summary, second.summary
    assert run_query(home, "SELECT count(*) AS n FROM questions").rows[0][0] == questions
    after = data_file_digests(home)
    assert {k: v for k, v in after.items() if k.startswith("export/")} == {k: v for k, v in before.items() if k.startswith("export/")}
