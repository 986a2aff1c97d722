"""A sweep's (and run-all's) index of its points: ``OUT/SCENARIO/sweep/index.json`` lists
every point with its status, health and keys, in the points' order, and groups the runs
by configuration (``configs``). Read strictly: a corrupt index is refused (UsageError)
rather than read in part.
"""

import os

from bufferbloat.core.errors import UsageError
from bufferbloat.results.records import load_json_object

#: A sweep's (and run-all's) index of its points, in its directory
INDEX_FILE = "index.json"


#: The JSON type of an index's fields and of its entries' (checked when present; every
#: index has ``done``)
_INDEX_TYPES = {"done": list, "vary": dict, "base": dict, "configs": dict,
                "catalogue": list, "scenario": str, "profile": str}
_ENTRY_TYPES = {"scenario": str, "run_dir": str, "overrides": dict, "varied": dict,
                "rep": int, "status": str, "run_key": str, "config_key": str,
                "profile": str, "health": str, "error": str, "worker": str,
                "machine": str, "where": str, "sent_bytes": int, "warnings": list,
                "degraded_attempts": list}


def read_index(path):
    """The index (``path``/index.json) as a dict, or None when ``path`` holds none;
    UsageError naming the file when it is not JSON, not an object, lacks ``done`` or
    holds a field (or an entry's field) of the wrong type: a corrupt index is bad
    input, refused rather than read in part."""
    index_path = os.path.join(str(path), INDEX_FILE)
    if not os.path.isfile(index_path):
        return None
    index = load_json_object(index_path, UsageError)
    if "done" not in index:
        raise UsageError(f"{index_path}: corrupt index: no 'done' field (its runs)")
    _check_types(index_path, "", index, _INDEX_TYPES)
    for i, entry in enumerate(index["done"]):
        if not isinstance(entry, dict):
            raise UsageError(f"{index_path}: corrupt index: done[{i}] is "
                             f"{type(entry).__name__}, not an object")
        _check_types(index_path, f"done[{i}].", entry, _ENTRY_TYPES)
    return index


def _check_types(path, where, obj, types):
    for key, kind in types.items():
        value = obj.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            raise UsageError(f"{path}: corrupt index: {where}{key} is "
                             f"{type(value).__name__} {value!r:.40}, not "
                             f"{ {dict: 'an object', list: 'an array', str: 'text', int: 'an integer'}[kind]}")


def degraded(index):
    """The entries of ``index`` whose run is ok but degraded (the emulator fell behind)."""
    return [e for e in index if e.get("status") == "ok" and e.get("health") == "degraded"]


def faulty(index):
    """The entries of ``index`` whose run is ok but faulty (a part began before its due
    time: the run's fault, not the emulator's; a rerun would not clear it)."""
    return [e for e in index if e.get("status") == "ok" and e.get("health") == "faulty"]


def group_configs(entries):
    """{config_key: {scenario, varied, profile, duration_s, scaling, runs: [{rep,
    run_dir, status}]}}: the index's runs grouped by configuration."""
    out = {}
    for e in entries:
        group = out.setdefault(e.get("config_key") or "?", {
            k: e.get(k) for k in ("scenario", "varied", "overrides", "profile",
                                  "duration_s", "scaling")})
        group.setdefault("runs", []).append(
            {"rep": e.get("rep"), "run_dir": e.get("run_dir"), "status": e.get("status")})
    return out
