"""Generate from a checkpoint written by ``python -m tools.train``.

    python -m tools.sample runs/X/model.pt                       # the task's default prompt
    python -m tools.sample runs/X/model.pt --prompt "20240607|" --temperature 0
    python -m tools.sample runs/X/model.pt --prompt "The " --max-new-tokens 300 --top-k 20 --seed 1

The model is rebuilt with the MiniGPT of ``--impl`` (or its MiniLlama, for a checkpoint of
``tools.train --model minillama``; the checkpoint keeps its class, config and vocabulary) and
continues the prompt with its ``generate``.
"""

from __future__ import annotations

import argparse

import torch

from transformer_spec.submission.loader import SubmissionError

from .checkpoint import build_model, load_checkpoint, model_class
from .cli import Parser, ToolError, add_impl_argument, fail, load_impl, set_threads, run_main
from .tasks import ReverseTask, vocab_from_dict

PROG = "python -m tools.sample"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description="Continue a prompt with a MiniGPT (or MiniLlama) saved by tools.train.")
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="a model.pt written by python -m tools.train")
    p.add_argument("--prompt", help="text to continue, in the model's characters (default: the task's "
                                    "example prompt, e.g. '31415926|' for the reversal task)")
    p.add_argument("--temperature", type=float, default=None,
                   help="0 = greedy; higher = more random (default 0 for the reversal task, 0.8 for text)")
    p.add_argument("--top-k", type=int, default=None, help="sample only among the k most likely characters")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="characters to generate (default: the answer length for the reversal task, 200 for text)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling torch.Generator (default 0)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default 1)")
    add_impl_argument(p)
    return p


def sample(checkpoint: str, prompt: str | None = None, temperature: float | None = None, top_k: int | None = None,
           max_new_tokens: int | None = None, seed: int = 0, impl: str | None = None) -> str:
    """The prompt followed by the generated characters. Raises :class:`ToolError` on bad input."""
    ckpt = load_checkpoint(checkpoint)
    task = ckpt["task"]
    reverse = task.get("kind") == ReverseTask.kind
    if temperature is None:
        temperature = 0.0 if reverse else 0.8
    if not temperature >= 0:
        raise ToolError(f"--temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise ToolError(f"--top-k must be at least 1, got {top_k}")
    if max_new_tokens is None:
        max_new_tokens = int(task["length"]) if reverse else 200
    if max_new_tokens < 1:
        raise ToolError(f"--max-new-tokens must be at least 1, got {max_new_tokens}")
    vocab = vocab_from_dict(task)
    if prompt is None:
        prompt = ReverseTask(int(task["length"]), str(task["symbols"])).default_prompt() if reverse else vocab.chars[0]
    if prompt == "":
        raise ToolError("--prompt is empty; give at least one character")
    ids = vocab.encode(prompt, argument="--prompt")
    cls = model_class(ckpt, "CHECKPOINT")
    submission = load_impl(impl, cls, f"{cls}.generate")
    model = build_model(submission, ckpt)
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    out = model.generate(ids, max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k,
                         generator=generator)
    return vocab.decode(out)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        set_threads(args.threads)
        text = sample(args.checkpoint, prompt=args.prompt, temperature=args.temperature, top_k=args.top_k,
                      max_new_tokens=args.max_new_tokens, seed=args.seed, impl=args.impl)
    except (ToolError, SubmissionError) as exc:
        fail(parser, exc)
    print(text)
    return 0


if __name__ == "__main__":
    run_main(main)
