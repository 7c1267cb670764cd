"""``python -m mongostore``: the same as the ``mongostore`` command."""

from __future__ import annotations

from mongostore.tools.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
