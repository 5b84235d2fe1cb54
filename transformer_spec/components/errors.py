"""The 'errors' component. Argument checks: a clear ValueError (or TypeError) naming the argument to
fix.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import numpy as np
import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import testing
from transformer_spec.submission import loader

NAMES = (

)

PITFALLS = (
    pitfall("heads_divisibility_not_checked", "errors",
            "d_model not divisible by num_heads is not rejected: raise ValueError naming d_model and num_heads.",
            ("_validation.py", "if d_model % num_heads != 0:", "if False:")),
    pitfall("positive_ints_not_checked", "errors",
            "Sizes such as d_model, num_heads or max_new_tokens are not checked: raise ValueError/TypeError "
            "naming the argument for 0, negatives and non-ints.",
            ("_validation.py", '"""``value`` must be an ``int`` (not a bool) greater than zero."""',
             '"""``value`` must be an ``int`` (not a bool) greater than zero."""\n    return value')),
    pitfall("max_len_not_checked", "errors",
            "A sequence longer than max_len is not rejected with a ValueError naming max_len.",
            ("position.py", "    if start + x.size(1) > max_len:", "    if False:")),
    pitfall("mask_dtype_not_checked", "errors",
            "A mask that is not bool is accepted: raise TypeError saying masks are bool (True = blocked).",
            ("_validation.py", "if mask.dtype != torch.bool:", "if False:")),
    pitfall("error_message_without_argument_name", "errors",
            "The error message does not name the argument: say which argument is wrong and its value.",
            ("_validation.py", 'raise ValueError(f"{name} must be a positive int, got {name}={value}")',
             'raise ValueError(f"must be a positive int, got {value}")')),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'errors' (transformer_spec/probes/behaviour.py)."""
    f["mha_10_4"] = bp.names_arg(lambda: impl.MultiHeadAttention(d_model=10, num_heads=4), "num_heads")
    f["ffn_d_model_0"] = bp.names_arg(lambda: impl.FeedForward(d_model=0, d_ff=4), "d_model")
    f["minigpt_vocab_0"] = bp.names_arg(lambda: impl.MiniGPT(0, d_model=8, num_heads=2, num_layers=1, d_ff=8,
                                                           max_len=4), "vocab_size")
    f["generate_max_new_tokens_0"] = bp.names_arg(lambda: bp.small_minigpt(impl).generate([1], max_new_tokens=0),
                                                "max_new_tokens")
    f["position_too_long"] = bp.names_arg(lambda: impl.SinusoidalPositionEncoding(6, max_len=4)(
        torch.zeros(1, 5, 6)), "max_len")
    f["float_mask"] = bp.names_arg(lambda: impl.scaled_dot_product_attention(
        torch.zeros(1, 2, 4), torch.zeros(1, 2, 4), torch.zeros(1, 2, 4), torch.zeros(2, 2)), "mask")
    f["causal_mask_0"] = bp.names_arg(lambda: impl.causal_mask(0), "seq_len")


# The re-checks: one a golden case, the same call with the bad argument of the same kind (zero stays
# zero; a negative size, a d_model that num_heads does not divide, a length past max_len, a float
# mask are drawn) and the other arguments drawn valid, chosen so that only the checked rule is
# broken (each is one a pitfall of this component breaks; a dropout above one is not re-checked: no
# pitfall breaks its check, so the re-check could not be shown to fail). The outcome is what
# the anchor asserts (testing.assert_raises_naming): the same call with a valid argument in the bad
# one's place was not rejected naming the argument (the anchor's control: code that raises so on every
# call checks nothing; another error there is a mistake elsewhere),
# and the bad call raised ValueError or TypeError whose message contains one of the names, as
# arrays; the reference's is True, True, True.
BAD = "spec_tests/test_bad_arguments.py::test_bad_argument_raises_an_error_naming_it"
BEHAVIOURS = "spec_tests/test_behaviours.py::"


def outcome(call, valid, *names: str, before: int = 1) -> dict[str, np.ndarray]:
    """Whether ``valid()`` was accepted (not rejected naming one of ``names``) every time, called ``before`` times
    before ``call()`` and once after it; whether ``call()`` raised ValueError or TypeError, and whether its message
    names one of ``names``. The re-check draws ``before`` from the secret seed (issue 45, attack 11): code that
    raises on every second call, or on every call of a re-check but the first, cannot know which call is the bad one."""
    raised = named = False
    accepted = all([_accepts(valid, names) for _ in range(before)])
    try:
        call()
    except loader.SubmissionError:
        raise
    except (ValueError, TypeError) as exc:
        message = str(exc).lower()
        raised, named = True, any(n.lower() in message for n in names)
    except Exception:  # noqa: BLE001 - another kind of error is a wrong answer
        pass
    accepted = _accepts(valid, names) and accepted
    return {"valid_arguments_accepted": np.array([accepted]), "raised_value_or_type_error": np.array([raised]),
            "message_names_the_argument": np.array([named])}


def _accepts(valid, names) -> bool:
    """Whether ``valid()`` runs without being rejected naming one of ``names``."""
    try:
        valid()
    except loader.SubmissionError:
        raise  # a name not submitted (or a refused call) is the child's to report, not a wrong answer
    except Exception as exc:  # noqa: BLE001 - rejecting the valid arguments is a wrong answer (testing.assert_accepts)
        return not testing.rejects_naming(exc, names)
    return True


def _draw(seed: int):
    g = inputs.generator(seed + 1)
    return lambda low, high: int(torch.randint(low, high + 1, (), generator=g))


