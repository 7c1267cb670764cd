"""The memory demo, kept at this path for compatibility: see ``mongostore.tools.demo``."""

from mongostore.tools.demo import *  # noqa: F403  (every public name, as its new home lists them)
from mongostore.tools.demo import __all__ as __all__
