"""``LearnedPositionEmbedding`` adds ``embedding.weight[pos]`` to position ``pos`` (not minus it).

Seen with known weights set by the contract's parameter name ``embedding.weight``. (Its output
shape is in ``test_contract_basics.py``, its errors in ``test_bad_arguments.py``.)
"""

import pytest
import torch

from transformer_spec.probes.assertions import assert_close
from transformer_spec.probes.testing import set_parameters

D = 8
F64 = torch.float64


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


@pytest.mark.component("position")
def test_learned_position_embedding_adds_the_row_of_each_position(impl):
    weight = _x(6, D, seed=7)
    emb = set_parameters(impl.LearnedPositionEmbedding(d_model=D, max_len=6).to(F64), {"embedding.weight": weight})
    x = _x(2, 4, D, seed=8)
    assert_close(emb(x), x + weight[:4], what="LearnedPositionEmbedding(x) with known embedding.weight: "
                                              "x + embedding.weight[:L]")
