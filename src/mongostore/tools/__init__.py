"""The tools built on the store: the ``mongostore`` command, analytics and reports, the demo, the
Agent Server factory and the embedders. What they may import: docs/architecture.md."""
