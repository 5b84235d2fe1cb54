"""The 'generate' component. MiniGPT.generate: greedy, temperature and top-k sampling, the context
window, modes restored.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/contract/registry.py)."""

from __future__ import annotations

import numpy as np
import torch

from transformer_spec.contract import inputs
from transformer_spec.contract.registry import Component, Name, Recheck, pitfall
from transformer_spec.probes import behaviour as bp
from transformer_spec.probes import recheck

NAMES = (
    Name("MiniGPT.generate", "generate", "method",
         "MiniGPT.generate(seed_tokens, max_new_tokens=50, temperature=0.8, top_k=None, generator=None) "
         "-> list of ints: the seed followed by max_new_tokens new ids; temperature=0 is greedy, top_k keeps "
         "the k most likely (top_k > vocab_size: keep all or raise ValueError naming top_k)"),
)

PITFALLS = (
    pitfall("generate_reads_first_position", "generate",
            "generate takes the logits of the FIRST position: the next token comes from the last one, logits[0, -1].",
            ("minigpt.py", "next_logits = self(window)[0][0, -1]", "next_logits = self(window)[0][0, 0]")),
    pitfall("temperature_multiplied", "generate",
            "generate multiplies the logits by the temperature: divide them (logits / temperature).",
            ("minigpt.py", "next_logits = next_logits / temperature", "next_logits = next_logits * temperature")),
    pitfall("window_ignored", "generate",
            "generate feeds the whole sequence: the model sees at most the last max_len tokens (tokens[-max_len:]).",
            ("minigpt.py", "window = torch.tensor([tokens[-self.max_len:]], device=device)  # (1, <=max_len)",
                   "window = torch.tensor([tokens], device=device)")),
    pitfall("top_k_ignored", "generate",
            "generate ignores top_k: only the k most likely tokens may be sampled.",
            ("minigpt.py", "if top_k is not None and top_k < next_logits.numel():", "if False:")),
    pitfall("top_k_above_vocabulary_crashes", "generate",
            "generate passes a top_k larger than the vocabulary straight to torch.topk, which raises: keep every "
            "token then (top_k = vocab_size), or raise a ValueError naming top_k.",
            ("minigpt.py", "if top_k is not None and top_k < next_logits.numel():", "if top_k is not None:")),
    pitfall("generator_ignored", "generate",
            "generate ignores `generator`: pass it to torch.multinomial so sampling is reproducible.",
            ("minigpt.py", "torch.multinomial(probs, 1, generator=generator)", "torch.multinomial(probs, 1)")),
    pitfall("mode_not_restored", "generate",
            "generate leaves the model in eval mode: restore the caller's train/eval mode afterwards.",
            ("minigpt.py", "self.train(was_training)", "pass  # the mode is not restored")),
    pitfall("generate_in_train_mode", "generate",
            "generate runs in train mode (dropout active while sampling): switch to eval() while generating.",
            ("minigpt.py", "caches = None\n        self.eval()", "caches = None")),
    pitfall("greedy_not_special_cased", "generate",
            "temperature=0 divides by zero: it means greedy decoding, the argmax.",
            ("minigpt.py", "if temperature == 0:", "if False:")),
    # mined from public implementations (issue 27): each cites where the mistake was made
    pitfall('temperature_divided_twice', 'generate',
            'The logits are divided by the temperature twice (softmax(logits / T^2)): divide once, '
        "softmax(logits / temperature).",
            ('minigpt.py', '                        next_logits = next_logits / temperature\n',
             '                        next_logits = next_logits / temperature\n                        next_logits = next_logits / temperature  # again (a second helper)\n'),
            source='RL-Align/RL-Kernel#81'),
    pitfall('temperature_applied_to_probabilities', 'generate',
            'The temperature divides the probabilities after the softmax, which the sampler '
        "renormalises: the temperature has no effect. Divide the logits before the softmax.",
            ('minigpt.py', '                        next_logits = next_logits / temperature\n',
             ''),
            ('minigpt.py', 'probs = F.softmax(next_logits, dim=-1)',
             'probs = F.softmax(next_logits, dim=-1) / temperature  # on the probabilities'),
            source='google/gemma.cpp#981'),
    pitfall('temperature_zero_still_samples', 'generate',
            'temperature=0 skips the scaling but still samples from softmax(logits), i.e. at '
        "temperature 1: temperature=0 means greedy decoding, the argmax.",
            ('minigpt.py', '                    if temperature == 0:\n',
             '                    if False:  # temperature=0 falls through to sampling\n'),
            ('minigpt.py', '                        next_logits = next_logits / temperature\n',
             '                        if temperature > 0:\n                            next_logits = next_logits / temperature\n'),
            source='Lightning-AI/litgpt#2238'),
    pitfall('top_k_keeps_one_extra', 'generate',
            'The top-k filter keeps k + 1 tokens (the threshold is the (k+1)-th largest logit), so '
        "top_k=1 is not greedy: keep the logits >= the k-th largest only.",
            ('minigpt.py', 'kth_best = torch.topk(next_logits, top_k).values[-1]',
             'kth_best = torch.topk(next_logits, top_k + 1).values[-1]  # the (k+1)-th'),
            source='kingoflolz/mesh-transformer-jax#164'),
    pitfall('top_k_filtered_to_tiny_positive', 'generate',
            'The logits outside the top k are set to 1e-10 instead of -inf: a logit near 0 keeps a '
        "large probability, so the filtered tokens are still sampled. Fill them with -inf.",
            ('minigpt.py', 'next_logits.masked_fill(next_logits < kth_best, float("-inf"))',
             'next_logits.masked_fill(next_logits < kth_best, 1e-10)'),
            source='karpathy/minGPT commit 8909e1b646d6fd5235ec33259fb22fdc2c91037c'),
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'generate' (transformer_spec/probes/behaviour.py)."""
    model = []

    def gen(seed_tokens, n, **kw):
        if not model:
            model.append(bp.small_minigpt(impl))
        return model[0].generate(seed_tokens, max_new_tokens=n, **kw)

    bp.capture(f, "greedy", lambda: gen([1, 2, 3], 6, temperature=0))
    bp.capture(f, "window", lambda: gen([4, 1, 7, 7, 2, 9, 3, 11, 5, 6], 3, temperature=0))
    bp.capture(f, "sample_t0.5", lambda: gen([1, 2, 3], 6, temperature=0.5, generator=inputs.generator(5)))
    bp.capture(f, "sample_t3_top2", lambda: gen([1, 2, 3], 6, temperature=3.0, top_k=2, generator=inputs.generator(6)))
    bp.capture(f, "sample_t3", lambda: gen([1, 2, 3], 12, temperature=3.0, generator=inputs.generator(11)))

    def top_k_above_vocabulary():
        out = gen([1, 2, 3], 3, temperature=1.0, top_k=bp.VOCAB + 5, generator=inputs.generator(10))
        return "returns tokens" if isinstance(out, list) and len(out) == 6 else f"returns {type(out).__name__}"

    bp.capture(f, "top_k_above_vocabulary", top_k_above_vocabulary)
    bp.capture(f, "~top_k_2_draws_from", lambda: bp.top_k_draws(bp.small_minigpt(impl), [1, 2, 3]))

    def reproducible():
        torch.manual_seed(7)
        a = gen([1, 2], 6, temperature=3.0, generator=inputs.generator(8))
        torch.manual_seed(9)
        b = gen([1, 2], 6, temperature=3.0, generator=inputs.generator(8))
        return a == b

    bp.capture(f, "~generator_reproducible", reproducible)

    def modes():
        m = bp.small_minigpt(impl, dropout=0.5)
        seen = []
        for mod in m.modules():  # a submission may call its blocks without calling the model itself
            mod.register_forward_pre_hook(lambda mod, args: seen.append(mod.training))
        m.train()
        m.generate([1, 2], max_new_tokens=2, temperature=0)
        after_train = m.training
        m.eval()
        m.generate([1, 2], max_new_tokens=2, temperature=0)
        return f"forward in train mode: {any(seen)}; mode restored: {after_train and not m.training}"

    bp.capture(f, "modes", modes)


def step_logits(model, tokens: list[int], prompt: int, window: int | None = None, vocab: int | None = None) -> np.ndarray:
    """``model``'s own next-token logits before each generated step of ``tokens`` (its forward on
    the last ``window`` tokens, its ``max_len``, as generate feeds them): ``(steps, vocab)``. By default
    the model is the snapshot's MiniGPT (see _greedy)."""
    window = window or recheck.SNAPSHOT_MINIGPT["max_len"]
    rows = [model(torch.tensor([tokens[: prompt + step][-window:]]))[0][0, -1] for step in range(len(tokens) - prompt)]
    return torch.stack(rows).double().numpy() if rows else np.zeros((0, vocab or recheck.SNAPSHOT_MINIGPT["vocab_size"]))


