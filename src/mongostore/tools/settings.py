"""The store settings shared by the ``mongostore`` command and the Agent Server factory: the
environment variables (docs/cli.md), URI redaction, the server probe, the embedder chooser, field
paths, and ``StoreSettings``."""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote

from langchain_core.embeddings import Embeddings
from langgraph.store.base import TTLConfig
from pymongo.errors import ServerSelectionTimeoutError

from mongostore.config import MAX_TTL_MINUTES, MongoIndexConfig
from mongostore.drivers.connect import probe_server as _probe_server
from mongostore.drivers.embedded.paths import ENV_DATA_DIR, LOCAL_SCHEME, default_data_dir, parse_local_uri
from mongostore.errors import ConfigurationError, ServerUnreachableError
from mongostore.store import DEFAULT_COLLECTION, DEFAULT_DB
from mongostore.tools.embeddings import (
    MiniLMEmbeddings,
    default_embeddings,
    local_embedder,
    unknown_embedder,
)

__all__ = [
    "DEFAULT_FIELDS",
    "ENV_COLLECTION",
    "ENV_DATA_DIR",
    "ENV_DB",
    "ENV_DIMS",
    "ENV_EMBED",
    "ENV_FIELDS",
    "ENV_TIMEOUT",
    "ENV_TTL_MINUTES",
    "ENV_TTL_REFRESH_ON_READ",
    "ENV_TTL_SWEEP_MINUTES",
    "ENV_URI",
    "IN_MEMORY_URI",
    "KNOWN_DIMS",
    "LOCAL_SCHEME",
    "ServerUnreachableError",
    "StoreSettings",
    "check_field_path",
    "check_local_dir",
    "probe_server",
    "redact_uri",
    "resolve_embeddings",
    "split_fields",
    "ttl_from_env",
]

ENV_URI = "MONGODB_URI"
ENV_DB = "MONGOSTORE_DB"
ENV_COLLECTION = "MONGOSTORE_COLLECTION"
ENV_EMBED = "MONGOSTORE_EMBED"
ENV_DIMS = "MONGOSTORE_DIMS"
ENV_FIELDS = "MONGOSTORE_FIELDS"
#: What the CLI, the demo and the Agent Server embed when no fields are given, so that they embed
#: one shared store the same way (a value without a ``text`` string gets no vector).
DEFAULT_FIELDS: tuple[str, ...] = ("text",)
ENV_TIMEOUT = "MONGOSTORE_TIMEOUT"
#: The Agent Server's TTL (``langgraph_api`` calls ``make_store()`` with no arguments): LangGraph's
#: ``TTLConfig`` keys, every duration in minutes.
ENV_TTL_MINUTES = "MONGOSTORE_TTL_MINUTES"
ENV_TTL_REFRESH_ON_READ = "MONGOSTORE_TTL_REFRESH_ON_READ"
ENV_TTL_SWEEP_MINUTES = "MONGOSTORE_TTL_SWEEP_MINUTES"
IN_MEMORY_URI = "mongomock://"
DEFAULT_TIMEOUT = 10.0

#: Output sizes of common provider models, so ``--dims`` can be left out for them.
KNOWN_DIMS: dict[str, int] = {
    "openai:text-embedding-3-small": 1536,
    "openai:text-embedding-3-large": 3072,
    "openai:text-embedding-ada-002": 1536,
}

_NO_INDEX = frozenset({"none", "off", "false", "no"})
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*://)(.*)$", re.IGNORECASE | re.DOTALL)
#: Query options whose value is a credential (lower case), and words that mark one.
_SECRET_OPTIONS = frozenset(
    {"authmechanismproperties", "tlscertificatekeyfilepassword", "sslpemkeypassword", "sslclientcertificatekeypassword"}
)
_SECRET_WORDS = ("password", "secret", "token", "passwd", "pwd", "apikey", "api_key", "credential")


