"""The training tasks: a synthetic reversal task (the default) and character-level text.

Both are character vocabularies, so a prompt is typed as text (``tools.sample --prompt``) and the
tokens label the axes of the attention maps. A task describes itself as a small dict that goes
into the checkpoint, so a saved model can be rebuilt with its vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .cli import ToolError, require_file

#: The share of a text file held out for validation (its end).
VAL_FRACTION = 0.1


def batch_generator(seed: int, rank: int, step: int, stream: int = 0) -> torch.Generator:
    """A generator for one batch: a pure function of (seed, rank, step), so a resumed run and
    every process of a torchrun job draw their own, reproducible batches."""
    g = torch.Generator()
    g.manual_seed((seed * 1_000_003 + rank * 7_919 + step * 104_729 + stream * 15_485_863) % (2**63 - 1))
    return g


class CharVocab:
    """Characters <-> ids."""

    def __init__(self, chars: str):
        self.chars = chars
        self.index = {c: i for i, c in enumerate(chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str, argument: str = "--prompt") -> list[int]:
        unknown = sorted({c for c in text if c not in self.index})
        if unknown:
            raise ToolError(
                f"{argument} holds characters the model does not know: {''.join(unknown)!r}; "
                f"use only these: {self.chars!r}"
            )
        return [self.index[c] for c in text]

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


@dataclass
class Batch:
    """Inputs ``x (B, L)``, next-token targets ``y (B, L)`` and which targets count for the loss."""

    x: torch.Tensor
    y: torch.Tensor
    weight: torch.Tensor  # (B, L) bool


def masked_loss(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy over the targets selected by ``batch.weight``."""
    losses = F.cross_entropy(logits.flatten(0, 1), batch.y.flatten(), reduction="none")
    weight = batch.weight.flatten().to(losses.dtype)
    return (losses * weight).sum() / weight.sum()


