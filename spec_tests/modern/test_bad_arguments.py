"""The modern track's bad arguments (``docs/contract.md``, "The modern track", Errors): each case must
raise a ValueError or TypeError whose message names the argument, and the same call with valid
arguments (its control) must not. ``test_bad_argument_errors_name_the_argument_by_its_identifier`` then
holds each component's messages to the argument's exact identifier, as a word (``num_kv_heads``, not
``NUM_KV_HEADS`` or ``XXnum_kv_headsXX``; :mod:`spec_tests.argument_names`), as the classic track does."""

import pytest
import torch

from transformer_spec.probes.testing import assert_raises_naming

from ..argument_names import misnamed

# A course profile whose modules the profile constructs (cs336's functions take the weights) checks
# none of these arguments itself.
pytestmark = pytest.mark.needs("errors")


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _rope(impl, head_dim=4, max_len=8, theta=10000.0):
    return impl.RotaryPositionEmbedding(head_dim, max_len, theta)


def _gqa(impl, **kw):
    args = {"d_model": 8, "num_heads": 2, **kw}
    return impl.GroupedQueryAttention(args.pop("d_model"), args.pop("num_heads"), **args)


def _llama(impl, **kw):
    return impl.MiniLlama(11, **{"d_model": 8, "num_layers": 1, "num_heads": 2, "max_len": 8, **kw})


