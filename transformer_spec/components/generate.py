"""The 'generate' component. MiniGPT.generate: greedy, temperature and top-k sampling, the context
window, modes restored.

Its declaration: contract names, pitfalls, diagnosis behaviour probes, hidden re-checks
(see transformer_spec/registry.py)."""

from __future__ import annotations

import torch

from .. import behaviour as bp
from .. import inputs
from ..registry import Component, Name, pitfall

#: Generation mistakes are written against the plain (uncached) loop, as a student writes it.
_NO_CACHE = ("minigpt.py", "generator=None,\n                 use_cache=True):",
             "generator=None,\n                 use_cache=False):")

NAMES = (
    Name("MiniGPT.generate", "generate", "method",
         "MiniGPT.generate(seed_tokens, max_new_tokens=50, temperature=0.8, top_k=None, generator=None) "
         "-> list of ints: the seed followed by max_new_tokens new ids; temperature=0 is greedy, top_k keeps "
         "the k most likely (top_k > vocab_size: keep all or raise ValueError naming top_k)"),
)

PITFALLS = (
    pitfall("generate_reads_first_position", "generate",
            "generate takes the logits of the FIRST position: the next token comes from the last one, logits[0, -1].",
            _NO_CACHE, ("minigpt.py", "next_logits = self(window)[0][0, -1]", "next_logits = self(window)[0][0, 0]")),
    pitfall("temperature_multiplied", "generate",
            "generate multiplies the logits by the temperature: divide them (logits / temperature).",
            ("minigpt.py", "next_logits = next_logits / temperature", "next_logits = next_logits * temperature")),
    pitfall("window_ignored", "generate",
            "generate feeds the whole sequence: the model sees at most the last max_len tokens (tokens[-max_len:]).",
            _NO_CACHE, ("minigpt.py", "window = torch.tensor([tokens[-self.max_len:]], device=device)  # (1, <=max_len)",
                   "window = torch.tensor([tokens], device=device)")),
    pitfall("top_k_ignored", "generate",
            "generate ignores top_k: only the k most likely tokens may be sampled.",
            ("minigpt.py", "if top_k is not None and top_k < next_logits.numel():", "if False:")),
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
)


def behaviour(impl, f: bp.Features) -> None:
    """The diagnosis probes of 'generate' (transformer_spec/behaviour.py)."""
    model = []

    def gen(seed_tokens, n, **kw):
        if not model:
            model.append(bp.small_minigpt(impl))
        return model[0].generate(seed_tokens, max_new_tokens=n, **kw)

    bp.capture(f, "greedy", lambda: gen([1, 2, 3], 6, temperature=0))
    bp.capture(f, "window", lambda: gen([4, 1, 7, 7, 2, 9, 3, 11, 5, 6], 3, temperature=0))
    bp.capture(f, "sample_t0.5", lambda: gen([1, 2, 3], 6, temperature=0.5, generator=inputs.generator(5)))
    bp.capture(f, "sample_t3_top2", lambda: gen([1, 2, 3], 6, temperature=3.0, top_k=2, generator=inputs.generator(6)))

    def reproducible():
        torch.manual_seed(7)
        a = gen([1, 2], 6, temperature=3.0, generator=inputs.generator(8))
        torch.manual_seed(9)
        b = gen([1, 2], 6, temperature=3.0, generator=inputs.generator(8))
        return a == b

    bp.capture(f, "generator_reproducible", reproducible)

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


COMPONENT = Component(
    "generate", label="gen", points=8, order=9, depends_on=("minigpt",),
    names=NAMES, pitfalls=PITFALLS, behaviour=behaviour,
    why_no_rechecks=(
        "no re-check written yet; greedy decoding could have one (sampled tokens depend on how a "
        "submission draws from the generator, which the contract leaves free)"
    ),
)
