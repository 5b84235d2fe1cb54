"""Laws of the rotary position embedding (component ``rotary``; RoFormer eq. 34).

The pair ``(x[2i], x[2i+1])`` of the token at position ``p`` turns by ``p * theta ** (-2i / head_dim)``.
So: each pair keeps its length; position 0 is the identity; turning at ``a`` then at ``b`` is
turning at ``a + b``; the score of a query at ``m`` and a key at ``n`` depends on ``m - n`` only (and
with the key moved to 0, where nothing turns, it is the query turned by ``m - n`` against the plain
key); each token turns by its own position alone, so ``positions`` broadcast like any tensor and
``None`` is ``arange(L)``; a vector in one pair stays in that pair, turned by that pair's angle.
Tables of ``max_len`` 16. Tolerances: :func:`properties.modern.strategies.rope_tolerance` (the
contract lets the angle tables be float32, even for float64 input).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close

from ..strategies import batch_shapes, dtypes, tensors
from .strategies import MAX_LEN, accepted, positions, rope_tolerance

thetas = st.sampled_from([10000.0, 100.0, 2.0])  # shrink to the default


@st.composite
def _rope_inputs(draw, *, batch_dims: int = 2, max_len: int = 4):
    """``x (..., L, head_dim)`` (``head_dim`` 2..8, even) with leading ``()``, ``(B,)`` or ``(B, H)``."""
    dtype = draw(dtypes())
    head_dim = 2 * draw(st.integers(1, 4))
    shape = draw(batch_shapes(max_dims=batch_dims)) + (draw(st.integers(1, max_len)), head_dim)
    return draw(tensors(shape, dtype))


def _rope(impl, x, theta=10000.0):
    return impl.RotaryPositionEmbedding(x.shape[-1], MAX_LEN, theta)


def _tol(dtype, scale=1.0):
    return rope_tolerance(dtype, scale)


def _pairs(t: torch.Tensor) -> torch.Tensor:
    """``(..., head_dim)`` -> ``(..., head_dim / 2, 2)``: the adjacent pairs ``(t[2i], t[2i+1])``."""
    return t.reshape(*t.shape[:-1], t.shape[-1] // 2, 2)


@pytest.mark.component("rotary")
@given(x=_rope_inputs(), data=st.data())
def test_rotary_keeps_the_length_of_every_adjacent_pair(impl, x, data):
    pos = data.draw(positions((x.shape[-2],)), label="positions")
    out = _rope(impl, x)(x, pos)
    assert_close(_pairs(out).double().norm(dim=-1), _pairs(x).double().norm(dim=-1), **_tol(x.dtype),
                 what=f"length of each pair (out[2i], out[2i+1]) at positions {pos.tolist()} vs the input pair's "
                      f"(a rotation of the adjacent pair keeps its length)")


@pytest.mark.component("rotary")
@given(x=_rope_inputs())
def test_rotary_is_the_identity_at_position_0(impl, x):
    zeros = torch.zeros(x.shape[-2], dtype=torch.long)
    assert_close(_rope(impl, x)(x, zeros), x, **_tol(x.dtype),
                 what="RotaryPositionEmbedding(x, positions=0 everywhere) vs x (cos 0 = 1, sin 0 = 0: nothing turns)")


@pytest.mark.component("rotary")
@given(x=_rope_inputs(), data=st.data())
def test_rotary_turning_at_a_then_at_b_is_turning_at_a_plus_b(impl, x, data):
    n = x.shape[-2]
    a = data.draw(positions((n,)), label="a")
    b = torch.tensor([data.draw(st.integers(0, MAX_LEN - 1 - int(ai)), label="b") for ai in a])
    rope = _rope(impl, x)
    assert_close(rope(rope(x, a), b), rope(x, a + b), **_tol(x.dtype),
                 what=f"rope(rope(x, a), b) vs rope(x, a + b) for a = {a.tolist()}, b = {b.tolist()} "
                      f"(rotations by angles proportional to the position add up)")


@pytest.mark.component("rotary")
@given(q=_rope_inputs(batch_dims=0), data=st.data())
def test_rotary_scores_depend_only_on_the_distance_between_positions(impl, q, data):
    """<rope(q, m), rope(k, n)> depends on m - n only: shifting both by s changes no score, and moving
    the earlier one to position 0 (where nothing turns) gives <rope(q, m - n), k> for m >= n and
    <q, rope(k, n - m)> for m < n."""
    k = data.draw(tensors((data.draw(st.integers(1, 4), label="Lk"), q.shape[-1]), q.dtype), label="k")
    m = data.draw(positions((q.shape[0],)), label="m")
    n = data.draw(positions((k.shape[0],)), label="n")
    s = data.draw(st.integers(0, MAX_LEN - 1 - int(max(m.max(), n.max()))), label="s")
    rope = _rope(impl, q)
    scores = rope(q, m) @ rope(k, n).T  # (Lq, Lk)
    tol = _tol(q.dtype, scale=10.0)  # scores: sums of head_dim products of entries up to 3
    assert_close(rope(q, m + s) @ rope(k, n + s).T, scores, **tol,
                 what=f"scores <rope(q, m + {s}), rope(k, n + {s})> vs <rope(q, m), rope(k, n)>, m = {m.tolist()}, "
                      f"n = {n.tolist()} (shifting both positions by the same s changes no score)")
    moved = torch.empty_like(scores)
    for i, mi in enumerate(m.tolist()):
        for j, nj in enumerate(n.tolist()):
            qi, kj = q[i : i + 1], k[j : j + 1]
            if mi >= nj:
                moved[i, j] = (rope(qi, torch.tensor([mi - nj])) @ kj.T)[0, 0]
            else:
                moved[i, j] = (qi @ rope(kj, torch.tensor([nj - mi])).T)[0, 0]
    assert_close(scores, moved, **tol,
                 what=f"scores <rope(q, m), rope(k, n)> vs the same with the earlier of each pair moved to position 0 "
                      f"(left unturned) and the other to the distance |m - n|, m = {m.tolist()}, n = {n.tolist()}")


def _token_by_token(rope, x, pos):
    """Each token of ``x (..., L, d)`` turned alone, at its own position ``pos (..., L)`` (the full shape)."""
    return torch.cat([rope(x[..., j : j + 1, :], pos[..., j : j + 1]) for j in range(x.shape[-2])], dim=-2)


@pytest.mark.component("rotary")
@given(x=_rope_inputs(), data=st.data())
def test_rotary_positions_broadcast_to_every_token(impl, x, data):
    """positions broadcastable to x.shape[:-1]: (L,), (B, L) for x (B, L, d), (B, 1, L) for x (B, H, L, d),
    or the full shape. Each gives the expanded positions' result, and each token turns by its own
    position, alone."""
    batch, n = tuple(x.shape[:-2]), x.shape[-2]
    shapes = [(n,)] + ([batch[:1] + (1,) * (len(batch) - 1) + (n,)] if batch else []) + [batch + (n,)]
    shape = data.draw(st.sampled_from(shapes), label="positions shape")
    pos = data.draw(positions(shape), label="positions")
    full = torch.broadcast_to(pos, batch + (n,)).contiguous()
    rope = _rope(impl, x)
    out = accepted(lambda: rope(x, pos), f"RotaryPositionEmbedding(x {tuple(x.shape)}, positions {tuple(shape)})")
    tol = _tol(x.dtype)
    assert_close(out, rope(x, full), **tol,
                 what=f"rope(x, positions of shape {tuple(shape)}) vs rope(x, the positions expanded to "
                      f"{tuple(full.shape)})")
    assert_close(out, _token_by_token(rope, x, full), **tol,
                 what=f"rope(x, positions of shape {tuple(shape)}) vs each token turned alone at its own position "
                      f"{full.tolist()}")


@pytest.mark.component("rotary")
@given(x=_rope_inputs())
@pytest.mark.needs('default_positions')
def test_rotary_positions_none_means_arange(impl, x):
    n = x.shape[-2]
    rope = _rope(impl, x)
    out = rope(x)
    tol = _tol(x.dtype)
    assert_close(out, rope(x, torch.arange(n)), **tol, what=f"rope(x) vs rope(x, positions=arange({n}))")
    full = torch.broadcast_to(torch.arange(n), x.shape[:-1])
    assert_close(out, _token_by_token(rope, x, full), **tol,
                 what=f"rope(x) (positions=None) vs token j turned alone at position j, j = 0 .. {n - 1}")


@st.composite
def _one_pair(draw):
    """``x (L, head_dim)`` zero outside pair ``i``, whose entries are drawn; ``i``; positions ``(L,)``."""
    x = draw(_rope_inputs(batch_dims=0))
    i = draw(st.integers(0, x.shape[-1] // 2 - 1))
    only = torch.zeros_like(x)
    only[..., 2 * i : 2 * i + 2] = x[..., 2 * i : 2 * i + 2]
    return only, i, draw(positions((x.shape[0],)))


@pytest.mark.component("rotary")
@given(case=_one_pair())
def test_rotary_turns_adjacent_pairs_each_on_its_own(impl, case):
    """A vector that is nonzero only in the pair (x[2i], x[2i+1]) stays in that pair: every other
    pair of the output is zero (pairs are adjacent features, each turned in its own plane)."""
    x, i, pos = case
    out = _rope(impl, x)(x, pos)
    others = torch.ones(x.shape[-1], dtype=torch.bool)
    others[2 * i : 2 * i + 2] = False
    assert_close(out[..., others], torch.zeros_like(out[..., others]), rtol=0, atol=1e-12,
                 what=f"features outside pair {i} (features {2 * i} and {2 * i + 1}) after rope at positions "
                      f"{pos.tolist()} of a vector that is zero there")


@pytest.mark.component("rotary")
@given(case=_one_pair(), theta=thetas)
def test_rotary_pair_i_turns_by_p_times_theta_to_the_minus_2i_over_head_dim(impl, case, theta):
    """(a, b) at position p becomes (a cos phi - b sin phi, a sin phi + b cos phi), phi = p * theta ** (-2i / d)."""
    x, i, pos = case
    d = x.shape[-1]
    out = _rope(impl, x, theta)(x, pos)
    phi = pos.to(torch.float64) * theta ** (-2 * i / d)
    a, b = x[:, 2 * i].double(), x[:, 2 * i + 1].double()
    expected = torch.stack((a * phi.cos() - b * phi.sin(), a * phi.sin() + b * phi.cos()), dim=-1)
    assert_close(out[:, 2 * i : 2 * i + 2].double(), expected, **_tol(x.dtype),
                 what=f"pair {i} of rope(x) (head_dim={d}, theta={theta:g}) at positions {pos.tolist()}: turned "
                      f"counter-clockwise by p * theta ** (-2*{i}/{d}) = p * {theta ** (-2 * i / d):.6g}")
