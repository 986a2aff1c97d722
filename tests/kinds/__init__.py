"""Traffic kinds defined outside the engine, for the tests that extend it."""
