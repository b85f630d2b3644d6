#!/usr/bin/python3
"""Every table of a results.md that says where it comes from is what its
command prints from the kept files today.

    check_rendered_tables.py RESULTS_MD

A table's source is the comment above it, `<!-- rendered: tables.py ARGS -->`,
run with this Python in the results file's folder (ARGS name kept files
there); the table is the lines from the comment to the next blank line.
Exits 1 naming the first table that differs, and its first differing line.
"""
import os
import shlex
import subprocess
import sys

MARK = "<!-- rendered: "


def main(path):
    folder = os.path.dirname(os.path.abspath(path))
    lines = open(path).read().splitlines()
    found = 0
    for i, line in enumerate(lines):
        if not line.startswith(MARK):
            continue
        found += 1
        command = shlex.split(line[len(MARK):].removesuffix("-->").strip())
        printed = subprocess.run([sys.executable] + command, cwd=folder, capture_output=True, text=True)
        if printed.returncode != 0:
            sys.exit(f"{path}:{i + 1}: `{' '.join(command)}` failed: {printed.stderr.strip()}")
        expected = [l for l in printed.stdout.splitlines() if l.strip()]
        written = []
        for following in lines[i + 1:]:
            if not following.strip() and written:
                break
            if following.strip():
                written.append(following)
        for k, (want, have) in enumerate(zip(expected, written)):
            if want != have:
                sys.exit(f"{path}:{i + 2 + k}: the table differs from `{' '.join(command)}`:\n"
                         f"  written:  {have}\n  rendered: {want}")
        if len(expected) != len(written):
            sys.exit(f"{path}:{i + 1}: the table has {len(written)} lines, `{' '.join(command)}` prints "
                     f"{len(expected)}")
    if found == 0:
        sys.exit(f"{path}: no `{MARK}...-->` table to check")
    print(f"{path}: {found} table(s) as rendered from their files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