def clear_steps(logits: np.ndarray, gap: float) -> int:
    """How many of the steps, from the first, have a top-1/top-2 gap of at least ``gap`` in
    ``logits`` (:func:`step_logits`): up to there the greedy choice is fixed for every correct
    implementation; a near-tie (float rounding, or a tie broken either way) may go either way, and
    so may the rest."""
    for step, row in enumerate(logits):
        top2 = np.sort(row)[-2:]
        if not np.all(np.isfinite(top2)) or float(top2[1] - top2[0]) < gap:
            return step
    return len(logits)


def greedy_law(prompt_length: int, gap: float):
    """The secret twin of a greedy test, judged on the submission's own model: the seed is kept, the
    length is right, and each generated token is the argmax of its own logits (up to the first
    near-tie), so a mistake in the model's other parts costs their own components, not generate's."""
    def law(answer: dict, reference: dict) -> str | None:
        got, expected = answer.get("tokens"), reference["tokens"]
        own = answer.get("own_logits")
        if got is None or own is None or got.ndim != 1 or own.ndim != 2:
            return "tokens or own_logits missing"
        if got.shape != expected.shape or not np.array_equal(got[:prompt_length], expected[:prompt_length]):
            return f"tokens: {got.tolist()}, expected the seed {expected[:prompt_length].tolist()} and " \
                   f"{len(expected) - prompt_length} new tokens"
        steps = len(got) - prompt_length
        if own.shape[0] != steps:
            return f"own_logits: {own.shape[0]} steps, expected {steps}"
        clear = clear_steps(own, gap)
        choice = own[:clear].argmax(axis=-1)
        wrong = np.nonzero(choice != got[prompt_length: prompt_length + clear])[0]
        if wrong.size:
            s = int(wrong[0])
            return (f"step {s}: generated {int(got[prompt_length + s])}, the argmax of the model's own logits "
                    f"is {int(choice[s])}")
        return None
    return law


