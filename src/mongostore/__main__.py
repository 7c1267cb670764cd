"""``python -m mongostore``: the same as the ``mongostore`` command."""

from mongostore.tools.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
