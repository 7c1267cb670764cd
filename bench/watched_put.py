"""What the local store's change log costs a put: the same puts on two local stores side by side in one
process, in interleaved rounds, one never watched and one watched once (so its writes are logged).

    python bench/watched_put.py [--puts 1000] [--rounds 9]

Prints the median and min per put of each, and the watched/unwatched ratio per round (median).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from mongostore import MongoStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--puts", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    stores: dict[str, MongoStore] = {}
    for mode in ("unwatched", "watched"):
        store = MongoStore.local(tempfile.mkdtemp(prefix=f"mongostore-bench-{mode}-"))
        store.setup()
        if mode == "watched":
            store.watch(("users",)).close()  # the collection's writes are logged from now on
        for i in range(300):  # warm: the table, its indexes, the catalogue
            store.put(("users", f"u{i % 10}"), f"w{i}", {"text": "warm", "n": i})
        stores[mode] = store
    per_put: dict[str, list[float]] = {mode: [] for mode in stores}
    for _ in range(args.rounds):
        for mode, store in stores.items():
            start = time.perf_counter()
            for i in range(args.puts):
                value = {"text": "hello world " * 5, "n": i, "tags": ["a", "b"]}
                store.put(("users", f"u{i % 50}"), f"k{i % 500}", value)
            per_put[mode].append((time.perf_counter() - start) / args.puts * 1e6)
    for mode, runs in per_put.items():
        print(f"{mode:>9}: put {statistics.median(runs):6.1f} us median, {min(runs):6.1f} us min")
    ratios = [w / u for w, u in zip(per_put["watched"], per_put["unwatched"], strict=True)]
    print(f"watched/unwatched: {statistics.median(ratios):.2f}x (median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
