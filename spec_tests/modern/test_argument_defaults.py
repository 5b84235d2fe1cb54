"""The modern track's defaults (``docs/contract.md``, "The modern track"), seen through behaviour.

Each test builds a module with its defaults and the same module with every default written out, gives
both the same weights and inputs, and asks for the same outputs; the sizes among the defaults are
also seen where they show (the longest sequence accepted, the number of tokens generated). A
signature can show defaults that the body does not use (mutmut 3 calls each mutant through a
trampoline that keeps the original signature), so only behaviour shows a changed default.
"""

import pytest
import torch
from transformer_spec.contract.inputs import randn

from transformer_spec.probes.assertions import assert_close
from transformer_spec.probes.llama_shapes import small_minillama

from ..argument_names import names_as_word, raises_naming_word
from ..generate_checks import assert_generate_defaults

#: equal code on equal float64 inputs gives equal outputs; a default theta of 10001 instead of 10000
#: moves these LlamaBlock outputs by about 5e-5 and these MiniLlama logits by about 3e-7
SAME = {"rtol": 1e-12, "atol": 1e-12}


def _twin(module, explicit):
    """``explicit`` with ``module``'s weights, both in float64 and eval mode."""
    explicit.load_state_dict(module.state_dict())
    return module.double().eval(), explicit.double().eval()


@pytest.mark.component("llama_block")
@pytest.mark.needs('non_causal')
def test_llama_block_defaults_are_max_len_2048_theta_10000_eps_1e_5(impl):
    torch.manual_seed(0)
    block, explicit = _twin(impl.LlamaBlock(8, 2, 16),
                            impl.LlamaBlock(8, 2, 16, num_kv_heads=None, max_len=2048, theta=10000.0, eps=1e-5))
    x = randn(1, 4, 8, seed=5)
    positions = torch.tensor([0, 9, 1000, 2047])  # the last position default max_len=2048 allows
    with torch.no_grad():
        got, expected = block(x.clone(), None, positions), explicit(x.clone(), None, positions)
    where = "LlamaBlock(8, 2, 16) vs LlamaBlock(8, 2, 16, max_len=2048, theta=10000.0, eps=1e-5), positions [0, 9, 1000, 2047]"
    assert_close(got[0], expected[0], **SAME, what=f"{where}: output")
    with pytest.raises((ValueError, TypeError)) as info:
        block(x[:, :1], None, torch.tensor([2048]))
    assert names_as_word(str(info.value), "max_len") or names_as_word(str(info.value), "positions"), (
        f"LlamaBlock(8, 2, 16) at position 2048 (default max_len=2048): the message {str(info.value)!r} should "
        f"name positions or max_len")


@pytest.mark.component("minillama")
@pytest.mark.needs('parameters')
def test_minillama_defaults_are_the_contracts(impl):
    torch.manual_seed(0)
    model, explicit = _twin(impl.MiniLlama(11),
                            impl.MiniLlama(11, d_model=64, num_layers=2, num_heads=4, num_kv_heads=None, d_ff=None,
                                           max_len=128, theta=10000.0, eps=1e-5, tie_weights=False))
    tokens = torch.randint(0, 11, (1, 128), generator=torch.Generator().manual_seed(6))  # default max_len=128
    with torch.no_grad():
        got, expected = model(tokens)[0], explicit(tokens)[0]
    assert_close(got, expected, **SAME, what="MiniLlama(11) vs MiniLlama(11, d_model=64, num_layers=2, num_heads=4, "
                                             "max_len=128, theta=10000.0, eps=1e-5) logits of 128 tokens")
    raises_naming_word(lambda: model(torch.zeros(1, 129, dtype=torch.long)), "max_len",
                       "MiniLlama(11) given 129 tokens (default max_len=128)")


@pytest.mark.component("llama_generate")
@pytest.mark.needs('generate')
def test_generate_defaults_are_50_tokens_at_temperature_0_8(impl):
    assert_generate_defaults(small_minillama(impl, 151), "MiniLlama")