def _prompt(seed: int, length: int) -> list[int]:
    return torch.randint(0, recheck.SNAPSHOT_MINIGPT["vocab_size"], (length,), generator=inputs.generator(seed + 1)).tolist()


def _greedy(prompt_length: int, new: int, gap: float, train: bool = False, **options):
    """generate from a seeded prompt of ``prompt_length`` tokens on the snapshot's MiniGPT with weights
    from the secret seed (called in train() mode with dropout 0.5 if ``train``): the whole list (its
    length counts) and the model's own logits before each step. Against the reference (compared up
    to the first step whose greedy choice is not clear by ``gap`` on the reference's side) or, as the
    secret twin, by :func:`greedy_law`."""
    def run(mod, seed):
        model = recheck.snapshot_minigpt(mod, seed, **({"dropout": 0.5} if train else {}))
        prompt = _prompt(seed, prompt_length)
        kwargs = {k: (inputs.generator(seed + 2) if v == "generator" else v) for k, v in options.items()}
        extra = {}
        if train:  # the test's own comparison: the same model's greedy tokens in eval() mode, then train()
            extra["eval_tokens"] = np.array(model.eval().generate(list(prompt), max_new_tokens=new, **kwargs),
                                            dtype=np.int64)
            model.train()
            torch.manual_seed(0)
        got = [int(t) for t in model.generate(list(prompt), max_new_tokens=new, **kwargs)]
        tokens = np.array(got, dtype=np.int64)
        if len(got) != prompt_length + new or got[:prompt_length] != prompt:
            return {"tokens": tokens, **extra}  # the wrong length or seed: fails by shape or value (not the mode law)
        own = step_logits(model.eval(), got, prompt_length)
        return recheck.Outputs({"tokens": tokens, "own_logits": own, **extra},
                               first={"tokens": prompt_length + clear_steps(own, gap)},
                               unchecked=("own_logits", *extra))
    return run


