"""The local store (``MongoStore.local``) against LangGraph's SqliteStore and InMemoryStore.

Side by side in one process, in interleaved rounds, on the same items and the same embedder
(the hashing embedder behind a cache, warmed first, so embedding costs nothing): ours on a
directory, ``SqliteStore`` on a file (``setup()`` called; indexed: its sqlite-vec index),
``InMemoryStore``. The items are ``{"text": <20 words>, "kind": <one of 4>, "n": i}`` over 50
namespaces ``("bench", "g<j % 5>", "u<j>", "memories")``, so the prefix ``("bench", "g0")``
holds 1/5 of them. At each size N:

1. one ``put`` of a new key in a store holding N items, no index / indexed;
2. filling an empty store with N items in batches of 500 (opening it and ``setup()`` included),
   no index / indexed: seconds in all;
3. one ``get``; 4. a filtered search under the prefix (``filter={"kind": ...}, limit=10``);
5. ``list_namespaces(limit=100)``; 6. a warm semantic search under the prefix (``limit=10``,
   after one warm-up search): rows 3-6 on the indexed stores;
7. a new process (``python -c``) that opens the store, runs ``setup()`` and one ``get``, ours
   and SqliteStore, no index / indexed: wall time and peak RSS (a bare ``python -c pass`` is
   in the notes); ``--quick`` runs it at the largest size only;
8. every CLI command whose output does not grow with the store (``setup``, ``doctor``, ``put``,
   ``get``, ``search --filter``, ``search --query``, ``ls``, ``stats``, ``rm``; not ``export``,
   ``import``, ``reindex`` or ``report``) on a local store of ``--cli-size`` items, filled with
   the Python API, and on an empty one: wall time and peak RSS.

First it checks that the three stores answer alike: a ``get``'s value, the filtered search's
matches (all of them, as sets), ``list_namespaces``, the semantic top 10 in order (items whose
scores tie may swap), and says what differed, if anything.

Each cell is ``median [min-max]`` over the rounds; the ratio column is ours/SqliteStore per round
(below 1: ours costs less), then ours/InMemoryStore; for the CLI rows, the full store/the empty
one. In ``run_all``'s tables (``Row``) the theirs column is SqliteStore's (CLI: the empty store's),
and the ratio theirs/ours as everywhere there.

SqliteStore gets ``text_fields`` beside ``fields`` (it reads only the former: langgraph#8808),
and runs on pysqlite3 where Python's sqlite3 cannot load extensions (pyenv's builds).

    python bench/local_store.py [--quick] [--sizes 5000,50000] [--cli-size 20000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from _common import DIMS, ROOT, MemoEmbeddings, Row, machine, paired_rounds, ratio_spread, save, spread
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from mongostore import MongoStore
from mongostore.store import DEFAULT_COLLECTION, DEFAULT_DB

SEC = "local store vs SqliteStore"
LOCAL, SQLITE, MEMORY = "local store", "SqliteStore", "InMemoryStore"
EMPTY = "empty local store"  # row 8
CONTENDERS = (LOCAL, SQLITE, MEMORY)
BATCH = 500
USERS, GROUPS = 50, 5
PREFIX = ("bench", "g0")  # users 0, 5, 10, ...: 1/5 of the items
KINDS = ("preference", "fact", "event", "plan")
FILTER = {"kind": "preference"}
WORDS_PER_TEXT = 20
# What a new process would embed with: nothing is embedded in a get, so any embedder will do.
CHILD_INDEX = (
    f'{{"dims": {DIMS}, "embed": lambda texts: [[1.0] + [0.0] * {DIMS - 1} for _ in texts], "fields": ["text"]}}'
)


# --------------------------------------------------------------------------- the data


def namespace(i: int) -> tuple[str, ...]:
    user = i % USERS
    return ("bench", f"g{user % GROUPS}", f"u{user}", "memories")


def _vocabulary(size: int = 600, seed: int = 7) -> list[str]:
    """Pronounceable made-up words (no stop words, no plural ``s`` for the embedder to strip)."""
    syllables = ("ka", "lo", "mi", "ru", "te", "na", "po", "si", "de", "vu", "ba", "fe", "go", "ha", "ji", "zu")
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 3))))
    return sorted(words)


WORDS = _vocabulary()
QUERY = " ".join(WORDS[1:7])


def make_ops(n: int, seed: int = 11) -> list[PutOp]:
    rng = random.Random(seed)
    return [
        PutOp(
            namespace(i),
            f"m{i}",
            {"text": " ".join(rng.choices(WORDS, k=WORDS_PER_TEXT)), "kind": KINDS[i % len(KINDS)], "n": i},
        )
        for i in range(n)
    ]


# --------------------------------------------------------------------------- the stores

# SqliteStore's index loads sqlite-vec, an SQLite extension: a Python built without extension
# loading (pyenv's by default) has no ``enable_load_extension``. Then both this process and the
# new ones of row 7 use pysqlite3 (pysqlite3-binary), as a user on that Python would.
SQLITE_IMPORT = """\
import sqlite3
if not hasattr(sqlite3.Connection, "enable_load_extension"):
    from pysqlite3 import dbapi2 as sqlite3
