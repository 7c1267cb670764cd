"""``mongostore import`` as a user runs it: one process per run, a fresh local store, the default
embedder (all-MiniLM-L6-v2 with the ``minilm`` extra) unless ``--embed`` says otherwise.

``bench/embedded.py`` times the store's side of an import in process, with a memoising
embedder: what the store costs. This times the whole command, process start, model load and
embedding included: what a user waits for. Each run gets its own ``MONGOSTORE_DATA_DIR``;
the lines are one short sentence each, all different (no embedding is reused).

    python bench/import_cli.py                      # 1 line and 1,000 lines, 3 runs each, then 5,000 once
    python bench/import_cli.py --sizes 1000 --rounds 5 --embed hashing
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUBJECTS = ("I like", "My sister enjoys", "I work on", "We visited", "I am allergic to", "I learned about")
THINGS = ("pizza", "hiking in the Alps", "Rust compilers", "the Lisbon aquarium", "peanuts", "jazz records")


def write_lines(path: Path, n: int) -> None:
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            text = f"{rng.choice(SUBJECTS)} {rng.choice(THINGS)} (note {i}, {rng.randint(0, 10**6)})"
            record = {"namespace": ["users", f"u{i % 50}", "memories"], "key": f"k{i}", "value": {"text": text}}
            out.write(json.dumps(record) + "\n")


def one_run(lines: Path, workdir: Path, embed: str | None) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONGOSTORE_") and k != "MONGODB_URI"}
    with tempfile.TemporaryDirectory(dir=workdir) as data:
        env["MONGOSTORE_DATA_DIR"] = data
        argv = [sys.executable, "-m", "mongostore", *(["--embed", embed] if embed else []), "import", "--no-progress"]
        started = time.perf_counter()
        subprocess.run([*argv, str(lines)], env=env, check=True, capture_output=True)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,1000", help="line counts timed --rounds times each (default 1,1000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--once", default="5000", help="line counts timed once (default 5000; '' for none)")
    parser.add_argument("--embed", help="minilm, hashing... (default: the CLI's default)")
    args = parser.parse_args()
    plan = [(int(n), args.rounds) for n in args.sizes.split(",") if n]
    plan += [(int(n), 1) for n in args.once.split(",") if n]
    python = sys.version.split()[0]
    print(f"mongostore import, embed={args.embed or 'the default'}, {os.cpu_count()} CPU(s), Python {python}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n, rounds in plan:
            lines = work / f"lines{n}.jsonl"
            write_lines(lines, n)
            times = [one_run(lines, work, args.embed) for _ in range(rounds)]
            median = statistics.median(times)
            per = f", {median / n * 1000:.2f} s per 1,000 lines" if n >= 1000 else ""
            spread = f" [{min(times):.2f}-{max(times):.2f}]" if rounds > 1 else ""
            print(f"{n:>6,} lines: {median:.2f} s{spread} ({rounds} run(s)){per}")


if __name__ == "__main__":
    main()
