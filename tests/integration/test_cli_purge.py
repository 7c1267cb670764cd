"""``mongostore purge`` (issue 36.1): asks on a terminal, needs ``--yes`` otherwise, ``--dry-run`` counts,
``--json`` prints the report; never a sibling prefix."""

from __future__ import annotations

import io
import sys

import pytest
from conftest import Run

from mongostore.tools.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.usefixtures("clean_store_env")


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(capsys)


class Terminal(io.StringIO):
    """stdin as a terminal on which the user types ``answer``."""

    def isatty(self) -> bool:
        return True


def fill(run: Run) -> None:
    for ns in ("users.alice", "users.alice.notes", "users.al", "users.bob"):
        assert run("put", ns, "k", '{"text": "hello"}')[0] == EXIT_OK


def namespaces(run: Run) -> list[list[str]]:
    return [list(n) for n in run.json("ls")["namespaces"]]


def test_dry_run_then_yes_with_json(run: Run) -> None:
    fill(run)
    report = run.json("purge", "users.alice", "--dry-run")
    assert (report["items"], report["vectors"], report["dry_run"]) == (2, 2, True)
    assert len(namespaces(run)) == 4
    report = run.json("purge", "users.alice", "--yes")
    assert (report["namespace"], report["items"], report["vectors"], report["dry_run"]) == (
        ["users", "alice"],
        2,
        2,
        False,
    )
    assert sorted(namespaces(run)) == [["users", "al"], ["users", "bob"]]


def test_without_a_terminal_it_needs_yes(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(run)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    code, _, err = run("purge", "users.alice")
    assert code == EXIT_USAGE and "--yes" in err
    assert len(namespaces(run)) == 4


@pytest.mark.parametrize(
    ("answer", "code", "left"), [("y\n", EXIT_OK, 2), ("n\n", EXIT_FAILURE, 4), ("\n", EXIT_FAILURE, 4)]
)
def test_on_a_terminal_it_asks_first(
    run: Run, monkeypatch: pytest.MonkeyPatch, answer: str, code: int, left: int
) -> None:
    fill(run)
    monkeypatch.setattr(sys, "stdin", Terminal(answer))
    got, out, err = run("purge", "users.alice")
    assert got == code
    assert "delete 2 item(s) and 2 vector(s) under users.alice" in err and "[y/N]" in err
    assert ("deleted 2 item(s)" in out) is (code == EXIT_OK)
    assert len(namespaces(run)) == left


def test_the_empty_prefix_is_refused(run: Run) -> None:
    code, _, err = run("purge", "", "--yes")
    assert code == EXIT_USAGE and "namespace prefix is empty" in err