"""


def sqlite_module() -> ModuleType:
    """The sqlite3 module SqliteStore runs on here: what ``SQLITE_IMPORT`` imports."""
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        from pysqlite3 import dbapi2  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError as exc:
        raise RuntimeError("this Python's sqlite3 cannot load sqlite-vec: pip install pysqlite3-binary") from exc
    return cast(ModuleType, dbapi2)


@dataclass
class Opened:
    """A store, what a new process opens to reach its data (None: in memory), and how to close it."""

    store: BaseStore
    path: Path | None
    close: Callable[[], None]


def open_store(kind: str, where: Path, embed: Any, indexed: bool) -> Opened:
    """An empty store of that kind in the directory ``where``, after ``setup()``; ours under the
    CLI's default database and collection, so that the CLI finds it there."""
    index: Any = {"dims": DIMS, "embed": embed, "fields": ["text"]} if indexed else None
    if kind == LOCAL:
        ours = MongoStore.local(where, index=index, db_name=DEFAULT_DB, collection_name=DEFAULT_COLLECTION)
        ours.setup()
        return Opened(ours, where, ours.close)
    if kind == SQLITE:
        path = where / "store.sqlite"
        # as SqliteStore.from_conn_string connects
        conn = sqlite_module().connect(path, check_same_thread=False, isolation_level=None)
        # SqliteStore reads the fields to embed from "text_fields", not IndexConfig's "fields"
        # (langgraph#8808, langgraph-checkpoint-sqlite 3.1.2): without it, it embeds the whole value.
        theirs = SqliteStore(conn, index=index and cast(Any, {**index, "text_fields": index["fields"]}))
        theirs.setup()
        return Opened(theirs, path, conn.close)
    return Opened(InMemoryStore(index=index), None, lambda: None)


def fill(store: BaseStore, ops: Sequence[PutOp]) -> None:
    for start in range(0, len(ops), BATCH):
        store.batch(ops[start : start + BATCH])


# --------------------------------------------------------------------------- results


def _seconds(samples: Sequence[float]) -> str:
    """``median [min-max]`` in us, ms or s, whichever suits the median."""
    mid = statistics.median(samples)
    scale, unit = (1e6, "us") if mid < 1e-3 else (1e3, "ms") if mid < 1 else (1.0, "s")
    return f"{spread(samples, scale)} {unit}"


