"""The reference (``reference/``) behind Stanford CS336 assignment 1's adapter functions.

Graded with ``pytest --profile cs336 --impl tests/profiles/cs336_reference`` (``tests/test_profiles.py``); it must
score 100 on the profile's applicable tests. The functions are ``tests/profiles/contract_adapters.py``'s.
"""

import importlib.util
from pathlib import Path

import reference as _impl


def _contract_adapters():
    path = Path(__file__).resolve().parents[2] / "contract_adapters.py"
    spec = importlib.util.spec_from_file_location("contract_adapters", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


globals().update(_contract_adapters().adapters_for(_impl))
