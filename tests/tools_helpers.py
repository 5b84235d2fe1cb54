"""Helpers shared by the tests of ``tools/``: PNG sizes and tiny training runs."""

from __future__ import annotations

import struct
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402

#: A MiniGPT small enough to train in a fraction of a second.
TINY = ["--d-model", "16", "--num-heads", "2", "--num-layers", "2", "--d-ff", "32",
        "--batch-size", "8", "--length", "3", "--eval-every", "2", "--no-progress", "--threads", "1"]


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) read from the PNG header (IHDR), independent of matplotlib."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG file (header {data[:8]!r})"
    assert data[12:16] == b"IHDR", f"{path}: PNG without IHDR chunk first"
    return struct.unpack(">II", data[16:24])


def assert_png(path: Path, size: tuple[int, int]) -> None:
    """``path`` is a PNG of exactly ``size`` pixels with something drawn on it."""
    assert Path(path).is_file(), f"{path} was not written"
    assert png_size(path) == size, f"{path}: expected {size[0]}x{size[1]} pixels, got {png_size(path)}"
    pixels = mpimg.imread(path)
    assert pixels[..., :3].std() > 0.02, f"{path} is (nearly) blank: pixel std {pixels[..., :3].std():.4f}"
