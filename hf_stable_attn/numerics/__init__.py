"""The numerics lab: measure the bf16 rounding bias of attention implementations (issue 5).

Modules, one job each:
- ``bf16_addition``: the paper's Appendix B example and the 2-bit rounding table;
- ``inputs``: attention inputs with controlled score structure (sinks, ties, near-ties);
- ``exact``: the float64 side of every comparison;
- ``drift``: the metrics (drift score of delta errors, dQ along the rank-1 direction);
- ``implementations``: the implementations compared (SDPA backends, our kernel, reference path);
- ``lab``: the runner, its JSON and markdown output;
- ``plots``: PNG plots; ``train_experiment``: the short GPT-2 training experiment;
- ``cli``: ``hf-stable-attn bias``.
See docs/numerics.md for the method and the results.
"""
