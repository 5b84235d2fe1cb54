"""Hidden re-checks: the class grader's own check of what a grading child says passed.

A re-check (:class:`~transformer_spec.registry.Recheck`, declared by its component in
:mod:`transformer_spec.components`) computes some of the contract's outputs on inputs drawn from a
secret seed. The submission's numbers come from a fresh child process with no pytest in it
(``python -m transformer_spec.recheck``), over the authenticated pipe of
:mod:`transformer_spec.isolation`, as raw little-endian arrays in JSON (never pickle). The
reference's numbers and the comparison are computed in the parent, where no submission code runs.

Each re-check mirrors one parameter case of a golden test (its *anchor*): the same shapes, masks,
constructor arguments and dtype (float64), with other random values. A submission that truly
passed the anchor computes the same function, so it passes the re-check too; when the child
claims the anchor passed and the re-check disagrees, the claim is false (``tools.grade`` then
gives the component 0 and the status ``tampering``). A component without re-checks says why in
its declaration (``why_no_rechecks``).

A re-check compares only what the contract fixes for every correct implementation: outputs for
weights set by the contract's names (held to the anchor's tolerance where it is looser than float64
rounding, :class:`Outputs`); greedy tokens up to the first near-tie the reference meets; a law's
residual where the contract leaves the outputs themselves free (Seq2SeqTransformer: zero for every
correct implementation); for bad arguments, whether the anchor's kind of error was raised naming
the argument (bool arrays). ``tests/test_rechecks.py`` holds each to the independent implementation,
every allowed variation and a pitfall of its component, through :func:`disagreement`.
"""

from __future__ import annotations

import base64
import math
import sys

import numpy as np

from . import alarm, inputs, layout, registry, testing

ORACLE = "spec_tests/test_torch_oracle.py::"
RTOL, ATOL = 1e-6, 1e-8  # float64; gross disagreement only, so an honest float64 pass never fails


# --------------------------------------------------------------------------------------------
# Helpers of the components' re-checks
# --------------------------------------------------------------------------------------------
class Outputs(dict):
    """A re-check's arrays by name, with how :func:`compare` holds a submission's to them.

    Only the expected side's settings count (the reference's, computed in the parent; a child's
    answer arrives as bare arrays): ``rtol``/``atol`` where the anchor allows more than float64
    rounding, and ``first[k] = n`` to compare only the first ``n`` entries of ``k`` (after its
    shape), where later entries are not fixed on these inputs (a greedy choice after a near-tie);
    ``unchecked`` names arrays sent for a re-check's ``law`` only, never compared (a model's own logits).
    """

    def __init__(self, arrays: dict[str, np.ndarray], *, rtol: float = RTOL, atol: float = ATOL,
                 first: dict[str, int] | None = None, unchecked: tuple[str, ...] = ()):
        super().__init__(arrays)
        self.rtol, self.atol, self.first = rtol, atol, dict(first or {})
        self.unchecked = tuple(unchecked)


def as_numpy(**arrays) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy() for k, v in arrays.items()}


def own_shapes(module) -> dict[str, tuple[int, ...]]:
    """The shapes of every parameter of ``module`` by its own names (tied ones once; no 0-d
    ones), for a module whose contract leaves some names free (``Seq2SeqTransformer``)."""
    return {n: tuple(p.shape) for n, p in module.named_parameters() if p.dim() >= 1}


def with_weights(module, shapes, seed: int, dtype=None):
    """``module`` in ``dtype`` (default float64) and eval mode, with seeded weights under the
    contract's names."""
    import torch

    module = module.double() if dtype in (None, torch.float64) else module.to(dtype)
    return testing.set_parameters(module, testing.seeded_parameters(shapes, seed)).eval()


def with_float32_weights(module, shapes=None, seed: int = 0, params: dict | None = None):
    """``module`` as built (float32) in eval mode, with seeded weights (``params``, else those of ``shapes``
    at ``seed``) cast to float32: as the float32 formula tests set them, which every course profile expresses."""
    params = testing.seeded_parameters(shapes, seed) if params is None else params
    return testing.set_parameters(module, {k: v.float() for k, v in params.items()}).eval()


def float32_outputs(**tensors) -> Outputs:
    """A float32 formula test's twin: the submission's float32 outputs held to the reference's within 10x the
    test's tolerance against the formula (rtol 1e-4, atol 1e-5): a pass of it puts both within twice that."""
    return Outputs(as_numpy(**tensors), rtol=1e-3, atol=1e-4)