class ReverseTask:
    """``d1 d2 ... dn | dn ... d2 d1``: reverse ``n`` random digits after the separator ``|``.

    The loss counts only the answer (the digits after ``|``); the digits before it are random and
    cannot be predicted. Solving it needs attention: answer position ``i`` must look back at input
    position ``n-1-i``, which the attention maps show as an anti-diagonal.
    """

    kind = "reverse"
    SEPARATOR = "|"

    def __init__(self, length: int = 8, symbols: str = "0123456789"):
        if length < 1:
            raise ToolError(f"--length must be at least 1, got {length}")
        self.length = length
        self.symbols = symbols
        self.vocab = CharVocab(symbols + self.SEPARATOR)
        self.sep_id = len(symbols)
        self.seq_len = 2 * length + 1  # tokens of a full example; the model sees seq_len - 1

    def describe(self) -> str:
        return f"reverse {self.length} random digits after '{self.SEPARATOR}'"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "length": self.length, "symbols": self.symbols}

    def examples(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` full examples ``(n, 2 length + 1)``."""
        digits = torch.randint(len(self.symbols), (n, self.length), generator=generator)
        sep = torch.full((n, 1), self.sep_id, dtype=torch.long)
        return torch.cat([digits, sep, digits.flip(1)], dim=1)

    def _batch(self, seqs: torch.Tensor) -> Batch:
        x, y = seqs[:, :-1], seqs[:, 1:]
        weight = torch.zeros_like(y, dtype=torch.bool)
        weight[:, self.length:] = True  # y[:, length] is the first digit after the separator
        return Batch(x, y, weight)

    def train_batch(self, batch_size: int, generator: torch.Generator) -> Batch:
        return self._batch(self.examples(batch_size, generator))

    def val_batches(self, seed: int, n: int = 512) -> list[Batch]:
        """Held-out examples: drawn from a stream no training batch uses."""
        return [self._batch(self.examples(n, batch_generator(seed, 0, 0, stream=1)))]

    def prompts(self, seed: int, n: int) -> list[tuple[str, str]]:
        """``n`` held-out ``(prompt, expected continuation)`` pairs."""
        seqs = self.examples(n, batch_generator(seed, 0, 0, stream=2))
        return [
            (self.vocab.decode(s[: self.length + 1]), self.vocab.decode(s[self.length + 1:]))
            for s in seqs
        ]

    def default_prompt(self) -> str:
        return "31415926"[: self.length].ljust(self.length, "0") + self.SEPARATOR

    def display_sequence(self, seed: int) -> torch.Tensor:
        """The held-out sequence whose attention maps are drawn: a full example."""
        return self.examples(1, batch_generator(seed, 0, 0, stream=3))[0]

    @torch.no_grad()
    def accuracy(self, model, batch: Batch) -> dict:
        """Held-out accuracy on the answer digits.

        ``token_acc``: each answer digit predicted (argmax) from the true prefix.
        ``seq_acc``: whole answers right when the model writes them itself, greedily.
        """
        logits, _ = model(batch.x)
        pred = logits.argmax(-1)
        token_acc = (pred == batch.y)[batch.weight].float().mean().item()
        seqs = batch.x[:, : self.length + 1]
        for _ in range(self.length):
            logits, _ = model(seqs)
            seqs = torch.cat([seqs, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        answer = torch.cat([batch.x[:, self.length + 1:], batch.y[:, -1:]], dim=1)
        seq_acc = (seqs[:, self.length + 1:] == answer).all(dim=1).float().mean().item()
        return {"token_acc": token_acc, "seq_acc": seq_acc}


class TextTask:
    """Character-level language modelling on a UTF-8 file: 90% for training, the last 10% held out."""

    kind = "text"

    def __init__(self, text: str, block_size: int = 64, chars: str | None = None, path: str = "<text>"):
        if block_size < 2:
            raise ToolError(f"--block-size must be at least 2, got {block_size}")
        self.path = path
        self.block_size = block_size
        self.seq_len = block_size + 1
        self.vocab = CharVocab(chars if chars is not None else "".join(sorted(set(text))))
        data = torch.tensor(self.vocab.encode(text, argument=f"--text {path}"), dtype=torch.long)
        split = int(len(data) * (1 - VAL_FRACTION))
        self.train_data, self.val_data = data[:split], data[split:]
        self.text_chars = len(text)

    @classmethod
    def from_file(cls, path: str, block_size: int = 64, chars: str | None = None) -> TextTask:
        text = read_text_file(path, block_size)
        return cls(text, block_size=block_size, chars=chars, path=path)

    def describe(self) -> str:
        return f"characters of {self.path} ({self.text_chars} chars, {len(self.vocab)} distinct)"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "block_size": self.block_size, "chars": self.vocab.chars, "path": self.path}

    def _windows(self, data: torch.Tensor, starts: torch.Tensor) -> Batch:
        idx = starts[:, None] + torch.arange(self.block_size + 1)
        seqs = data[idx]
        x, y = seqs[:, :-1], seqs[:, 1:]
        return Batch(x, y, torch.ones_like(y, dtype=torch.bool))

    def train_batch(self, batch_size: int, generator: torch.Generator) -> Batch:
        starts = torch.randint(len(self.train_data) - self.block_size, (batch_size,), generator=generator)
        return self._windows(self.train_data, starts)

    def val_batches(self, seed: int, n: int = 256) -> list[Batch]:
        count = len(self.val_data) - self.block_size
        starts = torch.linspace(0, count - 1, steps=min(n, count)).long()
        return [self._windows(self.val_data, starts)]

    def prompts(self, seed: int, n: int) -> list[tuple[str, str]]:
        starts = torch.linspace(0, len(self.val_data) - self.block_size - 1, steps=n).long()
        return [(self.vocab.decode(self.val_data[s: s + 8]), "") for s in starts.tolist()]

    def default_prompt(self) -> str:
        return self.vocab.decode(self.train_data[:1])

    def display_sequence(self, seed: int) -> torch.Tensor:
        n = min(self.block_size + 1, 24)
        return self.val_data[:n]

    def accuracy(self, model, batch: Batch) -> dict:
        with torch.no_grad():
            logits, _ = model(batch.x)
        return {"token_acc": (logits.argmax(-1) == batch.y).float().mean().item()}


def read_text_file(path: str, block_size: int) -> str:
    """The text of ``path``, or a :class:`ToolError` naming the problem and the fix."""
    arg = f"--text {path}"
    require_file(path, arg, "give the path of a UTF-8 text file")
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise ToolError(f"{arg}: cannot be read ({exc.strerror}); check the path and its permissions") from None
    if not raw.strip():
        raise ToolError(f"{arg}: the file is empty; give a UTF-8 text file with some text in it")
    if b"\x00" in raw:
        raise ToolError(f"{arg}: looks binary (it holds NUL bytes); give a UTF-8 text file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{arg}: is not UTF-8 text (bad byte at offset {exc.start}); convert it to UTF-8 or give another file"
        ) from None
    needed = int((block_size + 2) / VAL_FRACTION)  # validation must hold a whole block
    if len(text) < needed:
        raise ToolError(
            f"{arg}: only {len(text)} characters; with --block-size {block_size} it needs at least {needed} "
            f"(10% are held out for validation): give a longer file or a smaller --block-size"
        )
    return text


def task_from_dict(info: dict, text_path: str | None = None):
    """Rebuild the task a checkpoint was trained on (``text_path`` overrides the saved path)."""
    kind = info.get("kind")
    if kind == "reverse":
        return ReverseTask(length=int(info["length"]), symbols=str(info["symbols"]))
    if kind == "text":
        return TextTask.from_file(text_path or info["path"], int(info["block_size"]), chars=info["chars"])
    raise ToolError(f"the checkpoint names an unknown task {kind!r}")


def vocab_from_dict(info: dict) -> CharVocab:
    """The vocabulary of a saved task, without needing its data."""
    if info.get("kind") == "reverse":
        return CharVocab(str(info["symbols"]) + ReverseTask.SEPARATOR)
    return CharVocab(str(info["chars"]))
