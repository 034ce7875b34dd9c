"""The CLI explains itself: every option has help with its default; a closed pipe ends quietly."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from pipelines.orchestration.cli import build_parser


def every_parser(parser: argparse.ArgumentParser, path: str = "stemforge"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from every_parser(child, f"{path} {name}")


def test_every_option_has_help_that_names_its_default():
    missing, no_default = [], []
    for path, parser in every_parser(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            name = f"{path} {'/'.join(action.option_strings) or action.dest}"
            if not action.help:
                missing.append(name)
                continue
            has_default = action.default not in (None, False, argparse.SUPPRESS) and action.option_strings
            if has_default and "default" not in action.help:
                no_default.append(name)
    assert missing == [] and no_default == []


def test_help_prints_the_real_default_values():
    parser = build_parser()
    build = next(p for path, p in every_parser(parser) if path == "stemforge build")
    text = " ".join(build.format_help().split())
    assert "(default: 0)" in text and "--crawl-revalidate" in text and "(default: lastmod)" in text
    assert "--exam-skills" in text and "(default: all)" in text
    args = parser.parse_args(["build", "--crawl-revalidate", "all", "--exam-skills", "paper"])
    assert args.crawl_revalidate == "all" and args.exam_skills == "paper"
    with pytest.raises(SystemExit):
        parser.parse_args(["build", "--crawl-revalidate", "sometimes"])


def test_a_closed_pipe_ends_quietly(tmp_path):
    # a long output into a reader that stops after one line
    code = (
        "import sys\n"
        "from pipelines.orchestration import cli\n"
        "def flood(args):\n"
        "    for i in range(200000):\n"
        "        print('row', i)\n"
        "    return 0\n"
        "cli.cmd_latex = flood\n"
        "real = cli.build_parser\n"
        "def parser():\n"
        "    p = real()\n"
        "    p.set_defaults(func=flood)\n"
        "    return p\n"
        "cli.build_parser = parser\n"
        "sys.exit(cli.main(['latex']))\n"
    )
    shell = f"{sys.executable} -c \"$CODE\" | head -n 1"
    done = subprocess.run(["bash", "-c", shell], env={"CODE": code, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=120)
    assert done.stdout == "row 0\n"
    assert done.stderr == ""
