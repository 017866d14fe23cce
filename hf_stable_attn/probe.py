"""Probe a causal LM for the paper's Appendix D patterns through the registered attention.

Per layer and query head, from the q/k that transformers hands to ``stable_flash`` (observed with
``hf_stable_attn.hooks.observe_attention``, no second forward implementation of the model):

- the scores ``S = scaling * q k^T`` in fp32 (soft-capped, causal bottom-right, sliding window,
  padding, GQA by index) and per row the top two ``m1 >= m2``;
- rows with a *repeated maximum*: ``m1 - m2 <= tie_window(dtype)``, i.e. at least two entries of
  ``P_bar = exp(S - m1)`` round to exactly 1.0 in the input dtype (Section 3.3.2, Appendix D.2),
  with their positions, the keys that tie and whether the sink (the first key) is one of them;
- the number of ``P_bar`` entries that would be exactly 1.0 under plain FlashAttention-2;
- for chosen heads, ``P K`` (P = softmax(S) in fp32, K post-RoPE as the attention sees it), the
  attention input ``X`` (captured by a forward pre-hook on the attention module) and the rank-1
  matrices ``(PK)[T]^T X[T]`` of Eq. (2), with token-to-token similarities (Appendix D.1).

Memory stays bounded: each layer is summarised inside the observer callback in chunks of query
rows, only counters and a capped list of tied rows are kept; full tensors only for chosen heads.
"""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import torch

from hf_stable_attn.shift_rule import tie_window

# fp32 score elements materialised at once per layer (256 MiB).
_CHUNK_ELEMENTS = 1 << 26


# ----------------------------------------------------------------------------- the math