@dataclass
class Line:
    """One row of the table: per-round seconds of each contender (and peak RSS in MB, for processes)."""

    order: int
    row: str
    unit: str  # of the medians in run_all's Row
    scale: float
    samples: dict[str, list[float]]
    rss: dict[str, list[float]] = field(default_factory=dict)
    base: str = SQLITE  # what ours is divided by
    base_label: str = SQLITE

    def median(self, name: str) -> float | None:
        v = self.samples.get(name)
        return statistics.median(v) * self.scale if v else None

    def cell(self, name: str) -> str:
        v = self.samples.get(name)
        if not v:
            return "-"
        return _seconds(v) + (f", {spread(self.rss[name])} MB" if self.rss.get(name) else "")

    def ratios(self) -> str:
        """Ours divided by the base per round (and its peak RSS); by InMemoryStore's where it ran."""
        ours, base = self.samples.get(LOCAL), self.samples.get(self.base)
        if not ours or not base:
            return "-"
        out = ratio_spread(ours, base)
        if self.rss.get(LOCAL) and self.rss.get(self.base):
            out += f"; peak RSS {ratio_spread(self.rss[LOCAL], self.rss[self.base])}"
        if self.samples.get(MEMORY):
            out += f"; {ratio_spread(ours, self.samples[MEMORY])} vs InMemoryStore"
        return out

    def as_row(self) -> Row:
        note = f"ours/{self.base_label} per round {self.ratios()}"
        if self.samples.get(MEMORY):
            note += f"; InMemoryStore {self.cell(MEMORY)}"
        return Row(SEC, self.row, self.median(LOCAL), self.median(self.base), self.unit, note)


def markdown(lines: Sequence[Line]) -> str:
    head = ["row", LOCAL, SQLITE, MEMORY, "ours/SqliteStore per round"]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for line in lines:
        cells = [line.row, line.cell(LOCAL), line.cell(SQLITE), line.cell(MEMORY), line.ratios()]
        if line.base != SQLITE:  # the CLI rows: the empty store in SqliteStore's column
            cells[2] = f"{line.base_label}: {line.cell(line.base)}"
            cells[4] = f"full/empty: {cells[4]}"
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out)


# --------------------------------------------------------------------------- timing helpers


def per_call(
    fns: dict[str, Callable[[], Any]], rounds: int, budget: float = 0.02, cap: int = 200
) -> dict[str, list[float]]:
    """Seconds per call of each function in interleaved rounds. Each is first called once (the
    warm-up); one that took less than ``budget`` is then called several times per sample."""
    inner = {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        fn()
        inner[name] = max(1, min(cap, int(budget / max(time.perf_counter() - t0, 1e-9))))

    def repeated(fn: Callable[[], Any], times: int) -> Callable[[], None]:
        def run() -> None:
            for _ in range(times):
                fn()

        return run

    samples = paired_rounds({k: repeated(fn, inner[k]) for k, fn in fns.items()}, rounds, warmup=0)
    return {k: [s / inner[k] for s in v] for k, v in samples.items()}


def child_env() -> dict[str, str]:
    """This checkout first on the path; no store settings (nor ``MONGODB_URI``) from the environment. The
    children may write bytecode (``__pycache__``, ignored by git), so that from the warm-up on they load this
    checkout's modules compiled, as an installed package's are (pip compiles a wheel's at install) and as
    SqliteStore's are: with ``PYTHONDONTWRITEBYTECODE`` set, as on some machines, every new process compiled
    ours from source again (~80 ms)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MONGOSTORE_", "MONGODB_URI")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


# Runs the command after the file name and writes its wall time, peak RSS and exit status there.
# A small process in between, because a child forked from this one would report this process's RSS
# (Linux keeps a process's peak across exec): ``/usr/bin/time`` in Python.
_TIMER = """\
import resource, subprocess, sys, time
t0 = time.perf_counter()
code = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL)
wall = time.perf_counter() - t0
with open(sys.argv[1], "w") as f:
    f.write(f"{wall} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {code}")
