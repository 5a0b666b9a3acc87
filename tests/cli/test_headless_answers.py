"""A question with no terminal to ask and no flag that answers it: nothing is printed and it
stays unanswered (its default stands), so the action's own error says once what it decided
and why."""

from __future__ import annotations

import io

import pytest

from spark_tui.commands.terminal import answer
from spark_tui.service import events as ev


def test_without_a_terminal_the_question_stays_unanswered_and_nothing_is_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    question = ev.Question(ev.INSIST, "Launch refused by the fit check", "x cannot be checked")
    answer(question, {ev.INSIST: None})
    assert question.answer is None and question.yes is False
    assert capsys.readouterr().err == ""


def test_a_flag_answers_before_any_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    question = ev.Question(ev.INSIST, "t", "x")
    answer(question, {ev.INSIST: True})
    assert question.answer is True
