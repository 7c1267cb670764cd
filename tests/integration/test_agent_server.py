"""The Agent Server store factory, in-process and behind a real ``langgraph dev``.

The slow test starts ``langgraph dev`` (``langgraph-cli[inmem]``) on a loopback
port with ``examples/langgraph.json``, whose ``"store": {"path":
"mongostore.tools.server.make_store"}`` replaces the server's own store, then drives it
with ``langgraph_sdk``: the store API and runs of the example graph. It runs twice:
on the documented default, no ``MONGODB_URI`` (the local store's file in a temp
``MONGOSTORE_DATA_DIR``; never with ``--allow-blocking``, so the server's blockbuster
refuses any blocking call our store makes on its event loop), and in memory
(``MONGODB_URI=mongomock://``). It proves the items landed in *our* store through the
server itself: the graph's
nodes report the class of ``runtime.store``, an item put through the SDK is
recalled by the graph, SDK searches return similarity scores (the server's
default in-memory store has no index and returns none), and the server log names
``mongostore.aio.AsyncMongoStore``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import PutOp

from mongostore import AsyncMongoStore, MongoStore
from mongostore.errors import ConfigurationError
from mongostore.tools.embeddings import HashingEmbeddings
from mongostore.tools.server import ServerUnreachableError, make_store, ttl_from_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TTL_VARIABLES = ("MONGOSTORE_TTL_MINUTES", "MONGOSTORE_TTL_REFRESH_ON_READ", "MONGOSTORE_TTL_SWEEP_MINUTES")


@pytest.fixture
def server_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "MONGODB_URI",
        "MONGOSTORE_DB",
        "MONGOSTORE_COLLECTION",
        "MONGOSTORE_DIMS",
        "MONGOSTORE_FIELDS",
        *TTL_VARIABLES,
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MONGOSTORE_DATA_DIR", str(tmp_path / "server-data"))  # never the user's own
    monkeypatch.setenv("MONGOSTORE_EMBED", "hashing")
    monkeypatch.setenv("MONGOSTORE_FIELDS", "text")


# --------------------------------------------------------------------------- the factory, in-process


async def test_factory_defaults_to_an_async_store(server_env: None) -> None:
    async with make_store() as store:
        assert isinstance(store, AsyncMongoStore)
        assert store.index_config is not None and store.index_config["fields"] == ["text"]
        assert isinstance(store.index_config["embed"], HashingEmbeddings)
        await store.aput(("u", "memories"), "k", {"text": "I like pizza"})
        hits = await store.asearch(("u",), query="pizza")
        assert hits[0].key == "k" and hits[0].score is not None
        assert "path_key" in (await store.status())["item_indexes"]  # setup() ran


async def test_factory_needs_no_test_extra(server_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pymongo_async_mock", None)  # import fails: the base install
    monkeypatch.setenv("MONGODB_URI", "mongomock://")
    async with make_store() as store:
        assert isinstance(store, AsyncMongoStore)
        await store.aput(("u", "memories"), "k", {"text": "I like pizza"})
        assert (await store.aget(("u", "memories"), "k")) is not None


async def test_factory_defaults_to_the_local_store_the_cli_reads(
    server_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MONGOSTORE_DATA_DIR", str(tmp_path))
    async with make_store() as store:
        await store.aput(("u", "memories"), "k", {"text": "I like pizza"})
    assert (tmp_path / "mongostore.sqlite").is_file()
    again = MongoStore.local(tmp_path, index={"dims": 384, "embed": HashingEmbeddings(384), "fields": ["text"]})
    got = again.get(("u", "memories"), "k")
    assert got is not None and got.value == {"text": "I like pizza"}


async def test_factory_fails_fast_and_in_one_line_on_an_unreachable_server(
    server_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MONGODB_URI", "mongodb://user:s3cret@127.0.0.1:1/")
    started = time.monotonic()
    with pytest.raises(ServerUnreachableError) as info:
        async with make_store():
            pass
    assert time.monotonic() - started < 5  # not the driver's 30 s server selection
    message = str(info.value)
    assert "\n" not in message and "127.0.0.1:1 (connection refused)" in message and "s3cret" not in message


async def test_factory_reads_the_environment(server_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONGODB_URI", "mongomock://")
    monkeypatch.setenv("MONGOSTORE_DB", "agents")
    monkeypatch.setenv("MONGOSTORE_COLLECTION", "mem")
    monkeypatch.setenv("MONGOSTORE_EMBED", "none")
    async with make_store() as store:
        assert store.index_config is None
        assert isinstance(store, AsyncMongoStore)
        assert store.collection.name == "mem" and store.collection.database.name == "agents"


async def test_factory_rejects_bad_settings(server_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONGOSTORE_EMBED", "acme:unknown-model")
    with pytest.raises(ValueError, match="MONGOSTORE_DIMS"):
        async with make_store():
            pass


def test_ttl_from_the_environment() -> None:
    assert ttl_from_env({}) is None
    assert ttl_from_env({"MONGOSTORE_TTL_MINUTES": " 90 "}) == {"default_ttl": 90.0, "default_for_none": True}
    assert ttl_from_env(
        {
            "MONGOSTORE_TTL_MINUTES": "1.5",
            "MONGOSTORE_TTL_REFRESH_ON_READ": "False",
            "MONGOSTORE_TTL_SWEEP_MINUTES": "0.5",
        }
    ) == {"default_ttl": 1.5, "default_for_none": True, "refresh_on_read": False, "sweep_interval_minutes": 0.5}
    assert ttl_from_env({"MONGOSTORE_TTL_REFRESH_ON_READ": "yes"}) == {"refresh_on_read": True}
    for name, raw in (
        ("MONGOSTORE_TTL_MINUTES", "soon"),
        ("MONGOSTORE_TTL_MINUTES", "0"),
        ("MONGOSTORE_TTL_MINUTES", "-5"),
        ("MONGOSTORE_TTL_MINUTES", "nan"),
        ("MONGOSTORE_TTL_MINUTES", "inf"),
        ("MONGOSTORE_TTL_MINUTES", "1e12"),
        ("MONGOSTORE_TTL_SWEEP_MINUTES", "0"),
        ("MONGOSTORE_TTL_REFRESH_ON_READ", "maybe"),
    ):
        with pytest.raises(ConfigurationError, match=name):
            ttl_from_env({name: raw})


async def test_factory_takes_its_ttl_from_the_environment_and_sweeps_the_local_store(
    server_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MONGOSTORE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MONGOSTORE_TTL_MINUTES", "0.01")  # 600 ms: the count below sees it first, even under load
    monkeypatch.setenv("MONGOSTORE_TTL_REFRESH_ON_READ", "false")
    monkeypatch.setenv("MONGOSTORE_TTL_SWEEP_MINUTES", "0.005")  # every 300 ms
    async with make_store() as store:
        assert store.ttl_config == {
            "default_ttl": 0.01,
            "default_for_none": True,
            "refresh_on_read": False,
            "sweep_interval_minutes": 0.005,
        }
        await store.aput(("u", "memories"), "short", {"text": "gone soon"})
        await store.aput(("u", "memories"), "kept", {"text": "stays"}, ttl=60)
        assert await store.collection.count_documents({}) == 2
        for _ in range(200):  # the sweeper (the local store has no TTL monitor) deletes it
            await asyncio.sleep(0.05)
            if await store.collection.count_documents({}) == 1:
                break
        assert [d["key"] for d in await store.collection.find({}, {"key": 1}).to_list()] == ["kept"]
    again = MongoStore.local(tmp_path)
    assert again.get(("u", "memories"), "short") is None and again.get(("u", "memories"), "kept") is not None


async def test_factory_gives_the_default_ttl_to_puts_that_say_nothing(
    server_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Agent Server's ``/store`` API passes ``ttl=None`` when the client gave none (the SDK's
    ``put_item`` always sends ``"ttl": null``), and a graph's ``PutOp`` has ``ttl=None`` unless it sets
    one: with ``MONGOSTORE_TTL_MINUTES`` both get the default; an explicit ttl is kept."""
    monkeypatch.setenv("MONGODB_URI", "mongomock://")
    monkeypatch.setenv("MONGOSTORE_TTL_MINUTES", "600")
    async with make_store() as store:
        await store.aput(("u", "memories"), "api", {"text": "as put_item sends it"}, index=None, ttl=None)
        await store.aput(("u", "memories"), "unsaid", {"text": "aput without ttl"})
        await store.aput(("u", "memories"), "own", {"text": "five minutes"}, ttl=5)
        await store.abatch([PutOp(("u", "memories"), "op", {"text": "as a graph node writes it"})])
        got = {d["key"]: d.get("ttl_minutes") async for d in store.collection.find({}, {"key": 1, "ttl_minutes": 1})}
        assert got == {"api": 600, "unsaid": 600, "own": 5, "op": 600}
        assert await store.collection.count_documents({"expires_at": {"$exists": True}}) == 4


