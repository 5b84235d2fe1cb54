"""Behaviour probes: a submission's *features* on fixed inputs, for the diagnosis.

Each component's probes (``behaviour(impl, features)`` in its module of
:mod:`transformer_spec.components`) run the submission on fixed inputs: known weights set by the
contract's parameter names, float64, eval mode unless a probe is about train mode. Each probe
gives a *feature*: a tensor, a list of tokens, a yes/no behaviour ("eval() is deterministic"),
or the kind of error raised. :mod:`transformer_spec.diagnosis.diagnose` compares the features of a
submission with those of the reference and of every pitfall.

Tensors agree within ``rtol=1e-6, atol=1e-7`` (float64 probes; a course profile's float32 modules: its own
tolerance, :mod:`transformer_spec.diagnosis.profiles`), NaN equal to NaN (:func:`same`).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterable
from typing import NamedTuple

import torch

from transformer_spec.contract import inputs, registry
from transformer_spec.guard import alarm
from transformer_spec.probes import testing
from transformer_spec.submission import loader

Features = dict[str, object]
RTOL, ATOL = 1e-6, 1e-7
DTYPE = torch.float64
#: seconds allowed for one component's probes on a submission (a hang is not diagnosed)
PROBE_TIME_LIMIT = 30
#: the probes' sizes: model width, heads, feed-forward width
D, H, FF = 8, 2, 16


def value(x):
    if isinstance(x, torch.Tensor):
        kind = "bool" if x.dtype == torch.bool else ("float" if x.dtype.is_floating_point else "int")
        return ("tensor", tuple(x.shape), kind, x.detach().cpu().to(torch.float64).clone())
    if isinstance(x, (list, tuple)) and x and all(isinstance(t, torch.Tensor) for t in x):
        return value(torch.stack([t.detach() for t in x]))
    return x


#: A feature whose name starts with this is a behaviour (which keys get weight, whether a change
#: shows), not raw numbers: code written differently from the reference shares it when it makes the
#: same mistake. The diagnosis names a pitfall on these alone when nothing else matches
#: (:mod:`transformer_spec.diagnosis.diagnose`).
BEHAVIOURAL = "~"


class Probes(dict):
    """One component's features while its probes capture them; ``lacks``: what the course profile the
    submission is probed through cannot express (a probe that needs it is left out)."""

    def __init__(self, lacks: Iterable[str] = ()):
        super().__init__()
        self.lacks = frozenset(lacks)


def capture(features: Features, name: str, fn: Callable[[], object], needs: Iterable[str] = ()) -> None:
    """``features[name] = fn()``, or the kind of error it raised. ``needs``: capabilities
    (:data:`transformer_spec.profiles.CAPABILITIES`) without which the result means nothing, as a query
    row whose keys are all blocked for a course that leaves it undefined: not captured where lacking."""
    if set(needs) & getattr(features, "lacks", frozenset()):
        return
    try:
        out = fn()
    except loader.SubmissionError:
        out = "not submitted"
    except Exception as exc:  # noqa: BLE001 - any error is a behaviour
        out = f"raises {type(exc).__name__}"
    if isinstance(out, tuple) and len(out) in (2, 3) and isinstance(out[0], torch.Tensor):
        for i, t in enumerate(out):  # (output, weights, ...): a part that is no tensor (None, a course's
            features[f"{name}[{i}]"] = value(t) if isinstance(t, torch.Tensor) else _plain(t)  # placeholder)
    else:
        features[name] = value(out)


def _plain(x):
    """A feature that is no tensor, as a value the table can store and compare: itself if plain, else
    its type's name."""
    return x if x is None or isinstance(x, (bool, int, float, str)) else f"<{type(x).__name__}>"


class Tolerance(NamedTuple):
    rtol: float
    atol: float


#: the probes' own tolerance (float64)
EXACT = Tolerance(RTOL, ATOL)


def same(a, b, tol: Tolerance = EXACT) -> bool:
    """Two features agree (tensors within ``tol``, NaN = NaN; everything else equal)."""
    if isinstance(a, tuple) and isinstance(b, tuple) and a[:1] == b[:1] == ("tensor",):
        if a[1:3] != b[1:3]:
            return False
        return bool(torch.allclose(a[3], b[3], rtol=tol.rtol, atol=tol.atol, equal_nan=True))
    if isinstance(a, tuple) or isinstance(b, tuple):
        return False
    return a == b


def module(cls, params: dict, train: bool = False, **kwargs):
    m = cls(**kwargs).to(DTYPE)
    testing.set_parameters(m, params)
    return m.train(train)


def zeroed(params: dict, *names: str) -> dict:
    out = dict(params)
    for n in names:
        out[n] = torch.zeros_like(out[n])
    return out


def deterministic(fn) -> bool:
    torch.manual_seed(1)
    a = fn()
    torch.manual_seed(2)
    b = fn()
    return bool(torch.equal(a, b))


def names_arg(fn, arg: str) -> str:
    try:
        fn()
    except (ValueError, TypeError) as exc:
        return f"{type(exc).__name__} {'naming' if arg in str(exc) else 'not naming'} {arg}"
    except loader.SubmissionError:
        return "not submitted"
    except Exception as exc:  # noqa: BLE001
        return f"raises {type(exc).__name__}"
    return "no error"