def redact_uri(uri: str) -> str:
    """The URI with every credential hidden (safe to print and log), hiding more when in doubt.

    The password (up to the *last* ``@`` before the hosts, so an unescaped ``/`` or ``@`` in it is
    hidden too) and credential-bearing options (``authMechanismProperties``, which carries
    ``AWS_SESSION_TOKEN``; anything named like a password, secret or token) become ``***``.
    """
    m = _SCHEME.match(uri.strip())
    if not m:
        return uri
    scheme, rest = m.group(1), m.group(2)
    at = rest.rfind("@")
    if at >= 0:
        userinfo, rest = rest[:at], rest[at + 1 :]
        user = userinfo.split(":", 1)[0]
        if "/" in user or "?" in user:  # not a user name: hide the lot
            user = "***"
        prefix = f"{scheme}{user}:***@" if ":" in userinfo or user == "***" else f"{scheme}{user}@"
    else:
        prefix = scheme
    if "?" in rest:
        head, query = rest.split("?", 1)
        parts = []
        for part in re.split(r"([&;])", query):
            if part in ("&", ";"):
                parts.append(part)
                continue
            name, eq, _value = part.partition("=")
            lowered = unquote(name).lower()
            secret = lowered in _SECRET_OPTIONS or any(word in lowered for word in _SECRET_WORDS)
            parts.append(f"{name}=***" if eq and secret else part)
        rest = f"{head}?{''.join(parts)}"
    return prefix + rest


#: What the probe's error adds for the CLI and the Agent Server.
CLI_HINT = "(`docker compose up -d` starts one; without --uri / MONGODB_URI the local store needs none)"


def probe_server(uri: str, timeout: float = DEFAULT_TIMEOUT) -> str | None:
    """``mongostore.drivers.connect.probe_server`` with the CLI's hint: fail in milliseconds where
    pymongo would wait its whole server-selection timeout (``ServerUnreachableError``)."""
    return _probe_server(uri, timeout, CLI_HINT)


def _one_line(exc: BaseException) -> str:
    """The error as one line: every line of its message joined, cut at a sentence end if long."""
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, ServerSelectionTimeoutError):
        text = text.split(", Timeout:", 1)[0].split(" (configured timeouts:", 1)[0]
    text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    if len(text) <= 600:
        return text
    cut = text.rfind(". ", 0, 600)
    return text[: cut + 1] if cut > 200 else text[:599] + "…"


def resolve_embeddings(spec: str | None, dims: int | None = None) -> tuple[Embeddings | str, int, str] | None:
    """``(embed, dims, description)`` for an ``--embed`` / ``MONGOSTORE_EMBED`` value (``None`` for ``"none"``;
    ``""``: the best local model installed; a provider string goes to LangGraph's ``init_embeddings``)."""
    name = (spec or "").strip()
    lowered = name.lower()
    if dims is not None and (isinstance(dims, bool) or dims < 1):
        raise ConfigurationError(f"dims must be a positive integer, got {dims!r}")
    if lowered in _NO_INDEX:
        return None
    if not name:
        if dims is None:
            return default_embeddings()
        lowered = "minilm" if MiniLMEmbeddings.available() else "hashing"
    if (local := local_embedder(lowered, dims)) is not None:
        return local
    if ":" not in name:
        raise unknown_embedder(
            name, "minilm, hashing, none, or a LangChain provider string such as openai:text-embedding-3-small"
        )
    provider_dims = dims or KNOWN_DIMS.get(lowered)
    if provider_dims is None:
        raise ConfigurationError(f"set the vector size of {name!r} with --dims or {ENV_DIMS}")
    description = f"{name} ({provider_dims} dims) through LangChain's init_embeddings (needs its package and API key)"
    return name, provider_dims, description


def _env(env: Mapping[str, str], name: str) -> str:
    return (env.get(name) or "").strip()


def _parse_dims(raw: str) -> int | None:
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigurationError(f"{ENV_DIMS} must be a positive integer, got {raw!r}")
    return value


_PATH_SEGMENT = re.compile(r"^(?:\*|\{[^{}\[\],.]+(?:,[^{}\[\],.]+)*\}|[^.\[\]{},*]+)(?:\[(?:-?\d+|\*)\])*$")


def check_field_path(path: str, what: str = "field path") -> str:
    """``path`` if it is a LangGraph field path (``text``, ``a.b``, ``a[0]``, ``a[*].b``, ``{a,b}``, ``$``);
    LangGraph's own tokenizer accepts ``text[`` and embeds nothing, so it is refused here, by name."""
    if path == "$" or all(_PATH_SEGMENT.match(seg) for seg in _split_outside_braces(path, ".")):
        return path
    raise ConfigurationError(
        f"{what} {path!r} is not a field path: use names joined by dots, [0] / [-1] / [*] for list "
        "items and {a,b} for several fields, e.g. text or notes[*].body"
    )


