"""``generate``'s contract checked the same way for every track's model (``docs/contract.md``,
generate; MiniLlama's is "MiniGPT.generate's contract, word for word"): a 1-D integer tensor seed is the
list of its ids, and the defaults (``max_new_tokens=50``, ``temperature=0.8``) seen through behaviour.

Used by ``test_contract_basics.py`` and ``test_argument_defaults.py`` (MiniGPT) and by
``modern/test_generate.py`` and ``modern/test_argument_defaults.py`` (MiniLlama).
"""

import torch

from transformer_spec.probes.assertions import assert_equal

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


def assert_generate_defaults(model, model_name: str) -> None:
    """``generate(seed)`` adds 50 tokens, and sampling without a temperature is sampling at 0.8
    (the same generator state gives the same tokens). ``model`` must have logits sharp enough for the
    temperature to change some of 40 samples (a model of the suite's seeded weights, not a fresh one)."""
    out = model.generate([1, 2])
    assert len(out) == 52, (f"{model_name}.generate([1, 2]) returned {len(out)} tokens, expected 2 + 50 "
                            f"(default max_new_tokens=50)")
    a = model.generate([3], 40, generator=torch.Generator().manual_seed(8))
    b = model.generate([3], 40, temperature=0.8, top_k=None, generator=torch.Generator().manual_seed(8))
    assert_equal(torch.tensor(a), torch.tensor(b),
                 what=f"{model_name}.generate([3], 40) vs generate([3], 40, temperature=0.8, top_k=None), "
                      f"generators seeded 8")
