"""Render the analytics reports: plain-text tables (``render_text``, control characters in user data
shown as escapes, so no label can drive the terminal) and one self-contained HTML page
(``render_html``: inline CSS and SVG drawn here, no scripts, a Content-Security-Policy that forbids
every network load; all user data goes through ``html.escape``).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from datetime import datetime

from mongostore.tools.analytics import (
    Aggregator,
    GrowthReport,
    NamespaceCountsReport,
    Period,
    ReportBundle,
    StaleReport,
    Table,
    collect_reports,
)
from mongostore.tools.analytics.results import _show

__all__ = ["build_report", "render_html", "render_text"]

#: The growth chart and table show at most this many periods (the latest ones).
MAX_PERIODS = 60
#: Bar charts show at most this many rows (the largest ones).
MAX_BARS = 15

CREATED = "#2563eb"
UPDATED = "#f59e0b"
TOTAL = "#059669"
STALE = "#dc2626"
FRESH = "#16a34a"
NEUTRAL = "#64748b"
BAR = "#4f46e5"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _prefix_label(prefix: tuple[str, ...]) -> str:
    return "/".join(prefix) if prefix else "(all namespaces)"


def _svg(css_class: str, label: str, width: int, height: int) -> str:
    """An ``<svg>`` opening tag with its accessible name (``aria-label`` and ``<title>``)."""
    return (
        f'<svg class="chart {_e(css_class)}" role="img" aria-label="{_e(label)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}"><title>{_e(label)}</title>'
    )


def _nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at or above ``value`` (1 for 0)."""
    if value <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * exp:
            return float(step * exp)
    return float(10 * exp)


def _fmt(n: float) -> str:
    return f"{int(n):,}" if float(n).is_integer() else f"{n:,.1f}"


