#!/usr/bin/python3
"""Every table of a results.md that says where it comes from is what its
command prints from the kept files today.

    check_rendered_tables.py [--write] RESULTS_MD

--write puts each table back as its command prints it (for the writer,
after a data file or tables.py changed), and checks nothing.

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


def main(path, write=False):
    folder = os.path.dirname(os.path.abspath(path))
    lines = open(path).read().splitlines()
    found, rewritten = 0, []
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
            if not following.strip():
                break
            written.append(following)
        if write:
            rewritten.append((i + 1, len(written), expected))
            continue
        for k, (want, have) in enumerate(zip(expected, written)):
            if want != have:
                sys.exit(f"{path}:{i + 2 + k}: the table differs from `{' '.join(command)}`:\n"
                         f"  written:  {have}\n  rendered: {want}")
        if len(expected) != len(written):
            sys.exit(f"{path}:{i + 1}: the table has {len(written)} lines, `{' '.join(command)}` prints "
                     f"{len(expected)}")
    if found == 0:
        sys.exit(f"{path}: no `{MARK}...-->` table to check")
    if write:
        for start, count, table in reversed(rewritten):
            lines[start:start + count] = table
        with open(path, "w") as out:
            out.write("\n".join(lines) + "\n")
        print(f"{path}: {found} table(s) rendered again")
        return 0
    print(f"{path}: {found} table(s) as rendered from their files")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        sys.exit(main(sys.argv[2], write=True))
    sys.exit(main(sys.argv[1]))
