"""Is the server there? One check, in milliseconds, before pymongo waits its whole
server-selection timeout (30 s by default) and raises an error holding its topology description.
Used by both stores' ``from_conn_string``, the ``mongostore`` command and the Agent Server.
"""

from __future__ import annotations

import socket
import time

from pymongo.errors import ConfigurationError as PyMongoConfigurationError
from pymongo.errors import InvalidURI
from pymongo.uri_parser import parse_uri

from mongostore.errors import ServerUnreachableError

PYTHON_HINT = "(`docker compose up -d` starts one; MongoStore.local() and MongoStore.in_memory() need none)"
DEFAULT_SELECTION_TIMEOUT = 30.0  # pymongo's, in seconds
# A URI probed this recently (seconds) is not probed again by ``check_reachable``: the CLI and
# the Agent Server probe with their own hint, then open the store.
RECENT_PROBE = 10.0
_probed: dict[str, float] = {}


def probe_server(uri: str, timeout: float, hint: str = PYTHON_HINT) -> str | None:
    """Resolve the hosts (an SRV lookup for ``mongodb+srv://``) and open one TCP connection to each,
    at most 3 s: ``ServerUnreachableError`` when none accepts (refused, unknown host, no such SRV
    record), one line ending in ``hint``; a note when a host did not answer in time (pymongo may
    still reach it within ``timeout``); None when one accepted. An invalid URI raises pymongo's
    ``ConfigurationError`` before any network use.
    """
    srv = uri.startswith("mongodb+srv://")
    if srv:
        # Check the syntax and options first, without DNS: a failure after this is the network's.
        parse_uri("mongodb://" + uri[len("mongodb+srv://") :], warn=True)
    try:
        parsed = parse_uri(uri, warn=True, connect_timeout=timeout)
    except PyMongoConfigurationError as exc:
        if not srv or isinstance(exc, InvalidURI):  # InvalidURI: bad input, found before any DNS query
            raise
        host = uri[len("mongodb+srv://") :].rsplit("@", 1)[-1].split("/")[0].split("?")[0]
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0][:300]
        raise ServerUnreachableError(f"cannot resolve the mongodb+srv host {host}: {reason}") from None
    probe = min(timeout, 3.0)
    refused: list[str] = []
    silent: list[str] = []
    for host, port in parsed["nodelist"]:
        where = f"{host}:{port}"
        if host.endswith(".sock"):
            return None  # a Unix socket: let the driver try
        try:
            with socket.create_connection((host, port), timeout=probe):
                _probed[uri] = time.monotonic()
                return None
        except TimeoutError:
            silent.append(where)
        except socket.gaierror as exc:
            refused.append(f"{where} (unknown host: {exc.strerror or exc})")
        except ConnectionRefusedError:
            refused.append(f"{where} (connection refused)")
        except OSError as exc:
            refused.append(f"{where} ({exc.strerror or exc})")
    if silent:
        _probed[uri] = time.monotonic()  # pymongo may still reach it: waiting again here adds nothing
        return f"no answer from {', '.join(silent)} within {probe:g}s; waiting up to {timeout:g}s for the server"
    raise ServerUnreachableError(f"cannot connect to MongoDB at {', '.join(refused)}: is the server running? {hint}")


def check_reachable(conn_string: str, client_kwargs: dict[str, object] | None = None) -> str | None:
    """``probe_server`` for ``from_conn_string`` with the client's server-selection timeout; only
    ``mongodb://`` and ``mongodb+srv://`` URIs (one host that accepts is enough to go on)."""
    recent = time.monotonic() - _probed.get(conn_string, -RECENT_PROBE) < RECENT_PROBE
    if recent or not conn_string.startswith(("mongodb://", "mongodb+srv://")):
        return None
    raw = (client_kwargs or {}).get("serverSelectionTimeoutMS")
    timeout = DEFAULT_SELECTION_TIMEOUT if not isinstance(raw, (int, float)) or raw <= 0 else raw / 1000
    return probe_server(conn_string, timeout)