"""


@dataclass
class Child:
    wall: float
    rss_mb: float
    code: int
    stderr: str


def run_child(argv: Sequence[str], env: dict[str, str]) -> Child:
    """Run a process to its end: its wall time, its peak RSS, its exit status and stderr."""
    with tempfile.TemporaryDirectory() as tmp:
        report, err = Path(tmp) / "report", Path(tmp) / "stderr"
        with err.open("wb") as f:
            subprocess.run([sys.executable, "-c", _TIMER, str(report), *argv], stderr=f, env=env, check=True)
        wall, rss, code = report.read_text().split()
        stderr = err.read_text(errors="replace")
    per_mb = 2**20 if sys.platform == "darwin" else 2**10  # ru_maxrss: bytes on macOS, KiB on Linux
    return Child(float(wall), int(rss) / per_mb, int(code), stderr)


def interleaved(
    argvs: dict[str, list[str]], rounds: int, env: dict[str, str], start: int = 0
) -> dict[str, list[Child]]:
    """Each command once per round, in a rotating order (as ``paired_rounds``)."""
    names = list(argvs)
    runs: dict[str, list[Child]] = {k: [] for k in names}
    for r in range(start, start + rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            runs[name].append(run_child(argvs[name], env))
    return runs


# --------------------------------------------------------------------------- answers agree


def _ranked(store: BaseStore) -> list[tuple[str, float]]:
    return [(it.key, it.score or 0.0) for it in store.search(PREFIX, query=QUERY, limit=30)]


def _same_ranking(a: list[tuple[str, float]], b: list[tuple[str, float]], k: int = 10, tol: float = 1e-5) -> bool:
    """The same top ``k`` with the same scores (within ``tol``: SqliteStore ranks in float32), in
    order, except that items whose scores tie may swap (``a`` is ranked deeper to see whole ties)."""
    if len(a[:k]) != len(b[:k]):
        return False
    for (key_a, score_a), (key_b, score_b) in zip(a[:k], b[:k], strict=True):
        if abs(score_a - score_b) > tol:
            return False
        if key_a != key_b and key_b not in {key for key, score in a if abs(score - score_a) <= tol}:
            return False
    return True


def agreement(stores: dict[str, BaseStore], ops: Sequence[PutOp]) -> list[str]:
    """What the stores answered differently (empty: they agree)."""
    problems = []
    probe = ops[len(ops) // 3]
    answers: dict[str, dict[str, Any]] = {}
    for name, store in stores.items():
        item = store.get(probe.namespace, probe.key)
        matches = store.search(PREFIX, filter=FILTER, limit=len(ops))
        answers[name] = {
            "get": None if item is None else item.value,
            "filtered search": {(it.namespace, it.key) for it in matches},
            "list_namespaces": sorted(store.list_namespaces(limit=100)),
        }
    kind = FILTER["kind"]
    expected = {(op.namespace, op.key) for op in ops if op.namespace[:2] == PREFIX and op.value["kind"] == kind}  # type: ignore[index]
    if answers[LOCAL]["filtered search"] != expected:
        problems.append(
            f"ours' filtered search found {len(answers[LOCAL]['filtered search'])} of {len(expected)} expected"
        )
    if answers[LOCAL]["get"] != probe.value:
        problems.append("ours' get returned another value than was put")
    for name in (SQLITE, MEMORY):
        for what, answer in answers[name].items():
            if answer != answers[LOCAL][what]:
                problems.append(f"{what}: {name} differs from ours")
    ranked = {name: _ranked(store) for name, store in stores.items()}
    for name in (SQLITE, MEMORY):
        if not _same_ranking(ranked[LOCAL], ranked[name]):
            problems.append(f"semantic top 10: {name} {ranked[name][:10]} vs ours {ranked[LOCAL][:10]}")
    return problems


# --------------------------------------------------------------------------- the rows at one size


def fill_line(
    n: int, ops: Sequence[PutOp], embed: Any, indexed: bool, rounds: int, tmp: Path
) -> tuple[Line, dict[str, Opened]]:
    """Row 2, and the stores of its last round (the others are closed)."""
    kept: dict[str, Opened] = {}
    stale: list[Opened] = []

    def run(kind: str) -> Callable[[], None]:
        def go() -> None:
            opened = open_store(kind, Path(tempfile.mkdtemp(dir=tmp)), embed, indexed)
            fill(opened.store, ops)
            if kind in kept:
                stale.append(kept[kind])
            kept[kind] = opened

        return go

    samples = paired_rounds({kind: run(kind) for kind in CONTENDERS}, rounds, warmup=0)
    for opened in stale:
        opened.close()
    label = "indexed" if indexed else "no index"
    return Line(20 + indexed, f"2. fill {n:,} items in batches of {BATCH}, {label}", "s", 1.0, samples), kept


def put_line(n: int, ops: Sequence[PutOp], stores: dict[str, Opened], indexed: bool, rounds: int) -> Line:
    """Row 1: puts of new keys (texts already embedded), one call each."""

    def put(store: BaseStore) -> Callable[[], None]:
        counter = itertools.count()

        def go() -> None:
            c = next(counter)
            src = ops[c % len(ops)]
            store.put(namespace(c), f"new{c}", {**src.value, "n": n + c})  # type: ignore[dict-item]

        return go

    samples = per_call({k: put(o.store) for k, o in stores.items()}, rounds)
    label = "indexed" if indexed else "no index"
    return Line(10 + indexed, f"1. one put, store holding {n:,} items, {label}", "ms", 1e3, samples)


def read_lines(n: int, ops: Sequence[PutOp], stores: dict[str, Opened], rounds: int) -> list[Line]:
    """Rows 3-6 on the indexed stores."""
    probes = [ops[(i * 7919) % len(ops)] for i in range(200)]

    def get(store: BaseStore) -> Callable[[], Any]:
        cycle = itertools.cycle(probes)

        def go() -> Any:
            op = next(cycle)
            return store.get(op.namespace, op.key)

        return go

    workloads: list[tuple[int, str, str, float, Callable[[BaseStore], Callable[[], Any]]]] = [
        (30, f"3. one get, {n:,} items", "us", 1e6, get),
        (
            40,
            f"4. filtered search under a prefix of {n // GROUPS:,} items, limit 10",
            "ms",
            1e3,
            lambda s: lambda: s.search(PREFIX, filter=FILTER, limit=10),
        ),
        (50, f"5. list_namespaces(limit=100), {n:,} items", "ms", 1e3, lambda s: lambda: s.list_namespaces(limit=100)),
        (
            60,
            f"6. warm semantic search under a prefix of {n // GROUPS:,} items, limit 10",
            "ms",
            1e3,
            lambda s: lambda: s.search(PREFIX, query=QUERY, limit=10),
        ),
    ]
    return [
        Line(order, row, unit, scale, per_call({k: make(o.store) for k, o in stores.items()}, rounds))
        for order, row, unit, scale, make in workloads
    ]


def _child_code(kind: str, indexed: bool, op: PutOp) -> str:
    index = CHILD_INDEX if indexed else "None"
    ns, key = op.namespace, op.key
    if kind == LOCAL:
        return (
            "import sys\nfrom mongostore import MongoStore\n"
            f"with MongoStore.local(sys.argv[1], index={index}, collection_name={DEFAULT_COLLECTION!r}) as store:\n"
            f"    store.setup()\n    assert store.get({ns!r}, {key!r}) is not None\n"
        )
    return (
        f"import sys\n{SQLITE_IMPORT}from langgraph.store.sqlite import SqliteStore\n"
        "conn = sqlite3.connect(sys.argv[1], check_same_thread=False, isolation_level=None)\n"
        f"store = SqliteStore(conn, index={index})\n"
        f"store.setup()\nassert store.get({ns!r}, {key!r}) is not None\nconn.close()\n"
    )


def process_lines(n: int, op: PutOp, opened: dict[str, Opened], indexed: bool, rounds: int) -> tuple[Line, str]:
    """Row 7: a new process opens the store, ``setup()``, one ``get``; and a bare ``python -c pass``."""
    argvs = {
        kind: [sys.executable, "-c", _child_code(kind, indexed, op), str(opened[kind].path)] for kind in (LOCAL, SQLITE)
    }
    argvs["python"] = [sys.executable, "-c", "pass"]
    runs = interleaved(argvs, rounds + 1, child_env())
    for kind, children in runs.items():
        if failed := [c for c in children if c.code]:
            raise RuntimeError(f"{kind}: a new process exited {failed[0].code}: {failed[0].stderr.strip()[-2000:]}")
        del children[0]  # the warm-up (the interpreter's and the store's files into the page cache)
    bare = runs.pop("python")
    label = "indexed" if indexed else "no index"
    line = Line(
        70 + indexed,
        f"7. new process: open, setup(), one get, {n:,} items, {label}: wall, peak RSS",
        "ms",
        1e3,
        {k: [c.wall for c in v] for k, v in runs.items()},
        {k: [c.rss_mb for c in v] for k, v in runs.items()},
    )
    return line, f"a bare python -c pass: {_seconds([c.wall for c in bare])}, {spread([c.rss_mb for c in bare])} MB"


def size_lines(
    n: int, all_ops: Sequence[PutOp], embed: Any, cfg: Config, processes: bool
) -> tuple[list[Line], list[str]]:
    """Rows 1-7 at one size, and notes (what the stores answered differently, the bare interpreter)."""
    ops = all_ops[:n]
    lines: list[Line] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-local-") as tmp:
        stores: dict[bool, dict[str, Opened]] = {}
        try:
            for indexed in (False, True):
                line, stores[indexed] = fill_line(
                    n, ops, embed, indexed, cfg.fill_rounds if n <= 10_000 else 1, Path(tmp)
                )
                lines.append(line)
            problems = agreement({k: o.store for k, o in stores[True].items()}, ops)
            notes.append(f"{n:,} items: " + ("; ".join(problems) if problems else "the three stores' answers agree"))
            lines += read_lines(n, ops, stores[True], cfg.rounds)
            for indexed in (False, True):  # after the reads: these add items
                lines.append(put_line(n, ops, stores[indexed], indexed, cfg.rounds))
            if processes:
                for indexed in (False, True):
                    line, bare = process_lines(n, ops[n // 2], stores[indexed], indexed, cfg.child_rounds)
                    lines.append(line)
                notes.append(f"row 7 at {n:,} items, {bare}")
        finally:
            for opened in stores.values():
                for o in opened.values():
                    o.close()
    return lines, notes


# --------------------------------------------------------------------------- the CLI


def cli_commands(key: str) -> list[tuple[str, list[str]]]:
    """The commands of row 8; ``put``, ``get`` and ``rm`` on the key of the round."""
    ns = ".".join(namespace(0))
    value = json.dumps({"text": QUERY, "kind": "fact", "n": -1})
    return [
        ("setup", ["setup"]),
        ("doctor", ["doctor"]),
        ("put", ["put", ns, key, value]),
        ("get", ["get", ns, key]),
        ("search --filter", ["search", ".".join(PREFIX), "--filter", json.dumps(FILTER)]),
        ("search --query", ["search", ".".join(PREFIX), "--query", QUERY]),
        ("ls", ["ls"]),
        ("stats", ["stats"]),
        ("rm", ["rm", ns, key]),
    ]


def _cli(where: Path, args: list[str]) -> list[str]:
    """The command line: this store's directory and the embedder the store was filled with."""
    options = ["--data-dir", str(where), "--embed", "hashing", "--dims", str(DIMS), "--no-progress"]
    return [sys.executable, "-m", "mongostore", *options, *args]


