"""``bufferbloat describe SCENARIO``: everything about a scenario before running it.

The study it reproduces, the topology and traffic of its default setting, every key
``--set`` accepts (default, unit, allowed values: from the parameter declarations of
the topology, the qdiscs and the scenario's knobs), its variants, its sweep (full and
quick, with the number of runs), the figures it makes, the study's expected result
shape and its headline metrics with their theory at the default setting. All of it is
read from the scenario's data (``scenarios/*.py``); nothing is built and no Mininet,
numpy or matplotlib is needed.
"""

import math
import sys
import textwrap

from bufferbloat.core.params import format_param as _fmt
from bufferbloat.net.qdiscs import DEFAULT_KIND, KINDS
from bufferbloat.net.topology import TOPOLOGIES
from bufferbloat.results import headline
from bufferbloat.results.records import Run
from bufferbloat.run.scenario import KNOBS, study_path

#: unit of a parameter, from the suffix of its name
UNITS = (("_mbit", "Mbit/s"), ("_kbit", "kbit/s"), ("_ms", "ms"), ("_us", "us"),
         ("_pct", "%"), ("_bytes", "bytes"), ("_pkts", "packets"), ("_s", "s"))

#: what each figure of a run shows (plots.FIGURES holds how it is drawn)
RUN_FIGURES = {
    "cwnd": "cwnd of every flow over time",
    "rtt": "ping RTT over time, base and full-queue RTT, the AQM's target",
    "queue": "the bottleneck queue's length over time",
    "capacity": "a varying link's capacity against its delivered rate, and the queue's "
                "drain time",
    "qdelay": "queueing delay over time (backlog / rate and the AQM's own), target",
    "drops": "drops, early drops and ECN marks per second; PIE's probability",
    "throughput": "per-flow and aggregate throughput, link rate",
    "fairness": "per-flow mean throughput, Jain's index",
    "web": "web fetch times, failures marked",
    "udp": "UDP throughput, one-way delay and loss",
    "totals": "RRUL download, upload and latency totals over time",
    "ellipsis": "latency against throughput: mean and covariance ellipse",
    "ecdf": "eCDFs of RTT and throughput",
    "operating": "each flow's mean operating point (throughput against srtt)",
}


def unit_of(name):
    """The unit a parameter's name carries (``delay_ms`` -> ms), '' when none."""
    for suffix, unit in UNITS:
        if name.endswith(suffix):
            return unit
    return ""


class _Configured(Run):
    """The default setting of a scenario as a run record that was never run: the theory
    and headline functions read it through :class:`bufferbloat.results.records.Run`'s accessors,
    as they read a recorded run."""

    def __init__(self, topo, knobs, traffic):
        super().__init__("", {"params": dict(topo.params), "qdisc": topo.qdisc.to_dict(),
                              "base_rtt_ms": topo.base_rtt_ms(), "traffic": traffic,
                              "knobs": dict(knobs)})


def key_rows(scn):
    """(key, default, unit, allowed, what) for every key ``--set`` accepts, in the
    order: topology, qdisc (the scenario's qdisc first), knobs, variant."""
    params, qparams, knobs = scn.split()
    kind = params.get("qdisc", DEFAULT_KIND)
    rows = []
    for p in TOPOLOGIES[scn.topology].PARAMS:
        rows.append((p.name, params.get(p.name, p.default), unit_of(p.name), p.allowed(),
                     p.doc))
    own = {p.name for p in KINDS[kind].params}
    for p in KINDS[kind].params:
        value = qparams.get(p.name, p.default)
        rows.append((f"qdisc.{p.name}", value, unit_of(p.name), p.allowed(),
                     f"{kind}: {p.doc}"))
    others = {}
    for other, info in KINDS.items():
        for p in info.params:
            if p.name not in own:
                others.setdefault(p.name, (p, []))[1].append(other)
    for name, (p, kinds) in sorted(others.items()):
        rows.append((f"qdisc.{name}", p.default, unit_of(name), p.allowed(),
                     f"with --set qdisc={'|'.join(kinds)}: {p.doc}"))
    for name in scn.knobs:
        p = KNOBS[name]
        rows.append((name, knobs.get(name), unit_of(name), p.allowed(), p.doc))
    if scn.variants:
        rows.append(("variant", None, "", "one of " + ", ".join(scn.variants),
                     "a named set of the keys above (below: variants)"))
    return rows


