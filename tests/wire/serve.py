"""Serve mongoeco's MongoDB wire-protocol server on loopback, for the real-server tests.

Run by Python >= 3.13 in its own virtual environment (``.ci/wire`` makes it), not by
the test venv: mongoeco needs 3.13, our tests run on 3.10+. Binds a free port on
127.0.0.1 (or ``--port``), then prints ``port=<n>`` on stdout and writes ``<n>`` to
``--port-file`` once it accepts connections, and stops cleanly on SIGTERM or SIGINT.

It uses mongoeco's memory engine: its SQLite engine never matches strings holding
NUL with equality or ``$in``, and every item ``_id`` holds one (see
docs/real-server.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from mongoeco.engines.memory import MemoryEngine
from mongoeco.wire.proxy import AsyncMongoEcoProxyServer


async def serve(host: str, port: int, port_file: Path | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with AsyncMongoEcoProxyServer(engine=MemoryEngine(), host=host, port=port) as server:
        bound = server.address.port
        if port_file is not None:
            # Written whole then renamed, so a reader never sees half a number.
            tmp = port_file.with_name(port_file.name + ".tmp")
            tmp.write_text(f"{bound}\n")
            os.replace(tmp, port_file)
        print(f"port={bound}", flush=True)
        await stop.wait()
    print("stopped", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 (the default): any free port")
    parser.add_argument("--port-file", type=Path, help="write the bound port here once serving")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.host, args.port, args.port_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
