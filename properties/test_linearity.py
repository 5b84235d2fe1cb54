"""Law 4: attention is linear in V, and its weights do not look at V.

``attn(Q, K, a V1 + b V2) = a attn(Q, K, V1) + b attn(Q, K, V2)``: the output is the weights
(which depend on Q and K only) times V. Seed 001 exercise 3 ("把 values 改大一倍，看看输出是否也线性
变大") is the case a = 2, b = 0, generalised. Multi-head attention has no biases in W_V and W_O,
so it is linear in its ``value`` input as well.

Tolerance: the two sides differ by rounding of size ~ eps * (|a| max|V1| + |b| max|V2|), so the
absolute tolerance is the dtype's (float32 1e-5, float64 1e-10) times ``1 + |a| max|V1| + |b| max|V2|``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transformer_spec.probes.assertions import assert_close

from .modules import multihead_attention
from .strategies import attention_inputs, coefficients, configs, law_tolerance, sequences, tensors


def _tolerance(dtype, a, v1, b, v2):
    tol = law_tolerance(dtype)
    scale = 1 + abs(a) * v1.abs().max().item() + abs(b) * v2.abs().max().item()
    return {"rtol": tol["rtol"], "atol": tol["atol"] * scale}


@pytest.mark.component("attention")
@given(inputs=attention_inputs(), a=coefficients(), b=coefficients(), data=st.data())
def test_attention_is_linear_in_values(impl, inputs, a, b, data):
    q, k, v1, mask = inputs.q, inputs.k, inputs.v, inputs.mask
    v2 = data.draw(tensors(tuple(v1.shape), v1.dtype), label="v2")
    out, _ = impl.scaled_dot_product_attention(q, k, a * v1 + b * v2, mask)
    out1, _ = impl.scaled_dot_product_attention(q, k, v1, mask)
    out2, _ = impl.scaled_dot_product_attention(q, k, v2, mask)
    assert_close(out, a * out1 + b * out2, **_tolerance(q.dtype, a, v1, b, v2),
                 what=f"attn(q, k, {a:g}*v1 + {b:g}*v2) vs. {a:g}*attn(q, k, v1) + {b:g}*attn(q, k, v2)")


@pytest.mark.component("attention")
@given(inputs=attention_inputs(), d_v2=st.integers(1, 4), data=st.data())
@pytest.mark.needs('weights')
def test_attention_weights_do_not_depend_on_values(impl, inputs, d_v2, data):
    """Other values, even of another width d_v, give the same weights."""
    q, k, v1, mask = inputs.q, inputs.k, inputs.v, inputs.mask
    v2 = data.draw(tensors(tuple(v1.shape[:-1]) + (d_v2,), v1.dtype), label="v2")
    _, w1 = impl.scaled_dot_product_attention(q, k, v1, mask)
    out2, w2 = impl.scaled_dot_product_attention(q, k, v2, mask)
    assert tuple(out2.shape) == tuple(q.shape[:-1]) + (d_v2,), (
        f"output shape {tuple(out2.shape)} for v of width d_v={d_v2}, expected (..., Lq, d_v)"
    )
    assert_close(w2, w1, what="attention weights computed with other values v2", **law_tolerance(q.dtype))


@pytest.mark.component("mha")
@given(config=configs(), a=coefficients(), b=coefficients(), data=st.data())
def test_multihead_attention_is_linear_in_values(impl, config, a, b, data):
    query = data.draw(sequences(config), label="query")
    key = data.draw(sequences(config, batch=query.shape[0]), label="key")
    v1 = data.draw(tensors(tuple(key.shape), key.dtype), label="value1")
    v2 = data.draw(tensors(tuple(key.shape), key.dtype), label="value2")
    m = multihead_attention(impl, config)
    out, w = m(query, key, a * v1 + b * v2)
    out1, w1 = m(query, key, v1)
    out2, _ = m(query, key, v2)
    assert_close(out, a * out1 + b * out2, **_tolerance(query.dtype, a, v1, b, v2),
                 what=f"MultiHeadAttention(q, k, {a:g}*v1 + {b:g}*v2) vs. the same combination of the outputs")
    assert_close(w, w1, what="MultiHeadAttention weights with other values", **law_tolerance(query.dtype))
