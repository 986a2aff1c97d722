"""``bufferbloat compare A B [C ...]``: runs, sweeps or results trees side by side.

Each argument is a *side*: a run directory, a sweep directory or a results tree (every
run below it; :func:`plots.sweep.load_points`). When every side holds one setting (a
run, or repetitions of one configuration), the sides are compared directly, whatever
their scenarios (a student's FIFO run against the reference PIE run). Otherwise their
runs are matched by scenario and sweep point (``a1_fifo buffer_pkts=20``), one group of
rows per match. A side's value is the mean over its repetitions (degraded runs left
out, as in every mean: docs/design/health.md).

The table has one row per headline metric (the union of the sides' scenarios'
declarations, :mod:`bufferbloat.results.headline`), one column per side, and each side after
the first with its difference from the first (``-387 (x0.12)``) and whether it differs
(:func:`bufferbloat.core.uncertainty.decide` on the sides' healthy repetitions: Welch's t
test at 0.05 divided by the number of comparisons in the table, Bonferroni; "does not
differ" when the difference's interval lies within +-5 % of the first side's mean;
otherwise "unresolved", with about how many more runs a side would settle it). The
overlay figures
(:mod:`plots.overlay`: RTT eCDF, queueing delay and throughput over time, one line per
side) and the table go into one self-contained HTML page.
"""

import datetime
import os
import string

from bufferbloat.core import uncertainty
from bufferbloat.core.errors import UsageError
from bufferbloat.results import headline
from bufferbloat.scenarios import catalogue

#: how many lines an overlay figure holds at most (sides x matched points)
MAX_LINES = 16
#: the file that marks a directory as a published reference (scripts/make-reference.py)
REFERENCE_FILE = "reference.json"


class Side:
    """One argument: its letter, path and runs (``plots.sweep.Point``s)."""

    def __init__(self, letter, path, points):
        self.letter, self.path, self.points = letter, path, points

    def groups(self, direct):
        """{match key: [points]}; with ``direct`` one group holding everything."""
        from bufferbloat.plots.sweep import by_key, by_scenario
        if direct:
            return {"": self.points}
        out = {}
        for scn, pts in by_scenario(self.points).items():
            for key, reps in by_key(pts).items():
                out[f"{scn} {key}" if key != "default" else scn] = reps
        return out

    def describe(self):
        from bufferbloat.plots.common import run_label
        labels = list(dict.fromkeys(run_label(p.run) for p in self.points))
        what = labels[0] if len(labels) == 1 else f"{len(labels)} settings"
        return f"{self.letter} = {self.path} ({what}, {len(self.points)} run(s))"


def load_sides(paths):
    """The sides of ``paths`` (UsageError: fewer than two, or a path without runs)."""
    from bufferbloat.plots.sweep import load_points
    if len(paths) < 2:
        raise UsageError("compare needs at least two runs, sweeps or results trees")
    if len(paths) > len(string.ascii_uppercase):
        raise UsageError(f"compare takes at most {len(string.ascii_uppercase)} paths")
    return [Side(letter, path, load_points(path))
            for letter, path in zip(string.ascii_uppercase, paths)]


def _single_setting(side):
    from bufferbloat.plots.sweep import by_key, by_scenario
    sets = by_scenario(side.points)
    return len(sets) == 1 and len(by_key(next(iter(sets.values())))) == 1


def _entries(sides):
    """The headline entries of every side's scenarios, each metric once, in order."""
    seen, out = set(), []
    for side in sides:
        for p in side.points:
            for entry in headline.declared(p.run, catalogue()):
                if entry["metric"] not in seen:
                    seen.add(entry["metric"])
                    out.append(entry)
    return out


def _values(points, entry, key="metric"):
    """The entry's value in each healthy repetition of ``points``."""
    vals = [headline.evaluate(p.rows, entry, key) for p in points if p.averaged]
    return [v for v in vals if v is not None]


def _mean(points, entry, key="metric"):
    vals = _values(points, entry, key)
    return sum(vals) / len(vals) if vals else None


def _unit(sides, selector):
    for side in sides:
        for p in side.points:
            unit = headline.unit_of(p.rows, selector)
            if unit:
                return unit
    return ""


