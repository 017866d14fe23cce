"""The lab runner: every implementation on every input structure, against float64, as JSON rows.

For each shape ``(seqlen, head_dim)`` and case, ``seeds`` independent draws of ``batch * heads``
heads are run through each implementation; per implementation the lab reports

- ``delta_*``: drift score, mean and RMS of ``e = delta_lp - delta_hp`` per token (drift.py);
- ``o_*``: mean, RMS and drift (per head and feature, over tokens) of ``O_lp - O_hp``;
- ``dq_*``: drift and RMS of the dQ error along the head's rank-1 direction ``R`` (Eq. 1-3);
- the case's tie statistics (fraction of rows tied within the bf16 tie window, exactly tied).

It also keeps the mean cumulative delta error over tokens (Fig. 5a) of one case for the plots.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from .drift import BIAS_THRESHOLD, cumulative_error, dq_along_rank1, summarize
from .exact import exact_attention
from .implementations import IMPLEMENTATIONS
from .inputs import CASES, make_inputs, sink_positions


@dataclass(frozen=True)
class LabConfig:
    device: str = "cpu"
    seqlens: tuple[int, ...] = (256,)
    head_dims: tuple[int, ...] = (64,)
    cases: tuple[str, ...] = tuple(CASES)
    implementations: tuple[str, ...] = tuple(IMPLEMENTATIONS)
    batch: int = 4
    heads: int = 4
    seeds: int = 2
    causal: bool = False
    block_n: int = 128  # spacing of the tile_split copies (the kernels' key tile is <= 128)
    v_mean: float = -1.0
    dout_mean: float = -1.0
    curve_case: str = "single_dom"  # the case of the cumulative-error plot (else the first case)
    time_budget_s: float = 0.0  # stop starting new blocks after this long (0: no limit)
    extra: dict = field(default_factory=dict)  # free-form notes stored with the results


QUICK = LabConfig(
    cases=("random", "single_dom", "sink4", "sink2_dom", "near_tie2"),
    implementations=("ref_fa2", "ref_b2", "ref_single_b2", "ref_pr2721", "ref_pr2721_b2", "ref_out_fp32"),
    batch=4,
    heads=4,
    seeds=1,
)

FULL = LabConfig(
    device="cuda",
    seqlens=(1024, 4096),
    head_dims=(64, 128),
    batch=4,
    heads=8,
    seeds=2,
    time_budget_s=240.0,
)


def _shape_fits(case: str, seqlen: int, block_n: int) -> bool:
    try:
        sink_positions(CASES[case], seqlen, block_n)
    except ValueError:
        return False
    return True


class _Accumulator:
    """Per-implementation errors over the seeds of one (shape, case) block.

    Delta and dQ keep their per-token errors (B, H, S); O keeps, per head and feature, only the
    sum and the sum of squares over tokens (all its drift statistics need).
    """

    def __init__(self):
        self.delta, self.dq, self.o_sum, self.o_sq = [], [], [], []
        self.o_count = 0

    def add(self, run, exact):
        self.delta.append((run.delta.double() - exact.delta).cpu())
        self.dq.append(dq_along_rank1(run.dq, exact.dq, exact.pk).cpu())
        err = run.out.double() - exact.out  # (B, S, H, D)
        self.o_sum.append(err.sum(1).cpu())
        self.o_sq.append(err.square().sum(1).cpu())
        self.o_count += err.numel()

    def row(self) -> dict:
        delta = summarize(torch.cat(self.delta))
        dq = summarize(torch.cat(self.dq))
        o_sum, o_sq = torch.cat(self.o_sum), torch.cat(self.o_sq)
        o_drift = torch.where(o_sq == 0, 0.0, o_sum / o_sq.sqrt())
        return {
            "delta_drift": delta.drift_abs_mean,
            "delta_drift_signed": delta.drift_signed_mean,
            "delta_biased_heads": delta.biased_heads,
            "delta_err_mean": delta.err_mean,
            "delta_err_rms": delta.err_rms,
            "biased": delta.biased,
            "o_drift": o_drift.abs().mean().item(),
            "o_err_mean": (o_sum.sum() / self.o_count).item(),
            "o_err_rms": (o_sq.sum() / self.o_count).sqrt().item(),
            "dq_drift": dq.drift_abs_mean,
            "dq_err_rms": dq.err_rms,
        }


def run_lab(
    config: LabConfig,
    log: Callable[[str], None] = print,
    checkpoint: Callable[[dict], None] | None = None,
) -> dict:
    """Run the lab; returns a JSON-ready dict (``rows``, ``curves``, ``unavailable``, ...).

    ``checkpoint`` receives the partial result after every block (so a killed run keeps data).
    """
    device = torch.device(config.device)
    impls = [IMPLEMENTATIONS[n] for n in config.implementations]
    unavailable = {i.name: f"needs CUDA (device {device})" for i in impls if not i.supports(device)}
    impls = [i for i in impls if i.supports(device)]
    rows, curves, skipped = [], {}, []
    start = time.perf_counter()
    curve_shape = (max(config.seqlens), config.head_dims[0])
    curve_case = config.curve_case if config.curve_case in config.cases else config.cases[0]
    result = {
        "config": dataclasses.asdict(config),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "bias_threshold": BIAS_THRESHOLD,
        "rows": rows,
        "curves": {"case": curve_case, "seqlen": curve_shape[0], "head_dim": curve_shape[1], "impl": curves},
        "unavailable": unavailable,
        "skipped": skipped,
        "truncated": False,
        "seconds": 0.0,
    }
    for seqlen in config.seqlens:
        for head_dim in config.head_dims:
            scale = head_dim**-0.5
            for case in config.cases:
                if config.time_budget_s and time.perf_counter() - start > config.time_budget_s:
                    result["truncated"] = True
                    break
                if not _shape_fits(case, seqlen, config.block_n):
                    skipped.append(f"{case} at seqlen {seqlen}")
                    continue
                t0 = time.perf_counter()
                acc = {i.name: _Accumulator() for i in impls if i.name not in unavailable}
                ties = []
                for seed in range(config.seeds):
                    x = make_inputs(
                        CASES[case], batch=config.batch, heads=config.heads, seqlen=seqlen,
                        head_dim=head_dim, seed=seed, block_n=config.block_n,
                        v_mean=config.v_mean, dout_mean=config.dout_mean, device=device,
                    )
                    exact = exact_attention(x, scale, config.causal)
                    ties.append((exact.tied_frac, exact.exact_tie_frac))
                    for name in list(acc):
                        try:
                            acc[name].add(IMPLEMENTATIONS[name].run(x, scale, config.causal), exact)
                        except Exception as exc:  # an SDPA backend may refuse a shape or device
                            unavailable[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                            del acc[name]
                tied = sum(t for t, _ in ties) / len(ties)
                exact_tied = sum(e for _, e in ties) / len(ties)
                for name, a in acc.items():
                    rows.append(
                        {
                            "impl": name,
                            "family": IMPLEMENTATIONS[name].family,
                            "case": case,
                            "seqlen": seqlen,
                            "head_dim": head_dim,
                            "heads": config.batch * config.heads * config.seeds,
                            "tied_frac": tied,
                            "exact_tie_frac": exact_tied,
                            **a.row(),
                        }
                    )
                    if case == curve_case and (seqlen, head_dim) == curve_shape:
                        curves[name] = cumulative_error(torch.cat(a.delta))
                log(f"S={seqlen} D={head_dim} {case}: {len(acc)} implementations, "
                    f"tied {tied:.3f}, {time.perf_counter() - t0:.1f}s")
                result["seconds"] = time.perf_counter() - start
                if checkpoint is not None:
                    checkpoint(result)
    result["seconds"] = time.perf_counter() - start
    return result


def _grid(rows: list[dict], value: Callable[[dict], str]) -> list[str]:
    """Markdown table: implementations down, cases across."""
    cases = list(dict.fromkeys(r["case"] for r in rows))
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    cell = {(r["impl"], r["case"]): value(r) for r in rows}
    lines = ["| impl | " + " | ".join(cases) + " |", "|---" * (len(cases) + 1) + "|"]
    for impl in impls:
        lines.append(f"| {impl} | " + " | ".join(cell.get((impl, c), "-") for c in cases) + " |")
    return lines


def markdown_tables(result: dict) -> str:
    """The lab's results as markdown (one block per shape) for docs/numerics.md."""
    rows = result["rows"]
    out = [
        f"Device: {result['device_name']}, torch {result['torch']}; "
        f"{rows[0]['heads'] if rows else 0} independent heads per cell; "
        f"causal={result['config']['causal']}; bias threshold {result['bias_threshold']} "
        f"(noise ~0.8, a one-signed error ~sqrt(S)); **bold** = biased."
    ]
    for seqlen in dict.fromkeys(r["seqlen"] for r in rows):
        for head_dim in dict.fromkeys(r["head_dim"] for r in rows):
            block = [r for r in rows if r["seqlen"] == seqlen and r["head_dim"] == head_dim]
            if not block:
                continue
            ties = {r["case"]: f"{r['tied_frac']:.2f}/{r['exact_tie_frac']:.2f}" for r in block}
            out += [
                f"\n### S = {seqlen}, D = {head_dim}",
                "\nRows tied within the bf16 window / exactly tied: "
                + ", ".join(f"{c} {t}" for c, t in ties.items()),
                "\n**delta drift** `mean |sum e| / sqrt(sum e^2)` over heads:\n",
                *_grid(block, lambda r: f"**{r['delta_drift']:.1f}**" if r["biased"] else f"{r['delta_drift']:.1f}"),
                "\n**delta RMS error per token** (the noise level; the fix's cost):\n",
                *_grid(block, lambda r: f"{r['delta_err_rms']:.2e}"),
                "\n**O error**: drift over tokens per head and feature / mean / RMS:\n",
                *_grid(block, lambda r: f"{r['o_drift']:.1f} / {r['o_err_mean']:+.1e} / {r['o_err_rms']:.1e}"),
                "\n**dQ error along the rank-1 direction R**: drift (RMS):\n",
                *_grid(block, lambda r: f"{r['dq_drift']:.1f} ({r['dq_err_rms']:.1e})"),
            ]
    if result["unavailable"]:
        out.append("\nUnavailable: " + "; ".join(f"{k}: {v}" for k, v in result["unavailable"].items()))
    if result["skipped"] or result["truncated"]:
        out.append(f"\nSkipped: {result['skipped']}; truncated by the time budget: {result['truncated']}")
    return "\n".join(out) + "\n"