def count(n: int, one: str, many: str | None = None) -> str:
    """``1 item``, ``2 items``: a count with its noun in the right number."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def growth_svg(report: GrowthReport, width: int = 1040, height: int = 320) -> str:
    """Grouped bars (created, updated) per period on the left axis, the running total as a line."""
    points = report.points[-MAX_PERIODS:]
    label = f"Growth per {report.period}: items created and updated, and the running total"
    if not points:
        return _empty_svg("growth", label, width, "No items yet.")
    left, right, top, bottom = 56, 64, 16, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    bar_max = _nice_max(max(max(p.created, p.updated) for p in points))
    total_max = _nice_max(max(p.total for p in points))
    slot = plot_w / len(points)
    bar_w = max(1.0, slot * 0.38)
    parts = [_svg("growth", label, width, height)]
    for i in range(5):
        frac = i / 4
        y = top + plot_h - frac * plot_h
        parts.append(
            f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(bar_max * frac)}</text>'
            f'<text class="tick right" x="{left + plot_w + 6}" y="{y + 4:.1f}">{_fmt(total_max * frac)}</text>'
        )
    every = max(1, math.ceil(len(points) / 12))
    line: list[str] = []
    for i, p in enumerate(points):
        x0 = left + i * slot + slot / 2
        series = ((-bar_w, p.created, CREATED, "created"), (0.0, p.updated, UPDATED, "updated"))
        for offset, count, color, name in series:
            h = count / bar_max * plot_h
            parts.append(
                f'<rect class="bar {name}" x="{x0 + offset:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w:.1f}" '
                f'height="{h:.1f}" fill="{color}"><title>{_e(p.period)}: {count} {name}</title></rect>'
            )
        line.append(f"{x0:.1f},{top + plot_h - p.total / total_max * plot_h:.1f}")
        if i % every == 0 or i == len(points) - 1:
            parts.append(
                f'<text class="tick" x="{x0:.1f}" y="{top + plot_h + 18}" text-anchor="middle">{_e(p.period)}</text>'
            )
    parts.append(f'<polyline class="total" points="{" ".join(line)}" fill="none" stroke="{TOTAL}" stroke-width="2.5"/>')
    for xy, p in zip(line, points, strict=True):
        cx, cy = xy.split(",")
        parts.append(
            f'<circle cx="{cx}" cy="{cy}" r="3" fill="{TOTAL}"><title>{_e(p.period)}: {p.total} in total'
            "</title></circle>"
        )
    parts.append(f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>')
    legend_y = height - 10
    for j, (name, color) in enumerate((("created", CREATED), ("updated", UPDATED), ("total items", TOTAL))):
        lx = left + j * 130
        parts.append(
            f'<rect x="{lx}" y="{legend_y - 10}" width="12" height="12" fill="{color}"/>'
            f'<text class="legend" x="{lx + 18}" y="{legend_y}">{name}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def bar_svg(
    css_class: str, label: str, rows: Sequence[tuple[str, int, str]], color: str = BAR, width: int = 1040
) -> str:
    """Horizontal bars: (label, value, caption) per row, largest first as given."""
    rows = list(rows)[:MAX_BARS]
    if not rows:
        return _empty_svg(css_class, label, width, "Nothing to show.")
    row_h, label_w, top = 26, 240, 6
    height = top * 2 + row_h * len(rows)
    plot_w = width - label_w - 180
    vmax = max(v for _, v, _ in rows) or 1
    parts = [_svg(css_class, label, width, height)]
    for i, (name, value, caption) in enumerate(rows):
        y = top + i * row_h
        w = max(1.0, value / vmax * plot_w) if value else 0.0
        short = name if len(name) <= 28 else name[:27] + "\u2026"
        parts.append(
            f'<text class="label" x="{label_w - 8}" y="{y + 17}" text-anchor="end">{_e(short)}'
            f"<title>{_e(name)}</title></text>"
            f'<rect class="bar" x="{label_w}" y="{y + 4}" width="{w:.1f}" height="{row_h - 8}" fill="{color}" rx="2">'
            f"<title>{_e(name)}: {_e(caption)}</title></rect>"
            f'<text class="value" x="{label_w + w + 6:.1f}" y="{y + 17}">{_e(caption)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def stale_svg(report: StaleReport, size: int = 220) -> str:
    """A donut: the share of items not updated for ``days`` days."""
    label = f"Stale share: {report.stale} of {count(report.total, 'item')} not updated for {_fmt(report.days)} days"
    r, stroke = 70.0, 28
    c = size / 2
    circumference = 2 * math.pi * r
    stale_len = report.share * circumference
    return (
        _svg("stale", label, size, size) + f'<circle class="fresh" cx="{c}" cy="{c}" r="{r}" fill="none" '
        f'stroke="{FRESH if report.total else "#e2e8f0"}" stroke-width="{stroke}"/>'
        f'<circle class="stale-arc" cx="{c}" cy="{c}" r="{r}" fill="none" stroke="{STALE}" stroke-width="{stroke}" '
        f'stroke-dasharray="{stale_len:.2f} {circumference:.2f}" transform="rotate(-90 {c} {c})"/>'
        f'<text class="donut-value" x="{c}" y="{c + 2}" text-anchor="middle">{report.share:.0%}</text>'
        f'<text class="donut-caption" x="{c}" y="{c + 22}" text-anchor="middle">stale</text>'
        "</svg>"
    )


def _empty_svg(css_class: str, label: str, width: int, message: str) -> str:
    text = f'<text class="legend" x="12" y="34">{_e(message)}</text>'
    return f"{_svg(css_class + ' empty', label, width, 60)}{text}</svg>"


def namespaces_svg(report: NamespaceCountsReport) -> str:
    rows = [
        (
            "(directly in the prefix)" if r.label is None else r.label,
            r.items,
            f"{count(r.items, 'item')} \u00b7 {count(r.namespaces, 'namespace')}",
        )
        for r in report.rows
    ]
    return bar_svg("namespaces", f"Items per namespace at level {report.level}", rows)


CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 48px; background: #f8fafc; color: #0f172a;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1100px; margin: 0 auto; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 0 0 12px; }
.meta { color: #475569; margin: 0 0 20px; }
.cards { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; margin-bottom: 20px; }
.card { background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; padding: 12px 16px; }
.card .n { font-size: 26px; font-weight: 650; }
.card .t { color: #475569; }
section { background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; padding: 16px 20px; margin-bottom: 20px; }
.row { display: flex; gap: 24px; align-items: flex-start; }
.row > div { flex: 1; min-width: 0; }
svg.chart { display: block; max-width: 100%; height: auto; }
svg .grid { stroke: #e2e8f0; }
svg .axis { stroke: #94a3b8; }
svg text { font-size: 12px; fill: #334155; }
svg .tick { font-size: 11px; fill: #64748b; }
svg .tick.right { fill: #059669; }
svg .donut-value { font-size: 30px; font-weight: 650; fill: #0f172a; }
svg .donut-caption { font-size: 13px; fill: #64748b; }
table { border-collapse: collapse; width: 100%; margin-top: 12px; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 4px 10px; border-bottom: 1px solid #e2e8f0; }
th { background: #f1f5f9; font-weight: 600; }
td.num, th.num { text-align: right; }
details summary { cursor: pointer; color: #334155; margin-top: 8px; }
.note { color: #64748b; font-size: 12px; }
footer { color: #94a3b8; font-size: 12px; text-align: center; }
"""


