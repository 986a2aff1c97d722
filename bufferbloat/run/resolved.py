"""One point, resolved once: what the command line asked for, made into the run.

:func:`resolve_run` takes a scenario and what was asked of it (``--set`` overrides, the
profile, ``--time``, the repetition, the sampling period) and makes, once, everything the
rest of the suite needs to know about that run: the topology, knob values and traffic
(profile, variants, overrides and rate scaling applied, every value validated by
``scn.build``), the duration and warm-up, the configuration (:mod:`.identity`) and its
keys. The commands make one :class:`ResolvedRun` per point and hand that same object
to placement (the kernel pieces it needs), the sweep runner (its directory and key), the
executors and the engine (which builds its network and writes its record from it).

A run sent to a worker process (a Dask worker, its VM) crosses a process boundary as
data (:meth:`ResolvedRun.spec`); the worker makes it again from that data, once, and
refuses to run it when the key it gets is not the one the sweep planned (another
scenario definition or rate cap on that machine makes another run).
"""

from bufferbloat.core.errors import UsageError
from bufferbloat.core.params import SAMPLE_PERIOD_LIMITS_S, check_range
from bufferbloat.net.scaling import rate_cap_mbit
from bufferbloat.run import identity

_AUTO = object()


class ResolvedRun:
    """One point of a scenario, validated and resolved (see the module docstring).

    ``scn``, ``overrides``, ``quick``, ``asked_duration_s`` (``--time``, or None),
    ``rep`` and ``sample_period_s`` are what was asked; ``topo``, ``knobs``,
    ``traffic``, ``duration_s``, ``warmup_s``, ``config``, ``key`` and ``config_key``
    what it resolved to."""

    def __init__(self, scn, overrides, quick, asked_duration_s, rep, sample_period_s,
                 built, durations, max_rate_mbit=None):
        self.scn, self.overrides, self.quick = scn, dict(overrides or {}), bool(quick)
        self.asked_duration_s, self.rep = asked_duration_s, int(rep)
        self.sample_period_s, self.max_rate_mbit = sample_period_s, max_rate_mbit
        self.topo, self.knobs, self.traffic = built
        self.duration_s, self.warmup_s = durations
        self.config = identity.config_of(scn, self.topo, self.knobs, self.traffic, quick,
                                         self.duration_s, self.warmup_s,
                                         sample_period_s=sample_period_s, rep=rep)
        self.key = identity.run_key(self.config)
        self.config_key = identity.config_key(self.config)

    @property
    def name(self):
        """The scenario's name."""
        return self.scn.name

    @property
    def profile(self):
        """``quick`` or ``full``."""
        return self.config["profile"]

    def warnings(self, hz=None):
        """What the qdisc's values become on a kernel whose tick rate is ``hz`` (PIE's
        tupdate is counted in ticks), after the warnings of its validation."""
        qdisc = self.topo.qdisc
        info, params = qdisc.info, qdisc.params

        def said(at):     # on a copy, as nothing was given again: the checks that
            return info.check(dict(params), {}, at)   # depend on the tick only
        at_hz = [w for w in said(hz) if w not in said(None)] if hz else []
        return list(qdisc.warnings) + at_hz

    def again(self, overrides=None, rep=None):
        """The same point resolved anew with other ``overrides`` (a derived knob's value,
        once its provider ran) or another repetition ``rep``; the rest as asked."""
        return resolve_run(self.scn, self.overrides if overrides is None else overrides,
                           quick=self.quick, duration_s=self.asked_duration_s,
                           rep=self.rep if rep is None else rep,
                           sample_period_s=self.sample_period_s,
                           max_rate_mbit=self.max_rate_mbit)

    def spec(self):
        """The run as data, for a worker process (JSON): what was asked and its key."""
        return {"scenario": self.scn.name, "overrides": dict(self.overrides),
                "rep": self.rep, "quick": self.quick, "duration_s": self.asked_duration_s,
                "sample_period_s": self.sample_period_s, "run_key": self.key}

    def __repr__(self):
        return f"<ResolvedRun {self.scn.name} {identity.short(self.key)} rep {self.rep}>"


def resolve_run(scn, overrides=None, quick=False, duration_s=None, rep=1,
                sample_period_s=identity.DEFAULT_SAMPLE_PERIOD_S, max_rate_mbit=_AUTO):
    """The :class:`ResolvedRun` of one point of ``scn``; bad input raises UsageError
    (exit 2) before anything exists. ``max_rate_mbit`` defaults to this machine's cap
    (:func:`bufferbloat.net.scaling.rate_cap_mbit`, env BUFFERBLOAT_MAX_MBIT)."""
    if max_rate_mbit is _AUTO:
        max_rate_mbit = rate_cap_mbit(scn)
    durations = identity.durations(scn, quick, duration_s)
    check_range("sample period", sample_period_s, *SAMPLE_PERIOD_LIMITS_S, " s")
    built = scn.build(overrides, quick=quick, max_rate_mbit=max_rate_mbit)
    return ResolvedRun(scn, overrides, quick, duration_s, rep, sample_period_s, built,
                       durations, max_rate_mbit)


def resolve_spec(spec, catalogue):
    """The run a worker was sent (:meth:`ResolvedRun.spec`), made again from its data
    with ``catalogue`` ({name: scenario}) at this machine's rate cap; UsageError, before
    anything runs, when its key is not the one the sweep planned."""
    run = resolve_run(catalogue[spec["scenario"]], spec["overrides"],
                      quick=bool(spec.get("quick")), duration_s=spec.get("duration_s"),
                      rep=int(spec.get("rep", 1)),
                      sample_period_s=spec.get("sample_period_s",
                                               identity.DEFAULT_SAMPLE_PERIOD_S))
    want = spec.get("run_key")
    if want and run.key != want:
        raise UsageError(
            f"{run.name} rep {run.rep}: this worker makes run {identity.short(run.key)} "
            f"of it, the sweep planned {identity.short(want)} (another scenario "
            "definition, code version or rate cap, BUFFERBLOAT_MAX_MBIT, here): not run")
    return run
