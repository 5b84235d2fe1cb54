"""Named diagnoses: recognise a known mistake (:mod:`transformer_spec.pitfalls`) by its behaviour.

When a component fails, the submission is run on fixed probe inputs (known weights set by the
contract's parameter names, float64, eval mode unless a probe is about train mode). Each probe
gives a *feature*: a tensor, a list of tokens, a yes/no behaviour ("eval() is deterministic"),
or the kind of error raised. The same probes run on every catalogue pitfall (a patched copy of
the reference) and on the reference itself. For a component, a pitfall's *evidence* is the set
of features where it differs from the reference.

* **match**: the submission agrees with the pitfall on every feature of the component;
* **partial match**: it agrees on the pitfall's evidence, but differs elsewhere too (perhaps
  more than one mistake); named only when the partial matches together explain every feature
  where the submission differs from the reference (otherwise the evidence may be a coincidence);
* otherwise nothing is named: "no known mistake matches".

A pitfall whose evidence is empty for a component (its probes cannot see it) is never named.
Tensors agree within ``rtol=1e-6, atol=1e-7`` (float64 probes), NaN equal to NaN.

The pitfalls' features are cached in the temp folder, keyed by the sources of ``reference/``,
the catalogue and this file (computing them takes a while; the cache makes it once).

    python -m transformer_spec.diagnose          # recall and precision (transformer_spec/diagnosis_accuracy.py;
                                                 # also: tools.mutants --diagnose-accuracy)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

from . import loader, testing
from .contract import COMPONENTS
from .patching import REFERENCE_DIR, load_patched_reference
from .pitfalls import BY_NAME, CATALOGUE, Pitfall

Features = dict[str, object]
RTOL, ATOL = 1e-6, 1e-7
DTYPE = torch.float64
#: seconds allowed for one component's probes on a submission (a hang is not diagnosed)
PROBE_TIME_LIMIT = 30
NO_DIAGNOSE_ENV = "TRANSFORMER_SPEC_NO_DIAGNOSE"
D, H, FF = 8, 2, 16


# --------------------------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------------------------
def _value(x):
    if isinstance(x, torch.Tensor):
        kind = "bool" if x.dtype == torch.bool else ("float" if x.dtype.is_floating_point else "int")
        return ("tensor", tuple(x.shape), kind, x.detach().cpu().to(torch.float64).clone())
    if isinstance(x, (list, tuple)) and x and all(isinstance(t, torch.Tensor) for t in x):
        return _value(torch.stack([t.detach() for t in x]))
    return x


def _capture(features: Features, name: str, fn: Callable[[], object]) -> None:
    """``features[name] = fn()``, or the kind of error it raised."""
    try:
        out = fn()
    except loader.SubmissionError:
        out = "not submitted"
    except Exception as exc:  # noqa: BLE001 - any error is a behaviour
        out = f"raises {type(exc).__name__}"
    if isinstance(out, tuple) and len(out) in (2, 3) and all(isinstance(t, torch.Tensor) for t in out):
        for i, t in enumerate(out):
            features[f"{name}[{i}]"] = _value(t)
    else:
        features[name] = _value(out)


def same(a, b) -> bool:
    """Two features agree (tensors within tolerance, NaN = NaN; everything else equal)."""
    if isinstance(a, tuple) and isinstance(b, tuple) and a[:1] == b[:1] == ("tensor",):
        if a[1:3] != b[1:3]:
            return False
        return bool(torch.allclose(a[3], b[3], rtol=RTOL, atol=ATOL, equal_nan=True))
    if isinstance(a, tuple) or isinstance(b, tuple):
        return False
    return a == b


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed), dtype=DTYPE)


def _causal(n: int) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool).triu(1)


def _module(cls, params: dict, train: bool = False, **kwargs):
    m = cls(**kwargs).to(DTYPE)
    testing.set_parameters(m, params)
    return m.train(train)


def _zeroed(params: dict, *names: str) -> dict:
    out = dict(params)
    for n in names:
        out[n] = torch.zeros_like(out[n])
    return out


def _deterministic(fn) -> bool:
    torch.manual_seed(1)
    a = fn()
    torch.manual_seed(2)
    b = fn()
    return bool(torch.equal(a, b))


def _names_arg(fn, arg: str) -> str:
    try:
        fn()
    except (ValueError, TypeError) as exc:
        return f"{type(exc).__name__} {'naming' if arg in str(exc) else 'not naming'} {arg}"
    except loader.SubmissionError:
        return "not submitted"
    except Exception as exc:  # noqa: BLE001
        return f"raises {type(exc).__name__}"
    return "no error"


# --------------------------------------------------------------------------------------------
# The probes, one function per component
# --------------------------------------------------------------------------------------------
def _probe_attention(impl, f: Features) -> None:
    sdpa = lambda *a, **k: impl.scaled_dot_product_attention(*a, **k)  # noqa: E731
    q, k, v = _randn(2, 3, 4, seed=1), _randn(2, 5, 4, seed=2), _randn(2, 5, 6, seed=3)
    _capture(f, "plain", lambda: sdpa(q * 2, k * 2, v))
    _capture(f, "scale_0.3", lambda: sdpa(q, k, v, scale=0.3))
    x = _randn(2, 4, 4, seed=4) * 2
    _capture(f, "causal", lambda: sdpa(x, x, x, _causal(4)))
    mask = torch.zeros(2, 3, 5, dtype=torch.bool)
    mask[0, :, 3:] = True
    mask[1, 1, :] = True  # a fully blocked row
    _capture(f, "blocked", lambda: sdpa(q, k, v, mask))
    # Allowed scores far below zero: a finite fill (-1e9, -1e4) gives the blocked key the weight.
    one, values = torch.ones(1, 1, 1, dtype=DTYPE), torch.tensor([[[1.0], [2.0]]], dtype=DTYPE)
    second_blocked = torch.tensor([[[False, True]]])
    for low in (-2e4, -2e9):
        keys = torch.tensor([[[low], [0.0]]], dtype=DTYPE)
        _capture(f, f"blocked_after_{low:g}", lambda keys=keys: sdpa(one, keys, values, second_blocked))


def _probe_masks(impl, f: Features) -> None:
    _capture(f, "causal_mask", lambda: impl.causal_mask(5))
    tokens = torch.tensor([[4, 2, 7, 0, 0], [3, 0, 5, 9, 1]])
    _capture(f, "padding_mask", lambda: impl.padding_mask(tokens, 0))


def _mha_params():
    return testing.seeded_parameters(testing.mha_shapes(D), seed=11)


def _probe_mha(impl, f: Features) -> None:
    p = _mha_params()
    query, key, value = _randn(2, 3, D, seed=12), _randn(2, 5, D, seed=13), _randn(2, 5, D, seed=14)
    mask = torch.zeros(2, 1, 1, 5, dtype=torch.bool)
    mask[1, ..., 3:] = True
    x = _randn(2, 4, D, seed=15)

    def mha(dropout=0.0):
        return _module(impl.MultiHeadAttention, p, d_model=D, num_heads=H, dropout=dropout)

    _capture(f, "cross", lambda: mha()(query, key, value))
    _capture(f, "cross_masked", lambda: mha()(query, key, value, mask))
    _capture(f, "self_causal", lambda: _module(impl.MultiHeadSelfAttention, p, d_model=D, num_heads=H,
                                               dropout=0.0)(x, _causal(4)))
    _capture(f, "eval_deterministic", lambda: _deterministic(lambda: mha(0.5)(query, key, value)[0]))


def _probe_ffn(impl, f: Features) -> None:
    p = testing.seeded_parameters(testing.ffn_shapes(D, FF), seed=21)
    x = _randn(2, 3, D, seed=22) * 2

    def ffn(dropout=0.0, params=p, train=False):
        return _module(impl.FeedForward, params, train, d_model=D, d_ff=FF, dropout=dropout)

    _capture(f, "out", lambda: ffn()(x))
    _capture(f, "eval_deterministic", lambda: _deterministic(lambda: ffn(0.5)(x)))
    zero = _zeroed(p, "linear2.weight")

    def train_zero_linear2_gives_bias():
        torch.manual_seed(3)
        out = ffn(0.5, zero, train=True)(x)
        return bool(torch.allclose(out, zero["linear2.bias"].expand_as(out)))

    _capture(f, "train_zero_linear2_gives_bias", train_zero_linear2_gives_bias)


def _block_probes(f: Features, name: str, cls, shapes, call, zero_names) -> None:
    p = testing.seeded_parameters(shapes, seed=31)
    for norm_first in (True, False):
        tag = "pre" if norm_first else "post"
        _capture(f, tag, lambda nf=norm_first: call(_module(cls, p, d_model=D, num_heads=H, d_ff=FF,
                                                            dropout=0.0, norm_first=nf)))
    _capture(f, "eval_deterministic", lambda: _deterministic(
        lambda: call(_module(cls, p, d_model=D, num_heads=H, d_ff=FF, dropout=0.5))[0]))

    def train_zero_sublayers_is_identity():
        torch.manual_seed(4)
        m = _module(cls, _zeroed(p, *zero_names), True, d_model=D, num_heads=H, d_ff=FF, dropout=0.5)
        out = call(m)[0]
        return bool(torch.allclose(out, _randn(2, 4, D, seed=32)))

    _capture(f, "pre_train_zero_sublayers_is_identity", train_zero_sublayers_is_identity)

    def train_ffn_output_values():  # ffn(...) = 1 exactly: x + dropout(1) is x + 0 or x + 2
        torch.manual_seed(4)
        q = {**_zeroed(p, *zero_names), "ffn.linear2.bias": torch.ones_like(p["ffn.linear2.bias"])}
        m = _module(cls, q, True, d_model=D, num_heads=H, d_ff=FF, dropout=0.5)
        added = call(m)[0] - _randn(2, 4, D, seed=32)
        return torch.unique(added.round(decimals=6))  # [0, 2]; [1] when the block does not drop it

    _capture(f, "pre_train_ffn_output_values", train_ffn_output_values)


def _probe_encoder(impl, f: Features) -> None:
    x = _randn(2, 4, D, seed=32)
    mask = torch.zeros(2, 1, 1, 4, dtype=torch.bool)
    mask[1, ..., 3] = True
    _block_probes(f, "encoder", impl.TransformerEncoderBlock, testing.encoder_block_shapes(D, FF),
                  lambda m: m(x, mask),
                  ("self_attn.W_O.weight", "ffn.linear2.weight", "ffn.linear2.bias"))
    _capture(f, "pre_causal", lambda: _module(
        impl.TransformerEncoderBlock, testing.seeded_parameters(testing.encoder_block_shapes(D, FF), seed=31),
        d_model=D, num_heads=H, d_ff=FF, dropout=0.0)(x, _causal(4)))


def _probe_decoder(impl, f: Features) -> None:
    x, memory = _randn(2, 4, D, seed=32), _randn(2, 5, D, seed=33)
    memory_mask = torch.zeros(2, 1, 1, 5, dtype=torch.bool)
    memory_mask[1, ..., 3:] = True
    _block_probes(f, "decoder", impl.TransformerDecoderBlock, testing.decoder_block_shapes(D, FF),
                  lambda m: m(x, memory, _causal(4), memory_mask),
                  ("self_attn.W_O.weight", "cross_attn.W_O.weight", "ffn.linear2.weight", "ffn.linear2.bias"))


def _probe_position(impl, f: Features) -> None:
    _capture(f, "sinusoidal", lambda: impl.SinusoidalPositionEncoding(d_model=6, max_len=10).to(DTYPE)(
        torch.zeros(1, 7, 6, dtype=DTYPE)))
    p = {"embedding.weight": _randn(10, 6, seed=41)}
    _capture(f, "learned", lambda: _module(impl.LearnedPositionEmbedding, p, d_model=6, max_len=10)(
        torch.zeros(2, 4, 6, dtype=DTYPE)))


VOCAB, MAX_LEN = 13, 8


def _minigpt(impl, dropout=0.0):
    params = testing.minigpt_parameters(VOCAB, D, 2, FF, seed=51)
    return _module(impl.MiniGPT, params, vocab_size=VOCAB, d_model=D, num_heads=H, num_layers=2, d_ff=FF,
                   max_len=MAX_LEN, dropout=dropout)


def _probe_minigpt(impl, f: Features) -> None:
    tokens = torch.tensor([[1, 5, 2, 9, 12, 0], [3, 3, 7, 1, 4, 8]])
    _capture(f, "logits", lambda: _minigpt(impl)(tokens)[0])
    _capture(f, "attn_maps", lambda: _minigpt(impl)(tokens, return_attn=True)[1])

    def tied():
        m = _minigpt(impl)
        return m.lm_head.weight.data_ptr() == m.token_embed.weight.data_ptr()

    _capture(f, "tied", tied)

    def dropout_zero_is_eval_in_train():
        m = _minigpt(impl, dropout=0.0)
        with torch.no_grad():
            eval_logits = m.eval()(tokens)[0]
            torch.manual_seed(5)
            return bool(torch.allclose(m.train()(tokens)[0], eval_logits, rtol=1e-9, atol=1e-12))

    _capture(f, "dropout_zero_is_eval_in_train", dropout_zero_is_eval_in_train)


def _probe_generate(impl, f: Features) -> None:
    model = []

    def gen(seed_tokens, n, **kw):
        if not model:
            model.append(_minigpt(impl))
        return model[0].generate(seed_tokens, max_new_tokens=n, **kw)

    _capture(f, "greedy", lambda: gen([1, 2, 3], 6, temperature=0))
    _capture(f, "window", lambda: gen([4, 1, 7, 7, 2, 9, 3, 11, 5, 6], 3, temperature=0))
    _capture(f, "sample_t0.5", lambda: gen([1, 2, 3], 6, temperature=0.5, generator=_gen(5)))
    _capture(f, "sample_t3_top2", lambda: gen([1, 2, 3], 6, temperature=3.0, top_k=2, generator=_gen(6)))

    def reproducible():
        torch.manual_seed(7)
        a = gen([1, 2], 6, temperature=3.0, generator=_gen(8))
        torch.manual_seed(9)
        b = gen([1, 2], 6, temperature=3.0, generator=_gen(8))
        return a == b

    _capture(f, "generator_reproducible", reproducible)

    def modes():
        m = _minigpt(impl, dropout=0.5)
        seen = []
        for mod in m.modules():  # a submission may call its blocks without calling the model itself
            mod.register_forward_pre_hook(lambda mod, args: seen.append(mod.training))
        m.train()
        m.generate([1, 2], max_new_tokens=2, temperature=0)
        after_train = m.training
        m.eval()
        m.generate([1, 2], max_new_tokens=2, temperature=0)
        return f"forward in train mode: {any(seen)}; mode restored: {after_train and not m.training}"

    _capture(f, "modes", modes)


def _probe_seq2seq(impl, f: Features) -> None:
    def model():
        torch.manual_seed(61)
        return impl.Seq2SeqTransformer(11, 13, d_model=D, num_heads=H, num_encoder_layers=1,
                                       num_decoder_layers=1, d_ff=FF, max_len=MAX_LEN, dropout=0.0).to(DTYPE).eval()

    src, src_padded = torch.tensor([[3, 4, 5]]), torch.tensor([[3, 4, 5, 0, 0]])
    tgt = torch.tensor([[1, 2, 3, 4]])

    def padding_changes(m):
        return not torch.allclose(m(src, tgt), m(src_padded, tgt), rtol=1e-9, atol=1e-9)

    _capture(f, "src_padding_changes_logits", lambda: padding_changes(model()))
    _capture(f, "interior_pad_logits", lambda: model()(torch.tensor([[3, 0, 5, 4]]), tgt))  # a pad between tokens

    def without_encoder_attention():  # encoder self-attention contributes nothing: only cross-attention sees padding
        m = model()
        with torch.no_grad():
            for block in m.encoder:
                block.self_attn.W_O.weight.zero_()
        return padding_changes(m)

    _capture(f, "src_padding_changes_logits_without_encoder_attention", without_encoder_attention)

    def future_changes_past():
        m = model()
        other = torch.tensor([[1, 2, 9, 9]])
        return not torch.allclose(m(src, tgt)[:, :2], m(src, other)[:, :2], rtol=1e-9, atol=1e-9)

    _capture(f, "future_target_changes_earlier_logits", future_changes_past)


def _probe_errors(impl, f: Features) -> None:
    f["mha_10_4"] = _names_arg(lambda: impl.MultiHeadAttention(d_model=10, num_heads=4), "num_heads")
    f["ffn_d_model_0"] = _names_arg(lambda: impl.FeedForward(d_model=0, d_ff=4), "d_model")
    f["minigpt_vocab_0"] = _names_arg(lambda: impl.MiniGPT(0, d_model=8, num_heads=2, num_layers=1, d_ff=8,
                                                           max_len=4), "vocab_size")
    f["generate_max_new_tokens_0"] = _names_arg(lambda: _minigpt(impl).generate([1], max_new_tokens=0),
                                                "max_new_tokens")
    f["position_too_long"] = _names_arg(lambda: impl.SinusoidalPositionEncoding(6, max_len=4)(
        torch.zeros(1, 5, 6)), "max_len")
    f["float_mask"] = _names_arg(lambda: impl.scaled_dot_product_attention(
        torch.zeros(1, 2, 4), torch.zeros(1, 2, 4), torch.zeros(1, 2, 4), torch.zeros(2, 2)), "mask")
    f["causal_mask_0"] = _names_arg(lambda: impl.causal_mask(0), "seq_len")


PROBES: dict[str, Callable] = {
    "attention": _probe_attention, "masks": _probe_masks, "mha": _probe_mha, "ffn": _probe_ffn,
    "encoder": _probe_encoder, "decoder": _probe_decoder, "position": _probe_position,
    "minigpt": _probe_minigpt, "generate": _probe_generate, "seq2seq": _probe_seq2seq,
    "errors": _probe_errors,
}
assert set(PROBES) == set(COMPONENTS)


@contextlib.contextmanager
def _time_limit(seconds: int):
    """Stop the block with ``TimeoutError`` after ``seconds``. Inside an outer limit (an alarm
    already running, e.g. :func:`annotate`'s) the shorter of the two applies, and the outer one
    is re-armed with its remaining time afterwards."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return
    start = time.monotonic()
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0]
    if outer_left and outer_left <= seconds:  # the outer limit comes first: it stays in charge
        yield
        return

    def stop(signum, frame):
        raise TimeoutError(f"the diagnosis probes took over {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - start), 1e-3))


def features(impl, components: Iterable[str] = COMPONENTS) -> dict[str, Features]:
    """Every probe's feature for ``impl`` (a loaded submission), per component."""
    out: dict[str, Features] = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is fastest, and a shared machine stays usable
    with torch.random.fork_rng(), _quiet(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for comp in components:
            f: Features = {}
            torch.manual_seed(0)
            try:
                with _time_limit(PROBE_TIME_LIMIT):
                    PROBES[comp](impl, f)
            except TimeoutError:
                f["timeout"] = "timeout"
            out[comp] = f
    torch.set_num_threads(threads)
    return out


@contextlib.contextmanager
def _quiet():
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        yield


# --------------------------------------------------------------------------------------------
# The catalogue's features (cached)
# --------------------------------------------------------------------------------------------
def _cache_key() -> str:
    h = hashlib.sha256()
    for path in sorted(REFERENCE_DIR.glob("*.py")) + [Path(__file__), Path(__file__).with_name("pitfalls.py"),
                                                      Path(__file__).with_name("testing.py")]:
        h.update(path.name.encode() + path.read_bytes())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:16]


def _cache_path() -> Path:
    base = Path(os.environ.get("TRANSFORMER_SPEC_CACHE", Path(tempfile.gettempdir()) / "transformer_spec_cache"))
    return base / f"diagnose-{_cache_key()}.pt"


#: which components a pitfall of each component can change (the contract's composition);
#: errors pitfalls (shared argument checks) are looked for in the ``errors`` component only.
AFFECTS: dict[str, tuple[str, ...]] = {
    "attention": ("attention", "mha", "encoder", "decoder", "minigpt", "generate", "seq2seq"),
    "masks": ("masks", "seq2seq"),
    "mha": ("mha", "encoder", "decoder", "minigpt", "generate", "seq2seq"),
    "ffn": ("ffn", "encoder", "decoder", "minigpt", "generate", "seq2seq"),
    "encoder": ("encoder", "minigpt", "generate", "seq2seq"),
    "decoder": ("decoder", "seq2seq"),
    "position": ("position", "minigpt", "generate", "seq2seq"),
    "minigpt": ("minigpt", "generate"),
    "generate": ("generate",),
    "seq2seq": ("seq2seq",),
    "errors": ("errors",),
}
_MEMO: dict[str, dict[str, dict[str, Features]]] = {}


def candidates(comp: str) -> list[Pitfall]:
    """The pitfalls that can show in component ``comp``."""
    return [p for p in CATALOGUE if comp in AFFECTS[p.component]]


def catalogue_features(components: Iterable[str] = COMPONENTS) -> dict[str, dict[str, Features]]:
    """``{pitfall name or "reference": {component: features}}`` for ``components``, for the
    pitfalls that can show there (:func:`candidates`); computed once, cached on disk."""
    key = _cache_key()
    path = _cache_path()
    table = _MEMO.get(key)
    if table is None and path.exists():
        with contextlib.suppress(Exception):
            table = torch.load(path, weights_only=True)
    table = table if table is not None else {}
    _MEMO[key] = table
    todo = {}
    for comp in components:
        for name in ["reference", *(p.name for p in candidates(comp))]:
            if comp not in table.get(name, {}):
                todo.setdefault(name, []).append(comp)
    if not todo:
        return table
    with tempfile.TemporaryDirectory(prefix="diagnose-") as tmp:
        for name, comps in todo.items():
            impl = loader.load("reference") if name == "reference" else \
                load_patched_reference(Path(tmp), BY_NAME[name].patches, f"pitfall_{name}")
            table.setdefault(name, {}).update(features(impl, comps))
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp_path = path.with_suffix(f".{os.getpid()}.tmp")
        torch.save(table, tmp_path)
        os.replace(tmp_path, path)
    return table


def evidence(table, name: str, comp: str) -> list[str]:
    """The features of ``comp`` where pitfall ``name`` differs from the reference."""
    ref, mine = table["reference"][comp], table[name][comp]
    return [k for k in sorted(set(ref) | set(mine)) if not same(ref.get(k), mine.get(k))]


# --------------------------------------------------------------------------------------------
# Diagnoses
# --------------------------------------------------------------------------------------------
@dataclass
class Diagnosis:
    component: str
    matches: list[Pitfall]      # agree on every feature of the component
    partial: list[Pitfall]      # agree on the pitfall's evidence only
    differs_from_reference: bool

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.matches]

    def message(self) -> str:
        def line(p: Pitfall) -> str:
            where = "" if p.component == self.component else f" (a mistake in the '{p.component}' part)"
            return f"  - {p.explanation}{where} [pitfall `{p.name}`]"

        if self.matches:
            head = (f"Diagnosis for '{self.component}': on fixed probe inputs your code behaves exactly like "
                    + ("this known mistake:" if len(self.matches) == 1 else
                       "these known mistakes (they behave identically on the probes; one of them is likely):"))
            return "\n".join([head, *map(line, self.matches[:4])])
        if self.partial:
            head = (f"Diagnosis for '{self.component}' (partial): where this known mistake shows, your code "
                    f"behaves like it, but it also differs elsewhere (maybe more than one problem):")
            return "\n".join([head, *map(line, self.partial[:3])])
        if not self.differs_from_reference:
            return (f"Diagnosis for '{self.component}': the diagnosis probes found no difference from a correct "
                    f"implementation, so no known mistake is named; read the failing tests' messages.")
        return (f"Diagnosis for '{self.component}': no known mistake of the catalogue "
                f"(transformer_spec/pitfalls.py) matches your code's behaviour; read the failing tests' messages.")


