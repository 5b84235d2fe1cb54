"""Seed 001, section 9 (the worked self-attention example) and section 11 (its exercises).

Every expected number below was derived by hand from the seed's ``x``, ``w_key``, ``w_query``
and ``w_value``; the comments show the arithmetic (exact integers where possible, otherwise a
closed form in ``e = exp(1)`` evaluated to 12 significant digits with plain ``math.exp``).
``tests/test_spec_catches_mistakes.py`` re-derives these literals with plain Python (no torch)
so a typo in them is caught. The attention itself always runs through the submission's
``scaled_dot_product_attention`` (``scale=1.0`` gives the seed's unscaled ``queries @ keys.T``,
``scale=None`` the ``1/sqrt(d_k)`` of the exercises), or, once, its ``MultiHeadSelfAttention``.

Under a course profile whose attention takes no scale and returns no weights (``cs336``), the same
examples run on the output: ``scale=1.0`` becomes the queries times ``sqrt(d_k)`` at the default scale
(the same logits), and the weights are checked only where they come back.
"""

import math

import pytest
import torch

from transformer_spec import profiles
from transformer_spec.probes.assertions import assert_close, assert_equal
from transformer_spec.probes.testing import set_parameters

pytestmark = pytest.mark.component("attention")

SEED_9 = "seed 001 section 9"

# ---------------------------------------------------------------- 9.1 / 9.2: the seed's inputs
X = [
    [1, 0, 1, 0],  # token 1 embedding
    [0, 2, 0, 2],  # token 2 embedding
    [1, 1, 1, 1],  # token 3 embedding
]
W_KEY = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
W_QUERY = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
W_VALUE = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]

# ---------------------------------------------------------------- 9.3: keys = x @ w_key etc.
# A row of x picks rows of w and adds them: x[0] = [1,0,1,0] -> w[0] + w[2];
# x[1] = [0,2,0,2] -> 2 w[1] + 2 w[3]; x[2] = [1,1,1,1] -> w[0] + w[1] + w[2] + w[3].
KEYS = [
    [0, 1, 1],  # [0,0,1] + [0,1,0]
    [4, 4, 0],  # 2 [1,1,0] + 2 [1,1,0]
    [2, 3, 1],  # [0,0,1] + [1,1,0] + [0,1,0] + [1,1,0]
]
QUERIES = [
    [1, 0, 2],  # [1,0,1] + [0,0,1]
    [2, 2, 2],  # 2 [1,0,0] + 2 [0,1,1]
    [2, 1, 3],  # [1,0,1] + [1,0,0] + [0,0,1] + [0,1,1]
]
VALUES = [
    [1, 2, 3],  # [0,2,0] + [1,0,3]
    [2, 8, 0],  # 2 [0,3,0] + 2 [1,1,0]
    [2, 6, 3],  # [0,2,0] + [0,3,0] + [1,0,3] + [1,1,0]
]

# ---------------------------------------------------------------- 9.4: attn_logits = queries @ keys.T
LOGITS = [
    [2, 4, 4],  # q1=[1,0,2]: k1 0+0+2=2, k2 4+0+0=4, k3 2+0+2=4
    [4, 16, 12],  # q2=[2,2,2]: k1 0+2+2=4, k2 8+8+0=16, k3 4+6+2=12
    [4, 12, 10],  # q3=[2,1,3]: k1 0+1+3=4, k2 8+4+0=12, k3 4+3+3=10
]

# ---------------------------------------------------------------- 9.5: softmax(attn_logits, dim=-1)
# Row i: exp(l_ij - max_j l_ij) / sum_j exp(l_ij - max_j l_ij), e = exp(1):
#   row 1 [2,4,4]   -> [1, e^2, e^2] / (1 + 2 e^2)
#   row 2 [4,16,12] -> [e^-12, 1, e^-4] / (1 + e^-12 + e^-4)
#   row 3 [4,12,10] -> [e^-8, 1, e^-2] / (1 + e^-8 + e^-2)
WEIGHTS = [
    [0.0633789383330, 0.468310530833, 0.468310530833],
    [6.03366485456e-06, 0.982007864896, 0.0179861014393],
    [0.000295387223035, 0.880536901775, 0.119167711002],
]

