"""Laws of SwiGLU (component ``swiglu``): ``w2(silu(w1 x) * w3 x)``, ``silu(z) = z * sigmoid(z)``, bias-free.

The value branch ``w3`` enters linearly (scaling ``w3`` scales the output), the gate is SiLU of
``w1 x`` (written here with ``sigmoid``), and without biases a zero vector gives a zero vector.
Each position on its own. Tolerances: :func:`properties.strategies.law_tolerance`.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close
from transformer_spec.probes.llama_shapes import swiglu_shapes
from transformer_spec.probes.testing import seeded_parameters

from ..strategies import Config, dtypes, law_tolerance, seeds, sequences, values
from .strategies import with_weights


@st.composite
def _swiglu_case(draw):
    """A seeded ``SwiGLU(d_model, d_ff)`` (sizes 1..6) and an input ``x (B, L, d_model)``."""
    config = Config(draw(st.integers(1, 6)), 1, draw(st.integers(1, 6)), draw(seeds()), draw(dtypes()))
    return config, draw(sequences(config))


def _swiglu(impl, config):
    params = seeded_parameters(swiglu_shapes(config.d_model, config.d_ff), config.seed)
    return with_weights(impl.SwiGLU(config.d_model, config.d_ff), params, config.dtype)


@pytest.mark.component("swiglu")
@given(case=_swiglu_case())
def test_swiglu_gates_w3_x_with_silu_of_w1_x(impl, case):
    """out = w2 (g * v) with the gate g = w1 x * sigmoid(w1 x) and the value v = w3 x, from the module's
    own w1, w2, w3 (SiLU, not GELU or sigmoid alone, on w1's branch only)."""
    config, x = case
    ffn = _swiglu(impl, config)
    w1, w2, w3 = (getattr(ffn, n).weight.detach() for n in ("w1", "w2", "w3"))
    z = x @ w1.T
    expected = (z * torch.sigmoid(z) * (x @ w3.T)) @ w2.T
    assert_close(ffn(x), expected, **law_tolerance(config.dtype),
                 what="SwiGLU(x) vs w2(silu(w1 x) * w3 x) computed here from its own w1, w2, w3, "
                      "silu(z) = z * sigmoid(z)")


@pytest.mark.component("swiglu")
@given(case=_swiglu_case(), c=values(3.0))
def test_swiglu_is_linear_in_the_value_branch_w3(impl, case, c):
    """w3 -> c * w3 multiplies the output by c: w3 x only multiplies the gate, it goes through no nonlinearity."""
    config, x = case
    ffn = _swiglu(impl, config)
    out = ffn(x)
    with torch.no_grad():
        ffn.w3.weight.mul_(c)
    assert_close(ffn(x), c * out, **law_tolerance(config.dtype),
                 what=f"SwiGLU(x) with w3 scaled by {c:g} vs {c:g} * SwiGLU(x) (the value branch w3 x enters linearly)")


@pytest.mark.component("swiglu")
@given(case=_swiglu_case(), data=st.data())
def test_swiglu_is_bias_free_and_position_wise(impl, case, data):
    """Zeroing some positions of x zeroes exactly their outputs (no bias adds anything to 0) and leaves
    the other positions' outputs as they were."""
    config, x = case
    keep = data.draw(st.lists(st.booleans(), min_size=x.shape[1], max_size=x.shape[1]), label="keep")
    zeroed = x * torch.tensor(keep, dtype=x.dtype)[None, :, None]
    ffn = _swiglu(impl, config)
    expected = ffn(x) * torch.tensor(keep, dtype=x.dtype)[None, :, None]
    assert_close(ffn(zeroed), expected, **law_tolerance(config.dtype),
                 what=f"SwiGLU of x with the positions {[i for i, k in enumerate(keep) if not k]} set to 0: zero "
                      f"there (bias-free) and unchanged elsewhere (position-wise)")
