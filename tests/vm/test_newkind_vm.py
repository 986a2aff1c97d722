"""A traffic kind registered from a test module (tests/kinds/pyflow.py, outside the
engine) runs through the real pipeline in the project VM (netem delay on the dumbbell).
See tests/kinds/check.py for everything the run must leave."""
from kinds.check import run_and_check


def test_a_kind_from_outside_the_engine_runs_through_the_pipeline_in_the_vm(tmp_path):
    run_and_check(tmp_path, rate_mbit=10, delay_ms=5)
