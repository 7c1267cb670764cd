"""The argument parser: the common options, every command's arguments, argparse value types."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from mongostore import __version__
from mongostore.tools.cli.admin import check_reindex, cmd_doctor, cmd_reindex, cmd_setup
from mongostore.tools.cli.connect import DEMO_DB, Ctx, _default_dir_text
from mongostore.tools.cli.items import (
    check_item,
    check_ls,
    check_put,
    check_search,
    cmd_get,
    cmd_ls,
    cmd_put,
    cmd_rm,
    cmd_search,
)
from mongostore.tools.cli.output import PROG
from mongostore.tools.cli.purge import check_purge, cmd_purge
from mongostore.tools.cli.reports import check_reports, cmd_demo, cmd_report, cmd_stats
from mongostore.tools.cli.transfer import check_export, check_import, cmd_export, cmd_import
from mongostore.tools.cli.watch import check_watch, cmd_watch
from mongostore.tools.settings import DEFAULT_TIMEOUT, ENV_URI


def _at_least_one(text: str) -> int:
    value = _positive_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


#: The connection and output options every command takes (listed once, in ``mongostore --help``).
COMMON_OPTIONS = "--uri --data-dir --db --collection --embed --dims --fields --timeout --json --no-progress"


def _common(parser: argparse.ArgumentParser, *, sub: bool) -> None:
    """Connection, embedding and output options, before or after the command name (shown in
    ``mongostore --help``; each command's ``--help`` names them in one line)."""
    data_dir = f"the local store's directory, used without a URI (default: {_default_dir_text()})"
    embed = (
        "minilm, hashing, none, or a LangChain provider string like openai:text-embedding-3-small "
        "(default: $MONGOSTORE_EMBED, else minilm when installed, else hashing)"
    )
    fields = (
        "comma-separated value paths to embed, e.g. text,tags[*]; $ is the whole value "
        "(default: $MONGOSTORE_FIELDS or text)"
    )
    timeout = {
        "type": _positive_float,
        "default": DEFAULT_TIMEOUT,
        "help": "seconds to wait for the server (default 10)",
    }
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {
        "connection": [
            ("--uri", {"help": f"MongoDB URI (default: ${ENV_URI}; none: the local store; mongomock:// is in memory)"}),
            ("--data-dir", {"metavar": "DIR", "help": data_dir}),
            ("--db", {"help": "database (default: $MONGOSTORE_DB or mongostore)"}),
            ("--collection", {"help": "items collection (default: $MONGOSTORE_COLLECTION or memories)"}),
            ("--timeout", timeout),
        ],
        "embedding": [
            ("--embed", {"help": embed}),
            ("--dims", {"type": _positive_int, "help": "vector size (default: $MONGOSTORE_DIMS or the model's)"}),
            ("--fields", {"help": fields}),
        ],
        "output": [
            ("--json", {"action": "store_true", "help": "one JSON document on stdout, errors included"}),
            ("--no-progress", {"action": "store_true", "help": "never draw a progress bar"}),
        ],
    }
    for title, options in groups.items():
        group = parser if sub else parser.add_argument_group(f"{title} (also after the command)")
        for flag, kwargs in options:
            if sub:  # a command's own default would override the one given before its name
                kwargs = {**kwargs, "default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
            group.add_argument(flag, **kwargs)


class _UsageError(Exception):
    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


class _Parser(argparse.ArgumentParser):
    commands: tuple[str, ...] = ()  # the top-level parser's: every command's name

    def error(self, message: str) -> Any:  # one line plus the usage hint, exit 2 (see main)
        raise _UsageError(self.prog, message)


def build_parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="A LangGraph long-term-memory store on MongoDB: demo, admin and data tools.",
        epilog="Namespaces are dotted: users.alice.memories = ('users', 'alice', 'memories'). "
        "Without --uri / MONGODB_URI every command runs on the local store, a file under --data-dir that is "
        "kept between commands (`mongostore doctor` says where).",
    )
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {__version__}")
    _common(parser, sub=False)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def sub(
        name: str,
        help_: str,
        fn: Callable[[Ctx], int],
        epilog: str = "",
        check: Callable[[argparse.Namespace], None] | None = None,
    ) -> argparse.ArgumentParser:
        """A command: ``fn`` runs it on the open store; ``check`` checks its arguments before the store opens."""
        p = subs.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=(epilog + " " if epilog else "")
            + f"Also takes the connection, embedding and output options ({COMMON_OPTIONS}): see `{PROG} --help`.",
        )
        _common(p, sub=True)
        p.set_defaults(func=fn, check=check)
        return p

    p = sub(
        "demo",
        "run the LangGraph memory demo (two threads, one user, semantic recall)",
        cmd_demo,
        "Without --uri it runs on a temporary in-memory store; with one, in database "
        f"{DEMO_DB!r} unless --db or $MONGOSTORE_DB says otherwise.",
    )
    p.add_argument("--user", default="alice", help="the user id whose memories the demo writes (default alice)")

    sub("setup", "create the indexes (and the Atlas vector index); safe to run on every deploy", cmd_setup)
    sub("doctor", "server version, vector search and search path, index status, item and vector counts", cmd_doctor)

    key_help = "the item's key within the namespace (a key starting with - goes after --)"
    p = sub(
        "put",
        "store one item (an upsert)",
        cmd_put,
        f"A key that starts with -: {PROG} put users.alice -- -k1 '{{}}'.",
        check_put,
    )
    p.add_argument("namespace", help="dotted namespace, e.g. users.alice.memories")
    p.add_argument("key", help=key_help)
    p.add_argument("value", help="a JSON object, or - to read it from stdin")
    p.add_argument("--ttl", type=float, help="expire after this many minutes")
    grp = p.add_mutually_exclusive_group()
    grp.add_argument("--no-index", action="store_true", help="do not embed this item")
    grp.add_argument("--index", help="comma-separated fields to embed for this item (instead of --fields)")

    p = sub("get", "show one item, with its TTL and expiry", cmd_get, check=check_item)
    p.add_argument("namespace", help="dotted namespace, e.g. users.alice.memories")
    p.add_argument("key", help=key_help)

    p = sub("rm", "delete one item (and its vectors)", cmd_rm, check=check_item)
    p.add_argument("namespace", help="dotted namespace, e.g. users.alice.memories")
    p.add_argument("key", help=key_help)
    p.add_argument("-f", "--force", action="store_true", help="succeed even if the item does not exist")

    p = sub(
        "purge",
        "delete every item under a namespace prefix, with its vectors (asks first; --yes without a terminal)",
        cmd_purge,
        "Whole labels: users.al never touches users.alice. The empty prefix is refused.",
        check_purge,
    )
    p.add_argument("namespace", help="dotted namespace prefix, e.g. users.alice")
    p.add_argument("--dry-run", action="store_true", help="count what it would delete, delete nothing")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask (needed without a terminal)")

    p = sub("search", "list or semantically search items under a namespace prefix", cmd_search, check=check_search)
    p.add_argument("prefix", nargs="?", default="", help="dotted namespace prefix (default: everything)")
    p.add_argument("-q", "--query", help="natural-language query (semantic search)")
    p.add_argument("--filter", help='JSON filter on value fields, e.g. \'{"kind": "preference"}\'')
    p.add_argument("--limit", type=_at_least_one, default=10, help="at most this many items (default 10)")
    p.add_argument("--offset", type=_positive_int, default=0, help="skip this many items first")

    p = sub("ls", "list namespaces", cmd_ls, check=check_ls)
    p.add_argument("--prefix", help="only namespaces starting with this (dotted; * matches one label)")
    p.add_argument("--suffix", help="only namespaces ending with this (dotted; * matches one label)")
    p.add_argument("--max-depth", type=_positive_int, help="truncate namespaces to this many labels")
    p.add_argument("--limit", type=_at_least_one, default=100, help="at most this many (default 100)")
    p.add_argument("--offset", type=_positive_int, default=0)

    p = sub(
        "watch",
        "print each change (put, delete) under a namespace prefix as it happens, like tail -f",
        cmd_watch,
        "Ctrl-C stops it. Needs change streams (a replica set, a sharded cluster or Atlas) or the local store. "
        "--json: one JSON line per change, with the resume_token that --start-after takes.",
        check=check_watch,
    )
    p.add_argument("prefix", nargs="?", default="", help="dotted namespace prefix (default: everything)")
    p.add_argument("--start-after", metavar="TOKEN", help="a resume_token from --json: go on after that change")
    p.add_argument("--count", type=_at_least_one, help="stop after this many changes")
    p.add_argument("--seconds", type=_positive_float, help="stop after this many seconds")

    p = sub("export", "write items as JSON Lines (streamed with a cursor)", cmd_export, check=check_export)
    p.add_argument("prefix", nargs="?", default="", help="dotted namespace prefix (default: everything)")
    p.add_argument("-o", "--out", help="file to write (default: stdout)")

    p = sub("import", "read JSON Lines written by export (batched, idempotent upserts)", cmd_import, check=check_import)
    p.add_argument("file", help="a .jsonl file, or - for stdin")
    p.add_argument("--batch-size", type=_positive_int, default=500, help="lines per write (default 500)")
    stamps = p.add_mutually_exclusive_group()
    stamps.add_argument(
        "--reset-timestamps",
        dest="keep_timestamps",
        action="store_false",
        help="set created_at/updated_at to the import time, as for any put "
        "(default: keep the file's, so an import of an export restores the history)",
    )
    stamps.add_argument(
        "--keep-timestamps",
        dest="keep_timestamps",
        action="store_true",
        help="keep the file's created_at/updated_at (the default)",
    )
    p.set_defaults(keep_timestamps=True)

    p = sub(
        "reindex", "re-embed items with the current embedder (batched, resumable)", cmd_reindex, check=check_reindex
    )
    p.add_argument("prefix", nargs="?", default="", help="dotted namespace prefix (default: everything)")
    p.add_argument("--batch-size", type=_positive_int, default=100, help="items per batch (default 100)")
    p.add_argument("--after", help="resume after this checkpoint (printed by an earlier run)")
    p.add_argument("--all", action="store_true", help="also embed items that have no vectors yet")

    for name, help_, fn in (
        ("stats", "counts per namespace, growth, stale items, TTL outlook, breakdown by a value field", cmd_stats),
        ("report", "the same reports as one self-contained HTML page (inline SVG, no scripts)", cmd_report),
    ):
        p = sub(name, help_, fn, check=check_reports)
        p.add_argument("prefix", nargs="?", default="", help="dotted namespace prefix (default: everything)")
        p.add_argument(
            "--level", type=_positive_int, help="count namespaces by the label at this level (default: the next)"
        )
        p.add_argument(
            "--period", choices=["day", "week", "month"], default="week", help="growth period (default week)"
        )
        p.add_argument("--stale-days", type=float, default=30.0, help="stale = not updated for this many days (30)")
        grp = p.add_mutually_exclusive_group()
        grp.add_argument("--breakdown", default="kind", help="value field to break items down by (default kind)")
        grp.add_argument("--no-breakdown", action="store_true", help="leave the value breakdown out")
        p.add_argument("--limit", type=_positive_int, default=50, help="rows per table (default 50)")
        if name == "report":
            p.add_argument("-o", "--out", required=True, help="the HTML file to write (- for stdout)")
            p.add_argument("--title", help="page title")
    parser.commands = tuple(subs.choices)
    return parser