def _topology_text(topo):
    p = topo.params
    bn = topo.bottleneck
    q = topo.qdisc
    senders = ", ".join(topo.senders)
    qtext = " ".join(f"{k}={_fmt(v)}" for k, v in q.params.items() if v is not None)
    reverse = p.get("reverse_mbit") or p["bottleneck_mbit"]
    lines = [f"{type(topo).__name__}: {senders} -- s0 -- {topo.receiver}; bottleneck "
             f"s0 -> {topo.receiver} at {_fmt(p['bottleneck_mbit'])} Mbit/s (reverse "
             f"{_fmt(reverse)}), host links {_fmt(p['host_mbit'])} Mbit/s",
             f"one-way delay {_fmt(bn.ab.delay_ms)} ms on the bottleneck; base RTT "
             + ", ".join(f"{h} {_fmt(topo.base_rtt_ms(h))} ms" for h in topo.senders[:5])
             + (" ..." if len(topo.senders) > 5 else ""),
             f"qdisc {q.kind} ({qtext}){', both ways' if p['aqm_both_ways'] else ''}"
             + (f"; reverse direction (the receiver's own queue) {p['reverse_qdisc']}"
                if p.get("reverse_qdisc") else "") + "; "
             f"CCA {', '.join(sorted(set(topo.ccas.values())))}; switch {p['switch']}"]
    if p["loss_pct"]:
        lines.append(f"loss {_fmt(p['loss_pct'])} % on {p['loss_link']} ({p['loss_dir']})")
    factor = (getattr(topo, "scaling", None) or {}).get("factor") or 1.0
    for key, where in (("link_trace", "bottleneck"), ("link_trace_up", "reverse")):
        lt = getattr(topo, key, None)
        if lt is None:
            continue
        s = lt.summary(factor)
        lines.append(f"{where} capacity varies ({s['source']} {lt.text}, sha256 "
                     f"{s['sha256'][:12]}): period {_fmt(s['period_s'])} s, mean "
                     f"{_fmt(s['mean_mbit'])} Mbit/s, {_fmt(s['min_mbit'])}-"
                     f"{_fmt(s['max_mbit'])}, {s['zero_windows']} windows of 0 (held at "
                     f"1 kbit/s); set every 10 ms on the HTB class"
                     + (f"; rates scaled x{factor:.3g}" if factor != 1.0 else ""))
    return lines


def _traffic_lines(traffic, duration_s, quick_s):
    out = []
    skip = {"kind", "name", "start", "stop"}
    for t in traffic:
        fields = ", ".join(f"{k}={_fmt(v)}" for k, v in t.items() if k not in skip)
        span = (f"{t['start'] * duration_s:g}-{t['stop'] * duration_s:g} s of "
                f"{duration_s:g} (quick: {t['start'] * quick_s:g}-{t['stop'] * quick_s:g} "
                f"of {quick_s:g})")
        out.append(f"{t['kind']} {t['name']}: {fields}; {span}")
    return out


def _sweep_line(vary, repeat):
    if not vary:
        return "none"
    points = math.prod(len(v) for v in vary.values())
    keys = "; ".join(f"{k} = {', '.join(_fmt(x) for x in v)}" for k, v in vary.items())
    return f"{keys}: {points} points x {repeat} repetition(s) = {points * repeat} runs"


def _wrap(text, indent, width=92, first=None):
    """``text`` wrapped at ``width``, each line after ``indent`` (the first after
    ``first`` when given)."""
    return textwrap.wrap(text, width, initial_indent=indent if first is None else first,
                         subsequent_indent=indent, break_on_hyphens=False)


