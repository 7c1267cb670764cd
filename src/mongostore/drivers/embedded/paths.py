"""Where the local store lives: its directory, its URI, and its database (file) names."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

#: The environment variable that moves the local store (``--data-dir`` on the command line).
ENV_DATA_DIR = "MONGOSTORE_DATA_DIR"
#: ``mongostore-local://`` (the default directory) or ``mongostore-local:///abs/path``.
LOCAL_SCHEME = "mongostore-local://"
_BAD_DB_CHARS = set('/\\. "$*<>:|?\x00')


def default_data_dir(environ: Any = None) -> Path:
    """Where the local store lives when nothing else is said.

    ``$MONGOSTORE_DATA_DIR`` if set; else ``$XDG_DATA_HOME/mongostore`` (an absolute
    ``XDG_DATA_HOME`` only, as the XDG spec says), else ``~/.local/share/mongostore``;
    on Windows ``%LOCALAPPDATA%\\mongostore``, on macOS ``~/Library/Application Support/mongostore``.
    """
    env = os.environ if environ is None else environ
    explicit = (env.get(ENV_DATA_DIR) or "").strip()
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "win32" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"]) / "mongostore"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "mongostore"
    xdg = (env.get("XDG_DATA_HOME") or "").strip()
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "mongostore"
    return Path.home() / ".local" / "share" / "mongostore"


def parse_local_uri(uri: str) -> Path | None:
    """``mongostore-local://`` -> the default directory; ``mongostore-local:///x/y`` -> ``/x/y``."""
    if not uri.startswith(LOCAL_SCHEME):
        raise ValueError(f"not a {LOCAL_SCHEME} URI: {uri!r}")
    rest = uri[len(LOCAL_SCHEME) :]
    if not rest:
        return None
    if not rest.startswith("/"):
        raise ValueError(
            f"{uri!r}: give an absolute path after {LOCAL_SCHEME} (e.g. {LOCAL_SCHEME}/home/me/data), "
            f"or nothing for the default directory"
        )
    return Path(rest)


def check_db_name(db_name: str) -> str:
    if not db_name or any(c in _BAD_DB_CHARS for c in db_name) or len(db_name) > 63:
        raise ValueError(
            f"database name {db_name!r} cannot be a local store file name: use letters, digits, - and _ (at most 63)"
        )
    return db_name
