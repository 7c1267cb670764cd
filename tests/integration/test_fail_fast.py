"""``from_conn_string`` with nothing listening fails at once, in one line (issue 29, item 6).

pymongo would retry for its whole server-selection timeout (30 s) and then raise an error
holding its topology description. The stores now probe the hosts first, as the CLI and
the Agent Server already did (``drivers.connect.probe_server``).
"""

from __future__ import annotations

import socket
import time

import pytest

from mongostore import AsyncMongoStore, MongoStore, ServerUnreachableError
from mongostore.drivers.connect import check_reachable


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_sync_store_fails_at_once_with_one_line() -> None:
    uri = f"mongodb://127.0.0.1:{closed_port()}/?directConnection=true"
    started = time.monotonic()
    with pytest.raises(ServerUnreachableError) as info, MongoStore.from_conn_string(uri) as store:
        store.setup()
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "\n" not in message and "connection refused" in message and "Topology" not in message
    assert "MongoStore.local()" in message  # what works without a server
    assert isinstance(info.value, ConnectionError)


async def test_the_async_store_fails_at_once_with_one_line() -> None:
    uri = f"mongodb://127.0.0.1:{closed_port()}/?directConnection=true"
    started = time.monotonic()
    with pytest.raises(ServerUnreachableError) as info:
        async with AsyncMongoStore.from_conn_string(uri) as store:
            await store.setup()
    assert time.monotonic() - started < 5
    assert "\n" not in str(info.value) and "connection refused" in str(info.value)


def test_only_server_uris_are_probed() -> None:
    assert check_reachable("mongomock://") is None
    assert check_reachable("mongostore-local:///tmp/x") is None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        port = listening.getsockname()[1]
        assert check_reachable(f"mongodb://127.0.0.1:{port}/", {"serverSelectionTimeoutMS": 500}) is None


def test_the_cli_keeps_its_own_hint() -> None:
    from mongostore.tools.settings import probe_server

    with pytest.raises(ServerUnreachableError, match="without --uri / MONGODB_URI"):
        probe_server(f"mongodb://127.0.0.1:{closed_port()}/", 1.0)


def test_a_uri_just_probed_is_not_probed_again() -> None:
    from mongostore.drivers.connect import probe_server

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        uri = f"mongodb://127.0.0.1:{listening.getsockname()[1]}/"
        assert probe_server(uri, 1.0) is None  # as the CLI does before opening the store
    assert check_reachable(uri) is None  # closed now, but probed a moment ago: no second wait