def diagnose(impl, components: Iterable[str], table=None) -> dict[str, Diagnosis]:
    """A :class:`Diagnosis` per component for the loaded submission ``impl``."""
    comps = list(components)
    table = table if table is not None else catalogue_features(comps)
    mine = features(impl, comps)
    out = {}
    for comp in comps:
        sub, ref = mine[comp], table["reference"][comp]
        keys = sorted(set(sub) | set(ref))
        differs = any(not same(sub.get(k), ref.get(k)) for k in keys)
        matches, partial = [], []
        explained: set[str] = set()
        if differs:
            for p in candidates(comp):
                ev = evidence(table, p.name, comp)
                if not ev:
                    continue
                theirs = table[p.name][comp]
                if all(same(sub.get(k), theirs.get(k)) for k in sorted(set(sub) | set(theirs))):
                    matches.append(p)
                elif all(same(sub.get(k), theirs.get(k)) for k in ev):
                    partial.append((len(ev), p))
                    explained |= set(ev)
        # Partial matches are named only when together they explain every difference from the
        # reference: a mistake that agrees on its own evidence (perhaps one yes/no behaviour) while
        # other behaviours are unexplained is a guess, and a wrong name misleads more than none.
        different = {k for k in keys if not same(sub.get(k), ref.get(k))}
        if not different <= explained:
            partial = []
        partial_sorted = [p for _, p in sorted(partial, key=lambda t: -t[0])]
        # own-component pitfalls first: a mistake in this very part is the likelier explanation
        matches.sort(key=lambda p: p.component != comp)
        out[comp] = Diagnosis(comp, matches, partial_sorted, differs)
    return out


