"""The figures of the tools, drawn with matplotlib's Agg backend at fixed pixel sizes.

Sizes (width x height, in pixels): ``loss.png`` 900 x 500; ``attention_layers.png`` and
``attention_heads.png`` 360 per panel, at most 4 panels a row, plus 60 for the title
(``grid_size(n)``); ``scaling.png`` 1000 x 420.
"""

from __future__ import annotations

import math
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Characters outside the default font (CJK text with --text) are drawn as boxes: say so once in
# the docs instead of one warning per tick label.
warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)

DPI = 100
PANEL_PX = 360
TITLE_PX = 60
MAX_COLS = 4
LOSS_SIZE = (900, 500)
SCALING_SIZE = (1000, 420)


def grid_size(panels: int) -> tuple[int, int]:
    """Pixel size (width, height) of a figure of ``panels`` heatmaps."""
    cols = min(panels, MAX_COLS)
    rows = math.ceil(panels / MAX_COLS)
    return cols * PANEL_PX, rows * PANEL_PX + TITLE_PX


def _figure(size_px: tuple[int, int]):
    return plt.figure(figsize=(size_px[0] / DPI, size_px[1] / DPI), dpi=DPI)


def _save(fig, path) -> None:
    fig.savefig(path, dpi=DPI)  # no bbox_inches="tight": the pixel size stays as documented
    plt.close(fig)


def plot_loss(history: dict, path, title: str = "") -> None:
    """Training loss per step (raw and smoothed) and validation loss at each evaluation."""
    _save(loss_figure(history, title), path)


