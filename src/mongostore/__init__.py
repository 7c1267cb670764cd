"""mongostore: a LangGraph long-term-memory store on MongoDB.

``MongoStore`` (sync, pymongo) and ``AsyncMongoStore`` (asyncio: pymongo's ``AsyncMongoClient`` or
Motor) are full ``langgraph.store.base.BaseStore`` s; semantic search runs as ``$vectorSearch`` on
Atlas and as an exact numpy ranking elsewhere.
"""

from __future__ import annotations

from langgraph.store.base import InvalidNamespaceError

from mongostore.aio import AsyncMongoStore
from mongostore.config import MongoIndexConfig
from mongostore.core.changes import Change
from mongostore.core.plan.purge import PurgeReport
from mongostore.errors import (
    ChangeFeedUnavailableError,
    ChangeHistoryLostError,
    ConfigurationError,
    DamagedStoreFileError,
    InvalidFilterError,
    InvalidValueError,
    MongoStoreError,
    PipelineError,
    ServerUnreachableError,
    VectorIndexError,
    WriteError,
)
from mongostore.store import MongoStore

__version__ = "0.1.0"

__all__ = [
    "AsyncMongoStore",
    "Change",
    "ChangeFeedUnavailableError",
    "ChangeHistoryLostError",
    "ConfigurationError",
    "DamagedStoreFileError",
    "InvalidFilterError",
    "InvalidNamespaceError",
    "InvalidValueError",
    "MongoIndexConfig",
    "MongoStore",
    "MongoStoreError",
    "PipelineError",
    "PurgeReport",
    "ServerUnreachableError",
    "VectorIndexError",
    "WriteError",
    "__version__",
]