# (id, component, call with one bad argument, names it may be named by, (description, the valid call))
CASES = [
    ("rmsnorm_d_model_zero", "rmsnorm", lambda i: i.RMSNorm(0), ("d_model",), ("RMSNorm(4)", lambda i: i.RMSNorm(4))),
    ("rmsnorm_eps_zero", "rmsnorm", lambda i: i.RMSNorm(4, eps=0.0), ("eps",),
     ("RMSNorm(4, eps=1e-6)", lambda i: i.RMSNorm(4, eps=1e-6))),
    ("rmsnorm_eps_negative", "rmsnorm", lambda i: i.RMSNorm(4, eps=-1e-5), ("eps",),
     ("RMSNorm(4, eps=1e-5)", lambda i: i.RMSNorm(4, eps=1e-5))),
    ("rmsnorm_eps_string", "rmsnorm", lambda i: i.RMSNorm(4, eps="1e-5"), ("eps",),
     ("RMSNorm(4, eps=1e-5)", lambda i: i.RMSNorm(4, eps=1e-5))),
    ("rmsnorm_x_wrong_features", "rmsnorm", lambda i: i.RMSNorm(4)(_x(2, 3, 5)), ("x", "d_model"),
     ("RMSNorm(4)(x (2, 3, 4))", lambda i: i.RMSNorm(4)(_x(2, 3, 4)).shape)),
    ("rope_head_dim_odd", "rotary", lambda i: _rope(i, head_dim=5), ("head_dim",),
     ("RotaryPositionEmbedding(4, 8)", lambda i: _rope(i))),
    ("rope_head_dim_zero", "rotary", lambda i: _rope(i, head_dim=0), ("head_dim",),
     ("RotaryPositionEmbedding(4, 8)", lambda i: _rope(i))),
    ("rope_theta_zero", "rotary", lambda i: _rope(i, theta=0.0), ("theta",),
     ("RotaryPositionEmbedding(4, 8, theta=500.0)", lambda i: _rope(i, theta=500.0))),
    ("rope_max_len_zero", "rotary", lambda i: _rope(i, max_len=0), ("max_len",),
     ("RotaryPositionEmbedding(4, 8)", lambda i: _rope(i))),
    ("rope_position_at_max_len", "rotary", lambda i: _rope(i)(_x(3, 4), torch.tensor([0, 1, 8])),
     ("positions", "max_len"), ("rope(x (3, 4), positions=[0, 1, 7])", lambda i: _rope(i)(_x(3, 4), torch.tensor([0, 1, 7])))),
    ("rope_position_negative", "rotary", lambda i: _rope(i)(_x(3, 4), torch.tensor([0, -1, 2])),
     ("positions",), ("rope(x (3, 4), positions=[0, 1, 2])", lambda i: _rope(i)(_x(3, 4), torch.tensor([0, 1, 2])))),
    ("rope_positions_float", "rotary", lambda i: _rope(i)(_x(3, 4), torch.tensor([0.0, 1.0, 2.0])),
     ("positions",), ("rope(x (3, 4), positions=[0, 1, 2])", lambda i: _rope(i)(_x(3, 4), torch.tensor([0, 1, 2])))),
    ("rope_positions_not_broadcasting", "rotary", lambda i: _rope(i)(_x(3, 4), torch.zeros(2, 3, dtype=torch.long)),
     ("positions",), ("rope(x (3, 4), positions (3,))", lambda i: _rope(i)(_x(3, 4), torch.zeros(3, dtype=torch.long)))),
    ("rope_sequence_longer_than_max_len", "rotary", lambda i: _rope(i)(_x(9, 4)), ("max_len", "positions"),
     ("rope(x (8, 4))", lambda i: _rope(i)(_x(8, 4)))),
    ("rope_x_wrong_features", "rotary", lambda i: _rope(i)(_x(3, 6)), ("x", "head_dim"),
     ("rope(x (3, 4))", lambda i: _rope(i)(_x(3, 4)))),
    ("swiglu_d_ff_zero", "swiglu", lambda i: i.SwiGLU(4, 0), ("d_ff",), ("SwiGLU(4, 8)", lambda i: i.SwiGLU(4, 8))),
    ("swiglu_x_wrong_features", "swiglu", lambda i: i.SwiGLU(4, 8)(_x(2, 5)), ("x", "d_model"),
     ("SwiGLU(4, 8)(x (2, 4))", lambda i: i.SwiGLU(4, 8).double()(_x(2, 4)))),
    ("gqa_heads_not_dividing", "gqa", lambda i: _gqa(i, d_model=10, num_heads=4), ("num_heads", "d_model"),
     ("GroupedQueryAttention(8, 2)", lambda i: _gqa(i))),
    ("gqa_kv_heads_not_dividing", "gqa", lambda i: _gqa(i, d_model=12, num_heads=4, num_kv_heads=3),
     ("num_kv_heads",), ("GroupedQueryAttention(12, 4, num_kv_heads=2)", lambda i: _gqa(i, d_model=12, num_heads=4,
                                                                                      num_kv_heads=2))),
    ("gqa_kv_heads_zero", "gqa", lambda i: _gqa(i, num_kv_heads=0), ("num_kv_heads",),
     ("GroupedQueryAttention(8, 2, num_kv_heads=1)", lambda i: _gqa(i, num_kv_heads=1))),
    ("gqa_rope_wrong_head_dim", "gqa", lambda i: _gqa(i, rope=_rope(i, head_dim=8)), ("rope", "head_dim"),
     ("GroupedQueryAttention(8, 2, rope=RotaryPositionEmbedding(4, 8))", lambda i: _gqa(i, rope=_rope(i)))),
    ("gqa_mask_not_broadcasting", "gqa", lambda i: _gqa(i).double()(_x(1, 3, 8), torch.zeros(4, 4, dtype=torch.bool)),
     ("mask",), ("attn(x (1, 3, 8), mask (3, 3))", lambda i: _gqa(i).double()(_x(1, 3, 8),
                                                                               torch.zeros(3, 3, dtype=torch.bool)))),
    ("llama_block_d_ff_zero", "llama_block", lambda i: i.LlamaBlock(8, 2, 0), ("d_ff",),
     ("LlamaBlock(8, 2, 16)", lambda i: i.LlamaBlock(8, 2, 16))),
    ("llama_block_eps_negative", "llama_block", lambda i: i.LlamaBlock(8, 2, 16, eps=-1.0), ("eps",),
     ("LlamaBlock(8, 2, 16, eps=1e-6)", lambda i: i.LlamaBlock(8, 2, 16, eps=1e-6))),
    ("minillama_vocab_zero", "minillama", lambda i: i.MiniLlama(0), ("vocab_size",),
     ("MiniLlama(11)", lambda i: i.MiniLlama(11))),
    ("minillama_kv_heads_not_dividing", "minillama", lambda i: _llama(i, d_model=16, num_heads=4, num_kv_heads=3),
     ("num_kv_heads",), ("MiniLlama(11, d_model=16, num_heads=4, num_kv_heads=2)",
                         lambda i: _llama(i, d_model=16, num_heads=4, num_kv_heads=2))),
    ("minillama_theta_negative", "minillama", lambda i: _llama(i, theta=-1.0), ("theta",),
     ("MiniLlama(11, theta=500.0)", lambda i: _llama(i, theta=500.0))),
    ("minillama_tokens_too_long", "minillama", lambda i: _llama(i)(torch.zeros(1, 9, dtype=torch.long)),
     ("max_len", "tokens"), ("model(tokens (1, 8))", lambda i: _llama(i)(torch.zeros(1, 8, dtype=torch.long)))),
    ("minillama_tokens_outside_vocabulary", "minillama", lambda i: _llama(i)(torch.tensor([[1, 11]])),
     ("tokens", "vocab"), ("model([[1, 10]])", lambda i: _llama(i)(torch.tensor([[1, 10]])))),
    # sizes that are not positive ints, and eps / theta not positive, in every constructor that takes them
    ("swiglu_d_model_zero", "swiglu", lambda i: i.SwiGLU(0, 8), ("d_model",), ("SwiGLU(4, 8)", lambda i: i.SwiGLU(4, 8))),
    ("rope_theta_negative", "rotary", lambda i: _rope(i, theta=-10000.0), ("theta",),
     ("RotaryPositionEmbedding(4, 8)", lambda i: _rope(i))),
    ("llama_block_max_len_zero", "llama_block", lambda i: i.LlamaBlock(8, 2, 16, max_len=0), ("max_len",),
     ("LlamaBlock(8, 2, 16, max_len=8)", lambda i: i.LlamaBlock(8, 2, 16, max_len=8))),
    ("llama_block_theta_zero", "llama_block", lambda i: i.LlamaBlock(8, 2, 16, theta=0.0), ("theta",),
     ("LlamaBlock(8, 2, 16, theta=500.0)", lambda i: i.LlamaBlock(8, 2, 16, theta=500.0))),
    ("minillama_num_layers_zero", "minillama", lambda i: _llama(i, num_layers=0), ("num_layers",),
     ("MiniLlama(11, num_layers=1)", lambda i: _llama(i))),
    ("minillama_d_ff_zero", "minillama", lambda i: _llama(i, d_ff=0), ("d_ff",),
     ("MiniLlama(11, d_ff=16)", lambda i: _llama(i, d_ff=16))),
    ("minillama_max_len_zero", "minillama", lambda i: _llama(i, max_len=0), ("max_len",),
     ("MiniLlama(11, max_len=8)", lambda i: _llama(i))),
    ("minillama_eps_zero", "minillama", lambda i: _llama(i, eps=0.0), ("eps",),
     ("MiniLlama(11, eps=1e-6)", lambda i: _llama(i, eps=1e-6))),
    ("generate_max_new_tokens_zero", "llama_generate", lambda i: _llama(i).generate([1], 0), ("max_new_tokens",),
     ("generate([1], 1)", lambda i: _llama(i).generate([1], 1))),
    ("generate_top_k_zero", "llama_generate", lambda i: _llama(i).generate([1], 2, top_k=0), ("top_k",),
     ("generate([1], 2, top_k=1)", lambda i: _llama(i).generate([1], 2, top_k=1))),
    ("generate_temperature_negative", "llama_generate", lambda i: _llama(i).generate([1], 2, temperature=-1.0),
     ("temperature",), ("generate([1], 2, temperature=1.0)", lambda i: _llama(i).generate([1], 2, temperature=1.0))),
    ("generate_generator_not_a_generator", "llama_generate", lambda i: _llama(i).generate([1], 2, generator=7),
     ("generator",), ("generate([1], 2, generator=torch.Generator())",
                      lambda i: _llama(i).generate([1], 2, generator=torch.Generator()))),
    ("generate_seed_outside_vocabulary", "llama_generate", lambda i: _llama(i).generate([11], 2),
     ("seed_tokens", "vocab"), ("generate([10], 2)", lambda i: _llama(i).generate([10], 2))),
    ("generate_temperature_string", "llama_generate", lambda i: _llama(i).generate([1], 2, temperature="1.0"),
     ("temperature",), ("generate([1], 2, temperature=1.0)", lambda i: _llama(i).generate([1], 2, temperature=1.0))),
    ("gqa_x_wrong_features", "gqa", lambda i: _gqa(i).double()(_x(1, 3, 6)), ("x", "d_model"),
     ("attn(x (1, 3, 8))", lambda i: _gqa(i).double()(_x(1, 3, 8)))),
    ("rope_positions_list", "rotary", lambda i: _rope(i)(_x(3, 4), [0, 1, 2]), ("positions",),
     ("rope(x (3, 4), positions=tensor([0, 1, 2]))", lambda i: _rope(i)(_x(3, 4), torch.tensor([0, 1, 2])))),
    ("rope_positions_bool", "rotary", lambda i: _rope(i)(_x(3, 4), torch.tensor([False, True, True])),
     ("positions",), ("rope(x (3, 4), positions=[0, 1, 1])", lambda i: _rope(i)(_x(3, 4), torch.tensor([0, 1, 1])))),
]


@pytest.mark.parametrize(
    "call, names, valid",
    [pytest.param(call, names, valid, id=case, marks=pytest.mark.component(comp))
     for case, comp, call, names, valid in CASES])
def test_bad_argument_raises_an_error_naming_it(impl, call, names, valid, request):
    case = request.node.callspec.id
    assert_raises_naming(lambda: call(impl), *names, what=case, valid=(valid[0], lambda: valid[1](impl)))


@pytest.mark.parametrize("component", [pytest.param(c, marks=pytest.mark.component(c))
                                       for c in dict.fromkeys(comp for _, comp, *_ in CASES)])
def test_bad_argument_errors_name_the_argument_by_its_identifier(impl, component):
    wrong = misnamed((case, lambda call=call: call(impl), names, (valid[0], lambda valid=valid: valid[1](impl)))
                     for case, comp, call, names, valid in CASES if comp == component)
    assert not wrong, (f"{component}: error messages must name the argument by its exact identifier, as a word:\n  "
                       + "\n  ".join(wrong))
