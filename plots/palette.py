"""One palette for every figure: the same qdisc or CCA has the same colour everywhere.

Qdisc colours are each kind's own (its module in bufferbloat/net/qdiscs/), keyed by the
registry's kind names and by the kinds ``tc`` reports (``pfifo``, ``bfifo`` map to
fifo). CCA colours by the kernel's names. Flows of one run get colours from
:data:`FLOW_CYCLE` in the order they are listed, so "flow 1" is the same colour in the
cwnd, throughput and operating-point figures of a run.
"""

from bufferbloat.net.qdiscs import BY_TC_KIND, KINDS

QDISC_COLORS = {name: kind.color for name, kind in KINDS.items()}
#: tc's kind names for the registry's kinds.
QDISC_ALIASES = {tc: kind.name for tc, kind in BY_TC_KIND.items() if tc != kind.name}

CCA_COLORS = {
    "cubic": "#ff7f0e",
    "reno": "#8c564b",
    "bbr": "#17becf",
    "vegas": "#bcbd22",
    "dctcp": "#e377c2",
    "htcp": "#aec7e8",
}

#: Per-flow colours (matplotlib's tab10 without grey, which FIFO owns).
FLOW_CYCLE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
              "#e377c2", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31",
              "#843c39", "#7b4173", "#3182bd", "#e6550d")

#: Colours of the reference lines drawn next to measurements.
THEORY_COLOR = "#000000"
TARGET_COLOR = "#d62728"
LINK_COLOR = "#444444"
FALLBACK = "#333333"


def qdisc_kind(kind):
    """The registry name of a qdisc kind (``pfifo`` -> ``fifo``)."""
    kind = str(kind or "").lower()
    return QDISC_ALIASES.get(kind, kind)


def qdisc_color(kind):
    """The colour of qdisc ``kind`` (registry or tc name); grey-black when unknown."""
    return QDISC_COLORS.get(qdisc_kind(kind), FALLBACK)


def cca_color(cca):
    """The colour of congestion control ``cca``."""
    return CCA_COLORS.get(str(cca or "").lower(), FALLBACK)


def flow_color(index):
    """The colour of the ``index``-th flow (0-based) of a run."""
    return FLOW_CYCLE[int(index) % len(FLOW_CYCLE)]