def _table(table: Table, numeric_from: int = 1) -> str:
    headers, rows = table
    head = "".join(f'<th class="{"num" if i >= numeric_from else ""}">{_e(h)}</th>' for i, h in enumerate(headers))
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"num" if i >= numeric_from else ""}">{_e(c)}</td>' for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    if not rows:
        body = f'<tr><td colspan="{len(headers)}" class="note">No items.</td></tr>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(reports: ReportBundle, *, title: str | None = None) -> str:
    """One self-contained HTML page: summary cards, SVG charts and tables of every report."""
    prefix = _prefix_label(reports.prefix)
    title = title or f"mongostore report: {prefix}"
    ns, gr, st, ttl = reports.namespaces, reports.growth, reports.stale, reports.ttl
    growth_headers, growth_rows = gr.table()
    growth_rows = list(reversed(growth_rows[-MAX_PERIODS:]))
    shown = min(len(gr.points), MAX_PERIODS)
    ns_note = (
        f'<p class="note">The chart shows the {min(len(ns.rows), MAX_BARS)} largest of {ns.total_labels:,} labels.</p>'
        if ns.total_labels > MAX_BARS
        else ""
    )
    ttl_chart = bar_svg("ttl", "When items expire", [(n, v, f"{v:,}") for n, v in ttl.bins()], color=NEUTRAL)
    sections = [
        f"<section><h2>Growth per {_e(gr.period)}</h2>{growth_svg(gr)}"
        f'<p class="note">UTC. "updated" counts items by their latest put, when it came after the first; '
        f"showing the latest {shown} of {len(gr.points)} periods.</p>"
        f"<details><summary>Table</summary>{_table((growth_headers, growth_rows))}</details></section>",
        f"<section><h2>Items per namespace under {_e(prefix)} (level {ns.level})</h2>{namespaces_svg(ns)}{ns_note}"
        f"<details><summary>Table</summary>{_table(ns.table())}</details></section>",
        f'<section><h2>Stale items (not updated for {_e(_fmt(st.days))} days)</h2><div class="row">'
        f'<div style="flex: 0 0 240px">{stale_svg(st)}</div>'
        f"<div><p>{st.stale:,} of {st.total:,} items were last updated before "
        f"{_e(st.cutoff.strftime('%Y-%m-%d %H:%M'))} UTC. The oldest:</p>{_table(st.table(), numeric_from=3)}</div>"
        "</div></section>",
        f"<section><h2>TTL outlook</h2>{ttl_chart}{_table(ttl.table())}</section>",
    ]
    if reports.breakdown is not None:
        bd = reports.breakdown
        rows = [(_show(r.value), r.items, f"{r.items:,}") for r in bd.rows]
        chart = bar_svg("breakdown", f"Items by value.{bd.field}", rows, color=UPDATED)
        sections.append(
            f"<section><h2>Items by value.{_e(bd.field)}</h2>{chart}"
            f"<details><summary>Table</summary>{_table(bd.table())}</details></section>"
        )
    cards = "".join(
        f'<div class="card"><div class="n">{_e(value)}</div><div class="t">{_e(text)}</div></div>'
        for value, text in (
            (f"{ttl.total:,}", "items"),
            (f"{ns.total_namespaces:,}", "namespaces"),
            (f"{st.share:.0%}", f"stale (> {_fmt(st.days)} days)"),
            (f"{ttl.within_day:,}", "expire within a day"),
        )
    )
    generated = _e(reports.generated_at.strftime("%Y-%m-%d %H:%M:%S UTC"))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head>"
        f"<body><main><h1>{_e(title)}</h1>"
        f'<p class="meta">Namespace prefix <strong>{_e(prefix)}</strong> \u00b7 generated {generated}</p>'
        f'<div class="cards">{cards}</div>'
        + "".join(sections)
        + "<footer>Generated by mongostore. Self-contained: no scripts, no network.</footer>"
        "</main></body></html>\n"
    )