# ---------------------------------------------------------------- 9.6: output = attn_weights @ values
# Row i = sum_j WEIGHTS[i][j] * VALUES[j]; e.g. row 1 = ([1,2,3] + e^2 ([2,8,0] + [2,6,3])) / (1 + 2 e^2)
#                                                     = ([1,2,3] + e^2 [4,14,3]) / (1 + 2 e^2).
OUTPUT = [
    [1.93662106167, 6.68310530833, 1.59506840750],
    [1.99999396634, 7.96399159513, 0.0539764053125],
    [1.99970461278, 7.75989225466, 0.358389294675],
]

# ---------------------------------------------------------------- 9.5 / 9.6: the simplified weights
ATTN_WEIGHTS_SIMPLE = [
    [0.0, 0.5, 0.5],
    [0.0, 1.0, 0.0],
    [0.0, 0.9, 0.1],
]
# weighted_values = values[:, None] * attn_weights_simple.T[:, :, None], shape (3, 3, 3):
# weighted_values[j, i] = ATTN_WEIGHTS_SIMPLE[i][j] * VALUES[j].
WEIGHTED_VALUES = [
    [[0, 0, 0], [0, 0, 0], [0, 0, 0]],  # value 1 [1,2,3] times column 1 of the weights [0, 0, 0]
    [[1, 4, 0], [2, 8, 0], [1.8, 7.2, 0]],  # value 2 [2,8,0] times column 2 [0.5, 1, 0.9]
    [[1, 3, 1.5], [0, 0, 0], [0.2, 0.6, 0.3]],  # value 3 [2,6,3] times column 3 [0.5, 0, 0.1]
]
# "sum over tokens" (dim 0) = attn_weights_simple @ values:
WEIGHTED_SUM = [
    [2, 7, 1.5],  # 0.5 [2,8,0] + 0.5 [2,6,3]
    [2, 8, 0],  # 1.0 [2,8,0]
    [2, 7.8, 0.3],  # 0.9 [2,8,0] + 0.1 [2,6,3]
]

# ---------------------------------------------------------------- 11.1: divide by sqrt(d_k), d_k = 3
# Row i: softmax(LOGITS[i] / sqrt(3)), e.g. row 1 = [1, a, a] / (1 + 2a) with a = exp(2 / sqrt(3)).
SCALED_WEIGHTS = [
    [0.136125797557, 0.431937101222, 0.431937101222],
    [0.000890447390632, 0.908842647215, 0.0902669053944],  # [exp(-12/s), 1, exp(-4/s)] / sum, s = sqrt(3)
    [0.00744489237707, 0.754707580641, 0.237847526981],  # [exp(-8/s), 1, exp(-2/s)] / sum
]
SCALED_OUTPUT = [  # SCALED_WEIGHTS @ VALUES
    [1.86387420244, 6.31937101222, 1.70418869634],
    [1.99910955261, 7.81412350487, 0.273472058355],
    [1.99255510762, 7.47963559177, 0.735877258076],
]

# ---------------------------------------------------------------- 11.2: causal mask on the unscaled logits
# Future positions (j > i) set to -1e9 (the seed) or blocked (True, our contract): exp(-1e9) = 0, so
#   row 1 [2, -1e9, -1e9] -> [1, 0, 0]                          (token 1 only sees itself)
#   row 2 [4, 16, -1e9]   -> [e^-12, 1, 0] / (1 + e^-12)
#   row 3 [4, 12, 10]     -> unchanged: the last token sees everything
CAUSAL_WEIGHTS = [
    [1.0, 0.0, 0.0],
    [6.14417460221e-06, 0.999993855825, 0.0],
    [0.000295387223035, 0.880536901775, 0.119167711002],
]
CAUSAL_OUTPUT = [
    [1.0, 2.0, 3.0],  # = VALUES[0]
    [1.99999385583, 7.99996313495, 1.84325238066e-05],  # (e^-12 [1,2,3] + [2,8,0]) / (1 + e^-12)
    [1.99970461278, 7.75989225466, 0.358389294675],  # = OUTPUT[2]
]
CAUSAL_MASK_3 = [[False, True, True], [False, False, True], [False, False, False]]


def t(data, dtype):
    return torch.tensor(data, dtype=dtype)


def _attend(impl, dtype, mask=None, scale=1.0, values=VALUES):
    q, k, v = t(QUERIES, dtype), t(KEYS, dtype), t(values, dtype)
    m = None if mask is None else torch.tensor(mask, dtype=torch.bool)
    return _sdpa(impl, q, k, v, mask=m, scale=scale)