def eval_mode_law(answer: dict, reference: dict) -> str | None:
    """The secret twin of test_generate_runs_in_eval_mode, as the test judges it: greedy tokens
    generated in train() mode are those the same model generates in eval() mode (whatever they are: a wrong
    seed or length is the other tests' to judge, as the public test judges only the mode)."""
    got, eval_tokens = answer.get("tokens"), answer.get("eval_tokens")
    if got is None or eval_tokens is None:
        return "tokens or eval_tokens missing"
    if got.shape != eval_tokens.shape or not np.array_equal(got, eval_tokens):
        return f"in train() mode {got.tolist()}, in eval() mode {eval_tokens.tolist()}: generate must run in eval mode"
    return None


def _mode_restored(mod, seed):
    """test_generate_restores_the_callers_mode[train]: sampling from a model in train() mode leaves
    every module in train() mode."""
    model = recheck.snapshot_minigpt(mod, seed, dropout=0.5).train()
    model.generate(_prompt(seed, 2), max_new_tokens=3, temperature=1.0, generator=inputs.generator(seed + 2))
    return {"every_module_in_train_mode": np.array([all(m.training for m in model.modules())])}


SNAPSHOTS = "spec_tests/test_snapshots.py::"
BEHAVIOURS = "spec_tests/test_behaviours.py::"
#: a gap of 1e-4 is far above what float64 rounding (or a float32 sinusoidal table, ~4e-8) moves a
#: logit; with temperature 1e-3 a gap of 0.05 leaves another token a probability below 12 e^-50
RECHECKS = (
    Recheck("generate[greedy]", "generate", (f"{SNAPSHOTS}test_generate_greedy_snapshot",),
            _greedy(3, 7, 1e-4, temperature=0), law=greedy_law(3, 1e-4)),
    Recheck("generate[window]", "generate", (f"{SNAPSHOTS}test_generate_window_when_seed_is_longer_than_max_len",),
            _greedy(11, 4, 1e-4, temperature=0), law=greedy_law(11, 1e-4)),
    Recheck("generate[top_k_1]", "generate", (f"{SNAPSHOTS}test_generate_top_k_1_is_greedy",),
            _greedy(3, 7, 1e-4, temperature=0.8, top_k=1, generator="generator"), law=greedy_law(3, 1e-4)),
    Recheck("generate[tiny_temperature]", "generate", (f"{SNAPSHOTS}test_generate_tiny_temperature_is_greedy",),
            _greedy(3, 7, 0.05, temperature=1e-3, generator="generator"), law=greedy_law(3, 0.05)),
    Recheck("generate[train_mode]", "generate", (f"{BEHAVIOURS}test_generate_runs_in_eval_mode",),
            _greedy(2, 6, 1e-4, train=True, temperature=0), law=eval_mode_law),
    Recheck("generate[mode_restored]", "generate", (f"{BEHAVIOURS}test_generate_restores_the_callers_mode[train]",),
            _mode_restored),
)


COMPONENT = Component(
    "generate", label="gen", points=8, order=9, depends_on=("minigpt",),
    values=(  # the tests of what it computes (rubric.VALUES_SHARE of its points)
        "spec_tests/test_snapshots.py::test_generate_greedy_snapshot",
        "spec_tests/test_snapshots.py::test_generate_window_when_seed_is_longer_than_max_len",
        "spec_tests/test_snapshots.py::test_generate_samples_from_softmax_over_temperature",
        "spec_tests/test_snapshots.py::test_generate_top_k_samples_only_the_k_best",
    ),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour, rechecks=RECHECKS,
)
