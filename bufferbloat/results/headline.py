"""Headline metrics: the few numbers a grader reads first about a run, with theory.

A scenario declares its headline as data (``Scenario.headline``): a tuple of entries

* ``metric``: ``"SCOPE:METRIC"`` (the mean over every name of that scope, e.g.
  ``"ping:rtt_mean_ms"``) or ``"SCOPE:NAME:METRIC"`` (one name, e.g.
  ``"network:all:goodput_up_mbit"``, or names matching a pattern, ``"flow:rrul-down-*:
  throughput_mbit"``), a row of the run's metrics (bufferbloat/results/metrics.py);
* ``agg`` (optional): ``"sum"`` adds the matching rows up instead of averaging them;
* ``label``: what it is, in a few words;
* ``spread`` (optional): a second metric printed as ``± value`` (e.g. the fetch times'
  standard deviation);
* ``theory`` (optional): the name of a closed-form expectation (:data:`THEORIES`),
  computed from the run's own configuration;
* ``expect``: the study's expected shape, in words.

:func:`values` evaluates them on a run (the end of ``run``, ``compare``, the report);
:func:`theory_value` evaluates a theory alone (``describe`` on a scenario's default
setting). Needs no Mininet and no matplotlib (numpy only to compute a run's metrics).
"""

import fnmatch
import math
import textwrap

from bufferbloat.results import theory
from bufferbloat.results.metrics import run_rows

SCOPES = ("flow", "link", "network", "web", "ping", "udp")
FIELDS = ("metric", "label", "spread", "theory", "expect", "agg")
AGGREGATES = ("mean", "sum")


def _knob(run, name, default=None):
    value = (run.record.get("knobs") or {}).get(name)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else default


def _rate(run):
    return run.bottleneck_mbit


def _target_plus_base(run, _rows):
    return theory.targets_plus_base_ms(run)


def _ceiling(run, _rows):
    rate = _rate(run)
    return theory.tcp_goodput_ceiling(rate) if rate else None


def _tcp_flows(run, rows):
    n = select(rows, "network:all:flows")
    return int(n) if n else _knob(run, "flows", 1)


def _fair_share(run, rows):
    ceiling = _ceiling(run, rows)
    return ceiling / _tcp_flows(run, rows) if ceiling else None


def _mathis(run, rows):
    """Mathis et al.: each flow gets MSS / RTT x sqrt(3/2) / sqrt(p) with p the path's
    loss; RTT is the flows' measured mean srtt (the base RTT when not sampled); the
    flows' sum, never more than the link carries."""
    loss = run.params.get("loss_pct")
    if not isinstance(loss, (int, float)) or loss <= 0:
        return None
    rtt = select(rows, "flow:srtt_mean_ms") or theory.base_rtt_ms(run)
    mss = _knob(run, "mss_bytes", theory.TCP_PAYLOAD_BYTES)
    if not rtt:
        return None
    per_flow = mss * 8 / (rtt / 1e3) * math.sqrt(1.5) / math.sqrt(loss / 100) / 1e6
    total = per_flow * _tcp_flows(run, rows)
    ceiling = _ceiling(run, rows)
    return min(total, ceiling) if ceiling else total


def _udp_rate(run, _rows):
    total = 0.0
    for spec in run.record.get("traffic") or []:
        if isinstance(spec, dict) and spec.get("kind") == "udp":
            kbit = spec.get("rate_kbit")
            if isinstance(kbit, (int, float)):
                total += kbit / 1e3
    return total or None


