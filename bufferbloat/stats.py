"""Small statistics shared by the traffic tools (standard library only: the UDP stream's
sender and receiver import it in their own light processes)."""

import math


def percentile(sorted_vals, p):
    """Percentile by linear interpolation between closest ranks (numpy's default) of an
    already sorted list; None for an empty one."""
    if not sorted_vals:
        return None
    k = (len(sorted_vals) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)