def _normalised(out) -> bool:
    """Every position of ``out`` has mean 0 and variance 1 over its features: a LayerNorm with unit weight and
    zero bias came last."""
    out = out[0] if isinstance(out, tuple) else out
    var = out.var(-1, unbiased=False)
    return bool(torch.allclose(out.mean(-1), torch.zeros_like(var), atol=1e-6)
                and torch.allclose(var, torch.ones_like(var), atol=1e-3))


def block_probes(f: Features, cls, shapes, call, zero_names) -> None:
    p = testing.seeded_parameters(shapes, seed=31)
    for norm_first in (True, False):
        tag = "pre" if norm_first else "post"
        capture(f, tag, lambda nf=norm_first: call(module(cls, p, d_model=D, num_heads=H, d_ff=FF,
                                                            dropout=0.0, norm_first=nf)))
    # Post-LN ends with a LayerNorm, Pre-LN does not: with unit norms a block that normalises last gives mean 0,
    # variance 1. Asked for Pre-LN, that is the signature of the Post-LN order, however it is written; asked for
    # Post-LN, a block that does not end normalised may have any mistake (a raw feature, not a behaviour)
    unit = {n: torch.ones_like(v) if n.endswith("weight") else torch.zeros_like(v)
            for n, v in p.items() if "norm" in n}
    for norm_first, name in ((True, "~pre_ends_normalised"), (False, "post_ends_normalised")):
        capture(f, name, lambda nf=norm_first: _normalised(call(module(
            cls, {**p, **unit}, d_model=D, num_heads=H, d_ff=FF, dropout=0.0, norm_first=nf))))
    capture(f, "eval_deterministic", lambda: deterministic(
        lambda: call(module(cls, p, d_model=D, num_heads=H, d_ff=FF, dropout=0.5))[0]))

    def train_zero_sublayers_is_identity():
        torch.manual_seed(4)
        m = module(cls, zeroed(p, *zero_names), True, d_model=D, num_heads=H, d_ff=FF, dropout=0.5)
        out = call(m)[0]
        return bool(torch.allclose(out, inputs.randn(2, 4, D, seed=32)))

    capture(f, "pre_train_zero_sublayers_is_identity", train_zero_sublayers_is_identity)

    def train_ffn_output_values():  # ffn(...) = 1 exactly: x + dropout(1) is x + 0 or x + 2
        torch.manual_seed(4)
        q = {**zeroed(p, *zero_names), "ffn.linear2.bias": torch.ones_like(p["ffn.linear2.bias"])}
        m = module(cls, q, True, d_model=D, num_heads=H, d_ff=FF, dropout=0.5)
        added = call(m)[0] - inputs.randn(2, 4, D, seed=32)
        return torch.unique(added.round(decimals=6))  # [0, 2]; [1] when the block does not drop it

    capture(f, "pre_train_ffn_output_values", train_ffn_output_values)


def top_k_draws(model, prompt: list[int], k: int = 2, draws: int = 40) -> str:
    """Where the tokens ``generate`` draws with ``top_k=k`` at temperature 10 rank among the model's own next-token
    logits: ``"top-2"`` (as asked), ``"top-3"`` (one kept too many), ``"beyond"`` (top_k ignored): the signature of
    a top-k mistake whatever the sampler (the draws themselves are a free choice: inverse CDF, multinomial)."""
    out = model(torch.tensor([prompt]))
    logits = (out[0] if isinstance(out, tuple) else out)[0, -1]
    order = torch.argsort(logits, descending=True).tolist()
    drawn = {model.generate(list(prompt), max_new_tokens=1, temperature=10.0, top_k=k,
                            generator=torch.Generator().manual_seed(g))[-1] for g in range(draws)}
    return next((f"top-{n}" for n in (k, k + 1) if drawn <= set(order[:n])), "beyond")


VOCAB, MAX_LEN = 13, 8


def small_minigpt(impl, dropout=0.0):
    params = testing.minigpt_parameters(VOCAB, D, 2, FF, seed=51)
    return module(impl.MiniGPT, params, vocab_size=VOCAB, d_model=D, num_heads=H, num_layers=2, d_ff=FF,
                   max_len=MAX_LEN, dropout=dropout)



def features(impl, components: Iterable[str] | None = None, lacks: Iterable[str] = ()) -> dict[str, Features]:
    """Every probe's feature for ``impl`` (a loaded submission), per component; ``lacks``: what the course
    profile it is probed through cannot express (:class:`Probes`)."""
    out: dict[str, Features] = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is fastest, and a shared machine stays usable
    with torch.random.fork_rng(), _quiet(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in registry.names() if components is None else components:
            f = Probes(lacks)
            torch.manual_seed(0)
            try:
                with alarm.time_limit(PROBE_TIME_LIMIT, f"the diagnosis probes of {name!r}") as limit:
                    registry.get(name).behaviour(impl, f)
            except alarm.Expired as exc:
                if not exc.of(limit):
                    raise  # an outer limit (the whole diagnosis's) ran out
                f["timeout"] = "timeout"
            out[name] = dict(f)  # a plain dict: the catalogue's table is stored with weights_only
    torch.set_num_threads(threads)
    return out


@contextlib.contextmanager
def _quiet():
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        yield
