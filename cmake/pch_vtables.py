#!/usr/bin/env python3
"""pch_vtables.py BUILD_DIR — the classes whose virtual functions a file that
includes the precompiled header still instantiates for itself (Note [the
header's vtables], common/include/workbook/pch_vtables.hpp): it compiles an
empty file as the build compiles the first file that uses a built header, with Clang's -ftime-trace,
and prints the classes of the first instantiations done at the file's end."""
import json
import os
import shlex
import subprocess
import sys
import tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build/default"
commands = json.load(open(os.path.join(build, "compile_commands.json")))
def built_header(command):  # the precompiled header it uses, if built
    words = shlex.split(command)
    return "-include-pch" in words and os.path.exists(words[words.index("-include-pch") + 2])


uses_header = [c for c in commands if built_header(c["command"])]
if not uses_header:
    sys.exit(f"pch_vtables.py: no file in {build}/compile_commands.json uses the precompiled header")
words = shlex.split(uses_header[0]["command"])
words = words[: words.index("-o")] if "-o" in words else words
with tempfile.TemporaryDirectory() as scratch:
    empty = os.path.join(scratch, "empty.cpp")
    open(empty, "w").write("int workbook_empty_file = 0;\n")
    subprocess.run(words + ["-ftime-trace", "-ftime-trace-granularity=0", "-c", empty,
                            "-o", os.path.join(scratch, "empty.o")], check=True, cwd=uses_header[0]["directory"])
    trace = json.load(open(os.path.join(scratch, "empty.json")))

events = sorted((e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"] == "InstantiateFunction"),
                key=lambda e: (e["ts"], -e["dur"]))
outermost, end = [], -1
for e in events:
    if e["ts"] >= end:
        outermost.append(e)
        end = e["ts"] + e["dur"]


def class_of(function):  # "a::B<c::D>::f" -> "a::B<c::D>"
    depth, cut = 0, None
    for i, ch in enumerate(function):
        depth += ch in "<(" and 1 or ch in ">)" and -1 or 0
        if depth == 0 and function.startswith("::", i):
            cut = i
    return function[:cut] if cut else function


seconds = {}
for e in outermost:
    seconds[class_of(e["args"]["detail"])] = seconds.get(class_of(e["args"]["detail"]), 0) + e["dur"] / 1e6
print(f"an empty file instantiates {len(outermost)} functions for itself, {sum(seconds.values()):.2f} s:")
for name, s in sorted(seconds.items(), key=lambda item: -item[1]):
    print(f"  {s:6.2f} s  {name}")