def _split_outside_braces(text: str, sep: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts


def split_fields(raw: str, what: str) -> tuple[str, ...]:
    """Comma-separated field paths (commas inside ``{a,b}`` belong to the path), each checked."""
    fields = [f.strip() for f in _split_outside_braces(raw, ",")]
    if any(not f for f in fields):
        raise ConfigurationError(f"{what} {raw!r} has an empty field: give comma-separated paths, e.g. text,tags[*]")
    return tuple(check_field_path(f, f"{what}: the path") for f in fields)


@dataclass(frozen=True)
class StoreSettings:
    """Where the store lives and how it embeds. Built from the environment or the CLI."""

    uri: str | None = None
    db: str = DEFAULT_DB
    collection: str = DEFAULT_COLLECTION
    embed: str | None = None
    dims: int | None = None
    fields: tuple[str, ...] | None = None
    #: The local store's directory (no URI); ``None``: ``MONGOSTORE_DATA_DIR`` or the per-user default.
    data_dir: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> StoreSettings:
        """Settings from ``MONGODB_URI`` and ``MONGOSTORE_*``; keyword overrides that are not None win."""
        env = os.environ if environ is None else environ
        fields = _env(env, ENV_FIELDS)
        settings = cls(
            uri=_env(env, ENV_URI) or None,
            db=_env(env, ENV_DB) or DEFAULT_DB,
            collection=_env(env, ENV_COLLECTION) or DEFAULT_COLLECTION,
            embed=_env(env, ENV_EMBED) or None,
            dims=_parse_dims(_env(env, ENV_DIMS)),
            fields=split_fields(fields, ENV_FIELDS) if fields else None,
            data_dir=_env(env, ENV_DATA_DIR) or None,
        )
        return replace(settings, **{k: v for k, v in overrides.items() if v is not None})

    @property
    def in_memory(self) -> bool:
        """True for ``mongomock://``: in memory, lost when the process exits."""
        return self.uri is not None and self.uri.startswith(IN_MEMORY_URI)

    @property
    def local(self) -> bool:
        """True for the persistent embedded store: no URI, or ``mongostore-local://``."""
        return self.uri is None or self.uri.startswith(LOCAL_SCHEME)

    @property
    def embedded(self) -> bool:
        """No server: the local store or the in-memory one."""
        return self.local or self.in_memory

    def local_dir(self) -> Path:
        """The local store's directory (``mongostore-local:///dir``, ``data_dir``, or the default)."""
        if self.uri is not None and self.uri.startswith(LOCAL_SCHEME):
            given = parse_local_uri(self.uri)
            if given is not None:
                return given
        if self.data_dir:
            return Path(self.data_dir).expanduser().absolute()
        return default_data_dir().absolute()

    def local_file(self) -> Path:
        """The file holding this database of the local store."""
        return self.local_dir() / f"{self.db}.sqlite"

    def where(self) -> str:
        """A few words naming where the data is, credentials hidden (for result lines)."""
        if self.local:
            return f"local store {self.local_file()}"
        if self.in_memory:
            return f"the in-memory store (temporary; {self.db}.{self.collection})"
        assert self.uri is not None
        return f"{redact_uri(self.uri)} ({self.db}.{self.collection})"

    def label(self, path: bool = True) -> str:
        """One line saying where the data lives, credentials hidden (``path``: the local store's file too)."""
        where = f"database {self.db!r}, collection {self.collection!r}"
        if self.local:
            return (
                f"local store {str(self.local_file()) + ' ' if path else ''}({where}): kept between commands; "
                f"set --uri or {ENV_URI} for a MongoDB server"
            )
        if self.in_memory:
            return (
                f"embedded in-memory store (mongomock, {where}): temporary, lost when this process exits; "
                f"set --uri or {ENV_URI} for a real server"
            )
        assert self.uri is not None
        return f"{redact_uri(self.uri)} ({where})"

    def index(self) -> tuple[MongoIndexConfig | None, str]:
        """The ``index=`` config and a description of the embedder (``None``: no semantic search)."""
        resolved = resolve_embeddings(self.embed, self.dims)
        if resolved is None:
            return None, "none: semantic search is off (search by namespace and filter only)"
        embed, dims, description = resolved
        config = MongoIndexConfig(dims=dims, embed=embed, fields=list(self.fields or DEFAULT_FIELDS))
        return config, description

    def open(self, cls: Any, timeout: float, **options: Any) -> Any:
        """``cls`` (``MongoStore`` or ``AsyncMongoStore``) where these settings say, as its (sync
        or async) context manager; ``options`` go to the store (``index``, ``ttl``)."""
        options.update(db_name=self.db, collection_name=self.collection)
        if self.local:
            return cls.local(self.local_dir(), **options)
        if self.in_memory:
            return cls.in_memory(**options)
        ms = int(timeout * 1000)
        return cls.from_conn_string(self.uri, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms, **options)


def check_local_dir(directory: Path, how: str) -> None:
    """Refuse a local store directory this process cannot use, before the store opens, naming it and
    ``how`` to give another (``ConfigurationError``): a file, a path through a file, a directory it may
    not write (it is made when missing). What only trying can tell, the store's open reports."""
    probe = directory
    while not probe.exists() and probe.parent != probe:  # the nearest that exists: where it is made
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "is a file" if probe == directory else f"cannot be made: {probe} is a file"
        raise ConfigurationError(
            f"the local store's directory {directory} {where}, not a directory: give a directory with {how} "
            "(it is made if missing)"
        )
    if probe.is_dir() and not os.access(probe, os.W_OK | os.X_OK):
        what = "write in it" if probe == directory else f"make it in {probe}"
        raise ConfigurationError(
            f"the local store's directory {directory} is not usable: no permission to {what}; "
            f"give another directory with {how}"
        )


def local_dir_error(directory: Path, how: str, exc: OSError) -> ConfigurationError:
    """``check_local_dir``'s error for what only opening the store found (``exc``), in one line."""
    reason = exc.strerror or _one_line(exc)
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(directory) else ""
    return ConfigurationError(
        f"cannot use the local store's directory {directory}: {reason}{where}; give another directory with {how}"
    )


def _timeout(env: Mapping[str, str]) -> float:
    raw = _env(env, ENV_TIMEOUT)
    return _positive(raw, ENV_TIMEOUT, sys.float_info.max, "a positive number of seconds") if raw else DEFAULT_TIMEOUT


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _positive(raw: str, name: str, at_most: float, what: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value <= at_most:  # NaN fails too
        raise ConfigurationError(f"{name} must be {what}, got {raw!r}")
    return value


_MINUTES = f"a number of minutes > 0 (at most {MAX_TTL_MINUTES:.0f}, 1,000 years)"


def ttl_from_env(environ: Mapping[str, str] | None = None) -> TTLConfig | None:
    """The store's ``ttl=`` from ``MONGOSTORE_TTL_MINUTES`` (``default_ttl``, with ``default_for_none``:
    every put that gives no ttl gets it, ``ttl=None`` included), ``..._REFRESH_ON_READ`` and
    ``..._SWEEP_MINUTES`` (docs/cli.md); None when none is set. Each is checked here, by name."""
    env = os.environ if environ is None else environ
    minutes = _env(env, ENV_TTL_MINUTES)
    refresh = _env(env, ENV_TTL_REFRESH_ON_READ).lower()
    sweep = _env(env, ENV_TTL_SWEEP_MINUTES)
    if not (minutes or refresh or sweep):
        return None
    config: dict[str, Any] = {}
    if minutes:
        config["default_ttl"] = _positive(minutes, ENV_TTL_MINUTES, MAX_TTL_MINUTES, _MINUTES)
        # The server's /store API sends ttl=None for "no ttl given", and a graph's PutOp has no other
        # way to say it: the default applies to them (docs/decisions.md, "A default TTL and puts ...").
        config["default_for_none"] = True
    if refresh:
        if refresh not in _TRUE | _FALSE:
            raise ConfigurationError(f"{ENV_TTL_REFRESH_ON_READ} must be true or false, got {refresh!r}")
        config["refresh_on_read"] = refresh in _TRUE
    if sweep:
        config["sweep_interval_minutes"] = _positive(sweep, ENV_TTL_SWEEP_MINUTES, MAX_TTL_MINUTES, _MINUTES)
    return cast(TTLConfig, config)  # LangGraph types the sweep interval int; minutes may be fractions
