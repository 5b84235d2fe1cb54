"""Train MiniGPT (or the modern track's MiniLlama) and plot what it learned.

    python -m tools.train                       # default: reverse 8 digits, ~1 min on 2 CPU cores
    python -m tools.train --model minillama     # the Llama-style decoder, same task and bar
    python -m tools.train --text book.txt       # character-level model of any UTF-8 file
    python -m tools.train --resume runs/X/model.pt --steps 2000
    torchrun --nproc_per_node=2 -m tools.train --steps 20   # DistributedDataParallel

Writes to ``--out`` (default ``runs/<timestamp>/``): ``loss.png``, ``attention_layers.png``,
``attention_heads.png``, ``model.pt`` (weights, config, task, optimizer state), ``samples.txt``
and ``metrics.json``. Ctrl-C saves ``model.pt`` before exiting; ``--resume`` continues from it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from datetime import datetime
from pathlib import Path

import torch
import torch.distributed as dist
from tqdm import tqdm

from transformer_spec.submission.loader import SubmissionError

from .checkpoint import MODELS, build_model, load_checkpoint, model_class, save_checkpoint
from .cli import (
    Parser,
    ToolError,
    add_impl_argument,
    fail,
    load_impl,
    prepare_out_dir,
    resolve_device,
    set_threads,
    run_main,
)
from .tasks import ReverseTask, TextTask, batch_generator, masked_loss, task_from_dict
from .train_outputs import evaluate, write_figures, write_samples

PROG = "python -m tools.train"

#: Defaults that depend on the task: (synthetic reversal, --text).
TASK_DEFAULTS = {
    "reverse": dict(steps=500, batch_size=64, lr=3e-3, d_model=64, num_heads=4, num_layers=2,
                    d_ff=256, dropout=0.0, eval_every=25),
    "text": dict(steps=1000, batch_size=32, lr=1e-3, d_model=128, num_heads=4, num_layers=4,
                 d_ff=512, dropout=0.1, eval_every=100),
}
#: Options a resumed run takes from its checkpoint unless given again.
RESUMABLE = ("batch_size", "lr", "seed", "eval_every", "warmup")
WARMUP = 50


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG,
        description="Train the MiniGPT (or, with --model minillama, the MiniLlama) of an implementation (--impl) "
                    "on a synthetic reversal task "
                    "(default) or on a text file (--text), then plot its loss and attention.",
        epilog="Task-dependent defaults (reversal / --text): " + "; ".join(
            f"--{k.replace('_', '-')} {TASK_DEFAULTS['reverse'][k]} / {TASK_DEFAULTS['text'][k]}"
            for k in TASK_DEFAULTS["reverse"]),
    )
    add_impl_argument(p)
    data = p.add_argument_group("data")
    data.add_argument("--text", metavar="PATH", help="train a character-level model on this UTF-8 text file")
    data.add_argument("--length", type=int, default=8, help="digits to reverse in the synthetic task (default 8)")
    data.add_argument("--block-size", type=int, default=64, help="characters of context with --text (default 64)")
    run = p.add_argument_group("run")
    run.add_argument("--out", metavar="DIR", help="output folder (default runs/<timestamp>/, or the "
                                                   "checkpoint's folder with --resume)")
    run.add_argument("--steps", type=int, help="total optimizer steps (with --resume: the new total)")
    run.add_argument("--batch-size", type=int, help="sequences per step and per process")
    run.add_argument("--lr", type=float, help="peak AdamW learning rate (warmup, then cosine decay)")
    run.add_argument("--seed", type=int, default=None, help="seed of the weights and the data (default 0)")
    run.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    run.add_argument("--threads", type=int, help="torch threads per process (default 1: fastest for these small models, above all when other processes share the cores)")
    run.add_argument("--resume", metavar="CHECKPOINT", help="continue the run saved in this model.pt")
    run.add_argument("--force", action="store_true", help="overwrite a model.pt already in --out (refused otherwise)")
    run.add_argument("--eval-every", type=int, help="steps between validation evaluations")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    model = p.add_argument_group("model (ignored with --resume: the checkpoint decides)")
    model.add_argument("--model", choices=sorted(MODELS), default=None,
                       help="minigpt (default: the classic track's MiniGPT) or minillama (the modern track's "
                            "Llama-style decoder: RMSNorm, rotary positions, SwiGLU, grouped-query attention)")
    model.add_argument("--num-kv-heads", type=int, help="minillama: key/value heads (default: --num-heads)")
    model.add_argument("--d-model", type=int)
    model.add_argument("--num-heads", type=int)
    model.add_argument("--num-layers", type=int)
    model.add_argument("--d-ff", type=int)
    model.add_argument("--dropout", type=float)
    return p


# ---------------------------------------------------------------------------------------------
# distributed


def dist_info() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) from torchrun's environment; (0, 0, 1) otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0")), world


def init_distributed(device: torch.device) -> None:
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend)


def shutdown_distributed() -> None:
    """Leave the process group cleanly: wait until every rank is done, then destroy it.

    Without the barrier a rank that finishes first can destroy its gloo group while a gloo worker
    thread still releases the last all-reduce; the destructor holds the GIL while joining that
    thread, which waits for the GIL, and the process never exits (seen here under torchrun).
    """
    dist.barrier()
    dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------
# pieces the tests call directly


def learning_rate(step: int, total: int, peak: float, warmup: int = WARMUP) -> float:
    """Linear warmup over ``warmup`` steps, then cosine decay to a tenth of ``peak``."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