def cli_lines(n: int, all_ops: Sequence[PutOp], embed: Any, rounds: int) -> tuple[list[Line], list[str]]:
    """Row 8: each command on a store of ``n`` items and on an empty one, alternating, in rounds."""
    env = child_env()
    runs: dict[str, dict[str, list[Child]]] = {command: {LOCAL: [], EMPTY: []} for command, _ in cli_commands("")}
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        dirs = {LOCAL: Path(tmp) / "full", EMPTY: Path(tmp) / "empty"}
        for name, where in dirs.items():  # the CLI's default database and collection
            opened = open_store(LOCAL, where, embed, indexed=True)
            fill(opened.store, all_ops[: n if name == LOCAL else 0])
            opened.close()
        interleaved({name: _cli(where, ["ls"]) for name, where in dirs.items()}, 1, env)  # warm-up
        for r in range(rounds):
            for command, args in cli_commands(f"cli{r}"):
                got = interleaved({name: _cli(where, args) for name, where in dirs.items()}, 1, env, start=r)
                for name, children in got.items():
                    runs[command][name] += children
    lines, notes = [], []
    for i, (command, by_store) in enumerate(runs.items()):
        if failed := [c for children in by_store.values() for c in children if c.code]:
            notes.append(f"mongostore {command} exited {failed[0].code}: {failed[0].stderr.strip()[-300:]}")
        lines.append(
            Line(
                80 + i,
                f"8. mongostore {command}, local store of {n:,} items",
                "s",
                1.0,
                {k: [c.wall for c in v] for k, v in by_store.items()},
                {k: [c.rss_mb for c in v] for k, v in by_store.items()},
                base=EMPTY,
                base_label="empty store",
            )
        )
    return lines, notes


