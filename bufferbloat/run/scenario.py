"""Scenarios as data: topology, bottleneck, traffic, duration, sweeps, figures.

A scenario module in ``scenarios/`` defines ``SCENARIO = Scenario(...)``. Everything a run
needs is in that object:

* ``topology`` + ``params`` + ``qdisc_params``: the network (see :mod:`.topology`);
* ``traffic``: a tuple of traffic specs, each a dict with a ``kind`` and its fields
  (declared by the kind's class, :mod:`bufferbloat.traffic`). Start and stop times are *fractions of the run's duration*
  (``start``/``stop`` in 0..1), so that the quick profile, which shortens runs, keeps the
  shape of the experiment. A value ``"$name"`` refers to the scenario knob ``name``;
* ``knobs``: the scenario's own parameters (number of flows, fetch period...) with their
  defaults; ``--set name=value`` changes them like any topology parameter;
* ``duration_s`` / ``quick_duration_s``, ``quick``: overrides of the quick profile,
  ``warmup_s``: excluded from the statistics; ``repeat``: repetitions a study averages;
* ``sweep``: {key: values} that ``run_all.sh`` and ``bufferbloat sweep`` vary (cartesian);
  ``quick_sweep`` the smaller one of the quick profile (default: the same);
* ``variants``: named sets of overrides ("fifo", "pie", "pie10"...) chosen with the key
  ``variant``, so that a sweep can vary several parameters together;
* ``study`` (the study and part it reproduces), ``expect`` (the study's expected result
  shape, in words), ``headline`` (the metrics a grader reads first, with their theory
  and expected shape: :mod:`bufferbloat.results.headline`) and ``reproduce`` (the study's
  figures: ``{"figure": what, "command": the bufferbloat command, "plot": a study plot
  of the sweep (plots/study.py)}`` or ``"files"``: figures of a run): what ``bufferbloat
  describe`` prints, the report shows first and the README lists.

Overrides (``--set``) are validated here, before any network exists: unknown keys are
rejected with the list of valid ones.
"""

from dataclasses import dataclass, field

from bufferbloat.core.errors import UsageError
from bufferbloat.core.params import MIN_RATE_MBIT, Param, check_params
from bufferbloat.net.qdiscs import KINDS
from bufferbloat.net.scaling import scale_to_rate, scale_traffic_rates
from bufferbloat.net.topology import TOPOLOGIES, make_topo
from bufferbloat.results import headline
from bufferbloat.traffic.base import HOST_FIELDS
from bufferbloat.traffic.kinds import part_class

#: Knobs a scenario may declare: their types and ranges.
KNOBS = {k.name: k for k in (
    Param("flows", int, 1, "parallel long-lived TCP flows of the main sender", lo=1, hi=200),
    Param("web_every_s", float, 2.0, "period of the web fetches, s", lo=0.1, hi=3600),
    Param("web_size_bytes", int, 100_000, "size of the fetched index.html, bytes",
          lo=1, hi=1 << 30),
    Param("web_server", str, "h2", "host serving the web page: h2 (h1 downloads it, as "
          "EXPERIMENTS.md has it: the page comes back on the reverse path and the queue "
          "holds its SYN, request and ACKs) or h1 (h2 downloads it, as in the CS244 "
          "original: the page itself waits in the bottleneck queue)", choices=("h2", "h1")),
    Param("udp_rate_kbit", float, 1000.0, "UDP stream rate, kbit/s",
          lo=MIN_RATE_MBIT * 1000, hi=10_000_000),
    Param("udp_size_bytes", int, 1200, "UDP payload per packet, bytes", lo=16, hi=1472),
    Param("ping_interval_s", float, 0.1, "ping period, s", lo=0.01, hi=60),
    Param("mss_bytes", int, None, "TCP maximum segment size of the iperf3 flows, bytes",
          lo=88, hi=1460),
    Param("tool", str, "iperf", "the long flows' tool: iperf (iperf3, a client and a "
          "server process per flow) or netperfmeter (one passive process, active ones of at "
          "most 10 flows)",
          choices=("iperf", "netperfmeter")),
    Param("extra", str, "none", "additional traffic next to the main load",
          choices=("none", "udp", "tcp")),
    Param("stagger_s", float, 0.0, "flows start uniformly within this many seconds",
          lo=0, hi=86400),
    Param("load", str, "bulk", "what the sender sends: bulk (saturating), onoff (1 s on, "
          "5 s off on one connection), stream50/stream25 (paced at 50/25 % of the goodput "
          "of the matching bulk run, bulk_goodput_mbit)",
          choices=("bulk", "onoff", "stream50", "stream25")),
    Param("bulk_goodput_mbit", float, None, "goodput of the matching bulk run, Mbit/s "
          "(before any rate scaling): the streams' reference; a sweep sets it from that "
          "run's record", lo=MIN_RATE_MBIT, hi=100_000),
)}


