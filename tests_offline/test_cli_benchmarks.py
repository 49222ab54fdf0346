"""``trace-repro benchmarks``: the suite's keys, routes and rows, and which protocols are implemented."""

from __future__ import annotations

import json

from trace_lib.benchmarks import registry
from trace_lib.cli.main import main
from trace_lib.release.suite import load_suite


def _run(capsys, release, *argv):
    code = main(["benchmarks", "--trace-root", str(release.path), *argv])
    return code, capsys.readouterr().out


def test_json_lists_the_suite_in_order_with_routes_and_rows(capsys, release):
    code, out = _run(capsys, release, "--json")
    rows = json.loads(out)
    suite = load_suite(release)
    assert code == 0
    assert [(r["key"], r["route"], r["rows"], r["category"]) for r in rows] == [
        (b.key, b.route, b.rows, b.category) for b in suite.benchmarks
    ]
    assert {r["key"]: r["implemented"] for r in rows} == {k: registry.is_implemented(k) for k in suite.keys}


def test_a_missing_protocol_is_reported_and_fails_require_all(capsys, release, monkeypatch):
    monkeypatch.setitem(registry.PROTOCOLS, "mmstar", "trace_lib.benchmarks._not_written_yet:PROTOCOL")
    code, out = _run(capsys, release)
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("mmstar "))
    assert "NOT IMPLEMENTED" in line and "official_vlmevalkit" in line and f" {load_suite(release).benchmark('mmstar').rows} " in line
    code, out = _run(capsys, release, "--require-all")
    assert code == 1
    assert out.splitlines()[-1].endswith(f"protocols implemented; {load_suite(release).rows_per_model_seed} rows per "
                                         "model and seed")
