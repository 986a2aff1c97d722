"""A run's identity: its fully resolved configuration and a stable key computed from it.

Two runs are the same run when they would put the same network under the same traffic
for the same time: same scenario, every topology, qdisc and knob value and every
traffic part *after* the profile, variants, ``--set`` overrides and rate scaling were
applied, the same duration, warm-up, sampling period, profile, scaling and repetition
number. :func:`run_config` computes that configuration, :func:`run_key` hashes it
(SHA-256 of canonical JSON: sorted keys, no spaces, integral floats written as integers,
other floats rounded to 12 significant digits, tuples as lists), and :func:`config_key`
hashes it without the repetition number (the repetitions of one configuration share it).

What is *not* part of it: how the values were asked for (``--set variant=red`` and the
same values spelled out are one configuration), the scenario's description, figures and
sweep lists, and the machine (the kernel tick rate only adds warnings). The key changes
when the scenario's definition changes a value a run uses. A topology parameter that is
unset (None) is left out, so adding an optional parameter keeps every recorded key.

``result.json`` records ``run_config``, ``run_key`` and ``config_key``
(:func:`record_fields`); sweeps reuse a recorded point only when its ``run_key`` is the
one they would run and its status is ``ok`` (:mod:`.sweep`).
"""

import hashlib
import json
import math

from bufferbloat.core.params import DURATION_LIMITS_S, check_range
from bufferbloat.net.scaling import rate_cap_mbit

#: Bumped when the configuration's content changes meaning (all keys change with it).
IDENTITY_VERSION = 2
#: Characters of the key shown in directory names and tables.
SHORT = 12
DEFAULT_SAMPLE_PERIOD_S = 0.01
_AUTO = object()


def durations(scn, quick=False, duration_s=None):
    """(duration, warm-up) in seconds of a run of ``scn``: ``duration_s`` or the
    profile's, and the study's share of warm-up (a shortened run keeps it: C's first of
    two minutes). Raises UsageError for a duration outside 1..86400 s."""
    duration = duration_s if duration_s is not None else (
        scn.quick_duration_s if quick else scn.duration_s)
    check_range("time", duration, *DURATION_LIMITS_S, " s")
    return duration, scn.warmup_s * min(1.0, duration / scn.duration_s)


def config_of(scn, topo, knobs, traffic, quick, duration, warmup,
              sample_period_s=DEFAULT_SAMPLE_PERIOD_S, rep=1):
    """The configuration of a run from what ``scn.build`` returned (the engine's path)."""
    scaling = getattr(topo, "scaling", None)
    return _normal({
        "identity_version": IDENTITY_VERSION,
        "scenario": scn.name,
        "topology": scn.topology,
        # a parameter left at None (its default: "unset") is not written, so that a new
        # optional parameter does not change the key of every run recorded before it
        # (version 2; version 1 wrote them all, and adding reverse_qdisc changed every key)
        # a trace file is its content (its SHA-256), not its path
        "params": {k: (f"sha256:{getattr(topo, k).sha256}"
                       if k in ("link_trace", "link_trace_up") else v)
                   for k, v in topo.params.items() if v is not None},
        "qdisc": {"kind": topo.qdisc.kind, "params": dict(topo.qdisc.params)},
        "knobs": dict(knobs),
        "traffic": list(traffic),
        "profile": "quick" if quick else "full",
        "duration_s": duration,
        "warmup_s": warmup,
        "sample_period_s": sample_period_s,
        "tcp_sample_ms": getattr(scn, "tcp_sample_ms", None),
        "scaling": None if not scaling else {"factor": scaling.get("factor"),
                                             "max_rate_mbit": scaling.get("max_rate_mbit")},
        "rep": int(rep),
    })


def run_config(scn, overrides=None, quick=False, duration_s=None, rep=1,
               sample_period_s=DEFAULT_SAMPLE_PERIOD_S, max_rate_mbit=_AUTO):
    """The fully resolved configuration of one run of ``scn`` (validates like
    ``scn.build``: bad input raises UsageError). ``max_rate_mbit`` defaults to this
    machine's cap (:func:`bufferbloat.net.scaling.rate_cap_mbit`, env BUFFERBLOAT_MAX_MBIT),
    the value the engine scales with."""
    if max_rate_mbit is _AUTO:
        max_rate_mbit = rate_cap_mbit(scn)
    duration, warmup = durations(scn, quick, duration_s)
    topo, knobs, traffic = scn.build(overrides, quick=quick, max_rate_mbit=max_rate_mbit)
    return config_of(scn, topo, knobs, traffic, quick, duration, warmup,
                     sample_period_s=sample_period_s, rep=rep)


def _normal(value):
    """``value`` as canonical JSON data: integral floats as ints, other floats to 12
    significant digits, NaN/inf as None, tuples as lists, dict keys as strings."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() and abs(value) < 2 ** 53 \
            else float(f"{value:.12g}")
    if isinstance(value, dict):
        return {str(k): _normal(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    if hasattr(value, "item"):              # numpy scalars
        return _normal(value.item())
    return str(value)


def canonical_json(config):
    """The one text a configuration hashes as."""
    return json.dumps(_normal(config), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False)


def run_key(config):
    """SHA-256 (hex) of the configuration, repetition included: one run's identity."""
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()


def config_key(config):
    """SHA-256 (hex) of the configuration without its repetition number: shared by the
    repetitions of one configuration (sweep directories, grouping)."""
    return run_key({k: v for k, v in config.items() if k != "rep"})


def short(key):
    """The short form of a key shown in names and tables."""
    return str(key or "")[:SHORT]


def record_fields(config):
    """What result.json records about the run's identity."""
    return {"run_config": config, "run_key": run_key(config),
            "config_key": config_key(config)}


def setting(record):
    """(profile, duration s, scaling factor or None) of a recorded run: what must be
    the same for runs to share a table, a mean or a figure. Older records without
    ``run_config`` fall back on their top-level fields."""
    cfg = record.get("run_config") if isinstance(record.get("run_config"), dict) else {}
    profile = cfg.get("profile", record.get("profile")) or "?"
    duration = cfg.get("duration_s", record.get("duration_s"))
    scaling = cfg.get("scaling", record.get("scaling"))
    factor = scaling.get("factor") if isinstance(scaling, dict) else None
    return (str(profile), _normal(duration), _normal(factor))


def setting_label(setting_tuple):
    """``quick profile, 20 s`` / ``full profile, 120 s, scaled x0.25``."""
    profile, duration, factor = setting_tuple
    text = f"{profile} profile"
    if duration is not None:
        text += f", {duration:g} s" if isinstance(duration, (int, float)) else f", {duration} s"
    if factor is not None:
        text += f", rates scaled x{factor:.3g}"
    return text
