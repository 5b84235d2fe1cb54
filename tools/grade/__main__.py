"""``python -m tools.grade ...`` and ``python -m tools.grade merge ...``: see :mod:`tools.grade.cli`."""

from ..cli import run_main
from .cli import main

run_main(main)
