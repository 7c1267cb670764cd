"""The HTML / text report, kept at this path for compatibility: see ``mongostore.tools.report``."""

from mongostore.tools.report import *  # noqa: F403  (every public name, as its new home lists them)
from mongostore.tools.report import __all__ as __all__
