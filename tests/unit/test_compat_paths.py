"""The import paths users had before the tools moved to ``mongostore.tools`` still work."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OLD_PATHS = ["server", "embeddings", "analytics", "report", "demo", "agent_graph"]


@pytest.mark.parametrize("name", OLD_PATHS)
def test_an_old_module_re_exports_every_public_name_of_its_new_home(name: str) -> None:
    old = importlib.import_module(f"mongostore.{name}")
    new = importlib.import_module(f"mongostore.tools.{name}")
    assert old.__doc__ is not None and "compatibility" in old.__doc__
    assert old.__all__ == new.__all__
    for attr in new.__all__:
        assert getattr(old, attr) is getattr(new, attr), attr


def test_the_documented_old_names_resolve() -> None:
    from mongostore.analytics import collect_reports, scoped_pipeline
    from mongostore.embeddings import HashingEmbeddings, MiniLMEmbeddings
    from mongostore.server import StoreSettings, make_store, redact_uri
    from mongostore.tools.analytics import collect_reports as new_collect

    assert collect_reports is new_collect
    assert all(callable(x) for x in (scoped_pipeline, make_store, redact_uri))
    assert all(isinstance(x, type) for x in (HashingEmbeddings, MiniLMEmbeddings, StoreSettings))


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
