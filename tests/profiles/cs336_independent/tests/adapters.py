"""The independent implementation (``tests/independent/alt_modern.py``) behind Stanford CS336
assignment 1's adapter functions.

Graded with ``pytest --profile cs336 --impl tests/profiles/cs336_independent`` (``tests/test_profiles.py``); it must
score 100 on the profile's applicable tests. The functions are ``tests/profiles/contract_adapters.py``'s.
"""

import importlib.util
from pathlib import Path

def _load_independent():
    path = Path(__file__).resolve().parents[3] / "independent" / "alt_modern.py"
    spec = importlib.util.spec_from_file_location("alt_modern_behind_cs336_adapters", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_impl = _load_independent()


def _contract_adapters():
    path = Path(__file__).resolve().parents[2] / "contract_adapters.py"
    spec = importlib.util.spec_from_file_location("contract_adapters", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


globals().update(_contract_adapters().adapters_for(_impl))