def _case(build):
    """A re-check from ``build(impl, draw) -> (call, valid, names)``, ``draw(low, high)`` an int from
    the seed, ``valid`` the same call with a valid argument in the bad one's place."""
    def run(mod, seed):
        draw = _draw(seed)
        call, valid, names = build(mod, draw)
        return outcome(call, valid, *names, before=draw(0, 2))
    return run


def _heads_not_dividing(impl, draw, cls):
    h = draw(3, 6)
    d_model = 2 * draw(h, 3 * h)  # even (a sinusoidal table of odd width is not asked for), above num_heads
    while d_model % h == 0:
        d_model += 2
    kwargs = {"MultiHeadAttention": {}, "MiniGPT": dict(num_layers=1, d_ff=16, max_len=8)}[cls]
    args = (11,) if cls == "MiniGPT" else ()
    make = getattr(impl, cls)
    return (lambda: make(*args, d_model=d_model, num_heads=h, **kwargs),
            lambda: make(*args, d_model=d_model, num_heads=2, **kwargs), ("num_heads", "d_model"))


def _too_long(impl, draw):
    m = draw(2, 8)
    x = inputs.randn(1, m + draw(1, 4), 8, seed=draw(0, 99))
    return (lambda: impl.SinusoidalPositionEncoding(8, max_len=m)(x),
            lambda: impl.SinusoidalPositionEncoding(8, max_len=m)(x[:, :m]), ("max_len",))


def _sdpa_float_mask(impl, draw):
    q, k, v = (inputs.randn(2, 3, 4, seed=draw(0, 99)), inputs.randn(2, 5, 4, seed=draw(0, 99)),
               inputs.randn(2, 5, 6, seed=draw(0, 99)))
    mask = torch.rand(3, 5, generator=inputs.generator(draw(0, 99))) < 0.5
    mask[:, 0] = False  # no fully blocked row: the valid call is an ordinary one
    return (lambda: impl.scaled_dot_product_attention(q, k, v, mask.float()),
            lambda: impl.scaled_dot_product_attention(q, k, v, mask), ("mask",))


def _mha(impl, draw, **changes):
    kwargs = {"d_model": 2 * draw(1, 8), "num_heads": 2}
    return lambda: impl.MultiHeadAttention(**{**kwargs, **changes})


def _generate(impl, draw, **changes):
    seed, n = [draw(0, 10), draw(0, 10)], draw(1, 3)
    model = lambda: impl.MiniGPT(11, d_model=8, num_heads=2, num_layers=1, d_ff=16, max_len=8, dropout=0.0)
    return lambda: model().generate(seed, max_new_tokens=n, **{"top_k": draw(1, 11), **changes})


CASES = {  # name -> (anchor, build(impl, draw) -> (call, valid, names))
    "MultiHeadAttention_num_heads_zero": (f"{BAD}[MultiHeadAttention_num_heads_zero]", lambda impl, draw: (
        _mha(impl, draw, num_heads=0), _mha(impl, draw), ("num_heads",))),
    "MultiHeadAttention_d_model_negative": (f"{BAD}[MultiHeadAttention_d_model_negative]", lambda impl, draw: (
        _mha(impl, draw, d_model=-2 * draw(1, 8)), _mha(impl, draw), ("d_model",))),
    "FeedForward_d_ff_zero": (f"{BAD}[FeedForward_d_ff_zero]", lambda impl, draw: (
        lambda d=draw(1, 16): impl.FeedForward(d, 0), lambda d=draw(1, 16), f=draw(1, 32): impl.FeedForward(d, f),
        ("d_ff",))),
    "MiniGPT_vocab_size_zero": (f"{BAD}[MiniGPT_vocab_size_zero]", lambda impl, draw: (
        lambda d=2 * draw(1, 8): impl.MiniGPT(0, d_model=d, num_heads=2),
        lambda d=2 * draw(1, 8), v=draw(1, 20): impl.MiniGPT(v, d_model=d, num_heads=2), ("vocab_size",))),
    "sdpa_mask_not_bool": (f"{BAD}[sdpa_mask_not_bool]", _sdpa_float_mask),
    "generate_top_k_zero": (f"{BAD}[generate_top_k_zero]", lambda impl, draw: (
        _generate(impl, draw, top_k=0), _generate(impl, draw), ("top_k",))),
    "d_model_not_divisible_by_num_heads[MultiHeadAttention]": (
        f"{BEHAVIOURS}test_d_model_not_divisible_by_num_heads[MultiHeadAttention]",
        lambda impl, draw: _heads_not_dividing(impl, draw, "MultiHeadAttention")),
    "d_model_not_divisible_by_num_heads[MiniGPT]": (
        f"{BEHAVIOURS}test_d_model_not_divisible_by_num_heads[MiniGPT]",
        lambda impl, draw: _heads_not_dividing(impl, draw, "MiniGPT")),
    "sequence_longer_than_max_len[SinusoidalPositionEncoding]": (
        f"{BEHAVIOURS}test_sequence_longer_than_max_len[SinusoidalPositionEncoding]",
        _too_long),
}

RECHECKS = tuple(Recheck(f"errors[{name}]", "errors", (anchor,), _case(build)) for name, (anchor, build) in CASES.items())


COMPONENT = Component(
    "errors", label="err", points=6, order=11, depends_on=(),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour,
    why_no_names="the argument checks belong to the other components' names; their tests are graded here",
    why_no_values="its tests are argument checks: it computes nothing of its own",
    rechecks=RECHECKS,
)
