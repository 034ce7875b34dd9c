"""``stemforge ui`` listens on 127.0.0.1 unless told otherwise, and says in one line what another
address means (issue 30)."""

from __future__ import annotations

import os

import pytest

from pipelines.orchestration import cli


@pytest.fixture
def launched(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(os, "execv", lambda exe, command: calls.append(command))
    monkeypatch.setattr(os, "chdir", lambda path: None)
    monkeypatch.setattr(cli, "prepare_instance", lambda home: None)
    return calls


def test_the_ui_is_bound_to_loopback_by_default(launched, capsys, tmp_path):
    args = cli.build_parser().parse_args(["ui", "--home", str(tmp_path)])
    cli.cmd_ui(args)
    (command,) = launched
    assert command[command.index("-h") + 1] == "127.0.0.1"
    assert capsys.readouterr().err == ""


def test_exposing_the_ui_says_what_it_means_in_one_line(launched, capsys, tmp_path):
    cli.cmd_ui(cli.build_parser().parse_args(["ui", "--home", str(tmp_path), "--host", "0.0.0.0"]))
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "0.0.0.0" in err and "anyone who reaches it can launch builds" in err
    assert "this machine only" in " ".join(cli.build_parser()._subparsers._group_actions[0].choices["ui"].format_help().split())
