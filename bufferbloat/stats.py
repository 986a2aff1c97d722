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


def loss_figures(lost):
    """{sent, received, loss_pct, loss_up_pct, loss_down_pct} from the ``lost`` values
    of every probe sent ('' answered, 'up', 'down', 'unknown').

    loss_up_pct: requests lost / probes sent; loss_down_pct: replies lost / requests
    known to have reached the server (sent - lost up - lost with no direction known);
    loss_pct: every probe not answered / probes sent. None where the count is 0."""
    lost = list(lost)
    sent = len(lost)
    up = sum(1 for x in lost if x == "up")
    down = sum(1 for x in lost if x == "down")
    unknown = sum(1 for x in lost if x not in ("", "up", "down"))
    reached = sent - up - unknown
    pct = lambda n, d: 100.0 * n / d if d else None  # noqa: E731
    return {"sent": sent, "received": sent - up - down - unknown,
            "loss_pct": pct(up + down + unknown, sent), "loss_up_pct": pct(up, sent),
            "loss_down_pct": pct(down, reached)}