# --------------------------------------------------------------------------------------------
# The grading hook (called by transformer_spec/grading.py at the end of a run)
# --------------------------------------------------------------------------------------------
#: The longest a diagnosis may take at the end of a graded run (it runs submission code again).
DIAGNOSIS_SECONDS = 60.0


def _within(seconds: float, fn):
    """``fn()``, stopped with ``TimeoutError`` after ``seconds`` where SIGALRM exists (main thread)."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return fn()

    def stop(signum, frame):
        raise TimeoutError(f"it took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def annotate(config, state) -> dict[str, str]:
    """The diagnosis of each failing component: ``{component: message}``, in contract order.

    Skipped when the submission did not import, when ``$TRANSFORMER_SPEC_NO_DIAGNOSE`` is set,
    or for a component whose failures are all missing names, stubs (or tests that use one),
    forbidden APIs, timeouts or tests that did not run (their messages already say what to do).
    The key ``"(all)"`` holds a note when the diagnosis could not run. The grading plugin shows
    each diagnosis once (the run's notes, results.json's ``output`` and ``extra_data``).
    """
    from .failures import DIAGNOSED
    from .plugin import _SUBMISSION

    if os.environ.get(NO_DIAGNOSE_ENV):
        return {}
    sub = config.stash.get(_SUBMISSION, None)
    if sub is None or sub.error is not None:
        return {}
    failing = {r.component for r in state.results.values()
               if r.outcome == "failed" and r.kind in DIAGNOSED and not r.uses & state.stubs}
    if not failing:
        return {}
    try:
        found = _within(DIAGNOSIS_SECONDS, lambda: diagnose(sub, [c for c in COMPONENTS if c in failing]))
    except BaseException as exc:  # noqa: BLE001 - submission code runs here: SystemExit, a hang... never break a grade
        return {"(all)": f"(the diagnosis could not run: {type(exc).__name__}: {exc})"}
    return {comp: d.message() for comp, d in found.items()}


# --------------------------------------------------------------------------------------------
# Accuracy (transformer_spec/diagnosis_accuracy.py)
# --------------------------------------------------------------------------------------------
def accuracy(progress=None) -> dict:
    """Recall and precision of the diagnosis (see :mod:`transformer_spec.diagnosis_accuracy`)."""
    from . import diagnosis_accuracy

    return diagnosis_accuracy.accuracy(progress)


def main(argv: list[str] | None = None) -> int:
    from . import diagnosis_accuracy

    return diagnosis_accuracy.main(argv)


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["BY_NAME", "Diagnosis", "accuracy", "annotate", "catalogue_features", "diagnose", "features"]
