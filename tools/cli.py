"""Command-line plumbing shared by the tools: one-line errors, the implementation, devices,
input files and output folders."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch

from transformer_spec.submission import loader


class ToolError(Exception):
    """Bad input. The message is one line that names the argument and says how to fix it."""


def add_impl_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--impl", default=None, metavar="TARGET",
        help="implementation to use: a module name, a .py file or a package folder "
             f"(default: ${loader.ENV_VAR} or '{loader.DEFAULT_TARGET}')",
    )


def load_impl(target: str | None, *names: str) -> loader.Submission:
    """The submission ``target``; raises :class:`ToolError` if it lacks one of ``names``."""
    impl = loader.load(target)
    for name in names:
        try:
            impl.get(name)
        except loader.SubmissionError as exc:
            raise ToolError(
                f"--impl {impl.target}: {exc} -- point --impl at an implementation that defines {name}"
            ) from None
    return impl


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` (CUDA if present, else CPU), ``cpu``, ``cuda`` or ``cuda:N``; checked to exist."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ToolError(f"--device {name!r} is not a device; use cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ToolError(f"--device {name}: CUDA is not available here; use --device cpu")
        if device.index is None:
            device = torch.device("cuda", local_rank)
        if device.index >= torch.cuda.device_count():
            raise ToolError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif device.type != "cpu":
        raise ToolError(f"--device {name}: only cpu and cuda are supported")
    return device


def set_threads(threads: int | None) -> int:
    """``torch.set_num_threads``; default 1 per process.

    The models here are small, and extra threads mostly wait for each other: when other processes
    compete for the cores, two threads are many times slower than one (measured on the 2-core
    machine: the default run took 30 s with 1 thread and 288 s with 2 threads while test suites
    ran alongside).
    """
    if threads is None:
        threads = 1
    if threads < 1:
        raise ToolError(f"--threads must be at least 1, got {threads}")
    torch.set_num_threads(threads)
    return threads


def require_file(path: str | os.PathLike, argument: str, fix: str, folder_fix: str | None = None) -> None:
    """A :class:`ToolError` unless ``path`` is an existing file: ``"{argument}: no such file; {fix}"``
    or, for a folder, ``"{argument}: is a folder; {folder_fix or fix}"``."""
    if not os.path.exists(path):
        raise ToolError(f"{argument}: no such file; {fix}")
    if os.path.isdir(path):
        raise ToolError(f"{argument}: is a folder; {folder_fix or fix}")


def prepare_out_dir(path: str | os.PathLike, argument: str = "--out") -> Path:
    """Create ``path`` if needed and prove it is writable, before any work is done."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-test-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ToolError(f"{argument} {path}: cannot write there ({reason}); choose a writable folder with {argument}") from None
    return out


def fail(parser: argparse.ArgumentParser, exc: BaseException) -> None:
    """Report a :class:`ToolError` or submission error as one line and exit with status 2."""
    parser.exit(2, f"{parser.prog}: error: {exc}\n")