async def test_the_example_graph_gives_its_memories_the_stores_default_ttl(tmp_path: Path) -> None:
    """The graph writes memories as ``PutOp`` s (one batch, one embedding call): it gives them the store's
    ``default_ttl`` itself, as ``aput`` would, so they expire on any store with a default, ours or not."""
    from mongostore.tools.demo import build_graph

    index = {"dims": 64, "embed": HashingEmbeddings(64), "fields": ["text"]}
    async with AsyncMongoStore.in_memory(index=index, ttl={"default_ttl": 30}) as store:
        graph = build_graph().compile(store=store)
        await graph.ainvoke({"messages": [{"role": "user", "content": "I like pizza."}]}, context={"user_id": "alice"})
        docs = await store.collection.find({}, {"key": 1, "ttl_minutes": 1}).to_list()
        assert docs and all(d.get("ttl_minutes") == 30 for d in docs)


async def test_factory_without_ttl_variables_has_no_ttl(server_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONGODB_URI", "mongomock://")
    async with make_store() as store:
        assert store.ttl_config is None
        await store.aput(("u",), "k", {"text": "x"})
        got = await store.aget(("u",), "k")
        assert got is not None


async def test_factory_refuses_a_bad_ttl_before_opening_anything(
    server_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    data = tmp_path / "never-made"
    monkeypatch.setenv("MONGOSTORE_DATA_DIR", str(data))
    monkeypatch.setenv("MONGOSTORE_TTL_MINUTES", "a week")
    with pytest.raises(ConfigurationError, match="MONGOSTORE_TTL_MINUTES must be a number of minutes"):
        async with make_store():
            pass
    assert not data.exists()


# --------------------------------------------------------------------------- langgraph dev + langgraph_sdk


def _langgraph_cli() -> str | None:
    beside = Path(sys.executable).with_name("langgraph")
    if beside.exists():
        return str(beside)
    return shutil.which("langgraph")


def _has_inmem_server() -> bool:
    try:
        import langgraph_api  # noqa: F401
        import langgraph_runtime_inmem  # noqa: F401
        import langgraph_sdk  # noqa: F401
    except ImportError:
        return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path, backend: str, data_dir: Path | None) -> None:
        self.proc = proc
        self.url = url
        self.log = log
        self.backend = backend
        self.data_dir = data_dir

    def output(self) -> str:
        return self.log.read_text(errors="replace")


#: ``local``: the documented default, no ``MONGODB_URI`` (the persistent local store in a temp
#: ``MONGOSTORE_DATA_DIR``, with a TTL from the environment); ``mongomock``: in memory.
BACKENDS = ("local", "mongomock")


@pytest.fixture(params=BACKENDS)
def langgraph_dev(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    backend: str = request.param
    cli = _langgraph_cli()
    if cli is None or not _has_inmem_server():
        pytest.skip("needs the Agent Server: pip install 'langgraph-cli[inmem]==0.4.40' (langgraph-api, langgraph_sdk)")
    import httpx

    # As the README says, from the repository root: `langgraph dev --config examples/langgraph.json`
    # (a copy of examples/ under tmp_path, which stands for the root: `langgraph dev` writes its
    # dev state, .langgraph_api/, into the working directory).
    workdir = tmp_path
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns(".langgraph_api", "__pycache__"))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MONGOSTORE_", "LANGSMITH_", "LANGCHAIN_"))}
    env.pop("MONGODB_URI", None)
    data_dir: Path | None = None
    if backend == "mongomock":
        env["MONGODB_URI"] = "mongomock://"
    else:
        data_dir = tmp_path / "data"  # never the user's own; made by the server's first store call
        env.update(MONGOSTORE_DATA_DIR=str(data_dir), MONGOSTORE_TTL_MINUTES="600")
    env.update(
        MONGOSTORE_EMBED="hashing",  # fast and deterministic; the server runs MiniLM the same way
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        PYTHONUNBUFFERED="1",
    )
    log = tmp_path / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [
                cli,
                "dev",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-browser",
                "--no-reload",
                "--config",
                "examples/langgraph.json",
                # never --allow-blocking: the server must refuse nothing our store does on its loop
            ],
            cwd=workdir,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(proc, f"http://127.0.0.1:{port}", log, backend, data_dir)
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"langgraph dev exited with {proc.returncode}:\n{server.output()[-4000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{server.url}/ok", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"langgraph dev did not answer /ok within 90 s:\n{server.output()[-4000:]}")
            time.sleep(0.3)
        yield server
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # our own process group (start_new_session=True)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.fixture
async def client(langgraph_dev: Server) -> AsyncIterator[Any]:
    from langgraph_sdk import get_client

    c = get_client(url=langgraph_dev.url)
    yield c
    with contextlib.suppress(Exception):
        await c.http.client.aclose()


