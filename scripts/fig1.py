"""Evaluate the four placements of the paper's Fig. 1 narrative with the cost model.

    python scripts/fig1.py

Both jobs start at t = 0 in every strategy (they fit side by side), so each job's JCT is its
execution time E_j (Eq. 2-3) and the cost is Eq. (4). The paper's figures are printed beside
ours; the constants are not tuned to match them (docs/cost_model.md explains the gap). The
last column says which placements GPU memory forbids (geo_gym/memory.py): every one of them,
since Q needs at least 27 A6000s and P 6, so the example exists only under the paper's literal
start rule ("any"), as `paper-fig1` is built.
"""

from __future__ import annotations

import pandas as pd

from baselines.paper import fig1

if __name__ == "__main__":
    with pd.option_context("display.width", 200, "display.max_colwidth", 120):
        print(fig1().round(3).to_string(index=False))
