"""Lint and strict typing are part of the test command, so CI checks them too."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "src", "tests", "bench"],
        [sys.executable, "-m", "mypy", "--strict", "src"],
    ],
    ids=["ruff", "mypy-strict"],
)
def test_static_checks_pass(command: list[str]) -> None:
    if command[0] == "ruff" and shutil.which("ruff") is None:
        pytest.skip("ruff is not installed: pip install -e '.[test]'")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
