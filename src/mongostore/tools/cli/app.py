"""The ``mongostore`` command (also ``python -m mongostore``): ``main``, the dispatch to a command,
and every error as one line and an exit status. See ``mongostore --help``, docs/cli.md, and e.g.
``mongostore --uri "mongodb://localhost:27017/?directConnection=true" setup``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

from pymongo.errors import ConfigurationError as PyMongoConfigurationError
from pymongo.errors import PyMongoError, ServerSelectionTimeoutError

from mongostore.errors import MongoStoreError, WriteError
from mongostore.store import MongoStore
from mongostore.tools.cli.connect import Ctx, _open, _settings, data_dir_option
from mongostore.tools.cli.output import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, PROG, CLIError, dumps
from mongostore.tools.cli.parser import _UsageError, build_parser
from mongostore.tools.settings import (
    ENV_URI,
    ServerUnreachableError,
    StoreSettings,
    _one_line,
    check_local_dir,
    redact_uri,
)

__all__ = ["main"]


def _error_json(message: str, code: int, command: str | None) -> str:
    """The envelope of a failed command: ``ok`` false, ``command``, ``error``, ``exit_code``."""
    return dumps({"ok": False, "command": command, "error": message, "exit_code": code})


def _fail(json_mode: bool, message: str, code: int, command: str | None, trace: bool = False) -> int:
    """An error: one line on stderr and, with --json, one JSON document on stdout (``trace``: and the traceback)."""
    if trace:
        traceback.print_exc()
    sys.stderr.write(f"{PROG}: error: {message}\n")
    if json_mode:
        with contextlib.suppress(Exception):
            sys.stdout.write(_error_json(message, code, command) + "\n")
            sys.stdout.flush()
    return code


def _dash_hint(argv: Sequence[str], message: str) -> str:
    """A hint when a positional that starts with ``-`` was taken for an option."""
    if "unrecognized arguments" not in message and "the following arguments are required" not in message:
        return ""
    if not {"put", "get", "rm"} & set(argv):
        return ""  # only these take a key that could start with "-"
    dashed = [a for a in argv if a.startswith("-") and not a.startswith("--") and len(a) > 1 and a not in ("-f",)]
    if not dashed or "--" in argv:
        return ""
    return f"; a key or value starting with - goes after --, e.g. {PROG} put users.alice -- {dashed[0]} '{{...}}'"


def main(argv: Sequence[str] | None = None, *, store: MongoStore | None = None) -> int:
    """Run the CLI and return its exit status; ``store``: run every command on that store instead
    of opening one (for tests and for embedding the CLI)."""
    parser = build_parser()
    arglist = list(argv) if argv is not None else sys.argv[1:]
    json_mode = "--json" in arglist[: arglist.index("--")] if "--" in arglist else "--json" in arglist
    try:
        args = parser.parse_args(arglist)
    except _UsageError as exc:
        message = exc.message + _dash_hint(arglist, exc.message)
        sys.stderr.write(f"{exc.prog}: error: {message} (see {exc.prog} --help)\n")
        if json_mode:
            command = next((a for a in arglist if a in parser.commands), None)  # the line did not parse
            sys.stdout.write(_error_json(message, EXIT_USAGE, command) + "\n")
        return EXIT_USAGE
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        sys.stderr.write(f"{PROG}: error: no command given (see the list above)\n")
        if json_mode:
            sys.stdout.write(_error_json("no command given", EXIT_USAGE, None) + "\n")
        return EXIT_USAGE
    with warnings.catch_warnings():
        # Library warnings (e.g. pymongo's "Unknown option" for a URI) as one line each.
        warnings.showwarning = _show_warning
        return _run(args, store)


def _show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    sys.stderr.write(f"{PROG}: warning: {_one_line(Exception(str(message)))}\n")


def _note(text: str) -> None:
    sys.stderr.write(f"{PROG}: {text}\n")
    sys.stderr.flush()


def _run(args: argparse.Namespace, store: MongoStore | None) -> int:
    debug = bool(os.environ.get("MONGOSTORE_DEBUG"))
    settings: StoreSettings | None = None
    json_mode = bool(getattr(args, "json", False))
    command: str | None = getattr(args, "command", None)
    try:
        settings = _settings(args)
        progress = not args.no_progress
        if (check := getattr(args, "check", None)) is not None:
            check(args)  # the command's own arguments, before any store opens
        if store is not None:
            index = store.index_config
            embedder = f"{index.get('embed')!r} ({index.get('dims')} dims)" if index else "none: semantic search is off"
            ctx = Ctx(args, store, settings, embedder, args.json, progress, injected=True)
            return int(args.func(ctx))
        resolved = settings.index()  # the embedder, before the store opens
        if settings.local:
            check_local_dir(settings.local_dir(), data_dir_option(settings))
        if args.command != "demo":
            if settings.local:
                if args.command not in ("doctor", "setup"):  # they name the file themselves, once
                    _note(f"{settings.where()} (no --uri or {ENV_URI}: kept between commands)")
            elif settings.in_memory:
                _note(
                    "using the embedded in-memory store (mongomock): it starts empty and is lost when this "
                    "command exits; leave out --uri for the local store, or set it to a real server"
                )
        opening = _open(settings, args.timeout, _note, resolved=resolved)
        with opening as (opened, description):
            ctx = Ctx(args, opened, settings, description, args.json, progress)
            return int(args.func(ctx))
    except CLIError as exc:
        return _fail(json_mode, str(exc), exc.code, command)
    except KeyboardInterrupt:
        return _fail(json_mode, "interrupted", EXIT_INTERRUPTED, command)
    except BrokenPipeError:
        # The reader went away (e.g. `mongostore export | head`): stop quietly.
        with contextlib.suppress(Exception):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except ServerUnreachableError as exc:
        return _fail(json_mode, str(exc), EXIT_FAILURE, command)
    except ServerSelectionTimeoutError as exc:
        where = redact_uri(settings.uri) if settings and settings.uri else "the server"
        message = f"cannot reach MongoDB at {where} within {args.timeout:g}s: {_one_line(exc)}"
        return _fail(json_mode, message, EXIT_FAILURE, command)
    except PyMongoConfigurationError as exc:
        return _fail(json_mode, f"bad connection settings: {_one_line(exc)}", EXIT_USAGE, command)
    except WriteError as exc:
        return _fail(json_mode, _one_line(exc), EXIT_FAILURE, command)
    except ValueError as exc:
        # JSON errors, InvalidNamespaceError and ours (InvalidValueError, ConfigurationError, PipelineError...).
        return _fail(json_mode, _one_line(exc), EXIT_USAGE, command, debug)
    except (MongoStoreError, PyMongoError) as exc:
        return _fail(json_mode, _one_line(exc), EXIT_FAILURE, command, debug)
    except Exception as exc:
        message = f"unexpected {type(exc).__name__}: {_one_line(exc)} (set MONGOSTORE_DEBUG=1 for the traceback)"
        return _fail(json_mode, message, EXIT_FAILURE, command, debug)