#: name -> (function(run, metric rows) -> value or None, unit, what it is)
THEORIES = {
    "full_queue_rtt_ms": (lambda run, _rows: theory.run_full_queue_rtt_ms(run), "ms",
                          "RTT of a probe behind a full FIFO: base RTT + the buffer's drain "
                          "time (less the probes' own share of a packet buffer)"),
    "fifo_drain_ms": (lambda run, _rows: theory.fifo_drain_ms(run), "ms",
                      "drain time of a full FIFO buffer at the link rate"),
    "base_rtt_ms": (lambda run, _rows: theory.base_rtt_ms(run), "ms",
                    "propagation RTT of the path (no queue)"),
    "target_ms": (lambda run, _rows: theory.target_ms(run), "ms",
                  "the AQM's queueing-delay target"),
    "target_plus_base_ms": (_target_plus_base, "ms", "the targets of the AQM queues a round "
                            "trip crosses (both ways under a two-way load) + the base RTT"),
    "goodput_ceiling_mbit": (_ceiling, "Mbit/s",
                             "best TCP goodput through the link (1448 of every 1514 bytes)"),
    "fair_share_mbit": (_fair_share, "Mbit/s", "the goodput ceiling / the number of flows"),
    "mathis_mbit": (_mathis, "Mbit/s",
                    "Mathis et al.: MSS/RTT x sqrt(3/2)/sqrt(loss) per flow, at most the "
                    "goodput ceiling"),
    "udp_rate_mbit": (_udp_rate, "Mbit/s", "the UDP streams' configured rate"),
    "rtt_ms": (lambda run, rows: theory.run_full_queue_rtt_ms(run)
               if theory.fifo_buffer(run) else _target_plus_base(run, rows), "ms",
               "behind a FIFO the full-queue RTT, behind an AQM the targets it crosses + the "
               "base RTT"),
    "queue_delay_ms": (lambda run, _rows: theory.fifo_drain_ms(run)
                       if theory.fifo_buffer(run) else theory.target_ms(run), "ms",
                       "a FIFO's full-buffer drain time, or the AQM's target"),
    "one": (lambda run, _rows: 1.0, "", "1 (a fully used link, equal shares)"),
}


