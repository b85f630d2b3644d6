"""synthetic_class.py WORKBOOK WORKDIR CHAPTER: `workbook grade` on a class whose every score is known.

The reference is a full-marks student; one student per mutant below carries that known-wrong solution
(tests/mutants/) in one exercise; two are the skeleton with some exercises done. Each must get exactly
the expected points, under both rules of Note [earlier exercises] (common/grade/grader.py): with `both`,
a mistake in an earlier exercise costs only its own points; with `own`, the later exercises that call
it fail too.
"""
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

workbook, chapter = Path(sys.argv[1]), sys.argv[3]
work = Path(sys.argv[2]) / f"class-{chapter}"
source = Path(__file__).resolve().parents[2]
folder = next(p.parent.name for p in (source / "chapters").glob("*/chapter.json")
              if json.loads(p.read_text())["id"] == chapter)
manifest = json.loads((source / "chapters" / folder / "chapter.json").read_text())
exercises = [e["id"] for e in manifest["exercises"]]
file_of = {e["id"]: e["file"] for e in manifest["exercises"]}
if work.exists():
    shutil.rmtree(work)

def student(name, files):
    """files: exercise file -> its text; the rest of the chapter's exercise files are the reference's."""
    d = work / "class" / name / "chapters" / folder
    d.mkdir(parents=True)
    for f in set(file_of.values()):
        (d / f).write_text(files.get(f, (source / "solutions" / folder / f).read_text()))

def skeleton(f):
    return (source / "chapters" / folder / f).read_text()

def mutated(patch):
    """The reference's file with a mutant's patch applied."""
    text = patch.read_text()
    target = next(l.split()[1] for l in text.splitlines() if l.startswith("--- "))
    scratch = work / "patched"
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / Path(target).parent).mkdir(parents=True)
    shutil.copy(source / target, scratch / target)
    subprocess.run(["patch", "-s", "-p0", "-d", str(scratch), "-i", str(patch)], check=True)
    return Path(target).name, (scratch / target).read_text()

full = {e: 10 for e in exercises}
expected = {"both": {}, "own": {}}
student("reference", {})
expected["both"]["reference"] = expected["own"]["reference"] = dict(full)

# One mutant per exercise: its exercise 0. Under `own`, an exercise after it that calls it fails too
# (`calls`: which exercises' tests call which earlier exercise's code, for this chapter).
calls = {"ch12": {"ex12.3": ["ex12.1"]}}[chapter]
mutants = {"ch12": ["ex12.1-output-not-rescaled", "ex12.2-consecutive-chunks", "ex12.3-keys-gathered"]}[chapter]
for exercise, mutant in zip(exercises, mutants):
    patch = source / "tests" / "mutants" / f"{mutant}.patch"
    f, text = mutated(patch)
    name = f"mutant-{patch.stem}"
    student(name, {f: text})
    expected["both"][name] = {**full, exercise: 0}
    expected["own"][name] = {e: 0 if e == exercise or exercise in calls.get(e, []) else 10 for e in exercises}

# The first exercise done, the rest the skeleton's; and the first left a skeleton, the rest done.
first, rest = exercises[0], exercises[1:]
student("first-only", {file_of[e]: skeleton(file_of[e]) for e in rest})
expected["both"]["first-only"] = expected["own"]["first-only"] = {e: 10 if e == first else 0 for e in exercises}
student("all-but-first", {file_of[first]: skeleton(file_of[first])})
expected["both"]["all-but-first"] = {**full, first: 0}
expected["own"]["all-but-first"] = {e: 0 if e == first or first in calls.get(e, []) else 10 for e in exercises}

failures = []
for rule in ("both", "own"):
    out = work / f"gradebook-{rule}"
    names = sorted(expected[rule]) if rule == "both" else [n for n in sorted(expected[rule])
                                                         if expected["own"][n] != expected["both"][n]]
    # With `both`, the timing pass too, one run each: only the reference passes every exercise.
    timing = ["--timing", "1"] if rule == "both" else []
    done = subprocess.run([str(workbook), "grade", "--chapters", chapter, "--out", str(out), "--earlier", rule,
                           *timing, *[str(work / "class" / n) for n in names]], capture_output=True, text=True,
                          timeout=1500)
    print(done.stdout[-4000:], done.stderr[-3000:])
    if done.returncode != 0:
        sys.exit(f"workbook grade --earlier {rule} failed: exit {done.returncode}")
    got = {}
    for row in csv.DictReader(open(out / "gradebook.csv")):
        got.setdefault(row["submission"], {})[row["exercise"]] = (float(row["points"]), row["message"])
    for name in names:
        for e in exercises:
            points, message = got.get(name, {}).get(e, (None, "no row"))
            if points != expected[rule][name][e]:
                failures.append(f"--earlier {rule}: {name} {e}: {points} points ({message!r}), "
                                f"expected {expected[rule][name][e]}")
    print(open(out / "summary.md").read())
    if rule == "both":
        board = {b["name"]: b["value"] for b in json.loads((out / "reference" / "results.json").read_text())["leaderboard"]}
        ratio = board.get(f"{chapter} time / reference's")
        if ratio is None or not 0.5 < ratio < 2:  # the reference against itself: about 1
            failures.append(f"the reference timed against itself: {ratio} (the leaderboard: {board})")
        timed = {row["submission"] for row in csv.DictReader(open(out / "gradebook.csv"))
                 if row["time_vs_reference"] and not row["time_vs_reference"].startswith("not timed")}
        if timed != {"reference"}:
            failures.append(f"timed: {sorted(timed)}; only the reference passes every exercise")
if failures:
    sys.exit("\n".join(["synthetic class: FAILED"] + failures))
print(f"synthetic class of {chapter}: {len(expected['both'])} students, every score as expected under both rules")
