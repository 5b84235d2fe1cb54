"""Command-line plumbing shared by the tools: one-line errors, the implementation, devices,
input files and output folders."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from transformer_spec.submission import loader

if TYPE_CHECKING:
    import torch


class ToolError(Exception):
    """Bad input. The message is one line that names the argument and says how to fix it."""


_NUMBER = re.compile(r"-\d+(\.\d*)?([eE][-+]?\d+)?$")


class Parser(argparse.ArgumentParser):
    """argparse as every tool here uses it (issue 48).

    * No abbreviations: ``--step 10`` is not taken for ``--steps 10``, so a tool that later adds
      ``--step-size`` does not change what an old command meant.
    * A slip is answered in two lines: what was wrong, with the closest valid option or subcommand,
      and where the full list is (``--help``), not argparse's usage block. An unknown option is named
      even when argparse would first complain that a required option is missing (``--otu DIR`` is
      reported as ``--otu``, did you mean ``--out``, not as "--out is required").
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._given: list[str] = []
        self._commands: list[str] = []  # the subcommands' names, for where options stop being ours

    def add_subparsers(self, **kwargs):
        action = super().add_subparsers(**kwargs)
        self._commands = action.choices  # the live name -> parser map: filled as add_parser is called
        return action

    def parse_known_args(self, args=None, namespace=None):
        self._given = [str(a) for a in (sys.argv[1:] if args is None else args)]
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        message = self.unknown_option() or message + self.closest_choice()
        self.exit(2, f"{self.prog}: error: {message}\n{self.prog} --help lists every option\n")

    def option_strings(self) -> list[str]:
        """Every option this parser takes (``_actions`` is argparse's own record, kept for subclasses)."""
        return [s for a in self._actions for s in a.option_strings]

    def unknown_option(self) -> str:
        """The first option given that this parser does not know, with the closest one it does."""
        known = set(self.option_strings())
        for token in self._given:
            if token == "--" or token in self._commands:
                break  # the rest is positional, or a subcommand's
            if not token.startswith("-") or token == "-" or _NUMBER.match(token):
                continue
            name = token.split("=", 1)[0]
            if name in known:
                continue
            longer = sorted(o for o in known if o.startswith(name))
            if len(longer) == 1:
                return f"unknown option {name} (options are not abbreviated): write {longer[0]}"
            close = closest(name, known)
            return f"unknown option {name}" + (f"; did you mean {close}?" if close else "")
        return ""

    def closest_choice(self) -> str:
        """``; did you mean X?`` for a given word close to one of an argument's choices."""
        for action in self._actions:
            choices = [str(c) for c in (action.choices or ())]
            for token in self._given:
                if token.startswith("-") or token in choices:
                    continue
                close = closest(token, choices)
                if close:
                    return f"; did you mean {close!r}?"
        return ""


def closest(word: str, choices) -> str | None:
    """The valid word ``word`` most likely misspells (difflib's ratio of at least 0.6), or None."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return close[0] if close else None


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
    import torch  # here, not at the top: the tools that only parse arguments do not pay for it

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
    import torch

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


def check_target(path: str | os.PathLike, argument: str, folder: bool) -> Path:
    """``path`` as a place to write a folder (``folder``) or a file, before any work is done: a
    :class:`ToolError` naming ``argument`` if it is the other kind, or if one of its parents is a file."""
    out = Path(path)
    kind, other = ("a folder", "a file") if folder else ("a file", "a folder")
    if out.exists() and out.is_dir() != folder:
        raise ToolError(f"{argument} {path}: is {other}, not {kind}; give {argument} {kind} (it is created if missing)")
    parent = next((p for p in out.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise ToolError(f"{argument} {path}: {parent} is a file, not a folder; give {argument} a path under a folder")
    return out


def prepare_out_dir(path: str | os.PathLike, argument: str = "--out") -> Path:
    """Create ``path`` if needed and prove it is writable, before any work is done."""
    out = check_target(path, argument, folder=True)
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


def run_main(main) -> None:
    """``python -m tools.X``'s entry point: ``sys.exit(main())``, except that output piped into a command
    that stops reading early (``python -m tools.mutants --list | head``) ends quietly, as Unix tools
    do, not with a BrokenPipeError's traceback (the Python documentation's recipe for SIGPIPE)."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's own flush must not fail again
        code = 1
    sys.exit(code)