def loss_figure(history: dict, title: str = ""):
    """The figure :func:`plot_loss` saves."""
    fig = _figure(LOSS_SIZE)
    ax = fig.add_subplot(1, 1, 1)
    train = history.get("train", [])
    if train:
        steps = [s for s, _ in train]
        losses = [v for _, v in train]
        ax.plot(steps, losses, color="tab:blue", alpha=0.3, lw=0.8, label="train (per step)")
        half = max(1, len(losses) // 100)  # centred moving average: no lag behind the raw curve
        smooth = [sum(losses[max(0, i - half): i + half + 1]) / len(losses[max(0, i - half): i + half + 1])
                  for i in range(len(losses))]
        ax.plot(steps, smooth, color="tab:blue", lw=1.8, label="train (smoothed)")
    val = history.get("val", [])
    if val:
        ax.plot([r[0] for r in val], [r[1] for r in val], "o-", color="tab:orange", ms=3, label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss (nats)")
    values = [v for _, v in train] + [r[1] for r in val]
    if values and min(values) > 0 and max(values) / min(values) >= 10:  # a short run stays within a decade:
        ax.set_yscale("log")  # there a log axis labels one tick, as 2.32x10^0; plain numbers read better
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper right")
    ax.set_title(title or "loss")
    fig.tight_layout()
    return fig


#: pixels at the right of a heatmap figure for the shared colorbar and its label
COLORBAR_PX = 70


def heatmap_figure(maps, tokens: list[str], titles: list[str], suptitle: str):
    """The figure of ``maps`` (each ``(L, L)``, weights in [0, 1]): panels in a grid, one shared
    colorbar on the right, the title just above the panels' own titles."""
    n = len(maps)
    width, height = grid_size(n)
    cols = min(n, MAX_COLS)
    rows = math.ceil(n / MAX_COLS)
    fig = _figure((width, height))
    fig.subplots_adjust(left=50 / width, right=1 - COLORBAR_PX / width, bottom=45 / height,
                        top=1 - TITLE_PX / height, wspace=0.25, hspace=0.3)
    # Token labels while they fit in a panel of ~270 px (24 tokens: the --text display sequence).
    fontsize = 8 if len(tokens) <= 24 else 7 if len(tokens) <= 32 else 6 if len(tokens) <= 40 else None
    image = None
    for i, (weights, title) in enumerate(zip(maps, titles, strict=True)):
        ax = fig.add_subplot(rows, cols, i + 1)
        image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
        ax.set_title(title, fontsize=10)
        if fontsize:
            labels = [repr(t)[1:-1] if not t.isprintable() or t == " " else t for t in tokens]
            labels = ["␣" if t == " " else lab for t, lab in zip(tokens, labels, strict=True)]
            ax.set_xticks(range(len(tokens)), labels, fontsize=fontsize)
            ax.set_yticks(range(len(tokens)), labels, fontsize=fontsize)
        else:
            ax.tick_params(labelsize=8)
        if i % cols == 0:
            ax.set_ylabel("query", fontsize=9)
        ax.set_xlabel("key", fontsize=9)
    bottom, top = 45 / height, 1 - TITLE_PX / height
    bar = fig.add_axes((1 - (COLORBAR_PX - 12) / width, bottom, 12 / width, top - bottom))
    fig.colorbar(image, cax=bar).set_label("attention weight", fontsize=9)
    bar.tick_params(labelsize=8)
    fig.suptitle(suptitle, fontsize=12, y=1 - 8 / height, va="top")
    return fig


def plot_attention_layers(attn_maps, tokens: list[str], path, model: str = "") -> None:
    """Each layer's attention averaged over its heads (``attn_maps``: list of ``(H, L, L)``) of ``model``
    (its name, first in the title)."""
    maps = [m.float().mean(0).cpu().numpy() for m in attn_maps]
    titles = [f"layer {i + 1} (mean of {attn_maps[i].shape[0]} heads)" for i in range(len(maps))]
    _save(heatmap_figure(maps, tokens, titles,
                         _named(model, "attention per layer, averaged over heads (row: query, column: key)")), path)


def plot_attention_heads(layer_map, tokens: list[str], path, layer: int, model: str = "") -> None:
    """Every head of one layer (``layer_map``: ``(H, L, L)``) of ``model``."""
    maps = [m.float().cpu().numpy() for m in layer_map]
    titles = [f"layer {layer}, head {h + 1}" for h in range(len(maps))]
    _save(heatmap_figure(maps, tokens, titles, _named(model, f"attention of every head in layer {layer} (last layer)")),
          path)


def _named(model: str, title: str) -> str:
    return f"{model}: {title}" if model else title


def plot_scaling(rows: list[dict], path, seq_len: int) -> None:
    """Mean entropy and mean maximum weight against d_k, with and without 1/sqrt(d_k)."""
    fig = _figure(SCALING_SIZE)
    d_k = [r["d_k"] for r in rows]
    ax1 = fig.add_subplot(1, 2, 1)
    ax1.plot(d_k, [r["entropy_scaled"] for r in rows], "o-", label="scaled: softmax(qk/√d_k)")
    ax1.plot(d_k, [r["entropy_unscaled"] for r in rows], "s--", label="unscaled: softmax(qk)")
    ax1.axhline(math.log(seq_len), color="gray", lw=0.8, ls=":", label=f"uniform: ln {seq_len}")
    ax1.set_ylabel("mean entropy of a row (nats)")
    ax1.set_ylim(bottom=0)
    ax2 = fig.add_subplot(1, 2, 2)
    ax2.plot(d_k, [r["max_scaled"] for r in rows], "o-", label="scaled")
    ax2.plot(d_k, [r["max_unscaled"] for r in rows], "s--", label="unscaled")
    ax2.axhline(1.0, color="gray", lw=0.8, ls=":", label="one-hot")
    ax2.set_ylabel("mean maximum weight of a row")
    ax2.set_ylim(0, 1.05)
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(d_k, [str(d) for d in d_k])
        ax.set_xlabel("d_k")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"softmax saturation without 1/√d_k scaling (q, k ~ N(0, 1), {seq_len} keys)")
    fig.tight_layout()
    _save(fig, path)