def _say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.mark.slow
async def test_agent_server_uses_mongostore(langgraph_dev: Server, client: Any) -> None:
    ns = ["alice", "memories"]
    # --- the store API, through the server, into our store
    await client.store.put_item(ns, key="sdk-1", value={"text": "I like sushi", "kind": "preference"})
    item = await client.store.get_item(ns, key="sdk-1")
    assert item["value"] == {"text": "I like sushi", "kind": "preference"}
    assert item["namespace"] == ns

    # --- the example graph: thread 1 states facts, the graph writes them with runtime.store
    thread = await client.threads.create()
    out = await client.runs.wait(
        thread["thread_id"],
        "memory",
        input=_say("I work as a nurse. My sister lives in Lisbon."),
        context={"user_id": "alice"},
    )
    assert out["store"] == "AsyncMongoStore"  # the class of runtime.store inside the server
    assert [m["text"] for m in out["saved"]] == ["I work as a nurse", "My sister lives in Lisbon"]

    # --- semantic search through the SDK: scored by our index (hashing embeddings, fields=text)
    found = await client.store.search_items(["alice"], query="Where does my sister live?", limit=3)
    top = found["items"][0]
    assert top["value"]["text"] == "My sister lives in Lisbon" and top["score"] > 0.3
    assert {i["key"] for i in found["items"]} >= {"sdk-1"}

    # --- thread 2: a new thread recalls the item the SDK put, through runtime.store
    thread2 = await client.threads.create()
    out = await client.runs.wait(
        thread2["thread_id"], "memory", input=_say("What do I like to eat?"), context={"user_id": "alice"}
    )
    assert out["messages"][-1]["content"] == "You like sushi."
    recalled = out["recalled"][0]["memories"]
    assert recalled[0]["key"] == "sdk-1" and recalled[0]["score"] > 0.3

    # --- list_namespaces and delete_item
    listed = await client.store.list_namespaces(prefix=["alice"])
    assert listed["namespaces"] == [ns]
    await client.store.delete_item(ns, key="sdk-1")
    assert await client.store.get_item(ns, key="sdk-1") is None
    found = await client.store.search_items(["alice"], query="What do I like to eat?", limit=10)
    assert "sdk-1" not in {i["key"] for i in found["items"]}
    assert len(found["items"]) == 2

    log = langgraph_dev.output()
    assert "Using custom store: <mongostore.aio.AsyncMongoStore" in log
    assert "Traceback" not in log and "BlockingError" not in log

    if langgraph_dev.data_dir is not None:
        # MONGOSTORE_TTL_MINUTES=600 (in the log) reaches what the server writes: an SDK put without
        # a ttl (the /store API passes ttl=None) and the graph's memories (PutOps) get it; a put's
        # own ttl is kept.
        await client.store.put_item(["bob"], key="short", value={"text": "brief"}, ttl=5)
        await client.store.put_item(["bob"], key="plain", value={"text": "no ttl said"})
        assert "mongostore: local store" in log and "TTL: default 600 min" in log
        # The items are in the local store's file, where the CLI reads them.
        local = MongoStore.local(langgraph_dev.data_dir)
        texts = sorted(i.value["text"] for i in local.search(("alice",), limit=10))
        assert texts == ["I work as a nurse", "My sister lives in Lisbon"]
        ttls = {d["key"]: d.get("ttl_minutes") for d in local.collection.find({}, {"key": 1, "ttl_minutes": 1})}
        assert ttls["short"] == 5 and ttls["plain"] == 600
        memories = [k for k in ttls if k not in ("short", "plain")]
        assert len(memories) == 2 and all(ttls[k] == 600 for k in memories)
        assert local.collection.count_documents({"expires_at": {"$exists": True}}) == 4


