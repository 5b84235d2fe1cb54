"""MiniLlama.generate: MiniGPT.generate's contract (``docs/contract.md``), checked by laws on the model's
own logits, so a mistake elsewhere in the model costs its own component, not this one: each greedy token
is the argmax of the logits of the last ``max_len`` tokens, ``top_k`` keeps exactly the best ``k``, the
temperature divides the logits, and the caller's mode comes back."""

import pytest
import torch

from transformer_spec.probes.llama_shapes import SMALL, minillama_parameters, small_minillama
from transformer_spec.probes.testing import set_parameters

from ..generate_checks import SEED_DTYPES, assert_tensor_seed_is_the_list_seed

pytestmark = [pytest.mark.component("llama_generate"), pytest.mark.needs("generate")]

VOCAB, MAX_LEN = SMALL["vocab_size"], SMALL["max_len"]


def _model(impl, seed=141, sharp=False):
    return small_minillama(impl, seed, sharp=sharp)  # the re-checks' model too (llama_shapes.SMALL)


def _next_logits(model, tokens):
    with torch.no_grad():
        return model(torch.tensor([tokens[-MAX_LEN:]]))[0][0, -1]  # the window's last position


def _check_each_step(model, seed, out, what, ok):
    assert isinstance(out, list) and out[:len(seed)] == seed, f"{what}: must return a list starting with the seed " \
                                                               f"{seed}, got {out!r}"
    assert all(type(t) is int for t in out), f"{what}: every token must be a Python int, got {[type(t) for t in out]}"
    for i in range(len(seed), len(out)):
        logits = _next_logits(model, out[:i])
        problem = ok(out[i], logits)
        assert problem is None, (f"{what}: token {i} is {out[i]}, {problem} (logits of the window "
                                 f"{out[:i][-MAX_LEN:]}: {[round(v, 3) for v in logits.tolist()]})")


def _argmax(token, logits):
    return None if logits[token] >= logits.max() - 1e-9 else f"but the argmax is {int(logits.argmax())}"


@pytest.mark.parametrize("seed_tokens", [[1, 2, 3], [5, 3, 8, 1, 2, 9, 7, 4, 6, 0, 11, 12]], ids=["short", "long"])
def test_greedy_tokens_are_the_argmax_of_the_models_own_logits(impl, seed_tokens):
    model = _model(impl)
    out = model.generate(list(seed_tokens), 10, temperature=0)
    assert len(out) == len(seed_tokens) + 10, f"generate(seed of {len(seed_tokens)}, 10) returned {len(out)} tokens"
    _check_each_step(model, list(seed_tokens), out, f"generate({seed_tokens}, 10, temperature=0), max_len {MAX_LEN}",
                     _argmax)


@pytest.mark.parametrize("seed_dtype", SEED_DTYPES.values(), ids=SEED_DTYPES.keys())
def test_generate_takes_a_one_dimensional_integer_tensor_seed(impl, seed_dtype):
    assert_tensor_seed_is_the_list_seed(_model(impl), seed_dtype, "MiniLlama")


@pytest.mark.parametrize("seed", [144, 148, 149])
def test_greedy_with_sharp_attention_is_the_argmax_of_the_models_own_logits(impl, seed):
    # With a KV cache, each new token must be rotated at its absolute position in the window and the
    # prompt prefilled under the causal mask; sharp attention makes either mistake change a token.
    model = _model(impl, seed, sharp=True)
    out = model.generate([1, 2, 3], 10, temperature=0)
    _check_each_step(model, [1, 2, 3], out, f"generate([1, 2, 3], 10, temperature=0) of a sharp model (seed {seed})",
                     _argmax)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_greedy_with_a_large_eps_after_two_token_prompts_is_the_argmax_of_the_models_own_logits(impl, num_layers):
    # eps = 0.5 is twice the mean square of these embeddings, and the attention is sharp (q, k times 4; v and
    # the output projection times 3): a KV-cached step that normalises with another eps, or a two-token
    # prompt prefilled without the causal mask, changes a token.
    s = SMALL
    p = minillama_parameters(s["vocab_size"], s["d_model"], num_layers, s["num_heads"], s["d_ff"], 149,
                             num_kv_heads=s["num_kv_heads"])
    p = {k: v * (4 if "q_proj" in k or "k_proj" in k else 3 if "v_proj" in k or "output_proj" in k else 1)
         for k, v in p.items()}
    model = impl.MiniLlama(s["vocab_size"], d_model=s["d_model"], num_layers=num_layers, num_heads=s["num_heads"],
                           num_kv_heads=s["num_kv_heads"], d_ff=s["d_ff"], max_len=MAX_LEN, eps=0.5)
    model = set_parameters(model.double(), p).eval()
    for prompt in ([4, 2], [1, 7]):
        out = model.generate(list(prompt), 10, temperature=0)
        _check_each_step(model, list(prompt), out, f"generate({prompt}, 10, temperature=0) of a {num_layers}-layer "
                                                   f"model with eps=0.5", _argmax)


def test_top_k_1_and_a_tiny_temperature_are_greedy(impl):
    model = _model(impl)
    gen = torch.Generator().manual_seed(3)
    _check_each_step(model, [4, 2], model.generate([4, 2], 9, temperature=0.9, top_k=1, generator=gen),
                     "generate([4, 2], 9, temperature=0.9, top_k=1)", _argmax)
    _check_each_step(model, [4, 2], model.generate([4, 2], 9, temperature=1e-4, generator=gen),
                     "generate([4, 2], 9, temperature=1e-4)", _argmax)


def test_top_k_samples_only_the_k_best(impl):
    model = _model(impl)
    seed = [7, 1]
    out = model.generate(seed, 30, temperature=50.0, top_k=2, generator=torch.Generator().manual_seed(5))

    def in_top_2(token, logits):
        best = torch.topk(logits, 2).indices.tolist()
        return None if token in best else f"outside the 2 best {best}"

    _check_each_step(model, seed, out, "generate([7, 1], 30, temperature=50, top_k=2)", in_top_2)


def test_a_high_temperature_spreads_the_samples(impl):
    # logits / 1000 are nearly equal: about 13 different tokens in 40 draws (at least 5 with
    # overwhelming probability); logits * 1000 (a multiplied temperature) would give the argmax every time.
    model = _model(impl)
    out = model.generate([2], 40, temperature=1000.0, generator=torch.Generator().manual_seed(11))
    assert len(set(out[1:])) >= 5, (f"generate([2], 40, temperature=1000) drew only {sorted(set(out[1:]))}: at "
                                    f"temperature 1000 the distribution is nearly uniform over {VOCAB} tokens "
                                    f"(divide the logits by the temperature)")


def test_the_same_generator_state_gives_the_same_tokens(impl):
    model = _model(impl)
    a = model.generate([3], 12, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(9))
    b = model.generate([3], 12, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(9))
    assert a == b, f"generate with two generators seeded 9 gave {a} and {b}"


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_generate_restores_the_callers_mode(impl, mode):
    model = _model(impl).train(mode == "train")
    model.generate([1, 2], 3, temperature=0)
    assert model.training == (mode == "train"), f"generate left the model in {'train' if model.training else 'eval'}" \
                                                 f" mode; it was in {mode} mode before the call"
