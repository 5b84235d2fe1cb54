"""``os._exit`` inside a method fails the test that called it; the run goes on (transformer_spec/guard/exits.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from transformer_spec.catalogue.patching import write_patched_reference
from transformer_spec.layout import ROOT

FORWARD = '        """``x (..., D)`` -> ``(..., D)``: ``linear2(dropout(gelu(linear1(x))))``."""\n'


def test_os_exit_in_a_method_is_that_tests_failure(tmp_path):
    impl = write_patched_reference(tmp_path, [("feedforward.py", FORWARD, FORWARD + "        import os; os._exit(3)\n")],
                                   "exits_in_forward")
    out = tmp_path / "grade.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "spec_tests/test_torch_oracle.py", "-q", "-p", "no:cacheprovider",
                           "--impl", str(impl), "--grade-json", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:]
    tests = {t["name"].split("::")[-1]: t for t in json.loads(out.read_text())["tests"]}
    ffn = tests["test_feed_forward_matches_torch[float64]"]
    assert ffn["status"] == "failed" and "os._exit(3)" in ffn["output"] and ffn["extra_data"]["kind"] == "error"
    assert tests["test_sdpa_matches_torch[float64-scale_none-none]"]["status"] == "passed"  # the run went on
