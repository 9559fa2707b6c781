#!/usr/bin/env python3
"""Checks of tools/deepspeed_config_keys.py and the table it wrote, data/deepspeed_config_keys.csv (a CTest test).

CI has neither network nor a DeepSpeed clone, so the script cannot be re-run against DeepSpeed here. What is checked:
1. The script, run on tests/data/deepspeed-fixture (a small DeepSpeed-like tree), writes expected.csv exactly
   (every data line; the comment lines carry the script's hash).
2. data/deepspeed_config_keys.csv was written by this very script: its header's sha256 is the script's.
3. The table covers 0.14 ... 0.19, each at one tag (the last patch tag the script names) and one 40-hex commit, and
   every row cites a DeepSpeed file and line.
Usage: deepspeed_config_keys_test.py SOURCE_DIR
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
    script = os.path.join(root, "tools", "deepspeed_config_keys.py")
    fixture = os.path.join(root, "tests", "data", "deepspeed-fixture")
    failures = []

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "keys.csv")
        subprocess.run([sys.executable, script, "--tree", fixture, "--version", "0.99", "--tag", "v0.99.1", "--commit",
                        "0123456789abcdef0123456789abcdef01234567", "--out", out], check=True)
        with open(out, encoding="utf-8") as f:
            got = data_lines(f.read())
    with open(os.path.join(fixture, "expected.csv"), encoding="utf-8") as f:
        want = data_lines(f.read())
    if got != want:
        failures.append("the fixture's table differs from expected.csv:\n  got  %s\n  want %s" % (got, want))

    with open(script, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    table = os.path.join(root, "data", "deepspeed_config_keys.csv")
    with open(table, encoding="utf-8") as f:
        text = f.read()
    if ("sha256 " + sha) not in text.splitlines()[1]:
        failures.append("%s was not written by this script (sha256 %s): run tools/deepspeed_config_keys.py "
                        "--git-dir DEEPSPEED.git --out data/deepspeed_config_keys.csv" % (table, sha))
    sys.path.insert(0, os.path.join(root, "tools"))
    import deepspeed_config_keys as script_module
    tags = dict(script_module.VERSIONS)
    rows = list(csv.DictReader(data_lines(text)))
    seen = {}
    for r in rows:
        seen.setdefault(r["version"], set()).add((r["tag"], r["commit"]))
        if not re.fullmatch(r"deepspeed/[\w/]+\.py:\d+", r["source"]):
            failures.append("row %s %s cites no DeepSpeed file:line (%r)" % (r["version"], r["key"], r["source"]))
    if sorted(seen) != sorted(tags):
        failures.append("versions %s, expected %s" % (sorted(seen), sorted(tags)))
    for version, pairs in seen.items():
        if len(pairs) != 1 or next(iter(pairs))[0] != tags.get(version) or \
                not re.fullmatch(r"[0-9a-f]{40}", next(iter(pairs))[1]):
            failures.append("version %s read at %s, expected one commit of %s" % (version, pairs, tags.get(version)))

    for f in failures:
        print("FAIL:", f)
    print("%d rows of %d versions checked, %d failures" % (len(rows), len(seen), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
