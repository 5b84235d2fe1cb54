"""The independent implementation (``tests/independent/alt_modern.py``) behind Stanford CS336
assignment 1's adapter functions.

Graded with ``pytest --profile cs336 --impl tests/profiles/cs336_independent`` (``tests/test_profiles.py``);
it must score 100 on the profile's applicable tests. The functions are ``transformer_spec/profiles/cs336_adapters.py``'s.
"""

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[3]
sys.path.append(str(_TESTS / "independent"))  # the implementation
import alt_modern  # noqa: E402

from transformer_spec.profiles.cs336_adapters import adapters_for  # noqa: E402

globals().update(adapters_for(alt_modern))
