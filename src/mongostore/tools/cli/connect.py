"""From the connection options to a store (local, in-memory or a server), and the context every command gets."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mongostore.store import MongoStore
from mongostore.tools.cli.output import PROG, CLIError, dumps
from mongostore.tools.settings import (
    ENV_DATA_DIR,
    ENV_DB,
    IN_MEMORY_URI,
    LOCAL_SCHEME,
    ServerUnreachableError,
    StoreSettings,
    local_dir_error,
    probe_server,
    split_fields,
)


@dataclass
class Ctx:
    """What every command gets: the store, the settings and the output mode."""

    args: argparse.Namespace
    store: MongoStore
    settings: StoreSettings
    embedder: str
    json: bool
    progress: bool
    injected: bool = False

    @property
    def where(self) -> str:
        """Where the data is, in a few words, for result lines: the local store's file is named once,
        on stderr when it opens, so they say "the local store" (``--json`` keeps the path)."""
        if self.injected:
            return "the given store"
        if self.settings.local and not self.json:
            return "the local store"
        return self.settings.where()

    @property
    def local(self) -> bool:
        """The command runs on the local store (a file), not on a store given to ``main``."""
        return self.settings.local and not self.injected

    def label(self, path: bool = True) -> str:
        """``StoreSettings.label``, or "the given store"."""
        return "the given store" if self.injected else self.settings.label(path)

    def print(self, text: str = "") -> None:
        sys.stdout.write(text + "\n")

    def envelope(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The one shape of every command's ``--json`` output: ``ok``, ``command`` and ``store``,
        then the command's own fields (a list goes under a name: ``items``, ``namespaces``)."""
        return {"ok": True, "command": self.args.command, "store": self.where, **fields}

    def emit(self, fields: Mapping[str, Any]) -> None:
        """Print the command's one JSON document on stdout (``envelope``)."""
        sys.stdout.write(dumps(self.envelope(fields)) + "\n")

    def warn(self, text: str) -> None:
        sys.stderr.write(f"{PROG}: {text}\n")


#: ``mongostore.tools.demo.DEMO_DB``, repeated so that commands other than ``demo`` never import
#: the demo (and LangGraph's graph machinery): seconds off every command's start.
DEMO_DB = "mongostore_demo"


def _settings(args: argparse.Namespace) -> StoreSettings:
    """The command's store settings; the demo's default to a throwaway store, in a database of its own."""
    fields = split_fields(args.fields, "--fields") if args.fields is not None else None
    uri = args.uri
    if uri is not None and not uri.strip():
        raise CLIError("--uri is empty: give a mongodb:// URI, or leave it out for the local store")
    settings = StoreSettings.from_env(
        uri=uri.strip() if uri else None,
        db=args.db or None,
        collection=args.collection or None,
        embed=args.embed,
        dims=args.dims,
        fields=fields,
        data_dir=args.data_dir or None,
    )
    if args.command == "demo" and not args.db and not os.environ.get(ENV_DB):
        settings = replace(settings, db=DEMO_DB)
    if args.command == "demo" and settings.uri is None:
        settings = replace(settings, uri=IN_MEMORY_URI)
    return settings


@contextmanager
def _open(
    settings: StoreSettings,
    timeout: float,
    warn: Callable[[str], None],
    *,
    resolved: tuple[Any, str] | None = None,
) -> Iterator[tuple[MongoStore, str]]:
    """The store and the embedder's description (``resolved``: ``settings.index()``, when the caller checked
    it already). Each operation on the local store is a SQLite transaction of its own, as a server isolates
    each one (``export | import -`` in two processes works)."""
    index, description = resolved if resolved is not None else settings.index()
    if not settings.embedded:
        assert settings.uri is not None
        note = probe_server(settings.uri, timeout)
        if note:
            warn(note)
    with contextlib.ExitStack() as stack:
        try:
            store: MongoStore = stack.enter_context(settings.open(MongoStore, timeout, index=index))
            _first_read(store, settings, warn)
        except OSError as exc:  # what only opening the local store's directory could tell
            if not settings.local or isinstance(exc, ServerUnreachableError):
                raise
            raise local_dir_error(settings.local_dir(), data_dir_option(settings), exc) from exc
        yield store, description


def _first_read(store: MongoStore, settings: StoreSettings, warn: Callable[[str], None]) -> None:
    """Give a new store its indexes, as on a set-up server."""
    if settings.in_memory:
        store.setup()  # a fresh, empty store: give it its indexes so it behaves like a set-up one
    elif settings.local:
        store.collection.engine.on_wait = warn
        names = store.collection.database.list_collection_names()
        wanted = [store.collection.name]
        if store.vectors_collection is not None:
            wanted.append(store.vectors_collection.name)
        if any(name not in names for name in wanted):
            store.setup()  # a new store (or a first index)


def data_dir_option(settings: StoreSettings) -> str:
    """How the local store's directory was chosen, to say how to give another one."""
    if settings.uri is not None and settings.uri.startswith(LOCAL_SCHEME) and len(settings.uri) > len(LOCAL_SCHEME):
        return f"--uri {LOCAL_SCHEME}/other/dir"
    return f"--data-dir or {ENV_DATA_DIR}"


def _empty_hint(ctx: Ctx) -> str:
    hint = " (the in-memory store starts empty in every command: leave out --uri for the local store)"
    return hint if ctx.settings.in_memory and not ctx.injected else ""


def _default_dir_text() -> str:
    """Where the local store lives by default, as ``--help`` says it: ``$MONGOSTORE_DATA_DIR``, then
    (on Linux and other Unixes) ``$XDG_DATA_HOME/mongostore``, then the per-user directory."""
    from mongostore.drivers.embedded.paths import default_data_dir

    home = str(Path.home())
    text = str(default_data_dir({}))
    text = "~" + text[len(home) :] if text.startswith(home) else text
    xdg = "" if sys.platform in ("win32", "darwin") else "$XDG_DATA_HOME/mongostore, else "
    return f"${ENV_DATA_DIR}, else {xdg}{text}"
