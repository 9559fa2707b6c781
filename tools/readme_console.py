#!/usr/bin/env python3
"""Refresh the README's console excerpts from this build.

Each ```console block that starts with `$ COMMAND` quotes lines of that command's output, with `...` where lines were
left out. The rules are the README test's (docs/testing.md "README figures"): a block with a `# in FILE` line
quotes FILE, the committed file the command writes (regenerate it first by running the command: validate, calibrate,
tools/dev.sh bench); any other `$ zerosim ...` block is rerun with build/sim/zerosim from the repository root. Each
quoted line is replaced by the output line that has the same words and differs from it in the fewest numbers
(searched in order after the previous line's match), so the excerpt keeps its choice of lines and takes this build's
figures. A quoted line that no output line matches is reported and left as it was; the script exits 1 if any was.

  python3 tools/readme_console.py            # rewrite README.md in place
  python3 tools/readme_console.py --check    # exit 1 if any excerpt differs from this build's output
  python3 tools/readme_console.py --only recommend,bloom   # only the blocks whose command contains a word

Prose figures around the blocks (errors in %, "X s here") are not touched: update them by hand.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def shape(line):
    """The line's words with every number and run of spaces made generic, and its numbers."""
    parts = NUMBER.split(line)
    words = [re.sub(r"\s+", " ", p).strip() for p in parts]
    return words, NUMBER.findall(line)


def best_match(quoted, output, start):
    words, numbers = shape(quoted)
    best = None
    for i in range(start, len(output)):
        w, n = shape(output[i])
        if w != words or len(n) != len(numbers):
            continue
        differing = sum(a != b for a, b in zip(n, numbers))
        if best is None or differing < best[1]:
            best = (i, differing)
            if differing == 0:
                break
    return None if best is None else best[0]


def blocks(lines):
    """(first, last) line indices of each console block's body that starts with a command."""
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```console" and i + 1 < len(lines) and lines[i + 1].startswith("$ "):
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            yield i + 1, j
            i = j
        i += 1


def command_of(lines, first):
    """The command (continuation lines joined) and the index of its last line."""
    text, k = lines[first][2:], first
    while text.endswith("\\"):
        k += 1
        text = text[:-1] + " " + lines[k].strip()
    return text, k


def output_of(cmd, body):
    """The lines the block quotes: its `# in FILE`, else the zerosim command's output; None for other commands."""
    in_file = [ln[len("# in "):].strip() for ln in body if ln.startswith("# in ")]
    if in_file:
        return (ROOT / in_file[0]).read_text().split("\n")
    if not cmd.startswith("zerosim "):
        return None
    argv = [os.path.expanduser(a) for a in shlex.split(cmd)]  # as a shell would expand ~/...
    argv[0] = str(ROOT / "build/sim/zerosim")
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    return (run.stdout + run.stderr).split("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="report differences, change nothing")
    ap.add_argument("--only", default="", help="comma-separated words: only blocks whose command contains one")
    args = ap.parse_args()
    only = [w for w in args.only.split(",") if w]
    readme = ROOT / "README.md"
    lines = readme.read_text().split("\n")
    unmatched = changed = 0
    for first, end in list(blocks(lines)):
        cmd, last = command_of(lines, first)
        if only and not any(w in cmd for w in only):
            continue
        output = output_of(cmd, lines[last + 1:end])
        if output is None:
            continue
        pos = 0
        for k in range(last + 1, end):
            if lines[k].strip() == "..." or lines[k].startswith("# in "):
                continue
            m = best_match(lines[k], output, pos)
            if m is None:
                print(f"README.md:{k + 1}: no line of `{cmd}` matches: {lines[k]}", file=sys.stderr)
                unmatched += 1
                continue
            if output[m] != lines[k]:
                print(f"README.md:{k + 1}:\n  - {lines[k]}\n  + {output[m]}")
                changed += 1
                lines[k] = output[m]
            pos = m + 1
    if not args.check:
        readme.write_text("\n".join(lines))
    print(f"{changed} line(s) {'differ' if args.check else 'updated'}, {unmatched} unmatched")
    return 1 if unmatched or (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
