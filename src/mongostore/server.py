"""The Agent Server store factory, kept at this path for compatibility: see ``mongostore.tools.server``."""

from __future__ import annotations

from mongostore.tools.server import (
    ENV_COLLECTION,
    ENV_DATA_DIR,
    ENV_DB,
    ENV_DIMS,
    ENV_EMBED,
    ENV_FIELDS,
    ENV_TIMEOUT,
    ENV_URI,
    IN_MEMORY_URI,
    KNOWN_DIMS,
    LOCAL_SCHEME,
    ServerUnreachableError,
    StoreSettings,
    check_field_path,
    make_store,
    probe_server,
    redact_uri,
    resolve_embeddings,
    split_fields,
)

__all__ = [
    "ENV_COLLECTION",
    "ENV_DATA_DIR",
    "ENV_DB",
    "ENV_DIMS",
    "ENV_EMBED",
    "ENV_FIELDS",
    "ENV_TIMEOUT",
    "ENV_URI",
    "IN_MEMORY_URI",
    "KNOWN_DIMS",
    "LOCAL_SCHEME",
    "ServerUnreachableError",
    "StoreSettings",
    "check_field_path",
    "make_store",
    "probe_server",
    "redact_uri",
    "resolve_embeddings",
    "split_fields",
]