def table(sides):
    """(direct, rows): ``rows`` are dicts with ``group`` (the match key, '' when
    direct), ``label``, ``metric``, ``unit``, ``values`` (one per side, None when the
    side lacks it), ``spreads`` (the entry's ``± spread`` metric, or None), ``samples``
    (each side's healthy repetitions) and ``decisions`` (each side after the first
    against the first: :func:`bufferbloat.core.uncertainty.decide`)."""
    direct = all(_single_setting(s) for s in sides)
    per_side = [s.groups(direct) for s in sides]
    keys = list(dict.fromkeys(k for g in per_side for k in g))
    entries = _entries(sides)
    rows = []
    for key in keys:
        for entry in entries:
            values = [_mean(g.get(key, []), entry) for g in per_side]
            if all(v is None for v in values):
                continue
            spreads = [_mean(g.get(key, []), entry, "spread") if entry.get("spread")
                       else None for g in per_side]
            rows.append({"group": key, "label": entry["label"], "metric": entry["metric"],
                         "unit": _unit(sides, entry["metric"]), "values": values,
                         "spreads": spreads,
                         "samples": [_values(g.get(key, []), entry) for g in per_side]})
    comparisons = max(1, len(rows) * (len(sides) - 1))
    for row in rows:
        first = row["samples"][0]
        row["decisions"] = [uncertainty.decide(first, other, comparisons=comparisons)
                            for other in row["samples"][1:]]
    return direct, rows


def decision_text(decision):
    """``differs (p 0.003)``, ``does not differ`` or ``unresolved (~3 more runs a side)``."""
    if decision["verdict"] == "differs":
        return f"differs (p {decision['p']:.2g})"
    if decision["verdict"] == "does not differ":
        return "does not differ"
    more = decision.get("more_runs")
    return "unresolved" + (f" (~{more} more runs a side)" if more else "")


def difference(value, ref):
    """``+12.3 (x1.5)``: value - ref and value / ref, '' when either is missing."""
    if value is None or ref is None:
        return ""
    text = f"{value - ref:+.3g}"
    return text + (f" (x{value / ref:.2f})" if ref else "")


def cells(row):
    """The printed cells of a table row: each side's value (± its spread), then each
    side's difference from the first."""
    vals = row["values"]
    shown = [headline.fmt(v) + (f" ± {headline.fmt(sd)}" if sd is not None and v is not None
                                else "") for v, sd in zip(vals, row["spreads"])]
    return (shown + [difference(v, vals[0]) for v in vals[1:]]
            + [decision_text(d) for d in row.get("decisions") or []])


def header(sides):
    """The table's column names: metric, each side, each difference, each decision."""
    letters = [s.letter for s in sides]
    return (["metric"] + letters + [f"{x}-{letters[0]}" for x in letters[1:]]
            + [f"{x} vs {letters[0]}" for x in letters[1:]])


def table_lines(sides, rows):
    """The comparison table as aligned terminal lines."""
    head = header(sides)
    body = []
    group = None
    for r in rows:
        if r["group"] != group:
            group = r["group"]
            if group:
                body.append([f"[{group}]"] + [""] * (len(head) - 1))
        name = f"{r['label']} ({r['unit']})" if r["unit"] else r["label"]
        body.append([name] + cells(r))
    widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head))]
    fmt = lambda row: "  ".join(  # noqa: E731
        (c.ljust(w) if i == 0 else c.rjust(w)) for i, (c, w) in enumerate(zip(row, widths)))
    return [fmt(head)] + [fmt(row) for row in body]


def overlay_pairs(sides, direct):
    """[(label, Run)] for the overlay figures: the first run of each side (and of each
    matched point when not direct), at most :data:`MAX_LINES`."""
    from bufferbloat.plots.common import run_label
    pairs = []
    for side in sides:
        for key, pts in side.groups(direct).items():
            run = next((p.run for p in pts if p.averaged), pts[0].run)
            pairs.append((f"{side.letter}: {key or run_label(run)}", run))
    return pairs[:MAX_LINES]


def figures(sides, direct):
    """{name: Figure} of the overlays (:data:`plots.overlay.COMPARE`)."""
    from bufferbloat.plots import overlay
    pairs = overlay_pairs(sides, direct)
    out = {}
    for name, draw in overlay.COMPARE.items():
        fig = draw(pairs)
        if fig is not None:
            out[name] = fig
    return out


