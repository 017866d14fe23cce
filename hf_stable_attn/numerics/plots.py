"""PNG plots of the lab's and the training experiment's results (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_cumulative(result: dict, path: str | Path) -> Path:
    """Mean cumulative ``delta_lp - delta_hp`` over tokens per implementation (paper Fig. 5a)."""
    plt = _pyplot()
    curves = result["curves"]
    fig, ax = plt.subplots(figsize=(8, 5))
    for n, (name, curve) in enumerate(curves["impl"].items()):
        xs = [round(i * (curves["seqlen"] - 1) / max(len(curve) - 1, 1)) + 1 for i in range(len(curve))]
        ax.plot(xs, curve, label=name, color=plt.cm.tab20(n % 20), linestyle="-" if n < 20 else "--")
    ax.axhline(0.0, color="black", linewidth=0.5)
    ax.set_xlabel("tokens summed")
    ax.set_ylabel("mean over heads of cumulative (delta_lp - delta_hp)")
    ax.set_title(f"case {curves['case']}, S={curves['seqlen']}, D={curves['head_dim']} ({result['device_name']})")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def plot_drift(result: dict, path: str | Path) -> Path:
    """Heatmap of the delta drift, implementations x cases, at the largest shape of the run
    (log colour scale centred on the bias threshold; each cell annotated)."""
    plt = _pyplot()
    from matplotlib.colors import LogNorm

    rows = result["rows"]
    seqlen = max(r["seqlen"] for r in rows)
    head_dim = min(r["head_dim"] for r in rows if r["seqlen"] == seqlen)
    rows = [r for r in rows if r["seqlen"] == seqlen and r["head_dim"] == head_dim]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    value = {(r["impl"], r["case"]): r["delta_drift"] for r in rows}
    grid = [[value.get((i, c), float("nan")) for c in cases] for i in impls]
    threshold = result["bias_threshold"]
    fig, ax = plt.subplots(figsize=(1.0 * len(cases) + 3, 0.38 * len(impls) + 2))
    image = ax.imshow(grid, cmap="RdBu_r", norm=LogNorm(vmin=threshold**2 / 30, vmax=30), aspect="auto")
    for y, line in enumerate(grid):
        for x, v in enumerate(line):
            if v == v:  # not NaN
                ax.text(x, y, f"{v:.1f}", ha="center", va="center", fontsize=7,
                        fontweight="bold" if not v <= threshold else "normal")
    ax.set_xticks(range(len(cases)), cases, rotation=30, ha="right")
    ax.set_yticks(range(len(impls)), impls)
    fig.colorbar(image, ax=ax, label="mean |sum e| / sqrt(sum e^2) (noise ~0.8)")
    ax.set_title(f"delta drift, S={seqlen}, D={head_dim}, bold > {threshold:g} ({result['device_name']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def plot_training(log: dict, path: str | Path) -> Path:
    """Training experiment: loss, tied-row frequency, cumulative per-head delta error and its
    drift across steps (noise ~0.8)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.5))
    for label, run in log["runs"].items():
        history = run["history"]
        axes[0].plot([p["step"] for p in history], [p["loss"] for p in history], label=label)
        axes[1].plot([p["step"] for p in history], [p["tied_frac"] for p in history], label=label)
        steps = [p["step"] for p in run["points"]]
        axes[2].plot(steps, [p["cum_delta_err_max_head"] for p in run["points"]], label=label)
        axes[3].plot(steps, [p["step_drift_abs_mean"] for p in run["points"]], label=label)
    axes[0].set_title("training loss")
    axes[1].set_title("rows with a tied maximum (bf16 window), all layers")
    axes[1].set_yscale("symlog", linthresh=1e-4)
    axes[2].set_title("|cumulative sum_T e| over measured steps, worst head")
    axes[3].set_title("drift of sum_T e across measured steps (mean |.| over heads)")
    axes[3].axhline(0.8, color="gray", linestyle=":")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