#: How a modern-track output that went through a rotation is held to the reference's: the contract lets the
#: angle tables be float32 (as Llama's), so such a float64 result may differ by about float32's precision
#: (the golden tests allow the same: spec_tests/modern/formulas.py).
ROTATED = {"rtol": 1e-5, "atol": 1e-6}

#: the dtypes of the oracle tests' parameter cases, each with its own twin and replay
ORACLE_DTYPES = ("float64", "float32")


def oracle_outputs(dtype: str, **tensors) -> Outputs:
    """An oracle re-check's arrays, held in float32 to 10x the float32 test's tolerance (rtol 1e-4,
    atol 2e-5): a submission within it of torch's answer, as the reference is, is within this of
    the reference's; in float64 to :data:`RTOL`, :data:`ATOL`."""
    return Outputs(as_numpy(**tensors), **({"rtol": 1e-3, "atol": 2e-4} if dtype == "float32" else {}))


def oracle_name(base: str, dtype: str, case: str) -> str:
    """``sdpa[scale_none-none]`` for float64 (the names re-checks had before float32 joined),
    ``sdpa[float32-scale_none-none]`` for float32."""
    return f"{base}[{case}]" if dtype == "float64" else f"{base}[{dtype}-{case}]"


#: the MiniGPT of the snapshot tests (spec_tests/test_snapshots.py, spec_tests/snapshots/regenerate.py)
SNAPSHOT_MINIGPT = dict(vocab_size=13, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=8, dropout=0.1)
SNAPSHOT_BLOCK_GAIN = 8.0  # W_O and ffn.linear2 scaled up, as in the snapshot, so the blocks decide


def snapshot_minigpt(mod, seed: int, **changes):
    """``mod.MiniGPT`` of the snapshot's configuration (``changes`` applied, e.g. ``dropout``) in
    float64 and eval mode, with weights drawn from ``seed`` as the snapshot's are (the tied
    ``lm_head.weight`` set with ``token_embed``)."""
    c = {**SNAPSHOT_MINIGPT, **changes}
    params = testing.minigpt_parameters(c["vocab_size"], c["d_model"], c["num_layers"], c["d_ff"], seed)
    for name in params:
        if name.endswith(("W_O.weight", "linear2.weight")):
            params[name] = params[name] * SNAPSHOT_BLOCK_GAIN
    return testing.set_parameters(mod.MiniGPT(**c).double(), params).eval()


def sdpa_masks() -> dict:
    """The masks of spec_tests/test_torch_oracle.py::test_sdpa_matches_torch, by name. A re-check
    keeps its anchor's masks (a twin differs only in its values): another random mask could block a
    whole row, where a mistake the public test does not show (a fill of -1e9) would show."""
    s = inputs.ORACLE
    return {"none": None, "random": inputs.random_mask(s.b, s.h, s.lq, s.lk, seed=11),
            "broadcast_lq_lk": inputs.random_mask(s.lq, s.lk, seed=12), "padding": inputs.padding(s.lk, [s.lk, 4])}


def mha_masks(length: int, self_attention: bool) -> dict:
    """The oracle tests' masks of multi-head attention, by name (causal only for self-attention)."""
    s = inputs.ORACLE
    return {"none": None, "lq_lk": inputs.random_mask(s.lq, length, seed=21),
            "padding": inputs.padding(length, [length, 3]),
            "causal": inputs.causal(s.lq) if self_attention else None}


def law_residual(actual, expected):
    """``actual - expected``, 0 where :func:`transformer_spec.assertions.assert_close` (what the law's
    property test asserts, ``assert_close(actual, expected)``) accepts any value: where ``expected``
    is not finite. So a twin is judged by its anchor's own rule, no stricter."""
    import torch

    return torch.where(torch.isfinite(expected), actual - expected, torch.zeros_like(actual))


def by_name() -> dict[str, registry.Recheck]:
    return {r.name: r for r in registry.rechecks()}


# --------------------------------------------------------------------------------------------
# Arrays over JSON (no pickle)
# --------------------------------------------------------------------------------------------
_DTYPES = {"float64": np.float64, "float32": np.float32, "bool": np.bool_, "int64": np.int64,
           "float16": np.float16, "int32": np.int32, "bfloat16": None}


def encode_arrays(arrays: dict[str, np.ndarray]) -> dict:
    out = {}
    for k, a in arrays.items():
        a = np.ascontiguousarray(a)
        out[k] = {"dtype": str(a.dtype), "shape": list(a.shape),
                  "data": base64.b64encode(a.astype(a.dtype.newbyteorder("<")).tobytes()).decode()}
    return out


