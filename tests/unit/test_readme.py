"""The README's numbers and figure paths are the code's: runs per profile, traffic time,
each scenario's runs and durations, each study figure's command and file."""
import os
import re

import pytest

from bufferbloat.run.plan import points
from bufferbloat.run.scenario import study_path
from bufferbloat.scenarios import catalogue

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CATALOGUE = catalogue()


@pytest.fixture(scope="module")
def readme():
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def _runs(scn, quick):
    return len(points(scn.sweep_for(quick), 1 if quick else scn.repeat))


def test_profiles_table_counts_the_catalogue(readme):
    full = sum(_runs(s, False) for s in CATALOGUE.values())
    quick = sum(_runs(s, True) for s in CATALOGUE.values())
    traffic_full = sum(_runs(s, False) * s.duration_s for s in CATALOGUE.values())
    traffic_quick = sum(_runs(s, True) * s.quick_duration_s for s in CATALOGUE.values())
    q = re.search(r"^\| `--quick`[^|]*\| (\d+) \| ([\d,]+) s \|", readme, re.M)
    f = re.search(r"^\| full [^|]*\| (\d+) \| ([\d,]+) s \(([\d.]+) h\) \|", readme, re.M)
    assert q and f, "the profiles table is missing from README.md"
    assert (int(q.group(1)), int(q.group(2).replace(",", ""))) == (quick, traffic_quick)
    assert (int(f.group(1)), int(f.group(2).replace(",", ""))) == (full, traffic_full)
    assert float(f.group(3)) == round(traffic_full / 3600, 1)
    assert f"**{full}**" in readme and f"**{quick}**" in readme


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_each_scenario_row_has_its_runs_and_durations(readme, name):
    scn = CATALOGUE[name]
    row = re.search(rf"^\| `{name}` \|.*$", readme, re.M)
    assert row, f"{name} is missing from the catalogue table"
    assert row.group(0).endswith(
        f"| {_runs(scn, False)} x {scn.duration_s:g} | {_runs(scn, True)} x "
        f"{scn.quick_duration_s:g} |")


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_each_study_figure_has_its_reproduce_line(readme, name):
    for entry in CATALOGUE[name].reproduce:
        files = study_path(name, entry["plot"]) if entry.get("plot") else entry["files"]
        line = f"- `{name}`, to reproduce {entry['figure']}: `{entry['command']}` -> `{files}`"
        assert line in readme, line
