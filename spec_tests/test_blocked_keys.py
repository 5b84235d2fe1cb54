"""A blocked key gets exactly zero weight, however low the allowed keys' scores are.

Seed 001 section 8.1 sets the logits of padding to -inf ("in practice usually a sufficiently
small negative number"), and its exercise in section 11 uses -1e9. The contract's masks mean
``masked_fill(mask, -inf)``: with a finite fill F, a blocked key beats every allowed key whose
score is below F, and takes the weight. One query, two keys, the second blocked: the query must
attend to the first key alone, even when its score is -20000 (below a fill of -1e4) or -1e12
(below -1e9).
"""

import pytest
import torch

from transformer_spec.probes.assertions import assert_close


@pytest.mark.component("attention")
@pytest.mark.parametrize("allowed_score", [-2e4, -1e12], ids=["score_-2e4", "score_-1e12"])
@pytest.mark.needs('weights')
def test_blocked_key_gets_zero_weight_when_the_allowed_score_is_very_low(impl, dtype, allowed_score):
    q = torch.tensor([[1.0]], dtype=dtype)
    k = torch.tensor([[allowed_score], [0.0]], dtype=dtype)  # scores (d_k = 1): allowed_score, 0
    v = torch.tensor([[1.0], [2.0]], dtype=dtype)
    mask = torch.tensor([[False, True]])  # key 1 blocked
    out, weights = impl.scaled_dot_product_attention(q, k, v, mask)
    what = (f"scaled_dot_product_attention(q=[[1]], k=[[{allowed_score:g}], [0]], v=[[1], [2]], "
            f"mask=[[False, True]])")
    hint = ("the blocked key 1 must get exactly 0 (fill blocked scores with -inf; a finite fill such as -1e9 "
            "loses to no allowed score below it)")
    assert isinstance(weights, torch.Tensor) and weights.shape == (1, 2) and weights[0, 1].item() == 0, (
        f"{what}: weights {weights.tolist() if isinstance(weights, torch.Tensor) else weights!r}, expected "
        f"[[1.0, 0.0]]: {hint} [seed 001 section 8.1]"
    )
    assert_close(weights, [[1.0, 0.0]], what=f"{what} weights", seed="seed 001 section 8.1")
    assert_close(out, [[1.0]], what=f"{what} output (= v[0]): {hint}", seed="seed 001 section 8.1")