def visible_keys(
    sq: int,
    sk: int,
    *,
    causal: bool,
    sliding_window: int | None,
    rows: torch.Tensor | None = None,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Bool ``(len(rows), sk)``: key ``j`` is visible to query row ``i``.

    Causal masks are bottom-right aligned (row ``i`` sits at key ``i + sk - sq``); a sliding
    window of ``w`` keeps the ``w`` most recent keys (transformers' convention, flash-attn's
    ``window_size=(w - 1, w - 1)``).
    """
    rows = torch.arange(sq, device=device) if rows is None else rows.to(device)
    pos = (rows + (sk - sq))[:, None]
    j = torch.arange(sk, device=device)[None, :]
    keep = torch.ones(len(rows), sk, dtype=torch.bool, device=device)
    if causal:
        keep &= j <= pos
    if sliding_window is not None:
        keep &= (pos - j < sliding_window) & (j - pos < sliding_window)
    return keep


def segment_starts(kwargs: dict, sq: int, sk: int) -> torch.Tensor | None:
    """(B, Sk) index of the first token of each key's packed sequence, or None if not packed.

    Packed batches (``DataCollatorWithFlattening``) restart ``position_ids`` at 0 for every
    sequence, so a token at index ``j`` with position ``p`` starts its sequence at ``j - p``.
    """
    pos = kwargs.get("position_ids")
    if pos is None or sq != sk or pos.shape[-1] != sk:
        return None
    starts = torch.arange(sk, device=pos.device) - pos.reshape(-1, sk)
    return None if (starts == 0).all() else starts.clamp_min(0)


def attention_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    scaling: float,
    softcap: float | None = None,
    keep: torch.Tensor | None = None,
) -> torch.Tensor:
    """fp32 scores ``S`` (..., Sq, Sk) from q (..., Sq, D) and k (..., Sk, D); hidden keys -inf.

    ``keep`` broadcasts to the scores (True = visible). Softcap ``c > 0``: ``c * tanh(S / c)``.
    """
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scaling
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    return s


@dataclass
class RowTies:
    """Per-row tie statistics of scores ``s`` (..., Sq, Sk)."""

    m1: torch.Tensor  # (..., Sq) row maximum (-inf for rows that see no key)
    gap: torch.Tensor  # (..., Sq) m1 - m2 (inf when fewer than two keys are visible)
    tied: torch.Tensor  # (..., Sq) bool: the maximum repeats inside the tie window
    tied_keys: torch.Tensor  # (..., Sq, Sk) bool: keys within the window of m1 (tied rows only)
    ones: torch.Tensor  # (..., Sq) number of exp(S - m1) entries that round to 1.0 in dtype


def row_ties(s: torch.Tensor, dtype: torch.dtype, window: float | None = None) -> RowTies:
    """Find repeated row maxima of fp32 scores ``s`` (..., Sq, Sk) for inputs of ``dtype``.

    ``window`` defaults to ``tie_window(dtype)``. ``ones`` rounds ``exp(S - m1)`` to ``dtype`` the
    way plain FlashAttention-2 rounds ``P`` before ``P @ V``.
    """
    window = tie_window(dtype) if window is None else window
    if s.shape[-1] >= 2:
        top = torch.topk(s, 2, dim=-1).values
        m1, m2 = top[..., 0], top[..., 1]
    else:
        m1, m2 = s[..., 0], torch.full_like(s[..., 0], float("-inf"))
    seen = m1 > float("-inf")
    gap = torch.where(seen & (m2 > float("-inf")), m1 - m2, torch.full_like(m1, float("inf")))
    tied = gap <= window
    shift = torch.where(seen, m1, torch.zeros_like(m1))[..., None]
    p_bar = torch.exp(s - shift).to(dtype)
    ones = (p_bar == 1.0).sum(-1)
    tied_keys = (s >= (m1 - window)[..., None]) & seen[..., None] & tied[..., None]
    return RowTies(m1, gap, tied, tied_keys, ones)


def _cosine_matrix(a: torch.Tensor) -> torch.Tensor:
    """Cosine similarity between the rows of ``a`` (T, F) -> (T, T) (zero rows give 0)."""
    a = a.float()
    unit = a / a.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
    return unit @ unit.T


@dataclass
class Rank1Similarity:
    """Similarity between the rank-1 matrices ``R[T] = (PK)[T]^T X[T]`` (D, F) of T tokens."""

    flat_cosine: torch.Tensor  # (T, T) cosine of the flattened R[T]
    column_cosine: torch.Tensor  # (T, T) cosine restricted to the pair's largest columns
    top_columns: torch.Tensor  # (T, top_k) input features of each token's largest columns
    shared_columns: list[tuple[int, int]] = field(default_factory=list)  # (feature, tokens)


def rank1_matrices(pk: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``R[T] = outer(pk[T], x[T])``: pk (T, D), x (T, F) -> (T, D, F) fp32."""
    return pk.float()[:, :, None] * x.float()[:, None, :]


def rank1_similarity(pk: torch.Tensor, x: torch.Tensor, top_k: int = 8) -> Rank1Similarity:
    """Compare the rank-1 matrices of all token pairs without materialising them.

    pk (T, D), x (T, F). The inner product of two outer products factorises,
    ``<a b^T, c d^T> = (a.c)(b.d)``, so the flattened cosine is ``cos(pk) * cos(x)``. Column
    ``f`` of ``R[T]`` is ``pk[T] * x[T, f]``: the largest columns are the features with the
    largest ``|x[T, f]|`` (the paper's "similar columns in input features 546 and 678"); the
    column cosine restricts both matrices to the union of the two tokens' ``top_k`` columns.
    """
    x = x.float()
    t, f = x.shape
    top_k = min(top_k, f)
    cos_pk = _cosine_matrix(pk)
    flat = cos_pk * _cosine_matrix(x)
    top = x.abs().topk(top_k, dim=-1).indices  # (T, top_k)
    in_top = torch.zeros(t, f, dtype=torch.bool, device=x.device)
    in_top.scatter_(1, top, True)
    column = torch.empty(t, t, device=x.device)
    norm_eps = torch.finfo(torch.float32).tiny
    for i in range(t):
        cols = in_top | in_top[i]  # (T, F): union of token i's and token j's top columns
        xi = x[i].expand(t, f) * cols
        xj = x * cols
        cos_x = (xi * xj).sum(-1) / (xi.norm(dim=-1) * xj.norm(dim=-1)).clamp_min(norm_eps)
        column[i] = cos_pk[i] * cos_x
    counts = in_top.sum(0)
    order = counts.argsort(descending=True)[:top_k]
    shared = [(int(c), int(counts[c])) for c in order if counts[c] > 1]
    return Rank1Similarity(flat, column, top, shared)


# ----------------------------------------------------------------------------- the observer


@dataclass
class _HeadStats:
    rows: int = 0
    repeated_max_rows: int = 0
    sink_tied_rows: int = 0
    p_ones: int = 0
    max_logit: float = float("-inf")
    min_gap: float = float("inf")
    tied_rows: list = field(default_factory=list)  # capped list of {"text", "row", "keys", ...}


def _layer_index(module: torch.nn.Module, fallback: dict[int, int]) -> int:
    idx = getattr(module, "layer_idx", None)
    if idx is None:
        idx = fallback.setdefault(id(module), len(fallback))
    return int(idx)


def attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The attention modules of a transformers model (class name ``*Attention`` with a layer index)."""
    return [
        m for m in model.modules()
        if type(m).__name__.endswith("Attention") and hasattr(m, "layer_idx")
    ]


class AttentionProbe:
    """Observer that summarises every layer's attention while the forward runs.

    Args:
        layers: layer indices to summarise (None = all).
        heads: query heads to summarise (None = all).
        chosen: (layer, head) pairs whose full tensors are kept (scores, P K, X, rank-1 matrices).
        max_listed_rows: tied rows listed per head in the summary (the counts are always exact).
        max_listed_keys: tied keys listed per row (``n_keys`` has their number).
        rank1_tokens: how many tokens' rank-1 matrices are kept per chosen head.
        similarity_tokens: token-to-token similarities over the first this many tokens.
        top_columns: largest columns per rank-1 matrix used by the column similarity.
    """

    def __init__(
        self,
        *,
        layers: list[int] | None = None,
        heads: list[int] | None = None,
        chosen: list[tuple[int, int]] = (),
        max_listed_rows: int = 32,
        max_listed_keys: int = 16,
        rank1_tokens: int = 16,
        similarity_tokens: int = 512,
        top_columns: int = 8,
    ):
        self.layers = None if layers is None else set(layers)
        self.heads = None if heads is None else list(heads)
        self.chosen = {(int(l), int(h)) for l, h in chosen}
        self.max_listed_rows = max_listed_rows
        self.max_listed_keys = max_listed_keys
        self.rank1_tokens = rank1_tokens
        self.similarity_tokens = similarity_tokens
        self.top_columns = top_columns
        self.text_index = 0
        self.stats: dict[int, dict[int, _HeadStats]] = {}
        self.tensors: dict[str, torch.Tensor] = {}
        self.rank1: dict[tuple[int, int], dict] = {}
        self.kept: set[tuple[int, int]] = set()  # chosen heads whose tensors were captured
        self.dtype: torch.dtype | None = None
        self._x: dict[int, torch.Tensor] = {}
        self._fallback_idx: dict[int, int] = {}

    # -- capture
    @contextmanager
    def attach(self, model: torch.nn.Module) -> Iterator["AttentionProbe"]:
        """Observe ``model``'s stable_flash attention (and its inputs X) inside the block."""
        from hf_stable_attn.hooks import observe_attention

        with ExitStack() as stack:
            for module in attention_modules(model):
                handle = module.register_forward_pre_hook(self._capture_x, with_kwargs=True)
                stack.callback(handle.remove)
            stack.enter_context(observe_attention(self))
            yield self

    def _capture_x(self, module, args, kwargs):
        layer = _layer_index(module, self._fallback_idx)
        if any(l == layer for l, _ in self.chosen) and self.text_index == 0:
            x = kwargs.get("hidden_states", args[0] if args else None)
            self._x[layer] = x.detach()

    @torch.no_grad()
    def __call__(self, module, query, key, value, attention_mask, **kwargs):
        layer = _layer_index(module, self._fallback_idx)
        if self.layers is not None and layer not in self.layers:
            return
        self.dtype = query.dtype
        b, hq, sq, _ = query.shape
        hk, sk = key.shape[1], key.shape[2]
        heads = list(range(hq)) if self.heads is None else [h for h in self.heads if h < hq]
        kv = torch.tensor([h // (hq // hk) for h in heads], device=query.device)
        causal = kwargs.get("is_causal", getattr(module, "is_causal", True))
        keep = visible_keys(
            sq, sk, causal=causal, sliding_window=kwargs.get("sliding_window"), device=query.device
        )[None, None]  # (1, 1, Sq, Sk)
        row_valid = torch.ones(b, sq, dtype=torch.bool, device=query.device)
        sink = torch.zeros(b, sq, dtype=torch.long, device=query.device)  # sink key of each row
        starts = segment_starts(kwargs, sq, sk)
        if starts is not None:  # packed sequences: a row sees its own sequence only
            keep = keep & (starts[:, None, :, None] == starts[:, None, None, :])
            sink = starts.expand(b, sk)
        if attention_mask is not None:  # (B, Sk) padding mask, 1 = real token
            pad_keep = attention_mask.bool()
            keep = keep & pad_keep[:, None, None, :]
            row_valid = pad_keep[:, sk - sq:]
            sink = torch.maximum(sink, pad_keep.long().argmax(-1, keepdim=True))  # left padding
        q_sel = query[:, heads]  # (B, H, Sq, D)
        k_sel = key.index_select(1, kv)  # (B, H, Sk, D)
        per_layer = self.stats.setdefault(layer, {})
        chunk = max(1, _CHUNK_ELEMENTS // max(1, b * len(heads) * sk))
        chosen_rows: dict[int, list[torch.Tensor]] = {}
        for r0 in range(0, sq, chunk):
            r1 = min(sq, r0 + chunk)
            s = attention_scores(
                q_sel[:, :, r0:r1], k_sel, scaling=kwargs.get("scaling") or query.shape[-1] ** -0.5,
                softcap=kwargs.get("softcap"), keep=keep[..., r0:r1, :],
            )  # (B, H, r, Sk)
            ties = row_ties(s, query.dtype)
            valid = row_valid[:, None, r0:r1] & (ties.m1 > float("-inf"))  # (B, H, r)
            self._accumulate(per_layer, heads, s, ties, valid, sink[:, r0:r1], r0)
            for i, h in enumerate(heads):
                if (layer, h) in self.chosen and self.text_index == 0:
                    chosen_rows.setdefault(h, []).append(s[0, i])
        for i, h in enumerate(heads):
            if h in chosen_rows:
                self._keep_chosen(layer, h, torch.cat(chosen_rows[h]), k_sel[0, i])

    def _accumulate(self, per_layer, heads, s, ties: RowTies, valid, sink, r0):
        tied = ties.tied & valid
        sink_tied = ties.tied_keys.gather(-1, sink[:, None, :, None].expand(*tied.shape, 1))[..., 0]
        neg_inf = torch.tensor(float("-inf"), device=s.device)
        row_max = torch.where(valid, ties.m1, neg_inf).amax(dim=(0, 2))  # (H,)
        gaps = torch.where(valid, ties.gap, torch.tensor(float("inf"), device=s.device))
        counts = torch.stack([
            valid.sum(dim=(0, 2)), tied.sum(dim=(0, 2)), (sink_tied & tied).sum(dim=(0, 2)),
            torch.where(valid, ties.ones, 0).sum(dim=(0, 2)),
        ]).tolist()
        min_gaps = gaps.amin(dim=(0, 2)).tolist()
        row_max = row_max.tolist()
        for i, h in enumerate(heads):
            st = per_layer.setdefault(h, _HeadStats())
            st.rows += counts[0][i]
            st.repeated_max_rows += counts[1][i]
            st.sink_tied_rows += counts[2][i]
            st.p_ones += counts[3][i]
            st.max_logit = max(st.max_logit, row_max[i])
            st.min_gap = min(st.min_gap, min_gaps[i])
            room = self.max_listed_rows - len(st.tied_rows)
            if counts[1][i] and room > 0:
                for bi, ri in tied[:, i].nonzero().tolist()[:room]:
                    keys = ties.tied_keys[bi, i, ri].nonzero()[:, 0]
                    st.tied_rows.append({
                        "text": self.text_index, "batch": bi, "row": r0 + ri,
                        "keys": keys[: self.max_listed_keys].tolist(), "n_keys": len(keys),
                        "sink": bool(sink_tied[bi, i, ri]), "max": float(ties.m1[bi, i, ri]),
                        "gap": float(ties.gap[bi, i, ri]),
                    })

    def _keep_chosen(self, layer: int, head: int, s0: torch.Tensor, k0: torch.Tensor):
        """Keep batch element 0 of a chosen head: s0 (Sq, Sk) scores, k0 (Sk, D) its keys."""
        p = torch.softmax(s0, dim=-1).nan_to_num(0.0)  # fully hidden rows -> 0
        pk = p @ k0.float()  # (Sq, D)
        name = f"layer{layer}.head{head}"
        self.kept.add((layer, head))
        self.tensors[f"{name}.scores"] = s0.contiguous()
        self.tensors[f"{name}.pk"] = pk.contiguous()
        x = self._x.get(layer)
        if x is None:
            return
        x0 = x[0, -s0.shape[0]:].float()  # (Sq, F): rows of the queries
        t = min(self.similarity_tokens, pk.shape[0])
        sim = rank1_similarity(pk[:t], x0[:t], self.top_columns)
        n = min(self.rank1_tokens, pk.shape[0])
        self.tensors[f"{name}.x"] = x0.contiguous()
        self.tensors[f"{name}.rank1"] = rank1_matrices(pk[:n], x0[:n]).contiguous()
        self.tensors[f"{name}.flat_cosine"] = sim.flat_cosine.contiguous()
        self.tensors[f"{name}.column_cosine"] = sim.column_cosine.contiguous()
        self.tensors[f"{name}.top_columns"] = sim.top_columns.contiguous()
        self.rank1[(layer, head)] = _rank1_summary(sim)

    # -- results
    def summary(self) -> dict:
        """``{"dtype", "tie_window", "layers": [{"layer", "heads": [{"head", "rows", ...}]}]}``."""
        window = tie_window(self.dtype) if self.dtype is not None else None
        layers = []
        for layer in sorted(self.stats):
            heads = []
            for h, st in sorted(self.stats[layer].items()):
                entry = {
                    "head": h,
                    "rows": st.rows,
                    "repeated_max_rows": st.repeated_max_rows,
                    "repeated_max_fraction": st.repeated_max_rows / max(1, st.rows),
                    "sink_tied_rows": st.sink_tied_rows,
                    "p_ones": st.p_ones,
                    "max_logit": st.max_logit,
                    "min_gap": st.min_gap,
                    "tied_rows": st.tied_rows,
                }
                if (layer, h) in self.rank1:
                    entry["rank1"] = self.rank1[(layer, h)]
                heads.append(entry)
            layers.append({"layer": layer, "heads": heads})
        return {"dtype": str(self.dtype).replace("torch.", ""), "tie_window": window, "layers": layers}


def _rank1_summary(sim: Rank1Similarity) -> dict:
    """Scalars of a ``Rank1Similarity`` for summary.json (off-diagonal token pairs)."""
    t = sim.flat_cosine.shape[0]
    if t < 2:
        return {"tokens": t}
    off = ~torch.eye(t, dtype=torch.bool, device=sim.flat_cosine.device)
    flat = sim.flat_cosine.masked_fill(~off, float("-inf"))
    best = int(flat.argmax())
    return {
        "tokens": t,
        "mean_flat_cosine": float(sim.flat_cosine[off].mean()),
        "mean_column_cosine": float(sim.column_cosine[off].mean()),
        "most_similar_pair": [best // t, best % t, float(flat.view(-1)[best])],
        "shared_columns": [list(c) for c in sim.shared_columns],
    }


# ----------------------------------------------------------------------------- running it


@dataclass
class ProbeResult:
    summary: dict
    tensors: dict[str, torch.Tensor]
    tokens: list[str]  # tokens of text 0 (figure labels)


def run_probe(
    model: torch.nn.Module,
    input_ids: list[torch.Tensor],
    *,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
    chosen: list[tuple[int, int]] | None = None,
    auto_chosen: int = 2,
    tokens: list[str] | None = None,
    **probe_kwargs,
) -> ProbeResult:
    """Run ``model`` (attn_implementation="stable_flash") on each (1, S) tensor of ``input_ids``.

    Counts are summed over the texts; the full tensors of the chosen heads come from text 0.
    Without ``chosen``: every (layer, head) of ``layers x heads`` when both are given and there
    are at most 16, else the ``auto_chosen`` heads with the most repeated-max rows (text 0 is then
    run a second time to capture them).
    """
    if chosen is None and layers is not None and heads is not None and len(layers) * len(heads) <= 16:
        chosen = [(l, h) for l in layers for h in heads]
    probe = AttentionProbe(layers=layers, heads=heads, chosen=chosen or [], **probe_kwargs)
    _forward_all(model, input_ids, probe)
    summary = probe.summary()
    if chosen is None and auto_chosen > 0:
        ranked = sorted(
            ((h["repeated_max_rows"], h["max_logit"], l["layer"], h["head"])
             for l in summary["layers"] for h in l["heads"]), reverse=True,
        )
        again = AttentionProbe(layers=layers, heads=heads,
                               chosen=[(l, h) for _, _, l, h in ranked[:auto_chosen]], **probe_kwargs)
        _forward_all(model, input_ids[:1], again)
        probe.tensors, probe.rank1, probe.kept = again.tensors, again.rank1, again.kept
        summary = probe.summary()
    summary["texts"] = len(input_ids)
    summary["chosen"] = sorted(list(c) for c in probe.kept)
    return ProbeResult(summary, probe.tensors, tokens or [])


@torch.no_grad()
def _forward_all(model: torch.nn.Module, input_ids: list[torch.Tensor], probe: AttentionProbe):
    device = next(model.parameters()).device
    with probe.attach(model):
        for i, ids in enumerate(input_ids):
            probe.text_index = i
            model(input_ids=ids.to(device), use_cache=False)
            probe._x.clear()


def write_outputs(result: ProbeResult, out_dir: str | Path, *, figures: bool = True) -> list[Path]:
    """summary.json, summary.txt, tensors.safetensors and PNG figures under ``out_dir``."""
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "summary.json", out / "summary.txt"]
    written[0].write_text(json.dumps(result.summary, indent=1, allow_nan=True))
    written[1].write_text(text_summary(result.summary) + "\n")
    if result.tensors:
        save_file({k: v.detach().cpu().contiguous() for k, v in result.tensors.items()},
                  str(out / "tensors.safetensors"))
        written.append(out / "tensors.safetensors")
    if figures:
        written += _figures(result, out)
    return written


def _figures(result: ProbeResult, out: Path) -> list[Path]:
    from hf_stable_attn import probe_plots

    paths = [probe_plots.plot_overview(result.summary, out / "overview.png")]
    heads = {(l["layer"], h["head"]): h for l in result.summary["layers"] for h in l["heads"]}
    for layer, head in result.summary["chosen"]:
        name = f"layer{layer}.head{head}"
        entry = heads[(layer, head)]
        title = f"layer {layer}, head {head}"
        paths.append(probe_plots.plot_score_rows(
            result.tensors[f"{name}.scores"], entry["tied_rows"], out / f"scores_{name}.png",
            title=title, tokens=result.tokens))
        if "rank1" in entry and entry["rank1"]["tokens"] >= 2:
            paths.append(probe_plots.plot_rank1(
                result.tensors[f"{name}.pk"], result.tensors[f"{name}.x"], entry["rank1"],
                out / f"rank1_{name}.png", title=title, tokens=result.tokens))
    return paths


def text_summary(summary: dict, max_lines: int = 20) -> str:
    """One screen: totals, the layers with the most repeated maxima, the chosen heads."""
    heads = [(l["layer"], h) for l in summary["layers"] for h in l["heads"]]
    rows = sum(h["rows"] for _, h in heads)
    tied = sum(h["repeated_max_rows"] for _, h in heads)
    sink = sum(h["sink_tied_rows"] for _, h in heads)
    lines = [
        f"probe: {summary.get('texts', 1)} text(s), {len(summary['layers'])} layer(s), "
        f"dtype {summary['dtype']}, tie window {summary['tie_window']:.3g}",
        f"rows with a repeated maximum: {tied} of {rows} ({tied / max(1, rows):.2%}); "
        f"with the sink among the tied keys: {sink}",
        "layer  tied rows  rows    worst heads (head:tied rows)  max logit",
    ]
    for layer in summary["layers"][:max_lines]:
        hs = layer["heads"]
        worst = sorted(hs, key=lambda h: -h["repeated_max_rows"])[:4]
        worst = " ".join(f"{h['head']}:{h['repeated_max_rows']}" for h in worst if h["repeated_max_rows"])
        lines.append(
            f"{layer['layer']:5d}  {sum(h['repeated_max_rows'] for h in hs):9d}  "
            f"{sum(h['rows'] for h in hs):6d}  {worst:28s}  {max(h['max_logit'] for h in hs):9.3g}"
        )
    if len(summary["layers"]) > max_lines:
        lines.append(f"... {len(summary['layers']) - max_lines} more layers in summary.json")
    for layer, head in summary.get("chosen", []):
        h = next(h for l in summary["layers"] if l["layer"] == layer for h in l["heads"] if h["head"] == head)
        r = h.get("rank1")
        if r and r["tokens"] >= 2:
            a, b, c = r["most_similar_pair"]
            lines.append(
                f"layer {layer} head {head}: rank-1 (PK)[T]^T X[T] mean cosine {r['mean_flat_cosine']:.3f} "
                f"(largest columns {r['mean_column_cosine']:.3f}), most similar tokens {a},{b} ({c:.3f}), "
                f"shared columns {[c for c, _ in r['shared_columns'][:4]]}"
            )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- command line


def _int_list(text: str) -> list[int]:
    """'0,3,5-7' -> [0, 3, 5, 6, 7]."""
    out = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def _pairs(text: str) -> list[tuple[int, int]]:
    """'1:13,2:0' -> [(1, 13), (2, 0)]."""
    return [tuple(int(v) for v in p.split(":")) for p in filter(None, text.split(","))]


def add_subparser(subparsers) -> argparse.ArgumentParser:
    """Register ``hf-stable-attn probe``."""
    p = subparsers.add_parser(
        "probe",
        help="find repeated row maxima and similar rank-1 (PK)^T X matrices (paper, Appendix D)",
        description="Run a causal LM through stable_flash attention and summarise, per layer and "
        "head, the rows whose maximum repeats in the dtype's rounding window, and for chosen heads "
        "the rank-1 matrices (PK)[T]^T X[T]. Writes summary.json, summary.txt, "
        "tensors.safetensors and PNG figures to --out.",
    )
    p.add_argument("--model", required=True, help="local path or hub id of a causal LM")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="one input text")
    src.add_argument("--text-file", help="a file of texts, one per line")
    p.add_argument("--layers", type=_int_list, default=None, help="e.g. '0,1,4-6' (default: all)")
    p.add_argument("--heads", type=_int_list, default=None, help="query heads (default: all)")
    p.add_argument("--chosen", type=_pairs, default=None,
                   help="layer:head pairs to keep full tensors for, e.g. '1:13' (default: "
                   "layers x heads when at most 16, else the heads with the most repeated maxima)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--device", default=None, help="cuda, cpu, ... (default: cuda if available)")
    p.add_argument("--device-map", default=None, help="e.g. 'auto' for models larger than one GPU")
    p.add_argument("--max-tokens", type=int, default=4096, help="truncate each text")
    p.add_argument("--rank1-tokens", type=int, default=16, help="rank-1 matrices kept per chosen head")
    p.add_argument("--no-figures", action="store_true")
    p.set_defaults(func=_main)
    return p


def _main(args: argparse.Namespace) -> int:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import hf_stable_attn  # noqa: F401  (registers attn_implementation="stable_flash")

    dtype = getattr(torch, args.dtype)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(
        args.model, dtype=dtype, attn_implementation="stable_flash",
        device_map=args.device_map or {"": device},
    ).eval()
    texts = [args.text] if args.text is not None else [
        line.rstrip("\n") for line in Path(args.text_file).read_text().splitlines() if line.strip()
    ]
    ids = [tok(t, return_tensors="pt").input_ids[:, : args.max_tokens] for t in texts]
    tokens = tok.convert_ids_to_tokens(ids[0][0].tolist())
    result = run_probe(model, ids, layers=args.layers, heads=args.heads, chosen=args.chosen,
                       tokens=tokens, rank1_tokens=args.rank1_tokens)
    write_outputs(result, args.out, figures=not args.no_figures)
    print(text_summary(result.summary))
    print(f"wrote {args.out}/summary.json, summary.txt, tensors.safetensors and figures")
    return 0