_NUMBER = re.compile(r"-?[\d,]+(?:\.\d+)?%?")


def _clean(text: str) -> str:
    """Terminal-safe: control characters (e.g. ANSI escapes in user data) shown as escapes."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _text_table(table: Table) -> str:
    headers, rows = [_clean(h) for h in table[0]], [[_clean(c) for c in row] for row in table[1]]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    numeric = [bool(rows) and all(_NUMBER.fullmatch(r[i]) for r in rows) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric, strict=True)
        ).rstrip()

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in rows)
    if not rows:
        out.append("(none)")
    return "\n".join(out)


def render_text(reports: ReportBundle) -> str:
    """Every report as a titled text table (what ``mongostore stats`` prints)."""
    prefix = _clean(_prefix_label(reports.prefix))
    st = reports.stale
    gr_headers, gr_rows = reports.growth.table()
    blocks = [
        f"mongostore stats for {prefix} (generated {reports.generated_at:%Y-%m-%d %H:%M:%S} UTC)",
        f"Items per namespace (level {reports.namespaces.level}): {count(reports.namespaces.total_items, 'item')} in "
        f"{count(reports.namespaces.total_namespaces, 'namespace')}\n" + _text_table(reports.namespaces.table()),
        f"Growth per {reports.growth.period} (UTC, latest {MAX_PERIODS})\n"
        + _text_table((gr_headers, gr_rows[-MAX_PERIODS:])),
        f"Stale items (not updated for {_fmt(st.days)} days): {st.stale:,} of {st.total:,} ({st.share:.0%}); oldest:\n"
        + _text_table(st.table()),
        "TTL outlook (when items expire)\n" + _text_table(reports.ttl.table()),
    ]
    if reports.breakdown is not None:
        blocks.append(f"Items by value.{reports.breakdown.field}\n" + _text_table(reports.breakdown.table()))
    return "\n\n".join(blocks) + "\n"


def build_report(
    store: Aggregator,
    prefix: tuple[str, ...] = (),
    *,
    stale_days: float = 30,
    level: int | None = None,
    now: datetime | None = None,
    period: Period = "week",
    breakdown_field: str | None = "kind",
    title: str | None = None,
) -> str:
    """Run every report for ``prefix`` and render the HTML page (``mongostore report``)."""
    reports = collect_reports(
        store, prefix, level=level, period=period, stale_days=stale_days, breakdown_field=breakdown_field, now=now
    )
    return render_html(reports, title=title)