# ---------------------------------------------------------------------------------------------
# the run


def _check_positive(name: str, value, minimum=1) -> None:
    if value is not None and value < minimum:
        raise ToolError(f"--{name.replace('_', '-')} must be at least {minimum}, got {value}")


def _setup(args, rank: int):
    """Task, model config, options and (when resuming) checkpoint of this run."""
    ckpt = None
    if args.resume:
        ckpt = load_checkpoint(args.resume, argument="--resume")
        task = task_from_dict(ckpt["task"], args.text)
        config = dict(ckpt["model_config"])
        cls = model_class(ckpt, "--resume")
        saved = ckpt.get("train_args", {})
        opts = {k: (getattr(args, k) if getattr(args, k, None) is not None else saved.get(k)) for k in RESUMABLE}
        opts["steps"] = args.steps if args.steps is not None else ckpt.get("total_steps")
        if opts["steps"] is None or opts["steps"] <= ckpt["step"]:
            raise ToolError(
                f"--resume {args.resume}: the run is already at step {ckpt['step']}; "
                f"pass --steps N with N > {ckpt['step']} to train further"
            )
    else:
        task = TextTask.from_file(args.text, args.block_size) if args.text else ReverseTask(args.length)
        defaults = TASK_DEFAULTS[task.kind]
        pick = {k: (getattr(args, k) if getattr(args, k, None) is not None else v) for k, v in defaults.items()}
        cls = MODELS[args.model or "minigpt"]
        config = dict(vocab_size=len(task.vocab), d_model=pick["d_model"], num_heads=pick["num_heads"],
                      num_layers=pick["num_layers"], d_ff=pick["d_ff"], max_len=task.seq_len)
        if cls == "MiniLlama":  # no dropout in the modern track; d_ff=None is the contract's 8/3 rule
            if args.dropout is not None:
                raise ToolError("--dropout: MiniLlama has no dropout (the modern track has none); leave it out")
            if args.d_ff is None:
                config["d_ff"] = None
            if args.num_kv_heads is not None:
                config["num_kv_heads"] = args.num_kv_heads
        else:
            if args.num_kv_heads is not None:
                raise ToolError("--num-kv-heads applies to --model minillama, not to MiniGPT")
            config["dropout"] = pick["dropout"]
        opts = {k: pick.get(k) for k in ("steps", "batch_size", "lr", "eval_every")}
        opts["seed"] = args.seed
        opts["warmup"] = None
    opts["seed"] = 0 if opts.get("seed") is None else opts["seed"]
    opts["warmup"] = WARMUP if opts.get("warmup") is None else opts["warmup"]
    for key, minimum in (("steps", 1), ("batch_size", 1), ("eval_every", 1)):
        _check_positive(key, opts[key], minimum)
    if not opts["lr"] > 0:
        raise ToolError(f"--lr must be positive, got {opts['lr']}")
    return task, cls, config, opts, ckpt


def _default_out(args) -> str:
    if args.out:
        return args.out
    if args.resume:
        return str(Path(args.resume).parent)
    return os.path.join("runs", datetime.now().strftime("%Y%m%d-%H%M%S"))


def _refuse_to_overwrite(out: str, args) -> None:
    """A trained ``model.pt`` in ``out`` is replaced only by its own resumed run or with --force."""
    existing = Path(out) / "model.pt"
    if args.force or not existing.exists():
        return
    if args.resume and existing.resolve() == Path(args.resume).resolve():
        return
    raise ToolError(f"--out {out} already holds a trained model.pt: continue it with --resume {existing}, "
                    f"overwrite it with --force, or choose another --out")