def decode_arrays(data) -> dict[str, np.ndarray]:
    """Arrays from :func:`encode_arrays`; raises ValueError on anything malformed."""
    if not isinstance(data, dict):
        raise ValueError("not a table of arrays")
    out = {}
    for k, spec in data.items():
        dtype = _DTYPES.get(spec.get("dtype")) if isinstance(spec, dict) else None
        if dtype is None:
            raise ValueError(f"array {k!r}: unsupported dtype")
        shape = tuple(int(s) for s in spec["shape"])
        raw = base64.b64decode(spec["data"], validate=True)
        a = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
        if a.size != math.prod(shape):
            raise ValueError(f"array {k!r}: {a.size} values for shape {shape}")
        out[str(k)] = a.reshape(shape)
    return out


def compare(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> str | None:
    """None when ``actual`` matches ``expected``; else what differs, in one line."""
    rtol, atol = getattr(expected, "rtol", RTOL), getattr(expected, "atol", ATOL)
    first = getattr(expected, "first", {})
    for k, e in expected.items():
        if k in getattr(expected, "unchecked", ()):
            continue
        if k not in actual:
            return f"{k}: missing"
        a = actual[k]
        if a.shape != e.shape:
            return f"{k}: shape {a.shape}, expected {e.shape}"
        if k in first:
            a, e = a[: first[k]], e[: first[k]]
        if e.dtype == np.bool_ or np.issubdtype(e.dtype, np.integer):
            if a.dtype != e.dtype or not np.array_equal(a, e):
                return f"{k}: {a.tolist() if a.size <= 40 else 'values'}, expected {e.tolist() if e.size <= 40 else 'others'}"
            continue
        a = a.astype(np.float64)
        if not np.all(np.isfinite(a)) and np.all(np.isfinite(e)):
            return f"{k}: not finite"
        if not np.allclose(a, e, rtol=rtol, atol=atol):
            return f"{k}: largest difference {float(np.nanmax(np.abs(a - e))):.3g}"
    return None


SECRET, PUBLIC = "secret", "public"  # a re-check's two runs: its twin on secret inputs, its anchor's own inputs


def seed_of(check: registry.Recheck, mode: str, secret: int) -> int:
    """The seed ``check`` runs at in ``mode``: the batch's secret one, or its anchor's own."""
    if mode == PUBLIC:
        if check.public is None:
            raise ValueError(f"{check.name} has no public replay")
        return check.public
    return secret


def judge(check: registry.Recheck, answer: dict[str, np.ndarray], reference: dict[str, np.ndarray],
          mode: str = SECRET) -> str | None:
    """None when the submission's ``answer`` to ``check`` in ``mode`` is right; else what is wrong.
    A public replay is held to the reference's outputs (what its anchor asserts, more loosely); a
    secret twin to the re-check's ``law`` when it has one, else to the reference's outputs."""
    if mode == SECRET and check.law is not None:
        return check.law(answer, reference)
    return compare(answer, reference)


def run_one(check: registry.Recheck, module, seed: int) -> dict[str, np.ndarray]:
    """``check``'s arrays for ``module`` as the re-check child computes them (torch's global seed
    set, no autograd)."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        return check.run(module, seed)


def disagreement(check: registry.Recheck, module, seed: int, expected: dict[str, np.ndarray],
                 mode: str = SECRET) -> str | None:
    """What the class grader would say of ``module``'s answer to ``check`` in ``mode`` (None: it
    agrees): run in this process as the child runs it, sent through the same encoding, judged
    against ``expected`` (the reference's outputs at the same seed)."""
    try:
        answer = encode_arrays(run_one(check, module, seed_of(check, mode, seed)))
    except Exception as exc:  # noqa: BLE001 - the child reports any exception as the re-check failing
        return f"{type(exc).__name__}: {exc}"
    return judge(check, decode_arrays(answer), expected, mode)


def expected_outputs(seed: int, names: list[str] | None = None,
                     mode: str = SECRET) -> dict[str, dict[str, np.ndarray] | str]:
    """The reference's outputs for the re-checks (computed in the calling process): at ``seed``, or
    for ``mode=PUBLIC`` at each re-check's public seed (those that have one)."""
    import importlib

    import torch

    reference = importlib.import_module(layout.REFERENCE_MODULE)
    torch.set_num_threads(1)
    out = {}
    for p in registry.rechecks():
        if (names is None or p.name in names) and (mode == SECRET or p.public is not None):
            out[p.name] = run_one(p, reference, seed_of(p, mode, seed))
    return out


# --------------------------------------------------------------------------------------------
# The re-check child: python -I -m transformer_spec.recheck --impl TARGET
# --------------------------------------------------------------------------------------------
def _failed(name: str, mode: str, exc: BaseException) -> dict:
    """The child's message for a re-check that raised ``exc``."""
    from . import forbidden, loader

    text = str(exc).strip().splitlines()
    return {"kind": "recheck", "name": name, "mode": mode,
            "error": f"{type(exc).__name__}: {text[0][:300] if text else ''}",
            "missing": isinstance(exc, loader.NotSubmitted),  # a name the submission does not define
            "forbidden": isinstance(exc, forbidden.ForbiddenAPIError)}


def child_main(argv: list[str] | None = None) -> int:
    import argparse

    from . import exits, files, forbidden, forbidden_ops, isolation, loader, profiles, stubs

    parser = argparse.ArgumentParser(prog="python -m transformer_spec.recheck")
    parser.add_argument("--impl", required=True)
    args = parser.parse_args(argv)
    channel = isolation.open_child_channel()  # before the submission is imported
    if channel is None:
        print("transformer_spec.recheck: run by tools.grade only (no report channel)", file=sys.stderr)
        return 2
    seed = int(channel.extra["seed"])
    runs = [(str(n), SECRET) for n in channel.extra.get("rechecks", [])] + \
        [(str(n), PUBLIC) for n in channel.extra.get("public", [])]
    seconds = float(channel.extra.get("seconds_each", 20))

    import torch

    torch.set_num_threads(int(channel.extra.get("threads", 1)))
    guard = forbidden.Guard(channel.extra.get("forbidden", list(forbidden.DEFAULT_FORBIDDEN)),
                            paths=lambda: files.submission_paths(args.impl)).install()
    forbidden_ops.seal()  # no oracle here: forbidden.oracle() opened by the submission allows nothing
    seal = guard.seal  # as installed: the submission can reach the guard, not this frame's local
    profile = profiles.get(str(channel.extra.get("profile", profiles.DEFAULT)))  # the course API graded
    profiles.use(profile)
    sub = loader.load(args.impl, profile=profile)
    seal = guard.restore(seal)  # removed by the import: put back (a use costs where it is made)
    if sub.error is not None:
        channel.send({"kind": "recheck-import-error", "error": sub.error})
        channel.close()
        return 0
    if channel.extra.get("stubs"):  # the names that are stubs as loaded (tools/grade/rechecks.py: a proof)
        try:
            with alarm.time_limit(seconds, "reading the stubs"), exits.no_process_exit():
                found = stubs.loaded_stub_names(sub, [str(p) for p in files.submission_paths(args.impl)], profile)
            channel.send({"kind": "stubs", "names": sorted(found)})
        except (Exception, KeyboardInterrupt, SystemExit):  # noqa: BLE001 - no answer proves nothing
            pass
        guard.uses.clear()
    known = by_name()
    for name, mode in runs:
        check = known.get(name)
        if check is None or (mode == PUBLIC and check.public is None):
            continue
        try:
            with alarm.time_limit(seconds, f"the re-check {name}"), exits.no_process_exit():
                arrays = run_one(check, sub, seed_of(check, mode, seed))  # a missing name raises loader.NotSubmitted
            message = {"kind": "recheck", "name": name, "mode": mode, "arrays": encode_arrays(arrays)}
        except alarm.Expired:
            message = {"kind": "recheck", "name": name, "mode": mode, "error": f"did not finish in {seconds:g} s"}
        except (Exception, KeyboardInterrupt, SystemExit) as exc:  # whatever the submission raises fails it
            message = _failed(name, mode, exc)
        seal = guard.check_seal(seal, f"during the re-check {name}")
        if guard.uses and not message.get("forbidden"):  # a use the submission caught, or the guard removed
            message = _failed(name, mode, forbidden.ForbiddenAPIError(guard.uses[0].message))
        channel.send(message)
        guard.uses.clear()
    channel.send({"kind": "recheck-done"})
    channel.close()
    return 0


if __name__ == "__main__":
    from .fast_exit import exit_now

    # Everything is sent; skip the interpreter's teardown (~1 s of freeing torch) and whatever
    # exit handlers the submission registered: the parent waits for this process to end.
    exit_now(child_main())
