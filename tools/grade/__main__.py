"""``python -m tools.grade ...`` and ``python -m tools.grade merge ...``: see :mod:`tools.grade.cli`."""

import sys

from .cli import main

sys.exit(main())
