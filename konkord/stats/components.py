"""Connected components of a small undirected graph given as a dense adjacency matrix: which
models are linked through comparisons (one per model, so a few hundred at most).

scipy.sparse.csgraph does this too; importing it (and scipy's sparse arrays with it) cost the
report a tenth of a second for graphs of twenty nodes. Checked against it by test.

May import: numpy and the standard library.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["connected_components"]


def connected_components(adjacency: npt.ArrayLike) -> tuple[int, npt.NDArray[np.int64]]:
    """The number of connected components of the undirected graph whose edges are the nonzero
    entries of the square `adjacency` (either direction links), and each node's component,
    numbered in the order of their lowest nodes."""
    linked = np.asarray(adjacency) != 0
    linked = linked | linked.T
    n = linked.shape[0]
    labels = np.full(n, -1, dtype=np.int64)
    count = 0
    for start in range(n):
        if labels[start] >= 0:
            continue
        reached = np.zeros(n, dtype=bool)
        reached[start] = True
        frontier = reached.copy()
        while frontier.any():  # breadth first: every node one link from the frontier
            frontier = linked[frontier].any(axis=0) & ~reached
            reached |= frontier
        labels[reached] = count
        count += 1
    return count, labels
