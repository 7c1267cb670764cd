"""Timing: medians of interleaved runs (sync and async), paired rounds and their spreads."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import _setup  # noqa: F401  (first: this checkout's src/ and tests/ on sys.path)
from _results import fmt_ratio

# --------------------------------------------------------------------------- timing


def quiet_gc() -> contextlib.AbstractContextManager[None]:
    @contextlib.contextmanager
    def cm() -> Iterator[None]:
        gc.collect()
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if enabled:
                gc.enable()

    return cm()


def median_time(fn: Callable[[], Any], repeats: int, warmup: int = 1, inner: int = 1) -> float:
    """Median seconds of one call of ``fn`` over ``repeats`` samples of ``inner`` calls each."""
    for _ in range(warmup):
        fn()
    samples = []
    with quiet_gc():
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


# Seconds per call of each function in the last paired_medians/apaired_medians run, by name.
LAST_SAMPLES: dict[str, list[float]] = {}


def paired_medians(
    fns: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1, inner: int = 1
) -> dict[str, float]:
    """Like ``median_time`` for several functions, interleaved so that noise hits them alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    with quiet_gc():
        for _ in range(repeats):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(inner):
                    fn()
                samples[name].append((time.perf_counter() - t0) / inner)
    LAST_SAMPLES.clear()
    LAST_SAMPLES.update(samples)
    return {k: statistics.median(v) for k, v in samples.items()}


def run_async(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(coro_fn())  # type: ignore[arg-type]


async def apaired_medians(
    fns: dict[str, Callable[[], Awaitable[Any]]], repeats: int, warmup: int = 1, inner: int = 1
) -> dict[str, float]:
    """``paired_medians`` for coroutine functions, inside the running event loop."""
    for fn in fns.values():
        for _ in range(warmup):
            await fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    with quiet_gc():
        for _ in range(repeats):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(inner):
                    await fn()
                samples[name].append((time.perf_counter() - t0) / inner)
    LAST_SAMPLES.clear()
    LAST_SAMPLES.update(samples)
    return {k: statistics.median(v) for k, v in samples.items()}


# --------------------------------------------------------------------------- paired rounds


def paired_rounds(fns: dict[str, Callable[[], Any]], rounds: int, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each function, in interleaved rounds (each round calls every
    function once, in a rotating order), so that load on a shared machine hits all alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    names = list(fns)
    samples: dict[str, list[float]] = {k: [] for k in names}
    with quiet_gc():
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                t0 = time.perf_counter()
                fns[name]()
                samples[name].append(time.perf_counter() - t0)
    return samples


def spread(samples: Sequence[float], scale: float = 1.0) -> str:
    """``median [min-max]`` of samples, scaled (e.g. 1e3 for ms)."""
    v = sorted(x * scale for x in samples)

    def f(x: float) -> str:
        return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"

    return f"{f(statistics.median(v))} [{f(v[0])}-{f(v[-1])}]"


def ratio_spread(num: Sequence[float], den: Sequence[float]) -> str:
    """Per-round ratios num/den (paired samples): ``median [min-max]``."""
    ratios = sorted(a / b for a, b in zip(num, den, strict=True) if b > 0)
    if not ratios:
        return "n/a"
    return f"{fmt_ratio(statistics.median(ratios))} [{fmt_ratio(ratios[0])}-{fmt_ratio(ratios[-1])}]"