def _sdpa(impl, q, k, v, mask=None, scale=None):
    """The submission's attention; where the course's takes no scale (a profile lacking 'scale'),
    ``scale=1.0`` is the queries times sqrt(d_k) at its own 1/sqrt(d_k): the same logits, q @ k.T."""
    if scale == 1.0 and profiles.lacks("scale"):
        q, scale = q * math.sqrt(q.size(-1)), None
    return impl.scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)


@pytest.mark.needs('weights')
def test_unscaled_logits_9_4(impl, dtype):
    """scale=1.0 gives softmax(queries @ keys.T): log(w_ij) - log(w_i0) = logit_ij - logit_i0."""
    _, weights = _attend(impl, dtype, scale=1.0)
    assert_close(weights.sum(-1), [1.0, 1.0, 1.0], what="each row of the weights sums to", seed=SEED_9 + ".5")
    logw = torch.log(weights.to(torch.float64))
    expected = [[row[j] - row[0] for j in range(3)] for row in LOGITS]  # [[0,2,2],[0,12,8],[0,8,6]]
    atol = 1e-4 if dtype == torch.float32 else 1e-9
    assert_close(logw - logw[:, :1], t(expected, torch.float64), atol=atol, rtol=0,
                 what="logit differences recovered from the weights (scale=1.0 must not rescale "
                      "queries @ keys.T)", seed=SEED_9 + ".4")


@pytest.mark.needs('weights')
def test_softmax_weights_9_5(impl, dtype):
    _, weights = _attend(impl, dtype, scale=1.0)
    assert_close(weights, t(WEIGHTS, dtype), what="attn_weights = softmax(queries @ keys.T, dim=-1)",
                 seed=SEED_9 + ".5")


def test_output_9_6(impl, dtype):
    out, _ = _attend(impl, dtype, scale=1.0)
    assert_close(out, t(OUTPUT, dtype), what="output = attn_weights @ values", seed=SEED_9 + ".6")


def test_weighted_values_9_6(impl, dtype):
    """Section 9.6's decomposition with attn_weights_simple.

    The submission produces attn_weights_simple itself: with one-dimensional queries
    ``[[0], [1], [1]]`` and keys ``[[0], [ln 9], [0]]`` the scores are row 1 ``[0, 0, 0]``,
    rows 2-3 ``[0, ln 9, 0]``; blocking key 1 everywhere and key 3 in row 2 leaves
    ``[0, .5, .5]``, ``[0, 1, 0]`` and ``[0, 9/10, 1/10]``. Where the weights do not come back (a
    profile lacking 'weights'), the output alone is checked.
    """
    q = t([[0.0], [1.0], [1.0]], dtype)
    k = t([[0.0], [math.log(9.0)], [0.0]], dtype)
    v = t(VALUES, dtype)
    mask = torch.tensor([[True, False, False], [True, False, True], [True, False, False]])
    out, weights = _sdpa(impl, q, k, v, mask=mask, scale=1.0)
    if profiles.expresses("weights"):
        assert_close(weights, t(ATTN_WEIGHTS_SIMPLE, dtype), what="attn_weights_simple", seed=SEED_9 + ".5")
        weighted_values = v[:, None] * weights.T[:, :, None]  # the seed's formula
        assert_close(weighted_values, t(WEIGHTED_VALUES, dtype), what="weighted_values", seed=SEED_9 + ".6")
        assert_close(weighted_values.sum(dim=0), t(WEIGHTED_SUM, dtype),
                     what="weighted_values.sum(dim=0)", seed=SEED_9 + ".6")
    assert_close(out, t(WEIGHTED_SUM, dtype),
                 what="scaled_dot_product_attention output with attn_weights_simple", seed=SEED_9 + ".6")


