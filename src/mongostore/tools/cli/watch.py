"""The ``watch`` command: the store's change feed (``store.watch``) printed as it comes, like ``tail -f``."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from mongostore import Change
from mongostore.tools.cli.connect import Ctx
from mongostore.tools.cli.output import (
    EXIT_OK,
    CLIError,
    _iso,
    _when,
    dumps,
    format_namespace,
    loads_json,
    parse_namespace,
)
from mongostore.tools.settings import _one_line


def check_watch(a: argparse.Namespace) -> None:
    a.prefix_ns = parse_namespace(a.prefix, what="prefix", allow_empty=True)
    a.token = None
    if a.start_after is not None:
        try:
            token = loads_json(a.start_after)
        except ValueError as exc:
            raise CLIError(f"--start-after is not valid JSON: {_one_line(exc)}") from None
        if not isinstance(token, Mapping):
            raise CLIError('--start-after takes a resume token as printed by --json, e.g. \'{"_data": "8263..."}\'')
        a.token = dict(token)


def change_json(change: Change) -> dict[str, Any]:
    """One line of ``watch --json``: the change, and the token that resumes after it."""
    out: dict[str, Any] = {"op": change.op, "namespace": list(change.namespace), "key": change.key}
    if change.op == "put":
        out["value"] = change.value
    out["updated_at"] = _iso(change.updated_at)
    out["resume_token"] = dict(change.resume_token)
    return out


def change_line(change: Change) -> str:
    """One line of ``watch``: when, op, namespace, key, and a put's value as JSON."""
    line = f"{_when(change.updated_at)}  {change.op:<6}  {format_namespace(change.namespace)}  {change.key}"
    if change.op == "put":
        line += "  " + (dumps(change.value) if change.value is not None else "(gone since)")
    return line


def cmd_watch(ctx: Ctx) -> int:
    """Print each change under the prefix until Ctrl-C (or ``--count`` changes, or ``--seconds``); on stop,
    say how to go on from there (``--start-after``)."""
    a = ctx.args
    deadline = None if a.seconds is None else time.monotonic() + a.seconds
    seen = 0
    feed = ctx.store.watch(a.prefix_ns, start_after=a.token)
    ctx.warn(f"watching {format_namespace(a.prefix_ns)} in {ctx.where} (Ctrl-C stops)")  # stderr: once open
    stopping = _CtrlC()
    try:
        while (a.count is None or seen < a.count) and (deadline is None or time.monotonic() < deadline):
            if stopping.is_set():
                break
            change = feed.try_next()  # waits up to about a second: --seconds and Ctrl-C are seen in time
            if change is None:
                if not feed.alive:
                    break
                continue
            seen += 1
            sys.stdout.write((dumps(change_json(change)) if ctx.json else change_line(change)) + "\n")
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a watch ends: not an error
    finally:
        stopping.restore()
        token = feed.resume_token
        feed.close()
    resume = f" (go on with --start-after '{dumps(dict(token))}')" if token is not None else ""
    ctx.warn(f"stopped after {seen:,} change(s){resume}")
    return EXIT_OK


class _CtrlC:
    """Ctrl-C during a watch: a flag the loop reads (each wait lasts at most about a second) besides the
    usual KeyboardInterrupt, which Python drops when it lands in a finalizer (then the flag still stops)."""

    def __init__(self) -> None:
        self._set = False
        self._installed = threading.current_thread() is threading.main_thread()  # (signals: main thread only)
        self._previous: Any = signal.signal(signal.SIGINT, self._handle) if self._installed else None

    def _handle(self, signum: int, frame: Any) -> None:
        self._set = True
        raise KeyboardInterrupt

    def is_set(self) -> bool:
        return self._set

    def restore(self) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous if self._previous is not None else signal.SIG_DFL)
            self._installed = False
