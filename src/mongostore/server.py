"""The Agent Server store factory, kept at this path for compatibility: see ``mongostore.tools.server``."""

from mongostore.tools.server import *  # noqa: F403  (every public name, as its new home lists them)
from mongostore.tools.server import __all__ as __all__
