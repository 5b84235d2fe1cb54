"""Where dropout sits: on each sublayer's output, never on the residual stream or after ``linear2``.

The contract places dropout at ``linear2(dropout(gelu(linear1(x))))`` in the FFN and at
``x + drop(sublayer(norm(x)))`` in a Pre-LN block. With the sublayers' last linear map zeroed,
train() mode with dropout 0.5 must then give exactly ``linear2.bias`` (FFN) or the input (Pre-LN
encoder and decoder blocks), whatever the random dropout mask; dropout of the residual sum, or
after ``linear2``, fails. (That dropout acts in train() only, and that ``dropout=0.0`` reaches
every sublayer, is in ``test_behaviours.py``.)
"""

import pytest
import torch

from transformer_spec.probes.assertions import assert_close
from transformer_spec.probes.testing import (
    decoder_block_shapes,
    encoder_block_shapes,
    ffn_shapes,
    seeded_parameters,
    set_parameters,
)

D, H, FF = 8, 2, 16
F64 = torch.float64


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _zeroed(params, *names):
    return {n: (torch.zeros_like(v) if n in names else v) for n, v in params.items()}


@pytest.mark.component("ffn")
def test_feedforward_dropout_acts_before_linear2(impl):
    params = _zeroed(seeded_parameters(ffn_shapes(D, FF), seed=1), "linear2.weight")
    ffn = set_parameters(impl.FeedForward(d_model=D, d_ff=FF, dropout=0.5).to(F64), params).train()
    torch.manual_seed(0)
    out = ffn(_x(2, 5, D))
    assert_close(out, params["linear2.bias"].expand(2, 5, D),
                 what="FeedForward in train() with linear2.weight = 0 (so linear2(dropout(h)) = linear2.bias "
                      "whatever dropout does; dropout applied after linear2 would zero or scale the bias)")


@pytest.mark.component("encoder")
def test_pre_ln_encoder_block_dropout_leaves_the_residual_stream_alone(impl):
    params = _zeroed(seeded_parameters(encoder_block_shapes(D, FF), seed=2),
                     "self_attn.W_O.weight", "ffn.linear2.weight", "ffn.linear2.bias")
    block = impl.TransformerEncoderBlock(d_model=D, num_heads=H, d_ff=FF, dropout=0.5, norm_first=True)
    block = set_parameters(block.to(F64), params).train()
    x = _x(2, 4, D, seed=3)
    torch.manual_seed(0)
    out = block(x)[0]
    assert_close(out, x, what="Pre-LN encoder block in train() with W_O and linear2 zeroed: x + drop(0) + drop(0) "
                              "must be x exactly (dropout belongs on the sublayer's output, not on the residual sum)")


@pytest.mark.component("decoder")
def test_pre_ln_decoder_block_dropout_leaves_the_residual_stream_alone(impl):
    params = _zeroed(seeded_parameters(decoder_block_shapes(D, FF), seed=4),
                     "self_attn.W_O.weight", "cross_attn.W_O.weight", "ffn.linear2.weight", "ffn.linear2.bias")
    block = impl.TransformerDecoderBlock(d_model=D, num_heads=H, d_ff=FF, dropout=0.5, norm_first=True)
    block = set_parameters(block.to(F64), params).train()
    x, memory = _x(2, 4, D, seed=5), _x(2, 3, D, seed=6)
    torch.manual_seed(0)
    out = block(x, memory)[0]
    assert_close(out, x, what="Pre-LN decoder block in train() with every W_O and linear2 zeroed: the output "
                              "must be x exactly (dropout belongs on the sublayers' outputs only)")
