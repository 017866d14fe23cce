"""Figures of the probe, in the spirit of the paper's Figures 8 and 9 (matplotlib, Agg backend).

- ``plot_overview``: repeated-max fraction per layer x head (where to look).
- ``plot_rank1``: Figure 8: ``P K``, ``X`` and the rank-1 matrices ``(PK)[T]^T X[T]`` of the
  most similar tokens, the shared largest columns (input features) marked.
- ``plot_score_rows``: Figure 9: score rows with their tied maxima marked.
"""

from __future__ import annotations

from pathlib import Path

import torch


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(tokens: list[str] | None, i: int) -> str:
    return f"{i}:{tokens[i]!r}" if tokens and i < len(tokens) else str(i)


def plot_overview(summary: dict, path: Path) -> Path:
    """Heatmap of the repeated-max fraction, layers (rows) x heads (columns)."""
    plt = _pyplot()
    layers = summary["layers"]
    n_heads = 1 + max((h["head"] for l in layers for h in l["heads"]), default=0)
    grid = torch.full((len(layers), n_heads), float("nan"))
    for i, layer in enumerate(layers):
        for head in layer["heads"]:
            grid[i, head["head"]] = head["repeated_max_fraction"]
    fig, ax = plt.subplots(figsize=(max(4, 0.25 * n_heads + 2), max(3, 0.25 * len(layers) + 1.5)))
    im = ax.imshow(grid.numpy(), aspect="auto", cmap="viridis", vmin=0.0, interpolation="nearest")
    ax.set_yticks(range(len(layers)), [str(l["layer"]) for l in layers])
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(f"rows with a repeated maximum ({summary['dtype']})")
    fig.colorbar(im, ax=ax, label="fraction of rows")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_rank1(
    pk: torch.Tensor,
    x: torch.Tensor,
    rank1: dict,
    path: Path,
    *,
    title: str,
    tokens: list[str] | None = None,
) -> Path:
    """Figure 8: pk (T, D), x (T, F) and R[T] = outer(pk[T], x[T]) for the most similar pair.

    ``rank1`` is the probe's summary entry (``most_similar_pair``, ``shared_columns``).
    """
    plt = _pyplot()
    pair = rank1.get("most_similar_pair", [0, 0, float("nan")])
    picks = sorted({int(pair[0]), int(pair[1])})
    shared = [c for c, _ in rank1.get("shared_columns", [])]
    fig, axes = plt.subplots(1, 2 + len(picks), figsize=(5 * (2 + len(picks)), 4))
    for ax, m, name, xl in ((axes[0], pk, "P K", "head dim"), (axes[1], x, "X", "input feature")):
        im = ax.imshow(m.float().cpu().numpy(), aspect="auto", cmap="RdBu_r", interpolation="nearest")
        ax.set_title(name)
        ax.set_xlabel(xl)
        ax.set_ylabel("token")
        fig.colorbar(im, ax=ax)
    for ax, t in zip(axes[2:], picks):
        r = pk[t].float()[:, None] * x[t].float()[None, :]
        lim = float(r.abs().max()) or 1.0
        im = ax.imshow(r.cpu().numpy(), aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim,
                       interpolation="nearest")
        for c in shared:
            ax.axvline(c, color="k", lw=0.8, ls="--")
        ax.set_title(f"(PK)[T]^T X[T], T={_label(tokens, t)}")
        ax.set_xlabel("input feature (dashed: shared largest columns)")
        ax.set_ylabel("head dim")
        fig.colorbar(im, ax=ax)
    fig.suptitle(f"{title}: most similar pair {picks}, flattened cosine {pair[2]:.3f}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_score_rows(
    scores: torch.Tensor,
    tied_rows: list[dict],
    path: Path,
    *,
    title: str,
    tokens: list[str] | None = None,
    max_rows: int = 4,
) -> Path:
    """Figure 9: rows of scores (Sq, Sk) with tied maxima marked.

    Plots the listed tied rows (``{"row", "keys"}``, text 0); without any, the rows with the
    smallest gap between their two largest scores, to show how close they come.
    """
    plt = _pyplot()
    rows = [(r["row"], r["keys"]) for r in tied_rows if r.get("text", 0) == 0][:max_rows]
    if not rows:
        top = torch.topk(scores, min(2, scores.shape[-1]), dim=-1).values
        gap = (top[:, 0] - top[:, -1]).nan_to_num(float("inf"))  # < 2 visible keys: inf
        rows = [(int(i), []) for i in gap.argsort()[:max_rows] if gap[i] < float("inf")]
    fig, axes = plt.subplots(len(rows) or 1, 1, figsize=(8, 2.2 * max(1, len(rows))), squeeze=False)
    for ax, (row, keys) in zip(axes[:, 0], rows):
        s = scores[row].float().cpu()
        seen = torch.isfinite(s)
        j = torch.arange(len(s))[seen]
        ax.plot(j.numpy(), s[seen].numpy(), marker=".", lw=0.8)
        if keys:
            ax.scatter(keys, s[keys].numpy(), color="red", zorder=3, s=40, label="tied maxima")
            ax.legend(loc="lower right", fontsize=7)
        ax.set_title(f"query row {_label(tokens, row)}" + ("" if keys else " (no tie: closest row)"),
                     fontsize=9)
        ax.set_ylabel("score")
    axes[-1, 0].set_xlabel("key position (0 = sink)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
