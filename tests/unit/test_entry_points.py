"""The names users and the Agent Server load by path resolve: the example's graph and store
factory, the console script and ``python -m mongostore``."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_agent_server_example_names_paths_that_load() -> None:
    config = json.loads((ROOT / "examples" / "langgraph.json").read_text())
    for dotted in (config["graphs"]["memory"].replace(":", "."), config["store"]["path"]):
        module, _, attr = dotted.rpartition(".")
        assert getattr(importlib.import_module(module), attr) is not None, dotted


def test_the_console_script_and_python_m_mongostore() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = project["project"]["scripts"]["mongostore"]
    module, _, attr = target.partition(":")
    from mongostore.tools.cli.app import main

    assert getattr(importlib.import_module(module), attr) is main
    argv = [sys.executable, "-m", "mongostore", "--version"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("mongostore "), done.stdout + done.stderr