def check(entries, owner):
    """Validate a scenario's headline declaration (ValueError naming ``owner``)."""
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError(f"{owner}: headline entries are dicts, got {entry!r}")
        unknown = set(entry) - set(FIELDS)
        if unknown:
            raise ValueError(f"{owner}: headline fields {sorted(unknown)} unknown "
                             f"(valid: {', '.join(FIELDS)})")
        for key in ("metric", "label", "expect"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise ValueError(f"{owner}: headline entry {entry!r} needs a {key}")
        for key in ("metric", "spread"):
            if key in entry:
                parse_selector(entry[key], owner)
        if entry.get("agg", "mean") not in AGGREGATES:
            raise ValueError(f"{owner}: agg {entry['agg']!r} unknown (valid: "
                             f"{', '.join(AGGREGATES)})")
        if "theory" in entry and entry["theory"] not in THEORIES:
            raise ValueError(f"{owner}: unknown theory {entry['theory']!r} (valid: "
                             f"{', '.join(THEORIES)})")


def parse_selector(text, owner="headline"):
    """``SCOPE:METRIC`` or ``SCOPE:NAME:METRIC`` -> (scope, name or None, metric)."""
    parts = text.split(":")
    if len(parts) == 2:
        scope, name, metric = parts[0], None, parts[1]
    elif len(parts) >= 3:
        # a link's name holds a colon itself (s0-eth2:pie)
        scope, name, metric = parts[0], ":".join(parts[1:-1]), parts[-1]
    else:
        raise ValueError(f"{owner}: metric {text!r}: expected SCOPE:METRIC or "
                         "SCOPE:NAME:METRIC")
    if scope not in SCOPES or not metric:
        raise ValueError(f"{owner}: metric {text!r}: scope must be one of "
                         f"{', '.join(SCOPES)}")
    return scope, name, metric


def select(rows, selector, agg="mean"):
    """The value of ``selector`` in metric ``rows`` (over the scope's names, or those
    matching the named pattern: their mean, or their sum with ``agg="sum"``), or
    None."""
    scope, name, metric = parse_selector(selector)
    vals = [float(r["value"]) for r in rows
            if r.get("scope") == scope and r.get("metric") == metric
            and (name is None or fnmatch.fnmatchcase(str(r.get("name")), name))
            and r.get("value") is not None and math.isfinite(float(r["value"]))]
    if not vals:
        return None
    return sum(vals) if agg == "sum" else sum(vals) / len(vals)


def evaluate(rows, entry, key="metric"):
    """The value of a headline ``entry``'s ``metric`` (or ``spread``) in ``rows``."""
    return select(rows, entry[key], entry.get("agg", "mean")) if entry.get(key) else None


def unit_of(rows, selector):
    """The unit the metric rows give ``selector``'s metric ('' when none)."""
    scope, _, metric = parse_selector(selector)
    for r in rows:
        if r.get("scope") == scope and r.get("metric") == metric:
            return r.get("unit") or ""
    return ""


def theory_value(name, run, rows=()):
    """(value or None, unit) of theory ``name`` for ``run``."""
    fn, unit, _ = THEORIES[name]
    try:
        value = fn(run, list(rows))
    except (TypeError, ValueError, ZeroDivisionError):
        value = None
    return value, unit


#: what a run whose scenario declares no headline shows
DEFAULT = (
    {"metric": "ping:rtt_mean_ms", "label": "ping RTT, mean", "theory": "base_rtt_ms",
     "expect": "the base RTT plus the queue's delay"},
    {"metric": "network:all:aggregate_throughput_mbit", "label": "goodput",
     "theory": "goodput_ceiling_mbit", "expect": "near the ceiling when the link is loaded"},
    {"metric": "link:qdelay_mean_ms", "label": "queueing delay, mean",
     "expect": "what the bottleneck's queue adds"},
)


def declared(run, catalogue=None):
    """The headline declaration for ``run``: its recorded scenario's, else that of its
    scenario name in ``catalogue`` ({name: Scenario}, given by the caller: the commands
    and the figures hold the catalogue, this layer does not), else :data:`DEFAULT`."""
    scn = run.record.get("scenario")
    if isinstance(scn, dict) and scn.get("headline"):
        return tuple(scn["headline"])
    name = scn.get("name") if isinstance(scn, dict) else scn
    found = (catalogue or {}).get(name) if isinstance(name, str) else None
    return tuple(found.headline) if found is not None and found.headline else DEFAULT


def _other_qdisc(run):
    """(the scenario's qdisc, the run's) when a ``--set`` changed it (the study's
    expected shape is then not this run's), else None."""
    scn = run.record.get("scenario")
    declared_kind = ((scn.get("params") or {}).get("qdisc") if isinstance(scn, dict)
                     else None)
    kind = theory.qdisc_info(run)[0]
    if declared_kind and kind and declared_kind != kind:
        return declared_kind, kind
    return None


def values(run, rows=None, entries=None, catalogue=None):
    """The headline of ``run`` evaluated: one dict per entry with ``label``, ``metric``,
    ``value``, ``unit``, ``spread``, ``theory`` (name), ``theory_value``,
    ``theory_unit``, ``ratio`` (value / theory) and ``expect``. ``entries``: default
    :func:`declared` (with ``catalogue``)."""
    if rows is None:
        rows = run_rows(run)
    other = _other_qdisc(run)
    out = []
    for entry in (declared(run, catalogue) if entries is None else entries):
        value = evaluate(rows, entry)
        expect = entry["expect"] if not other else (
            f"(the study's, with {other[0]}; this run has {other[1]}) {entry['expect']}")
        item = {"label": entry["label"], "metric": entry["metric"], "value": value,
                "unit": unit_of(rows, entry["metric"]), "expect": expect,
                "spread": evaluate(rows, entry, "spread"),
                "theory": entry.get("theory"), "theory_value": None, "theory_unit": "",
                "ratio": None}
        if entry.get("theory"):
            item["theory_value"], item["theory_unit"] = theory_value(entry["theory"], run,
                                                                     rows)
            if value is not None and item["theory_value"]:
                item["ratio"] = value / item["theory_value"]
        out.append(item)
    return out


def fmt(value, unit=""):
    """A number for a terminal: 3 significant digits, the unit after it."""
    if value is None:
        return "n/a"
    text = f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return f"{text} {unit}".strip()


def lines(items):
    """Aligned terminal lines of :func:`values`' items: label, value (± spread), theory
    with the ratio, and the expected shape."""
    out = []
    width = max((len(i["label"]) for i in items), default=0)
    for i in items:
        value = fmt(i["value"], i["unit"])
        if i["spread"] is not None:
            value = f"{fmt(i['value'])} ± {fmt(i['spread'], i['unit'])}"
        text = f"  {i['label']:<{width}}  {value:>18}"
        if i["theory"]:
            text += f"   theory {fmt(i['theory_value'], i['theory_unit'])}"
            if i["ratio"] is not None:
                text += f" (x{i['ratio']:.2f})"
        out.append(text)
        out += textwrap.wrap(f"expected: {i['expect']}", 92,
                             initial_indent=" " * (width + 4),
                             subsequent_indent=" " * (width + 14), break_on_hyphens=False)
    return out