# --------------------------------------------------------------------------- langgraph dev stops on a bad store


#: Each case: the variable, its value, what the one line says, and whether langgraph dev reloads.
FAILING_STARTS = [
    pytest.param(
        "MONGODB_URI",
        "mongodb://127.0.0.1:1/",
        "cannot connect to MongoDB at 127.0.0.1:1",
        True,
        id="reload-unreachable",
    ),
    pytest.param(
        "MONGOSTORE_TTL_MINUTES",
        "a week",
        "MONGOSTORE_TTL_MINUTES must be a number of minutes",
        True,
        id="reload-bad-ttl",
    ),
    pytest.param("MONGOSTORE_DATA_DIR", "FILE", "is a file, not a directory", False, id="no-reload-data-dir-is-a-file"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "value", "says", "reload"), FAILING_STARTS)
def test_langgraph_dev_exits_when_the_store_cannot_start(
    tmp_path: Path, name: str, value: str, says: str, reload: bool
) -> None:
    """``langgraph dev`` (reload mode, the default: uvicorn's reloader runs the server in a child and
    outlives it) must end, with a failure status and the one line, when the store cannot start."""
    cli = _langgraph_cli()
    if cli is None or not _has_inmem_server():
        pytest.skip("needs the Agent Server: pip install 'langgraph-cli[inmem]==0.4.40' (langgraph-api, langgraph_sdk)")
    workdir = tmp_path / "root"  # watched by the reloader: the log goes beside it, not in it
    workdir.mkdir()
    shutil.copytree(EXAMPLES, workdir / "examples", ignore=shutil.ignore_patterns(".langgraph_api", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MONGOSTORE_", "LANGSMITH_", "LANGCHAIN_"))}
    env.pop("MONGODB_URI", None)
    env.update(
        MONGOSTORE_DATA_DIR=str(tmp_path / "data"),
        MONGOSTORE_EMBED="hashing",
        LANGSMITH_TRACING="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",
        PYTHONUNBUFFERED="1",
    )
    if value == "FILE":
        value = str(tmp_path / "a-file")
        Path(value).write_text("not a directory")
    env[name] = value
    argv = [cli, "dev", "--host", "127.0.0.1", "--port", str(_free_port()), "--no-browser"]
    argv += ["--config", "examples/langgraph.json", *([] if reload else ["--no-reload"])]
    log = tmp_path / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            argv, cwd=workdir, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"langgraph dev kept running with a store that cannot start:\n{log.read_text()[-3000:]}")
        output = log.read_text(errors="replace")
        assert code != 0, output[-3000:]
        error_lines = [line for line in output.splitlines() if says in line and "mongostore" in line]
        assert error_lines, output[-3000:]
        if reload:  # the last line says why langgraph dev stopped
            assert output.rstrip().splitlines()[-1].startswith("mongostore: error: "), output[-1000:]
            assert says in output.rstrip().splitlines()[-1]
        # Nothing of it is left running: the server child, the reloader, the resource tracker.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail("a process of langgraph dev is still running after it exited")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(timeout=10)
