"""The HTML / text report, kept at this path for compatibility: see ``mongostore.tools.report``."""

from __future__ import annotations

from mongostore.tools.report import (
    build_report,
    render_html,
    render_text,
)

__all__ = [
    "build_report",
    "render_html",
    "render_text",
]