# --------------------------------------------------------------------------- entry points


@dataclass
class Config:
    rounds: int  # rows 1 and 3-6
    fill_rounds: int  # row 2, up to 10,000 items (one fill above)
    child_rounds: int  # row 7
    cli_rounds: int  # row 8
    processes_at_largest_only: bool  # row 7 at every size, or at the largest


QUICK = Config(rounds=3, fill_rounds=2, child_rounds=2, cli_rounds=1, processes_at_largest_only=True)
FULL = Config(rounds=7, fill_rounds=3, child_rounds=5, cli_rounds=3, processes_at_largest_only=False)


def run(sizes: Sequence[int], cli_size: int, cfg: Config) -> tuple[list[Line], list[str]]:
    """Every row at every size (row 8 once, at ``cli_size``; none at 0), and the notes."""
    embed = MemoEmbeddings()
    all_ops = make_ops(max([*sizes, cli_size]))
    embed.embed_documents([op.value["text"] for op in all_ops])  # type: ignore[index]
    embed.embed_query(QUERY)
    sqlite = sqlite_module()
    lines: list[Line] = []
    notes = [f"SqliteStore on {sqlite.__name__} (SQLite {sqlite.sqlite_version}), sqlite-vec {_version('sqlite-vec')}"]
    for n in sizes:
        t0 = time.perf_counter()
        got, more = size_lines(n, all_ops, embed, cfg, not cfg.processes_at_largest_only or n == max(sizes))
        lines += got
        notes += more
        print(f"[{n:,} items: {time.perf_counter() - t0:.0f}s]", file=sys.stderr, flush=True)
    if cli_size:
        t0 = time.perf_counter()
        got, more = cli_lines(cli_size, all_ops, embed, cfg.cli_rounds)
        lines += got
        notes += more
        print(f"[CLI, {cli_size:,} items: {time.perf_counter() - t0:.0f}s]", file=sys.stderr, flush=True)
    lines.sort(key=lambda line: line.order)  # stable: by row, then by size
    return lines, notes


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def rows(quick: bool = False) -> list[Row]:
    """For run_all: 500 and 2,000 items with a CLI store of 2,000, or 5,000 and 50,000 with 20,000."""
    lines, notes = run([500, 2_000] if quick else [5_000, 50_000], 2_000 if quick else 20_000, QUICK if quick else FULL)
    print("\n".join(notes))
    return [line.as_row() for line in lines]


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="500 and 2,000 items, a CLI store of 2,000, fewer rounds")
    ap.add_argument("--sizes", help="comma-separated item counts (default 5000,50000; --quick 500,2000)")
    ap.add_argument("--cli-size", type=int, help="items in the CLI's store (default 20000; --quick 2000; 0: no row 8)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [500, 2_000] if args.quick else [5_000, 50_000]
    cli_size = args.cli_size if args.cli_size is not None else 2_000 if args.quick else 20_000
    t0 = time.perf_counter()
    lines, notes = run(sizes, cli_size, QUICK if args.quick else FULL)
    table = markdown(lines)
    print(f"**The local store vs SqliteStore and InMemoryStore** ({machine()})\n\n{table}\n")
    print("\n".join(f"- {note}" for note in notes))
    out = [line.as_row() for line in lines]
    seconds = time.perf_counter() - t0
    save(
        "local_store",
        out,
        {"notes": notes, "markdown": table, "sizes": sizes, "cli_size": cli_size, "seconds": seconds},
    )
    print(f"\n[{seconds:.0f}s]")
    return out


if __name__ == "__main__":
    main()