def write_html(path, sides, rows, figs):
    """The comparison as one self-contained page at ``path``; returns ``path``."""
    from bufferbloat.plots.report import CSS, esc, figure_html, write_page
    columns = header(sides)
    head = "".join(f"<th>{esc(h)}</th>" for h in columns)
    body, group = [], None
    for r in rows:
        if r["group"] != group:
            group = r["group"]
            if group:
                body.append(f'<tr><th colspan="{len(columns)}">{esc(group)}</th></tr>')
        body.append(f"<tr><td>{esc(r['label'])} ({esc(r['unit'])})</td>"
                    + "".join(f"<td class=num>{esc(c)}</td>" for c in cells(r)) + "</tr>")
    legend = "".join(f"<li>{esc(s.describe())}</li>" for s in sides)
    imgs = "".join(figure_html(fig, name) for name, fig in figs.items())
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>bufferbloat compare</title>
<style>{CSS}</style></head><body>
<h1>bufferbloat compare</h1>
<p class=muted>generated {esc(now)} from the stored results only</p>
<ul>{legend}</ul>
<table class="compare"><tr>{head}</tr>{"".join(body)}</table>
<h2>Overlays</h2>{imgs or "<p class=muted>No series to overlay.</p>"}
</body></html>
"""
    return write_page(path, page)


def is_reference(side):
    """Whether a side is a published reference (its directory holds REFERENCE_FILE)."""
    return os.path.isfile(os.path.join(str(side.path), REFERENCE_FILE))


def _config_key(point):
    """The run's configuration key; for an older record without one, its scenario,
    overrides and setting."""
    return point.run.record.get("config_key") or (
        point.scenario, tuple(sorted((k, str(v)) for k, v in point.overrides.items())),
        point.setting)


def spread(values, confidence=uncertainty.CONFIDENCE):
    """(low, high) within which a further run is expected, from the reference's runs:
    the Student-t prediction interval mean +- t(n - 1) s sqrt(1 + 1/n); None below 2."""
    n, mean, sd = uncertainty.mean_sd(values)
    if n < 2:
        return None
    half = uncertainty.t_quantile(0.5 + confidence / 2, n - 1) * sd * (1 + 1 / n) ** 0.5
    return mean - half, mean + half


def against_reference(side, ref):
    """Lines saying, for each run of ``side``, whether each headline metric falls inside
    the reference's spread for the same configuration (its ``config_key``), or why the
    run is not comparable (no reference run of its configuration: another setting, or
    other parameters)."""
    from bufferbloat.plots.common import run_label  # noqa: PLC0415
    from bufferbloat.plots.sweep import by_key  # noqa: PLC0415
    by_config = {}
    for p in ref.points:
        if p.averaged:
            by_config.setdefault(_config_key(p), []).append(p)
    out = [f"against the reference {ref.path} (95 % prediction interval of its healthy "
           "runs: mean +- t s sqrt(1 + 1/n)):"]
    for key, reps in by_key(side.points).items():
        for p in reps:
            rep = (p.run.record.get("run_config") or {}).get("rep") or p.rep
            label = f"{run_label(p.run)} (rep {rep})"
            if not p.averaged:
                out.append(f"  {label}: not comparable: its own run is not healthy "
                           f"({p.run.record.get('health', {}).get('verdict')})")
                continue
            refs = by_config.get(_config_key(p))
            if not refs:
                same = [r for r in ref.points if r.scenario == p.scenario
                        and r.overrides == p.overrides]
                why = (f"another setting ({identity_label(p)} here, "
                       f"{identity_label(same[0])} in the reference)"
                       if same and same[0].setting != p.setting else
                       "no reference run of this configuration (other parameters, "
                       "code or rate cap)")
                out.append(f"  {label}: not comparable: {why}")
                continue
            for entry in headline.declared(p.run, catalogue()):
                value = headline.evaluate(p.rows, entry)
                band = spread(_values(refs, entry))
                if value is None or band is None:
                    continue
                inside = band[0] <= value <= band[1]
                out.append(f"  {label}: {entry['label']} {headline.fmt(value)}: "
                           + ("inside" if inside else "OUTSIDE")
                           + f" the reference's spread {headline.fmt(band[0])} to "
                             f"{headline.fmt(band[1])} ({len(refs)} runs)")
    return out


def identity_label(point):
    from bufferbloat.run.identity import setting_label  # noqa: PLC0415
    return setting_label(point.setting)


def compare(paths, html_path=None):
    """Compare ``paths``; return the terminal lines. With ``html_path``, also write the
    HTML page (the table and the overlay figures) there; without it, nothing is
    written."""
    sides = load_sides(paths)
    refs = [s for s in sides if is_reference(s)]
    if refs:         # a reference is its own spread: each other side's runs against it
        out = ["compare:"] + [f"  {s.describe()}" for s in sides]
        for side in sides:
            if side is not refs[0]:
                out += against_reference(side, refs[0])
        return out
    direct, rows = table(sides)
    out = ["compare:"] + [f"  {s.describe()}" for s in sides]
    out += table_lines(sides, rows) if rows else ["(no headline metric in common)"]
    if rows:
        out.append(f"(differs: {rows[0]['decisions'][0]['method']})")
    if html_path is None:
        out.append("(--html FILE writes a page with this table and the overlay figures)")
        return out
    figs = figures(sides, direct)
    out.append(f"figures ({', '.join(figs) or 'none'}) and the table: "
               f"{write_html(html_path, sides, rows, figs)}")
    return out
