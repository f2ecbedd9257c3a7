"""Former home of :mod:`contrastkit.checks`, kept importable until both refactor branches land."""
from contrastkit.checks import *  # noqa: F403
