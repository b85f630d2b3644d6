"""hostile.py WORKBOOK WORKDIR: `workbook grade` on the fixture chapter (ch90: add(a, b)) with hostile
submissions, bad input and three honest ones. Every hostile one must be contained and get 0 with the
right reason, nothing outside the grader's scratch folders may change, and the honest ones get 10.
"""
import hashlib
import io
import json
import csv
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

workbook, work = Path(sys.argv[1]), Path(sys.argv[2]) / "hostile"
source = Path(__file__).resolve().parents[2]
fixture = source / "tests" / "grade" / "fixture"
solution = fixture / "solutions" / "90_fixture" / "add.cpp"
if work.exists():
    shutil.rmtree(work)
(work / "class").mkdir(parents=True)
out = work / "gradebook"

# A listener outside any sandbox: a submission that reaches it has a network.
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
port = listener.getsockname()[1]
arrived = []
threading.Thread(target=lambda: arrived.append(listener.accept()), daemon=True).start()

honest_file = work / "class" / "honest" / "chapters" / "90_fixture" / "add.cpp"
planted = [source / "tests" / "grade" / "fixture" / "PLANTED", workbook.parent / "PLANTED", Path("/tmp/PLANTED-grade"),
           honest_file.parent / "PLANTED"]

HEAD = """#include "add.hpp"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
namespace fixture {
static bool readable(const char* path) { std::ifstream in(path); return in.good() && in.peek() != EOF; }
long add(long a, long b) {
"""
TAIL = "\n}\n}  // namespace fixture\n"
bodies = {
    # name: (the body of add, expected points, the reason's pattern)
    "reads-solutions": (f'if (readable("{solution}") || readable("../../solutions/90_fixture/add.cpp") || '
                        f'readable("{source}/solutions/01_single_device/batches.cpp") || '
                        f'readable("{source}/chapters/01_single_device/hints.md") || '
                        f'readable("{workbook.parent}/grade-kit/ch90/objects/reference/add.cpp.o")) return a + b;\n'
                        f'return -1;',
                        0, r"add\(2, 3\) == 5|== 5"),
    "reads-another": (f'if (readable("{honest_file}") || readable("{out}/.work/honest/ch90/chapter/add.cpp")) '
                      f'return a + b;\nreturn -1;', 0, r"== 5"),
    "writes-the-grader-tree": ("".join(f'{{ std::ofstream("{p}") << "x"; }}\n' for p in planted) +
                               f'{{ std::ofstream f("{honest_file}", std::ios::app); f << "// x"; }}\nreturn -1;',
                               0, r"== 5"),
    "connects-out": (f'int s = socket(AF_INET, SOCK_STREAM, 0); sockaddr_in to{{}}; to.sin_family = AF_INET; '
                     f'to.sin_port = htons({port}); inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);\n'
                     f'if (connect(s, (sockaddr*)&to, sizeof to) == 0) return a + b;\nreturn -1;', 0, r"== 5"),
    "fork-bomb": ("for (;;) fork();", 0, r"limit of \d+ processes"),
    "endless-loop": ("for (volatile long i = 0;; i = i + 1) {}", 0, r"killed after \d+ s"),
    "allocates-30-gib": ("for (int i = 0; i < 30; ++i) { volatile char* p = (volatile char*)std::malloc(1L << 30); "
                         "for (long j = 0; p && j < (1L << 30); j += 4096) p[j] = 1; }\nreturn a + b;",
                         0, r"out of memory"),
    "prints-1-gb": ("static char line[1 << 20]; std::memset(line, 'x', sizeof line);\n"
                    "for (int i = 0; i < 1024; ++i) fwrite(line, 1, sizeof line, stdout);\nreturn a + b;",
                    0, r"printed more than"),
}
expected = {}
for name, (body, points, reason) in bodies.items():
    folder = work / "class" / name / "chapters" / "90_fixture"
    folder.mkdir(parents=True)
    (folder / "add.cpp").write_text(HEAD + body + TAIL)
    expected[name] = (points, reason)

def folder_submission(name, text):
    (work / "class" / name / "chapters" / "90_fixture").mkdir(parents=True)
    (work / "class" / name / "chapters" / "90_fixture" / "add.cpp").write_text(text)

folder_submission("honest", solution.read_text())
expected["honest"] = (10, r"^$")
folder_submission("includes-the-solution", f'#include "{solution}"\n')
expected["includes-the-solution"] = (0, r"does not compile")
folder_submission("does-not-compile", '#include "add.hpp"\nnamespace fixture { long add(long a, long b) { return a + } }\n')
expected["does-not-compile"] = (0, r"does not compile: .*error")
folder_submission("skeleton", (fixture / "chapters" / "90_fixture" / "add.cpp").read_text())
expected["skeleton"] = (0, r"ex90.1 is not implemented yet")
(work / "class" / "no-chapter" / "chapters" / "01_single_device").mkdir(parents=True)
(work / "class" / "no-chapter" / "chapters" / "01_single_device" / "batches.cpp").write_text("int x;\n")
expected["no-chapter"] = (0, r"has no chapters/90_fixture/")

def tarball(name, entries):
    with tarfile.open(work / "class" / f"{name}.tar.gz", "w:gz") as tar:
        for entry, text in entries:
            info = tarfile.TarInfo(entry)
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))

