#!/usr/bin/env python3
"""Checks of tools/torch_fsdp_arguments.py and the table it wrote, data/torch_fsdp_arguments.csv (a CTest test).

CI has neither network nor torch's packages, so the script cannot be re-run against torch here. What is checked:
1. The script, run on tests/data/torch-fsdp-fixture (a small torch-like tree written for this test, whose README says
   what each file exercises), writes expected.csv exactly (every data line; the comment lines carry the script's hash).
2. data/torch_fsdp_arguments.csv was written by this very script: its header's sha256 is the script's.
3. The table covers the script's VERSIONS, each at one release and one origin naming the Debian package version the
   script names with its SHA-256, and every row cites a torch file and line.
Usage: torch_fsdp_arguments_test.py SOURCE_DIR
"""

import csv
import hashlib
import os
import re
import subprocess
import sys
import tempfile


def data_lines(text):
    return [line for line in text.splitlines() if not line.startswith("#")]


def main():
    root = sys.argv[1]
    script = os.path.join(root, "tools", "torch_fsdp_arguments.py")
    fixture = os.path.join(root, "tests", "data", "torch-fsdp-fixture")
    failures = []

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "arguments.csv")
        subprocess.run([sys.executable, script, "--tree", fixture, "--version", "9.9", "--release", "v9.9.0",
                        "--origin", "fixture", "--out", out], check=True)
        with open(out, encoding="utf-8") as f:
            got = data_lines(f.read())
    with open(os.path.join(fixture, "expected.csv"), encoding="utf-8") as f:
        want = data_lines(f.read())
    if got != want:
        failures.append("the fixture's table differs from expected.csv:\n  got  %s\n  want %s" % (got, want))

    with open(script, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    table = os.path.join(root, "data", "torch_fsdp_arguments.csv")
    with open(table, encoding="utf-8") as f:
        text = f.read()
    if ("sha256 " + sha) not in text.splitlines()[1]:
        failures.append("%s was not written by this script (sha256 %s): run tools/torch_fsdp_arguments.py "
                        "--debs DIR --out data/torch_fsdp_arguments.csv" % (table, sha))
    sys.path.insert(0, os.path.join(root, "tools"))
    import torch_fsdp_arguments as script_module
    expected = {v: (release, package) for v, release, package in script_module.VERSIONS}
    rows = list(csv.DictReader(data_lines(text)))
    seen = {}
    for r in rows:
        seen.setdefault(r["version"], set()).add((r["release"], r["origin"]))
        if not re.fullmatch(r"torch/[\w/]+\.py:\d+", r["source"]):
            failures.append("row %s %s %s cites no torch file:line (%r)" % (r["version"], r["callable"],
                                                                           r["argument"], r["source"]))
    if sorted(seen) != sorted(expected):
        failures.append("versions %s, expected %s" % (sorted(seen), sorted(expected)))
    for version, pairs in seen.items():
        release, package = expected.get(version, ("?", "?"))
        origin = r"Debian python3-torch %s amd64 sha256 [0-9a-f]{64}" % re.escape(package)
        if len(pairs) != 1 or next(iter(pairs))[0] != release or not re.fullmatch(origin, next(iter(pairs))[1]):
            failures.append("version %s read as %s, expected one origin of %s %s" % (version, pairs, release, package))

    for f in failures:
        print("FAIL:", f)
    print("%d rows of %d versions checked, %d failures" % (len(rows), len(seen), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
