"""``generate``'s seed as a tensor: the contract's "a non-empty list of ints (or a 1-D integer
tensor)" (``docs/contract.md``, generate), one check for every track's model.

Used by ``test_contract_basics.py`` (MiniGPT) and ``modern/test_generate.py`` (MiniLlama).
"""

import torch

SEED = [3, 1, 4]
#: the integer dtypes a seed tensor may have: torch's default for ints, and a narrower one
SEED_DTYPES = {"int64": torch.int64, "int32": torch.int32}


def assert_tensor_seed_is_the_list_seed(model, dtype: torch.dtype, model_name: str) -> None:
    """Greedy ``generate`` from ``torch.tensor(SEED, dtype=dtype)`` must return what it returns from
    the list ``SEED``: a list of Python ints starting with the seed."""
    expected = model.generate(list(SEED), max_new_tokens=4, temperature=0)
    what = f"{model_name}.generate(torch.tensor({SEED}, dtype={dtype}), max_new_tokens=4, temperature=0)"
    got = model.generate(torch.tensor(SEED, dtype=dtype), max_new_tokens=4, temperature=0)
    assert isinstance(got, list) and all(type(t) is int for t in got), (
        f"{what} must return a list of Python ints (the seed may be a 1-D integer tensor), got {got!r}")
    assert got == expected, (
        f"{what} returned {got}, but from the list {SEED} it returns {expected}: a 1-D integer tensor seed "
        f"is the same seed as the list of its ids")