def run(args: argparse.Namespace) -> dict:
    """Train as ``args`` say; returns a summary (rank 0 writes the files). Raises ToolError."""
    started = time.perf_counter()
    rank, local_rank, world = dist_info()
    set_threads(args.threads)
    device = resolve_device(args.device, local_rank)
    task, cls, config, opts, ckpt = _setup(args, rank)
    impl = load_impl(args.impl, cls, f"{cls}.generate")
    _refuse_to_overwrite(_default_out(args), args)
    out = prepare_out_dir(_default_out(args)) if rank == 0 else None

    torch.manual_seed(opts["seed"])  # the same initial weights on every process
    if ckpt is not None:
        model = build_model(impl, ckpt, argument="--resume")
    else:
        try:
            model = impl.get(cls)(**config)
        except (TypeError, ValueError) as exc:
            raise ToolError(f"model options: {cls}({config}) refused: {exc}") from None
    model.to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=opts["lr"], betas=(0.9, 0.98), weight_decay=0.01)
    start = 0
    history = {"train": [], "val": []}
    if ckpt is not None:
        try:
            if "optimizer" in ckpt:
                optimizer.load_state_dict(ckpt["optimizer"])
        except (ValueError, RuntimeError, KeyError) as exc:
            raise ToolError(f"--resume {args.resume}: the optimizer state does not fit the model ({exc})") from None
        start = int(ckpt["step"])
        history = {k: [list(r) for r in v] for k, v in ckpt.get("history", history).items()}

    if world > 1:
        init_distributed(device)
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    else:
        ddp = model
    total = opts["steps"]
    val_batches = [b.__class__(b.x.to(device), b.y.to(device), b.weight.to(device))
                   for b in task.val_batches(opts["seed"])]
    metrics: dict = {}
    train_args = {k: opts[k] for k in RESUMABLE}

    def checkpoint(step: int) -> Path:
        return save_checkpoint({
            "model_class": cls, "model_config": config, "task": task.to_dict(), "model": model.state_dict(),
            "optimizer": optimizer.state_dict(), "step": step, "total_steps": total,
            "history": history, "train_args": train_args, "impl": impl.target, "metrics": metrics,
            "world_size": world,
        }, out / "model.pt")

    if rank == 0:
        n_params = sum(p.numel() for p in model.parameters())
        print(f"{PROG}: {task.describe()}; {cls}({', '.join(f'{k}={v}' for k, v in config.items())}) "
              f"= {n_params:,} parameters; --impl {impl.target}; {world} process(es) on {device}, "
              f"{torch.get_num_threads()} thread(s) each; steps {start}->{total}; out {out}", flush=True)
    bar = tqdm(total=total, initial=start, desc="train", unit="step", dynamic_ncols=True,
               disable=rank != 0 or args.no_progress, file=sys.stderr)
    step = start
    running = None
    try:
        for step in range(start, total):
            batch = task.train_batch(opts["batch_size"], batch_generator(opts["seed"], rank, step))
            x, y, w = batch.x.to(device), batch.y.to(device), batch.weight.to(device)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, total, opts["lr"], opts["warmup"])
            logits, _ = ddp(x)
            loss = masked_loss(logits, batch.__class__(x, y, w))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            value = loss.item()
            if not math.isfinite(value):
                raise ToolError(f"the loss became {value} at step {step + 1}; try a smaller --lr")
            running = value if running is None else 0.9 * running + 0.1 * value
            if rank == 0:
                history["train"].append([step + 1, value])
                if (step + 1) % opts["eval_every"] == 0 or step + 1 == total:
                    metrics = evaluate(model, task, val_batches)
                    history["val"].append([step + 1, metrics["val_loss"], metrics.get("token_acc")])
                    bar.set_postfix(loss=f"{running:.4f}", val=f"{metrics['val_loss']:.4f}",
                                    acc=f"{metrics.get('token_acc', 0):.3f}", refresh=False)
                else:
                    bar.set_postfix(loss=f"{running:.4f}", refresh=False)
                bar.update(1)
        step = total
        if world > 1:
            ddp = None  # drop DDP's reducer before the group goes
            shutdown_distributed()
    except KeyboardInterrupt:
        bar.close()
        if rank == 0:
            done = len([r for r in history["train"] if r[0] > start]) + start
            history["train"] = history["train"][: done]
            path = checkpoint(done)
            print(f"\n{PROG}: interrupted at step {done}; saved {path}; continue with: "
                  f"{PROG} --resume {path}", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    finally:
        bar.close()

    summary = {"steps": total, "processes": world, "task": task.describe(), "model": cls, "impl": impl.target}
    if rank == 0:
        model.eval()
        if not metrics or history["val"][-1][0] != total:
            metrics = evaluate(model, task, val_batches)
        checkpoint(total)
        model.cpu()
        figure_paths = write_figures(model, task, history, out, opts["seed"],
                                     title=f"{cls} loss: {task.describe()}\n--impl {impl.target}, {total} steps")
        write_samples(model, task, out / "samples.txt", opts["seed"], metrics)
        train_seconds = time.perf_counter() - started
        summary.update(metrics, seconds=round(train_seconds, 1), out=str(out),
                       files=[p.name for p in figure_paths] + ["model.pt", "samples.txt", "metrics.json"])
        (out / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n")
        parts = [f"val loss {metrics['val_loss']:.4f}"]
        if "token_acc" in metrics:
            parts.append(f"held-out {'answer ' if task.kind == 'reverse' else ''}token accuracy "
                         f"{100 * metrics['token_acc']:.1f}%")
        if "seq_acc" in metrics:
            parts.append(f"whole answers right (greedy) {100 * metrics['seq_acc']:.1f}%")
        print(f"{PROG}: done in {train_seconds:.1f} s, step {total}: {', '.join(parts)}; wrote {out}/"
              f"{{{','.join(summary['files'])}}}", flush=True)
    return summary


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        run(args)
    except (ToolError, SubmissionError) as exc:
        fail(parser, exc)
    return 0


if __name__ == "__main__":
    run_main(main)
