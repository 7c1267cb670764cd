"""Analytics over memories, kept at this path for compatibility: see ``mongostore.tools.analytics``."""

from mongostore.tools.analytics import *  # noqa: F403  (every public name, as its new home lists them)
from mongostore.tools.analytics import __all__ as __all__
