"""The reference (``reference/``) behind Stanford CS336 assignment 1's adapter functions.

Graded with ``pytest --profile cs336 --impl tests/profiles/cs336_reference`` (``tests/test_profiles.py``); it
must score 100 on the profile's applicable tests. The functions are ``tests/profiles/contract_adapters.py``'s.
"""

import sys
from pathlib import Path

import reference

sys.path.append(str(Path(__file__).resolve().parents[2]))  # tests/profiles, where the shared functions are
from contract_adapters import adapters_for  # noqa: E402

globals().update(adapters_for(reference))