def describe(scn, overrides=None):
    """The description of scenario ``scn`` (with ``overrides``, --set) as text lines."""
    from bufferbloat.scenarios._common import STUDIES
    topo, knobs, traffic = scn.build(overrides)
    out = [f"{scn.name}: {scn.description}"]
    family = STUDIES.get(scn.family)
    if family:
        out.append(f"study: family {scn.family}, {family}")
    if scn.study:
        out += _wrap(scn.study, "  ")
    doc = _module_doc(scn)
    if doc:
        out += _wrap(doc, "  ")
    out.append("topology:")
    out += ["  " + line for line in _topology_text(topo)]
    out.append("traffic (start/stop are fractions of the run):")
    out += ["  " + line for line in _traffic_lines(traffic, scn.duration_s,
                                                   scn.quick_duration_s)]
    quick_knobs = "".join(f", {k}={_fmt(v)}" for k, v in scn.quick.items())
    out.append(f"duration: {scn.duration_s:g} s, warm-up {scn.warmup_s:g} s left out of the "
               f"statistics; quick profile {scn.quick_duration_s:g} s{quick_knobs}; "
               f"repetitions {scn.repeat}")
    out.append("keys (--set KEY=VALUE; default is this scenario's):")
    rows = key_rows(scn)
    wk = max(len(r[0]) for r in rows)
    wd = max(len(_fmt(r[1])) for r in rows)
    wu = max(len(r[2]) for r in rows)
    for key, default, unit, allowed, what in rows:
        out.append(f"  {key:<{wk}}  {_fmt(default):<{wd}}  {unit:<{wu}}  {allowed}")
        out += _wrap(what, "  " + " " * (wk + wd + wu + 6))
    if scn.variants:
        out.append("variants (--set variant=NAME):")
        for name, over in scn.variants.items():
            out.append(f"  {name}: " + (", ".join(f"{k}={_fmt(v, 'unset')}"
                                                  for k, v in over.items())
                                        or "the parameters above (the default)"))
    out.append(f"sweep (bufferbloat sweep {scn.name}; run_all.sh):")
    out.append(f"  full:  {_sweep_line(scn.sweep_for(False), scn.repeat)}")
    out.append(f"  quick: {_sweep_line(scn.sweep_for(True), 1)} (run_all.sh --quick)")
    out.append("figures of each run (bufferbloat plot RUN_DIR -> RUN_DIR/figures/NAME.png):")
    for name in scn.figures:
        out.append(f"  {name}: {RUN_FIGURES.get(name, '')}")
    if scn.reproduce:
        out.append("the study's figures:")
        for item in scn.reproduce:
            out += _wrap(item["figure"], "    ", first="  - ")
            files = (study_path(scn.name, item["plot"]) if item.get("plot")
                     else item["files"])
            out.append(f"      {item['command']}  ->  {files}")
    out += _scaling_text(scn)
    if scn.expect:
        out.append("expected result:")
        out += _wrap(scn.expect, "  ")
    out.append("headline (printed at the end of a run; theory at the default setting):")
    cfg = _Configured(topo, knobs, traffic)
    for entry in scn.headline or headline.DEFAULT:
        text = f"  {entry['label']}: {entry['metric']}" + (
            " (summed)" if entry.get("agg") == "sum" else "")
        if entry.get("spread"):
            text += f" ± {entry['spread']}"
        if entry.get("theory"):
            value, unit = headline.theory_value(entry["theory"], cfg)
            text += (f"; theory {entry['theory']} = {headline.fmt(value, unit)}"
                     if value is not None else
                     f"; theory {entry['theory']} (none at the default setting)")
        out.append(text)
        out += _wrap(f"expected: {entry['expect']}", "      ")
    return out


def _scaling_text(scn):
    """How the TCG VM runs ``scn`` when its bottleneck is faster than the VM sustains
    (bufferbloat.net.scaling), and which of such a run's numbers hold at the study's
    rate (the evidence's path); [] when the VM runs it at the study's rate."""
    from bufferbloat.net import scaling  # noqa: PLC0415 - only for this section
    topo = scn.build(max_rate_mbit=scaling.per_direction_cap(scn))[0]
    if not topo.scaling:
        return []
    return (["in the TCG VM (rates above what it sustains are scaled; BUFFERBLOAT_MAX_MBIT "
             "sets the cap, 0 turns it off):"]
            + [line for text in scaling.evidence_lines(topo.scaling, scn.family)
               for line in _wrap(text.strip(), "    ", first="  ")])


def _module_doc(scn):
    """The first paragraph of the scenario module's docstring."""
    from bufferbloat import scenarios
    mod = sys.modules.get(f"{scenarios.__name__}.{scn.name}")
    doc = (mod.__doc__ or "") if mod else ""
    return " ".join(doc.strip().split("\n\n")[0].split())
