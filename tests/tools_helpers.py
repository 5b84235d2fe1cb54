"""Helpers shared by the tests of ``tools/``: PNG sizes, tiny training runs, a headless browser."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
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


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: CI installs Chromium (.ci/run); elsewhere the browser tests skip when it is missing
NO_CHROMIUM = CHROMIUM is None and not os.environ.get("CI")


def _chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=10000", *args], capture_output=True, text=True, timeout=120)


def chromium_dom(page: Path) -> str:
    """The DOM headless Chromium builds from ``page`` once its scripts (if any may run) ran."""
    dom = _chromium("--dump-dom", Path(page).resolve().as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout


def assert_renders_in_chromium(page: Path, figures: int, shot: Path, size: tuple[int, int] = (1200, 2600)) -> None:
    """Headless Chromium loads ``page``: its own check (a script marking ``<body>``) finds
    ``figures`` images, all decoded and drawn, and no script error; a screenshot of ``size`` shows
    something."""
    dom = _chromium("--dump-dom", Path(page).resolve().as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body is not None, dom.stdout[:500]
    assert f'data-figures="{figures}"' in body[0] and f'data-drawn="{figures}"' in body[0], f"not drawn: {body[0]}"
    assert "data-errors" not in body[0], f"script errors: {body[0]}"
    done = _chromium(f"--screenshot={shot}", f"--window-size={size[0]},{size[1]}", Path(page).resolve().as_uri())
    assert done.returncode == 0 and Path(shot).is_file(), done.stderr[-2000:]
    assert_png(shot, size)