def text_summary(result: dict) -> str:
    """Short plain-text table of delta drift (``*`` = biased) for the terminal."""
    rows = result["rows"]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    cell = {(r["impl"], r["case"], r["seqlen"], r["head_dim"]): r for r in rows}
    lines = []
    for seqlen in dict.fromkeys(r["seqlen"] for r in rows):
        for head_dim in dict.fromkeys(r["head_dim"] for r in rows):
            lines.append(f"delta drift (noise ~0.8, * = biased > {result['bias_threshold']}), S={seqlen} D={head_dim}")
            lines.append(f"{'impl':22s}" + "".join(f"{c[:13]:>14s}" for c in cases))
            for impl in impls:
                cells = []
                for c in cases:
                    r = cell.get((impl, c, seqlen, head_dim))
                    cells.append("-" if r is None else f"{r['delta_drift']:.1f}{'*' if r['biased'] else ' '}")
                lines.append(f"{impl:22s}" + "".join(f"{s:>14s}" for s in cells))
    for name, reason in result["unavailable"].items():
        lines.append(f"unavailable {name}: {reason[:120]}")
    if result["truncated"]:
        lines.append("truncated by the time budget")
    lines.append(f"{result['seconds']:.1f}s on {result['device_name']}")
    return "\n".join(lines)
