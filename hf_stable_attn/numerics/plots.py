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
    for name, curve in curves["impl"].items():
        xs = [round(i * (curves["seqlen"] - 1) / max(len(curve) - 1, 1)) + 1 for i in range(len(curve))]
        ax.plot(xs, curve, label=name)
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
    """Delta drift per implementation and case (log scale) at the largest shape of the run."""
    plt = _pyplot()
    rows = result["rows"]
    seqlen = max(r["seqlen"] for r in rows)
    head_dim = min(r["head_dim"] for r in rows if r["seqlen"] == seqlen)
    rows = [r for r in rows if r["seqlen"] == seqlen and r["head_dim"] == head_dim]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    value = {(r["impl"], r["case"]): r["delta_drift"] for r in rows}
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(cases) * max(1, len(impls) / 6)), 5))
    width = 0.8 / len(impls)
    for i, impl in enumerate(impls):
        xs = [c + (i - len(impls) / 2) * width for c in range(len(cases))]
        ax.bar(xs, [value.get((impl, c), 0.0) for c in cases], width, label=impl)
    ax.axhline(0.8, color="gray", linestyle=":", label="noise (~0.8)")
    ax.axhline(result["bias_threshold"], color="red", linestyle="--", label="bias threshold")
    ax.set_yscale("log")
    ax.set_xticks(range(len(cases)), cases, rotation=30, ha="right")
    ax.set_ylabel("mean |sum e| / sqrt(sum e^2) over heads")
    ax.set_title(f"delta drift, S={seqlen}, D={head_dim} ({result['device_name']})")
    ax.legend(fontsize=6, ncol=3)
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
