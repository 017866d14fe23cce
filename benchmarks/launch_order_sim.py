"""How much a causal grid's launch order costs, in a model of the GPU's block dispatch (CPU only).

Model: the GPU runs ``slots`` programs at a time (SMs x programs per SM) and starts the next
program of the launch order on the first slot that frees; a program of query tile ``i`` (0-based)
costs ``(i + 1) * tile_cost + 1`` units (a causal mask: tile ``i`` sees ``i + 1`` key tiles of
cost ``tile_cost``, plus one unit of start-up). The makespan is compared with an even split of the
total work over the slots. Orders: ``grid`` (the tile fastest, then batch x head, as the grid
launches), and ``balanced`` (``kernels/_common.scheduled_tile``: groups of ``head_group`` columns,
in each the last tiles first). This is the simulation behind docs/kernel_notes.md v17a.

    python -m benchmarks.launch_order_sim --slots 264 --head-groups 8 16
"""

from __future__ import annotations

import argparse
import heapq


def grid_order(tiles: int, columns: int) -> list[int]:
    """Query tile of each program in the grid's own launch order."""
    return [t for _ in range(columns) for t in range(tiles)]


def balanced_order(tiles: int, columns: int, head_group: int) -> list[int]:
    """Query tile of each program in ``scheduled_tile``'s launch order."""
    order = []
    for first in range(0, columns, head_group):
        size = min(head_group, columns - first)
        for t in reversed(range(tiles)):
            order += [t] * size
    return order


def makespan_over_even_split(order: list[int], slots: int, tile_cost: float = 1.0) -> float:
    """Greedy dispatch of ``order`` over ``slots``: the makespan over the even split, minus 1."""
    costs = [(t + 1) * tile_cost + 1 for t in order]
    free = [0.0] * slots
    for cost in costs:
        heapq.heappush(free, heapq.heappop(free) + cost)
    return max(free) / (sum(costs) / slots) - 1


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, default=264, help="SMs x programs per SM")
    ap.add_argument("--head-groups", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--total-tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--block-m", type=int, default=128)
    ap.add_argument("--tile-cost", type=float, default=1.0, help="cost of one key tile")
    args = ap.parse_args(argv)
    print("S      D    grid   " + "  ".join(f"groups of {g}" for g in args.head_groups))
    for seqlen in (1024, 2048, 4096, 8192):
        for head_dim in (128, 64):
            tiles = seqlen // args.block_m
            columns = (args.total_tokens // seqlen) * (args.hidden // head_dim)
            orders = [grid_order(tiles, columns)]
            orders += [balanced_order(tiles, columns, g) for g in args.head_groups]
            over = [makespan_over_even_split(o, args.slots, args.tile_cost) for o in orders]
            print(f"{seqlen:<6} {head_dim:<4} " + "  ".join(f"{100 * x:+9.1f}%" for x in over))


if __name__ == "__main__":
    main()