tarball("honest-tarball", [("alice/chapters/90_fixture/add.cpp", solution.read_bytes())])
expected["honest-tarball"] = (10, r"^$")
tarball("absolute-paths", [("/tmp/evil", b"x"), ("chapters/90_fixture/add.cpp", solution.read_bytes())])
expected["absolute-paths"] = (None, r"entry outside its folder")
tarball("dot-dot", [("chapters/../../evil", b"x"), ("chapters/90_fixture/add.cpp", solution.read_bytes())])
expected["dot-dot"] = (None, r"entry outside its folder")

def repository(name, extra=()):
    repo = work / "repos" / name
    (repo / "chapters" / "90_fixture").mkdir(parents=True)
    (repo / "chapters" / "90_fixture" / "add.cpp").write_bytes(solution.read_bytes())
    for path, text in extra:
        (repo / path).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=s", "-c", "user.email=s@example.org"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "mine"], check=True)
    subprocess.run(git[:3] + ["bundle", "create", "-q", str(work / "class" / f"{name}.bundle"), "HEAD", "--all"],
                   check=True, capture_output=True)

repository("honest-bundle")
expected["honest-bundle"] = (10, r"^$")
repository("lfs", [(".gitattributes", "*.cpp filter=lfs diff=lfs merge=lfs -text\n")])
expected["lfs"] = (None, r"Git LFS")
repository("submodules", [(".gitmodules", "[submodule \"x\"]\n\tpath = x\n\turl = ../x\n")])
expected["submodules"] = (None, r"submodules")

def fingerprint(path):
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(str(p).encode() + p.read_bytes())
    return h.hexdigest()

class_before = fingerprint(work / "class")
status_before = subprocess.run(["git", "-C", str(source), "status", "--porcelain"], capture_output=True, text=True).stdout
submissions = sorted(str(p) for p in (work / "class").iterdir())
done = subprocess.run([str(workbook), "grade", "--root", str(fixture), "--chapters", "ch90", "--out", str(out),
                       "--time", "10", "--memory", "1", "--processes", "64", "--output-mib", "4", *submissions],
                      capture_output=True, text=True, timeout=800)
print(done.stdout[-6000:], done.stderr[-3000:])
if done.returncode != 0:
    sys.exit(f"workbook grade failed: exit {done.returncode}")

failures = []
rows = {r["submission"]: r for r in csv.DictReader(open(out / "gradebook.csv"))}
for name, (points, reason) in expected.items():
    row = rows.get(name)
    if row is None:
        failures.append(f"{name}: no row in the gradebook")
        continue
    got = row["points"]
    if points is None:  # not graded at all: no points column
        ok = row["exercise"] == "" and re.search(reason, row["message"])
    else:
        ok = float(got or 0) == points and re.search(reason, row["message"])
    if not ok:
        failures.append(f"{name}: {got} points, {row['message']!r}; expected {points} and /{reason}/")
    results = out / name / "results.json"
    if not results.exists() or "score" not in json.loads(results.read_text()):
        failures.append(f"{name}: no results.json")
for p in planted:
    if p.exists():
        failures.append(f"{p} was written by a submission")
        p.unlink()
if fingerprint(work / "class") != class_before:
    failures.append("a submission changed the class's files")
if subprocess.run(["git", "-C", str(source), "status", "--porcelain"], capture_output=True, text=True).stdout != status_before:
    failures.append("a submission changed the workbook's checkout")
if arrived:
    failures.append("a submission connected to a listener outside its sandbox")
leftover = [p for p in Path("/sys/fs/cgroup/pids").glob("workbook-grade-*")] if Path("/sys/fs/cgroup/pids").is_dir() else []
leftover += list(Path("/sys/fs/cgroup").glob("workbook-grade-*"))
if leftover:
    failures.append(f"cgroups left behind: {leftover}")
print(open(out / "summary.md").read())

# The instructor's own tests (--tests): a [hidden] one refuses a submission that passes the visible
# tests only; results.json, which the student sees, does not say what it checked; the CSV does.
cheat = work / "class2" / "visible-only" / "chapters" / "90_fixture"
cheat.mkdir(parents=True)
(cheat / "add.cpp").write_text('#include "add.hpp"\nnamespace fixture { long add(long a, long b) '
                               '{ return a == -5 ? 0 : a + b; } }\n')
out2 = work / "gradebook-own-tests"
done = subprocess.run([str(workbook), "grade", "--root", str(fixture), "--chapters", "ch90", "--out", str(out2),
                       "--tests", str(fixture / "instructor"), str(cheat.parents[1]), str(work / "class" / "honest")],
                      capture_output=True, text=True, timeout=300)
print(done.stdout[-3000:], done.stderr[-3000:])
rows = {r["submission"]: r for r in csv.DictReader(open(out2 / "gradebook.csv"))} if done.returncode == 0 else {}
shown = json.loads((out2 / "visible-only" / "results.json").read_text())["tests"][0]["output"] if rows else ""
if rows.get("honest", {}).get("points") != "10" or rows.get("honest", {}).get("tests_total") != "2":
    failures.append(f"--tests: the honest submission got {rows.get('honest')}, not 10 with 2 tests")
if rows.get("visible-only", {}).get("points") != "0" or "-5" not in rows.get("visible-only", {}).get("message", ""):
    failures.append(f"--tests: the visible-only submission got {rows.get('visible-only')}, not 0 with the hidden test's message")
if "instructor keeps" not in shown or "-5" in shown:
    failures.append(f"--tests: results.json tells the student {shown!r}")
if failures:
    sys.exit("\n".join(["hostile submissions: FAILED"] + failures))
print(f"hostile submissions: {len(expected)} graded as expected; nothing outside the scratch folders changed")
