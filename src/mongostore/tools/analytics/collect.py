"""Running the reports: each runner sends its pipelines through ``aggregate`` and parses the output."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from mongostore.core.codec import as_utc
from mongostore.core.scope import _check_prefix
from mongostore.tools.analytics.pipelines import (
    Period,
    _cutoff,
    growth_pipeline,
    namespace_counts_pipeline,
    stale_oldest_pipeline,
    stale_summary_pipeline,
    ttl_outlook_pipeline,
    value_breakdown_pipeline,
)
from mongostore.tools.analytics.results import (
    BreakdownReport,
    GrowthReport,
    NamespaceCountsReport,
    ReportBundle,
    StaleReport,
    TTLOutlookReport,
    parse_growth,
    parse_namespace_counts,
    parse_stale,
    parse_ttl_outlook,
    parse_value_breakdown,
)

__all__ = [
    "Aggregator",
    "AsyncAggregator",
    "ReportPlan",
    "acollect_reports",
    "collect_reports",
    "growth",
    "namespace_counts",
    "stale_items",
    "ttl_outlook",
    "value_breakdown",
]


class Aggregator(Protocol):
    """Anything that runs a pipeline over the items under a prefix (e.g. ``MongoStore``)."""

    def aggregate(self, namespace_prefix: tuple[str, ...], pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]: ...


class AsyncAggregator(Protocol):
    """The async twin (e.g. ``AsyncMongoStore``)."""

    def aaggregate(
        self, namespace_prefix: tuple[str, ...], pipeline: list[dict[str, Any]]
    ) -> Awaitable[list[dict[str, Any]]]: ...


def namespace_counts(
    store: Aggregator, prefix: tuple[str, ...], level: int | None = None, *, limit: int = 100
) -> NamespaceCountsReport:
    """Items and namespaces per label at ``level`` (default: the one below ``prefix``: users under ``("users",)``)."""
    level = len(prefix) if level is None else level
    return parse_namespace_counts(
        store.aggregate(tuple(prefix), namespace_counts_pipeline(level, limit=limit)), tuple(prefix), level
    )


def growth(store: Aggregator, prefix: tuple[str, ...], period: Period = "day") -> GrowthReport:
    return parse_growth(store.aggregate(tuple(prefix), growth_pipeline(period)), tuple(prefix), period)


def stale_items(
    store: Aggregator, prefix: tuple[str, ...], days: float = 30, *, now: datetime | None = None, oldest: int = 10
) -> StaleReport:
    """Items not updated for ``days`` days: how many, their share, and the ``oldest`` oldest."""
    prefix = tuple(prefix)
    cutoff = _cutoff(now or datetime.now(timezone.utc), days)
    summary = store.aggregate(prefix, stale_summary_pipeline(cutoff))
    rows = store.aggregate(prefix, stale_oldest_pipeline(cutoff, oldest))
    return parse_stale(summary, rows, prefix, days, cutoff)


def ttl_outlook(store: Aggregator, prefix: tuple[str, ...], *, now: datetime | None = None) -> TTLOutlookReport:
    now = as_utc(now or datetime.now(timezone.utc))
    return parse_ttl_outlook(store.aggregate(tuple(prefix), ttl_outlook_pipeline(now)), tuple(prefix), now)


def value_breakdown(
    store: Aggregator, prefix: tuple[str, ...], field_path: str = "kind", *, limit: int = 50
) -> BreakdownReport:
    """Items per value of ``value.<field_path>`` (e.g. ``kind`` -> ``$value.kind``)."""
    pipeline = value_breakdown_pipeline(field_path, limit=limit)
    return parse_value_breakdown(store.aggregate(tuple(prefix), pipeline), tuple(prefix), field_path)


@dataclass(frozen=True)
class ReportPlan:
    """The pipelines of every report, and how to read their outputs back: ``run`` (sync) and ``arun``."""

    prefix: tuple[str, ...]
    now: datetime
    level: int | None = None
    period: Period = "week"
    stale_days: float = 30
    oldest: int = 10
    breakdown_field: str | None = "kind"
    limit: int = 50
    cutoff: datetime = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", _check_prefix(self.prefix))
        object.__setattr__(self, "now", as_utc(self.now))
        object.__setattr__(self, "cutoff", _cutoff(self.now, self.stale_days))

    @property
    def namespace_level(self) -> int:
        return len(self.prefix) if self.level is None else self.level

    def pipelines(self) -> dict[str, list[dict[str, Any]]]:
        out = {
            "namespaces": namespace_counts_pipeline(self.namespace_level, limit=self.limit),
            "growth": growth_pipeline(self.period),
            "stale_summary": stale_summary_pipeline(self.cutoff),
            "stale_oldest": stale_oldest_pipeline(self.cutoff, self.oldest),
            "ttl": ttl_outlook_pipeline(self.now),
        }
        if self.breakdown_field is not None:
            out["breakdown"] = value_breakdown_pipeline(self.breakdown_field, limit=self.limit)
        return out

    def parse(self, outputs: Mapping[str, Sequence[Mapping[str, Any]]]) -> ReportBundle:
        p = self.prefix
        return ReportBundle(
            prefix=p,
            generated_at=self.now,
            namespaces=parse_namespace_counts(outputs["namespaces"], p, self.namespace_level),
            growth=parse_growth(outputs["growth"], p, self.period),
            stale=parse_stale(outputs["stale_summary"], outputs["stale_oldest"], p, self.stale_days, self.cutoff),
            ttl=parse_ttl_outlook(outputs["ttl"], p, self.now),
            breakdown=(
                parse_value_breakdown(outputs["breakdown"], p, self.breakdown_field)
                if self.breakdown_field is not None
                else None
            ),
        )

    def run(self, store: Aggregator) -> ReportBundle:
        return self.parse({name: store.aggregate(self.prefix, pl) for name, pl in self.pipelines().items()})

    async def arun(self, store: AsyncAggregator) -> ReportBundle:
        pipelines = self.pipelines()
        results = await asyncio.gather(*(store.aaggregate(self.prefix, pl) for pl in pipelines.values()))
        return self.parse(dict(zip(pipelines, results, strict=True)))


def collect_reports(
    store: Aggregator,
    prefix: tuple[str, ...] = (),
    *,
    level: int | None = None,
    period: Period = "week",
    stale_days: float = 30,
    breakdown_field: str | None = "kind",
    limit: int = 50,
    now: datetime | None = None,
) -> ReportBundle:
    """Run every report for ``prefix`` (what ``mongostore stats`` shows)."""
    plan = _plan(prefix, now, limit, level=level, period=period, stale_days=stale_days, breakdown_field=breakdown_field)
    return plan.run(store)


async def acollect_reports(
    store: AsyncAggregator,
    prefix: tuple[str, ...] = (),
    *,
    level: int | None = None,
    period: Period = "week",
    stale_days: float = 30,
    breakdown_field: str | None = "kind",
    limit: int = 50,
    now: datetime | None = None,
) -> ReportBundle:
    """``collect_reports`` for an async store; the pipelines run concurrently."""
    plan = _plan(prefix, now, limit, level=level, period=period, stale_days=stale_days, breakdown_field=breakdown_field)
    return await plan.arun(store)


def _plan(prefix: tuple[str, ...], now: datetime | None, limit: int, **options: Any) -> ReportPlan:
    """What both collectors run: every table at most ``limit`` rows, the oldest stale items at most 10."""
    return ReportPlan(tuple(prefix), now or datetime.now(timezone.utc), limit=limit, oldest=min(limit, 10), **options)
