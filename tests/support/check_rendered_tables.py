#!/usr/bin/python3
"""Every table of a results.md that says where it comes from is what its
command prints from the kept files today.

    check_rendered_tables.py [--write] [--workbook PATH] MARKDOWN

--write puts each table back as its command prints it (for the writer,
after a data file or tables.py changed), and checks nothing.

A table's source is the comment above it, `<!-- rendered: COMMAND -->`, run
in the Markdown file's folder (its arguments name kept files there):
`tables.py ARGS` (any script) with this Python, `workbook ARGS` with the
workbook CLI given by --workbook. The table is the lines from the comment to
the next blank line; where the comment is followed by a code fence, the table
is the whole fence, blank lines included (the README's tour table).
Exits 1 naming the first table that differs, and its first differing line.
"""
import os
import shlex
import subprocess
import sys

MARK = "<!-- rendered: "


def run(command, folder, workbook):
    if command[0] == "workbook":
        if workbook is None:
            sys.exit(f"`{' '.join(command)}` needs --workbook PATH")
        return subprocess.run([workbook] + command[1:], cwd=folder, capture_output=True, text=True)
    return subprocess.run([sys.executable] + command, cwd=folder, capture_output=True, text=True)


def main(path, write=False, workbook=None):
    folder = os.path.dirname(os.path.abspath(path))
    lines = open(path).read().splitlines()
    found, rewritten = 0, []
    for i, line in enumerate(lines):
        if not line.startswith(MARK):
            continue
        found += 1
        command = shlex.split(line[len(MARK):].removesuffix("-->").strip())
        printed = run(command, folder, workbook)
        if printed.returncode != 0:
            sys.exit(f"{path}:{i + 1}: `{' '.join(command)}` failed: {printed.stderr.strip()}")
        fenced = lines[i + 1:i + 2] == ["```"]
        if fenced:
            expected = [l.rstrip() for l in printed.stdout.rstrip("\n").splitlines()]
            written = []
            for following in lines[i + 2:]:
                if following == "```":
                    break
                written.append(following.rstrip())
        else:
            expected = [l for l in printed.stdout.splitlines() if l.strip()]
            written = []
            for following in lines[i + 1:]:
                if not following.strip():
                    break
                written.append(following)
        if write:
            rewritten.append((i + 1 + fenced, len(written), expected))
            continue
        for k, (want, have) in enumerate(zip(expected, written)):
            if want != have:
                sys.exit(f"{path}:{i + 2 + fenced + k}: the table differs from `{' '.join(command)}`:\n"
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
    args = sys.argv[1:]
    write = args[:1] == ["--write"]
    args = args[write:]
    workbook = None
    if args[:1] == ["--workbook"]:
        workbook, args = os.path.abspath(args[1]), args[2:]
    sys.exit(main(args[0], write=write, workbook=workbook))
