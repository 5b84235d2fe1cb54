"""Laws of the position encodings and the masks (components ``position``, ``masks``).

Sinusoidal encoding (seed 000 section 6): bounded by 1, ``sin^2 + cos^2 = 1`` per frequency
pair, and ``PE(pos + k)`` is a fixed linear map of ``PE(pos)``: per pair a rotation by the angle
``k * w_i`` with ``w_i = 10000^(-2i / d_model)``, the same for every pos. Both encodings add one
fixed vector per position (independent of x and of the batch item, and the same for a prefix).
The encoding is read as ``forward(zeros)``. Its table is float32 (the contract's buffer), so
it is compared at 5e-5 (float32 rounding of angles up to 64 rad) in any dtype.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close, assert_equal

from .strategies import build, configs, dtypes, law_tolerance, tensors, token_batches

PE_TOL = {"rtol": 0.0, "atol": 5e-5}


def _table(impl, d_model, length, dtype=torch.float64, max_len=64):
    pe = impl.SinusoidalPositionEncoding(d_model=d_model, max_len=max_len).to(dtype).eval()
    return pe(torch.zeros(1, length, d_model, dtype=dtype))[0].double()  # (L, D)


even_dims = st.integers(1, 8).map(lambda h: 2 * h)


@pytest.mark.component("position")
@given(d_model=even_dims, length=st.integers(1, 64))
def test_sinusoidal_encoding_is_bounded_by_one(impl, d_model, length):
    pe = _table(impl, d_model, length)
    worst = pe.abs().max().item()
    assert worst <= 1 + 1e-6, f"SinusoidalPositionEncoding(d_model={d_model}) has an entry {worst:.6g}, |sin|, |cos| <= 1"


@pytest.mark.component("position")
@given(d_model=even_dims, length=st.integers(1, 64))
def test_sinusoidal_encoding_sin_cos_pairs_have_unit_norm(impl, d_model, length):
    pe = _table(impl, d_model, length)
    norms = pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2  # (L, D/2)
    assert_close(norms, torch.ones_like(norms), what=f"PE[pos, 2i]^2 + PE[pos, 2i+1]^2 (d_model={d_model})", **PE_TOL)


@pytest.mark.component("position")
@given(d_model=even_dims, pos=st.integers(0, 31), k=st.integers(0, 32))
def test_sinusoidal_encoding_shift_by_k_is_a_fixed_rotation(impl, d_model, pos, k):
    """(sin(w(p+k)), cos(w(p+k))) = [[cos wk, sin wk], [-sin wk, cos wk]] (sin wp, cos wp):
    PE(pos + k) is a linear map of PE(pos) that depends on k only."""
    pe = _table(impl, d_model, pos + k + 1)
    i = torch.arange(d_model // 2, dtype=torch.float64)
    angle = k * 10000.0 ** (-2 * i / d_model)
    s, c = pe[pos, 0::2], pe[pos, 1::2]
    expected = torch.empty(d_model, dtype=torch.float64)
    expected[0::2] = torch.cos(angle) * s + torch.sin(angle) * c
    expected[1::2] = -torch.sin(angle) * s + torch.cos(angle) * c
    assert_close(pe[pos + k], expected, **PE_TOL,
                 what=f"PE(pos + k) vs. the rotation by k * 10000^(-2i/d_model) of PE(pos), pos={pos}, k={k}")


@pytest.mark.component("position")
@pytest.mark.parametrize("kind", ["SinusoidalPositionEncoding", "LearnedPositionEmbedding"])
@given(config=configs(max_heads=1, max_dk=6), length=st.integers(1, 6), data=st.data())
def test_position_encoding_adds_one_fixed_vector_per_position(impl, kind, config, length, data):
    """forward(x) - x does not depend on x or on the batch item, and a shorter sequence gets the
    first rows of a longer one's."""
    d = config.d_model
    module = build(getattr(impl, kind), config, d_model=d, max_len=8)
    x = data.draw(st.integers(1, 3).flatmap(lambda b: tensors((b, length, d), config.dtype)), label="x")
    added = module(x) - x
    ref = module(torch.zeros(1, 8, d, dtype=config.dtype))  # the first 8 position vectors
    tol = law_tolerance(config.dtype)
    tol = {"rtol": tol["rtol"], "atol": max(tol["atol"], 4 * torch.finfo(config.dtype).eps)}
    assert_close(added, ref[:, :length].expand_as(added), what=f"{kind}: forward(x) - x vs. the first "
                 f"{length} rows of forward(zeros) for a longer sequence", **tol)


@pytest.mark.component("masks")
@given(n=st.integers(1, 12))
@pytest.mark.needs('causal_mask')
def test_causal_mask_blocks_exactly_the_future(impl, n):
    i = torch.arange(n)
    assert_equal(impl.causal_mask(n), i[None, :] > i[:, None],
                 what=f"causal_mask({n}): True exactly where key j > query i")


@pytest.mark.component("masks")
@pytest.mark.track("classic")  # padding_mask: the modern track has causal_mask only
@given(pad_id=st.integers(0, 3), data=st.data())
def test_padding_mask_blocks_exactly_the_padded_keys(impl, pad_id, data):
    tokens = data.draw(token_batches(5, max_batch=3), label="tokens")
    assert_equal(impl.padding_mask(tokens, pad_id), (tokens == pad_id)[:, None, None, :],
                 what=f"padding_mask(tokens, pad_id={pad_id}): (B, 1, 1, L), True where tokens == pad_id")


@pytest.mark.component("masks")
@given(n=st.integers(1, 6), dtype=dtypes(), data=st.data())
@pytest.mark.needs('weights')
def test_causal_mask_makes_attention_causal(impl, n, dtype, data):
    """The submission's own causal_mask, used with its attention, hides the future."""
    q, k, v = (data.draw(tensors((n, 2), dtype), label=name) for name in ("q", "k", "v"))
    _, w = impl.scaled_dot_product_attention(q, k, v, impl.causal_mask(n))
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    assert (w[future] == 0).all(), "attention weights on future keys with causal_mask must be exactly 0"