@dataclass(frozen=True)
class Scenario:
    """An experiment as data (see the module docstring)."""

    name: str
    description: str
    topology: str = "dumbbell"
    params: dict = field(default_factory=dict)
    qdisc_params: dict = field(default_factory=dict)
    traffic: tuple = ()
    knobs: dict = field(default_factory=dict)
    duration_s: float = 60.0
    quick_duration_s: float = 20.0
    quick: dict = field(default_factory=dict)
    warmup_s: float = 0.0
    repeat: int = 1
    sweep: dict = field(default_factory=dict)
    quick_sweep: dict | None = None
    variants: dict = field(default_factory=dict)
    family: str = ""
    figures: tuple = ("cwnd", "rtt", "queue")
    #: how often the TCP sockets are sampled, ms (None: with the queue, every tick); the
    #: queue is always sampled at the run's sample period
    tcp_sample_ms: float | None = None
    study: str = ""
    expect: str = ""
    headline: tuple = ()
    reproduce: tuple = ()
    #: knobs a sweep fills from another point's recorded metric (bufferbloat/run/derive.py):
    #: {knob: {"when": {knob: values}, "from": {knob: value}, "metric": (scope, name,
    #: metric)}}
    derived: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"{self.name}: unknown topology {self.topology!r}")
        unknown = set(self.knobs) - set(KNOBS)
        if unknown:
            raise ValueError(f"{self.name}: unknown knobs {sorted(unknown)}")
        for spec in self.traffic:
            try:
                part_class(spec.get("kind")).check_spec(spec, f"{self.name}: ",
                                                        resolved=False)
            except UsageError as exc:
                raise ValueError(str(exc)) from None
        headline.check(self.headline, self.name)
        for item in self.reproduce:
            if not (isinstance(item, dict) and {"figure", "command"} <= set(item)
                    and ("plot" in item or "files" in item)):
                raise ValueError(f"{self.name}: reproduce entries are dicts with figure, "
                                 f"command and a plot or files, got {item!r}")

    def sweep_for(self, quick):
        """The sweep of a profile."""
        return dict(self.quick_sweep if quick and self.quick_sweep is not None
                    else self.sweep)

    # ------------------------------------------------------------ overrides
    def valid_keys(self):
        """Every key ``--set`` accepts for this scenario."""
        topo_keys = {p.name for p in TOPOLOGIES[self.topology].PARAMS}
        return sorted(topo_keys | set(self.knobs) | {"qdisc." + k for k in
                                                     self._qdisc_keys()}
                      | ({"variant"} if self.variants else set()))

    def _qdisc_keys(self):
        keys = set()
        for kind in KINDS.values():
            keys |= {p.name for p in kind.params}
        return keys

    def split(self, overrides=None, quick=False):
        """(topology params, qdisc params, knob values) after the quick profile and
        ``overrides``; unknown keys raise UsageError listing the valid ones."""
        merged = dict(self.quick) if quick else {}
        overrides = dict(overrides or {})
        variant = overrides.pop("variant", None)
        if variant is not None:
            if variant not in self.variants:
                raise UsageError(f"invalid value for variant: {variant!r} (allowed: "
                                 f"{', '.join(self.variants) or 'none'})")
            merged.update(self.variants[variant])
        merged.update(overrides)
        valid = set(self.valid_keys())
        bad = sorted(set(merged) - valid)
        if bad:
            raise UsageError(f"unknown parameter {bad[0]!r} for scenario {self.name} "
                             f"(valid: {', '.join(sorted(valid))})")
        params, qparams = dict(self.params), dict(self.qdisc_params)
        knobs = {k: KNOBS[k].default for k in self.knobs}
        knobs.update(self.knobs)
        if "qdisc" in merged and merged["qdisc"] != params.get("qdisc"):
            qparams = {}  # another qdisc: its own defaults, not the scenario's
        for key, value in merged.items():
            if key.startswith("qdisc."):
                qparams[key[len("qdisc."):]] = value
            elif key in self.knobs:
                knobs[key] = value
            else:
                params[key] = value
        knobs = check_params(f"scenario {self.name}", [KNOBS[k] for k in self.knobs],
                             knobs)
        return params, qparams, knobs

    def build(self, overrides=None, quick=False, hz=None, max_rate_mbit=None):
        """(topology, knob values, traffic specs resolved) — validated, nothing built.
        With ``max_rate_mbit`` below the bottleneck rate, rates and buffers are scaled
        (:func:`bufferbloat.net.scaling.scale_to_rate`); the scaling is then in
        ``topo.scaling``."""
        params, qparams, knobs = self.split(overrides, quick)
        scaling = None
        # the study's own values validated first (a bad one is named as the user gave
        # it, before any scaling reads it), then scaled to the cap when above it
        topo = make_topo(self.topology, qdisc_params=qparams, hz=hz, **params)
        if max_rate_mbit and topo.params["bottleneck_mbit"] > max_rate_mbit:
            params, qparams, knobs, scaling = scale_to_rate(params, qparams, knobs,
                                                            max_rate_mbit)
            topo = make_topo(self.topology, qdisc_params=qparams, hz=hz, **params)
        topo.scaling = scaling
        traffic = self.resolve_traffic(knobs, topo,
                                       rate_factor=scaling["factor"] if scaling else 1.0)
        return topo, knobs, traffic

    def resolve_traffic(self, knobs, topo, rate_factor=1.0):
        """Traffic specs with knob references replaced, hosts checked and defaults set.

        ``"$knob"`` takes a knob's value; host ``"receiver"`` is the topology's receiver and
        ``src: "senders"`` makes one spec per sender; ``rate_mbit: "bottleneck"`` is the
        bottleneck rate; ``when: {knob: value}`` keeps a spec only if the knobs match;
        ``rate_factor`` scales the other rates
        (:func:`bufferbloat.net.scaling.scale_traffic_rates`)."""
        hosts = set(topo.senders) | {topo.receiver}
        out = []
        for i, spec in enumerate(self.traffic):
            if any(knobs.get(k) != v for k, v in spec.get("when", {}).items()):
                continue
            s = {k: (knobs[v[1:]] if isinstance(v, str) and v.startswith("$") else v)
                 for k, v in spec.items() if k != "when"}
            s.setdefault("name", f"{s['kind']}{i}")
            s.setdefault("start", 0.0)
            s.setdefault("stop", 1.0)
            scale_traffic_rates(s, rate_factor, names={
                k: v[1:] for k, v in spec.items() if isinstance(v, str) and v[:1] == "$"})
            if s.get("rate_mbit") == "bottleneck":
                s["rate_mbit"] = topo.bottleneck.rate_mbit
            for role in ("dst", "server", "b"):
                if s.get(role) == "receiver":
                    s[role] = topo.receiver
            if not 0 <= s["start"] < s["stop"] <= 1:
                raise UsageError(f"{self.name}: traffic {s['name']}: start/stop must satisfy "
                                 f"0 <= start < stop <= 1 (fractions of the run)")
            each = ([dict(s, src=h, name=f"{s['name']}-{h}") for h in topo.senders]
                    if s.get("src") == "senders" else [s])
            for t in each:
                part_class(t["kind"]).check_spec(t, f"{self.name}: ")
                for role in HOST_FIELDS:
                    if role in t and t[role] not in hosts:
                        raise UsageError(f"{self.name}: traffic {t['name']}: unknown host "
                                         f"{t[role]!r} (hosts: {', '.join(sorted(hosts))})")
                out.append(t)
        return out


def study_file(plot):
    """The file stem of a study plot (``Scenario.reproduce``'s ``plot``): the name,
    ``KEY-vs-PARAM`` for ``metric:KEY:PARAM``."""
    if plot.startswith("metric:"):
        _, key, param = plot.split(":", 2)
        return f"{key}-vs-{param}"
    return plot


def study_path(scenario, plot, out="results"):
    """Where ``bufferbloat sweep SCENARIO`` (and the report) writes study plot ``plot``:
    ``OUT/SCENARIO/sweep/figures/SCENARIO-STEM.png``."""
    return f"{out}/{scenario}/sweep/figures/{scenario}-{study_file(plot)}.png"