@pytest.mark.component("mha")
def test_worked_example_through_one_head_self_attention(impl, dtype):
    """The same example through MultiHeadSelfAttention(d_model=4, num_heads=1).

    W_Q/W_K/W_V are the seed's matrices (transposed into nn.Linear's (out, in) layout, padded with
    a zero fourth output feature), W_Q doubled to undo the 1/sqrt(d_k) = 1/2 of d_k = 4, W_O = I:
    the weights are section 9.5's and the first three output features section 9.6's.
    """

    def linear_weight(w, factor=1.0):
        padded = [[factor * c for c in row] + [0.0] for row in w]  # (4 in, 4 out)
        return torch.tensor(padded, dtype=torch.float64).T  # nn.Linear: (out, in)

    mhsa = impl.MultiHeadSelfAttention(d_model=4, num_heads=1, dropout=0.0).to(dtype)
    set_parameters(mhsa, {
        "W_Q.weight": linear_weight(W_QUERY, 2.0),
        "W_K.weight": linear_weight(W_KEY),
        "W_V.weight": linear_weight(W_VALUE),
        "W_O.weight": torch.eye(4, dtype=torch.float64),
    })
    mhsa = mhsa.eval()
    with torch.no_grad():
        out, weights = mhsa(t(X, dtype)[None])
    assert_close(weights, t(WEIGHTS, dtype)[None, None], what="MultiHeadSelfAttention weights (1 head)",
                 seed=SEED_9 + ".5")
    expected = [row + [0.0] for row in OUTPUT]
    assert_close(out, t(expected, dtype)[None], what="MultiHeadSelfAttention output (1 head, W_O = I)",
                 seed=SEED_9 + ".6")


def test_exercise_11_1_scaled_by_sqrt_dk(impl, dtype):
    """scale=None divides by sqrt(d_k) with d_k = keys.size(-1) = 3."""
    out, weights = _attend(impl, dtype, scale=None)
    if profiles.expresses("weights"):
        assert_close(weights, t(SCALED_WEIGHTS, dtype), what="softmax(attn_logits / sqrt(3))",
                     seed="seed 001 section 11, exercise 1")
    assert_close(out, t(SCALED_OUTPUT, dtype), what="scaled output", seed="seed 001 section 11, exercise 1")


def test_exercise_11_2_causal_mask(impl, dtype):
    """Blocking the future: the first row collapses onto token 1, the last row is unchanged."""
    out, weights = _attend(impl, dtype, mask=CAUSAL_MASK_3, scale=1.0)
    where = "seed 001 section 11, exercise 2"
    if profiles.expresses("weights"):
        assert_close(weights, t(CAUSAL_WEIGHTS, dtype), what="causally masked weights", seed=where)
        assert_equal(weights[torch.tensor(CAUSAL_MASK_3)] == 0, torch.ones(3, dtype=torch.bool),
                     what="weights at blocked (future) positions are exactly 0", seed=where)
    assert_close(out, t(CAUSAL_OUTPUT, dtype), what="causally masked output", seed=where)
    # How the output changes: row 1 becomes values[0], the last row keeps the unmasked output.
    assert_close(out[2], t(OUTPUT[2], dtype), what="last row (sees every token) is unchanged", seed=where)


def test_exercise_11_2_mask_matches_minus_1e9(impl, dtype):
    """True = blocked gives what the seed's -1e9 in the logits gives (here: scores shifted so the
    blocked logits are -1e9 exactly, through the submission with no mask at all)."""
    where = "seed 001 section 11, exercise 2"
    masked_out, masked_w = _attend(impl, dtype, mask=CAUSAL_MASK_3, scale=1.0)
    # A fourth query dimension carries the -1e9: queries [q, 1], keys [k, -1e9 if future of row i].
    # One query row per call so that "future" depends on the row.
    rows_out, rows_w = [], []
    for i in range(3):
        q = t([QUERIES[i] + [1.0]], torch.float64)
        k = t([KEYS[j] + ([-1e9] if j > i else [0.0]) for j in range(3)], torch.float64)
        o, w = _sdpa(impl, q.to(dtype), k.to(dtype), t(VALUES, dtype), scale=1.0)
        rows_out.append(o[0])
        rows_w.append(w)
    if profiles.expresses("weights"):
        assert_close(masked_w, torch.stack([w[0] for w in rows_w]), what="weights with mask vs with -1e9 logits",
                     seed=where)
    assert_close(masked_out, torch.stack(rows_out), what="output with mask vs with -1e9 logits", seed=where)


def test_exercise_11_3_doubling_values_doubles_output(impl, dtype):
    where = "seed 001 section 11, exercise 3"
    doubled = [[2 * c for c in row] for row in VALUES]
    out, weights = _attend(impl, dtype, scale=1.0, values=doubled)
    if profiles.expresses("weights"):
        assert_close(weights, t(WEIGHTS, dtype), what="weights do not depend on the values", seed=where)
    assert_close(out, 2 * t(OUTPUT, dtype), what="output with values doubled = 2 * output", seed=where)
