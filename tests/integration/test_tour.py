"""The README's five-minute tour and its Python snippet, run as written, without a server.

Each tour line is one ``mongostore`` process (as a newcomer types them), in a fresh
working directory with the local store in a fresh ``MONGOSTORE_DATA_DIR``; every step's
output is checked, and the steps must see each other's writes. The command list is read
from README.md, so the tour and this test cannot drift apart: a new line without a check
here fails the test.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mongostore.tools.embeddings import MiniLMEmbeddings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not MiniLMEmbeddings.available(), reason="the tour installs the minilm extra"),
]


def tour_commands() -> list[str]:
    """The ``mongostore`` commands of the tour's first bash block, comments dropped, ``&&`` split."""
    section = README.split("## A five-minute tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    commands = []
    for line in block.group(1).splitlines():
        code = line.split("  #", 1)[0].strip()
        for part in code.split("&&"):
            part = part.strip()
            if part.startswith("mongostore"):
                commands.append(part)
    return commands


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONGOSTORE_") and k != "MONGODB_URI"}
    env["MONGOSTORE_DATA_DIR"] = str(tmp_path / "data")
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


Check = Callable[[subprocess.CompletedProcess[str], Path], None]


def ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def names_the_store(proc: subprocess.CompletedProcess[str], tmp: Path) -> None:
    assert f"local store {tmp / 'data' / 'mongostore.sqlite'}" in proc.stderr


def check_demo(p: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok(p)
    assert "I like pizza" in p.stdout and "The in-memory store is gone now" in p.stdout
    assert not (tmp / "data").exists()  # the demo stays in memory: the local store is untouched


def check_doctor(p: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok(p)
    assert str(tmp / "data") not in p.stderr  # named once, on the data file line
    assert p.stdout.count(str(tmp / "data")) == 1
    assert f"data file          {tmp / 'data' / 'mongostore.sqlite'}" in p.stdout
    assert "all-MiniLM-L6-v2" in p.stdout and p.stdout.rstrip().endswith("ok")


def check_put(key: str) -> Check:
    def check(p: subprocess.CompletedProcess[str], tmp: Path) -> None:
        ok(p)
        assert p.stdout.startswith("stored users.") and f"/ {key} in the local store" in p.stdout
        names_the_store(p, tmp)  # once, on stderr
        assert str(tmp / "data") not in p.stdout

    return check


def check_get(p: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok(p)
    assert "key         pizza" in p.stdout and '"text": "I like pizza"' in p.stdout  # written by another process


def check_search(p: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok(p)
    first = p.stdout.splitlines()[2]
    assert first.startswith("users.alice.memories  pizza") and float(first.split()[2]) > 0.3


def check_ls(p: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok(p)
    assert p.stdout.splitlines() == ["users.alice", "users.bob"]


def check_stats(p: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok(p)
    assert "store: the local store" in p.stdout and str(tmp / "data") not in p.stdout
    names_the_store(p, tmp)
    assert re.search(r"^alice\s+1\s+1$", p.stdout, re.M) and re.search(r"^bob\s+1\s+1$", p.stdout, re.M)
    assert re.search(r"^preference\s+1$", p.stdout, re.M)


def check_report(p: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok(p)
    page = (tmp / "work" / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "alice" in page


def check_export(p: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok(p)
    lines = [json.loads(x) for x in (tmp / "work" / "memories.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(x["key"] for x in lines) == ["hike", "pizza"]
    assert "exported 2 item(s) under users" in p.stderr


def check_rm(p: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok(p)
    assert p.stdout.startswith("deleted users.bob.memories / hike in the local store")


def check_import(p: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok(p)
    assert "import: 2 line(s) read, 2 item(s) written, 0 rejected" in p.stdout


CHECKS: dict[str, Check] = {
    "mongostore demo": check_demo,
    "mongostore doctor": check_doctor,
    "mongostore put users.alice.memories pizza": check_put("pizza"),
    "mongostore put users.bob.memories hike": check_put("hike"),
    "mongostore get users.alice.memories pizza": check_get,
    "mongostore search users.alice": check_search,
    "mongostore ls": check_ls,
    "mongostore stats users": check_stats,
    "mongostore report users": check_report,
    "mongostore export users": check_export,
    "mongostore rm users.bob.memories hike": check_rm,
    "mongostore import memories.jsonl": check_import,
}


def check_for(command: str) -> Check:
    matches = [prefix for prefix in CHECKS if command.startswith(prefix)]
    assert matches, f"README tour step {command!r} has no check in tests/integration/test_tour.py"
    return CHECKS[max(matches, key=len)]


def git(work: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "user.name=tour", "-c", "user.email=tour@example.com", *args],
        cwd=work, capture_output=True, text=True, timeout=60, check=True,
    )
    return proc.stdout


def test_the_five_minute_tour_without_a_server(tmp_path: Path) -> None:
    commands = tour_commands()
    assert len(commands) >= 10 and commands[0] == "mongostore demo"
    # "From the repository root": a repository with the project's .gitignore, to see what the tour leaves.
    work = tmp_path / "work"
    work.mkdir()
    (work / ".gitignore").write_text((ROOT / ".gitignore").read_text(encoding="utf-8"), encoding="utf-8")
    git(work, "init", "-q")
    git(work, "add", ".gitignore")
    git(work, "commit", "-q", "-m", "the repository")
    env = env_for(tmp_path)
    for command in commands:
        argv = [sys.executable, "-m", "mongostore", *shlex.split(command)[1:]]
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=180, check=False)
        check_for(command)(proc, tmp_path)
    # After the round trip: both items are back, in the file every command shared.
    final = subprocess.run(
        [sys.executable, "-m", "mongostore", "search", "users", "--json"],
        cwd=work, env=env, capture_output=True, text=True, timeout=180, check=False,
    )
    ok(final)
    assert sorted(i["key"] for i in json.loads(final.stdout)["items"]) == ["hike", "pizza"]
    # The tour leaves nothing untracked in the repository (its files are ignored, like the venv).
    assert git(work, "status", "--porcelain", "--untracked-files=all") == ""


def test_the_readme_python_snippet_without_a_server(tmp_path: Path) -> None:
    section = README.split("### Without a server", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    script = tmp_path / "snippet.py"
    script.write_text(block.group(1), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env_for(tmp_path), capture_output=True, text=True,
        timeout=180, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "{'text': 'I like pizza'}" in proc.stdout and "I like hiking" in proc.stdout
    assert (tmp_path / "data" / "mongostore.sqlite").is_file()  # MongoStore.local() kept it
