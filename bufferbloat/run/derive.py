"""Knobs a sweep fills in from another point's recorded result (a scenario's ``derived``).

Study D paces its streams at a fraction of the goodput *measured by the matching bulk
run* (same CCA, path and buffer setting). A scenario declares that as data::

    derived={"bulk_goodput_mbit": {
        "when": {"load": ("stream50", "stream25")},   # the points that need it
        "from": {"load": "bulk"},                     # what makes the matching point
        "metric": ("network", "all", "goodput_up_mbit")}}

For a point whose knobs match ``when``, the matching point is the same point (every
override, the same repetition) with ``from`` applied. Its run must be recorded ``ok`` in
its sweep directory (the sweep runs providers first, :func:`providers_first`); its
metric, divided by that run's rate-scaling factor (so that the value is in the study's
units and scales again with the stream's rate), becomes the knob's value, and so part
of the point's identity. No recorded run is an error for that point, never a guess.
"""

import json
import os

from bufferbloat.core.errors import UsageError
from bufferbloat.results.records_layout import RESULT_FILE
from bufferbloat.run import identity

#: a stand-in value used only to validate a point before its provider has run
PLACEHOLDER = 1.0


def _matches(scn, overrides, when):
    """Whether the point's knob values (after the profile and variant) match ``when``
    ({knob: value or tuple of values})."""
    _, _, knobs = scn.split({k: v for k, v in overrides.items()
                             if k not in scn.derived})
    return all(knobs.get(k) in (v if isinstance(v, (tuple, list)) else (v,))
               for k, v in when.items())


def needs(scn, overrides):
    """{knob: rule} of the derived knobs this point must get (not given by the user)."""
    return {knob: rule for knob, rule in (getattr(scn, "derived", None) or {}).items()
            if knob not in overrides and _matches(scn, overrides, rule["when"])}


def provides(scn, overrides):
    """Whether the point is some other point's provider (matches a rule's ``from``)."""
    return any(_matches(scn, overrides, rule["from"])
               for rule in (getattr(scn, "derived", None) or {}).values())


def providers_first(planned):
    """``planned`` points (:class:`~bufferbloat.run.plan.Point`) with every provider
    point before the points that may need it (a stable sort: otherwise in their order)."""
    return sorted(planned, key=lambda p: 0 if provides(p.scn, p.overrides) else 1)


def placeholders(scn, overrides):
    """``overrides`` with a stand-in for each derived knob the point needs (validation)."""
    return dict(overrides, **{k: PLACEHOLDER for k in needs(scn, overrides)})


def recorded_ok(path, key):
    """The record of run ``key`` recorded ``ok`` at ``path`` or beside it (``path.2``...),
    else None."""
    n = 1
    while True:
        candidate = path if n == 1 else f"{path}.{n}"
        if not os.path.exists(candidate):
            return None
        try:
            with open(os.path.join(candidate, RESULT_FILE)) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            rec = {}
        if rec.get("run_key") == key and rec.get("status") == "ok":
            return candidate, rec
        n += 1


def metric_value(run_dir, scope, name, metric):
    """A metric of ``run_dir``/metrics.json, or None."""
    try:
        with open(os.path.join(run_dir, "metrics.json")) as f:
            rows = json.load(f).get("metrics") or []
    except (OSError, ValueError):
        return None
    for r in rows:
        if (r.get("scope"), r.get("name"), r.get("metric")) == (scope, name, metric):
            return r.get("value")
    return None


def fill(scn, overrides, varied, rep, sweep_root, point_dir, quick=False,
         duration_s=None):
    """``overrides`` with every derived knob the point needs set from its provider's
    recorded run (see the module docstring). ``point_dir(root, varied, rep, config)`` is
    the sweep's directory rule. Raises UsageError naming the missing provider."""
    out = dict(overrides)
    for knob, rule in needs(scn, overrides).items():
        prov = dict(overrides, **rule["from"])
        prov_varied = {k: rule["from"].get(k, v) for k, v in varied.items()}
        config = identity.run_config(scn, prov, quick=quick, duration_s=duration_s, rep=rep)
        path = point_dir(sweep_root, prov_varied, rep, config)
        found = recorded_ok(path, identity.run_key(config))
        value = None if found is None else metric_value(found[0], *rule["metric"])
        if value is None:
            what = " ".join(f"{k}={v}" for k, v in rule["from"].items())
            raise UsageError(
                f"{scn.name}: {knob} comes from the matching {what} run (rep {rep}), "
                f"which is not recorded ok with its metric {rule['metric'][-1]} at "
                f"{path}: run that point first (a sweep over it runs it first), or "
                f"--set {knob}=VALUE")
        factor = ((found[1].get("scaling") or {}).get("factor") or 1.0)
        out[knob] = round(float(value) / float(factor), 6)
    return out
