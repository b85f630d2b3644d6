"""grade.py: `workbook grade`, a class's submissions built and tested in sandboxes, into a gradebook.

    workbook grade SUBMISSION... --chapters ch13[,ch12,ex11.3] [--out DIR] [--points FILE]
                   [--earlier both|own] [--tests DIR] [--timing N] [--time S] [--memory GIB] [--jobs N]
    workbook grade --check        whether this machine can grade (the sandbox starts)
    workbook grade --prepare --chapters ch13      the kits alone (before an array job's tasks)
    workbook grade --merge DIR... --out DIR       the gradebook of a class graded in pieces

Per submission it writes DIR/NAME/results.json (Gradescope's format) and
DIR/NAME/instructor.json, and for the class DIR/gradebook.csv and
DIR/summary.md (gradebook.py). Student code runs only inside the sandbox
(sandbox.py), built against the chapter's kit (kit.py) by grader.py.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gradebook  # noqa: E402
import kit as kits  # noqa: E402
from grader import Grader  # noqa: E402
from sandbox import GIB, Limits, unavailable  # noqa: E402
from submissions import Submission, SubmissionError, name_of  # noqa: E402


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="workbook grade", description="A class's submissions built and tested, each in "
                                "a sandbox, into a gradebook (README.md, \"Grading a class\").")
    p.add_argument("--source", type=Path, required=True, help=argparse.SUPPRESS)
    p.add_argument("--build", type=Path, required=True, help=argparse.SUPPRESS)
    p.add_argument("--workbook", type=Path, required=True, help=argparse.SUPPRESS)
    p.add_argument("--libtorch", default="unknown", help=argparse.SUPPRESS)
    p.add_argument("--root", type=Path, help=argparse.SUPPRESS)  # tests/grade/fixture: its chapters/ and solutions/
    p.add_argument("submissions", nargs="*", type=Path, help="folders, tarballs, git repositories or bundles")
    p.add_argument("--chapters", default="",
                   help="what to grade, comma-separated: chapters (ch12), or exercises (ex13.2: that one alone)")
    p.add_argument("--out", type=Path, help="where the gradebook goes (default build/<preset>/grade)")
    p.add_argument("--points", type=Path, help="the grading file (JSON; default: 10 points an exercise, all or none)")
    p.add_argument("--earlier", choices=("both", "own"), default=None,
                   help="both: an exercise that fails on the student's code is graded again with the reference's "
                        "earlier exercises in place of theirs, and keeps the better; own: theirs alone (default both)")
    p.add_argument("--time", type=float, default=300, help="seconds each sandboxed command may run (default 300)")
    p.add_argument("--memory", type=float, default=4, help="GiB a sandboxed command may use (default 4)")
    p.add_argument("--processes", type=int, default=256, help="processes and threads (default 256)")
    p.add_argument("--output-mib", type=float, default=8, help="MiB a sandboxed command may print (default 8)")
    p.add_argument("--jobs", type=int, default=1, help="submissions graded at once (default 1)")
    p.add_argument("--tests", type=Path, metavar="DIR",
                   help="your own tests, DIR/chNN/*.cpp, beside the chapter's, tagged with their exercise; "
                        "tagged [hidden] too, their failures are not shown to students")
    p.add_argument("--timing", type=int, default=0, metavar="REPEATS",
                   help="after the grading, time the chapter's program of each submission that passes every "
                        "exercise against the reference's, REPEATS runs each, interleaved (default 0: no timing)")
    p.add_argument("--check", action="store_true", help="only say whether this machine can grade")
    p.add_argument("--prepare", action="store_true",
                   help="make the chapters' kits (and grade the reference with them), even when current")
    p.add_argument("--kits-ready", action="store_true",
                   help="use the kits --prepare made; never make one (the tasks of an array job)")
    p.add_argument("--merge", type=Path, nargs="+", metavar="DIR",
                   help="merge the results.json files under these folders into one gradebook (after an array job)")
    args = p.parse_args(argv)
    # A job cancelled (SIGTERM) ends as an exit does: the scratch folder is removed, the sandboxes with it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    why = unavailable()
    if why:
        print(f"workbook grade: no sandbox can start on this machine: {why}. Grading runs students' code only "
              f"inside one (README.md, \"Grading a class\").", file=sys.stderr)
        return 2
    if args.check:
        print("workbook grade: the sandbox starts here" + ("" if os.geteuid() == 0 else
              " (not root: memory and processes are bounded per process by prlimit, not by a cgroup)"))
        return 0
    if args.merge:
        return merge(args.merge, (args.out or args.build / "grade").resolve())
    if not args.chapters or not (args.submissions or args.prepare):
        p.error("give --chapters, and submissions (or --prepare)")
    points = {"default": 10, "partial": False, "earlier": "both", "points": {}}
    if args.points:
        try:
            points.update(gradebook.read_grading_file(args.points))
        except ValueError as e:
            print(f"workbook grade: {e}", file=sys.stderr)
            return 2
    missing = [str(p) for p in args.submissions if not p.exists()]
    if missing:
        print(f"workbook grade: no such submission: {', '.join(missing)} (nothing was graded)", file=sys.stderr)
        return 2
    earlier = args.earlier or points.get("earlier", "both")
    limits = Limits(wall_s=args.time, cpu_s=int(args.time), memory_bytes=int(args.memory * GIB),
                    pids=args.processes, output_bytes=int(args.output_mib * (1 << 20)))
    out = (args.out or args.build / "grade").resolve()
    out.mkdir(parents=True, exist_ok=True)
    grader = Grader(args.source.resolve(), args.build.resolve(), args.workbook, out, limits, points, earlier)
    grader.libtorch = args.libtorch
    grader.root = args.root.resolve() if args.root else None
    grader.own_tests = args.tests.resolve() if args.tests else None
    # Chapters, and for a chapter named by its exercises only, those (None: all of it).
    chapters: list[str] = []
    only: dict[str, set[str] | None] = {}
    for item in (c.strip() for c in args.chapters.split(",") if c.strip()):
        exercise = re.fullmatch(r"ex(\d+)\.\d+", item)
        chapter = f"ch{int(exercise.group(1)):02d}" if exercise else item
        if chapter not in chapters:
            chapters.append(chapter)
            only[chapter] = set() if exercise else None
        if exercise and only[chapter] is not None:
            only[chapter].add(item)
        elif not exercise:
            only[chapter] = None
    started = time.monotonic()
    try:
        for chapter in chapters:
            meta = grader.kit(chapter, remake=args.prepare, ready=args.kits_ready)
            unknown = (only[chapter] or set()) - {e["id"] for e in meta["exercises"]}
            if unknown:
                raise kits.KitError(f"{meta['chapter']} has no exercise {', '.join(sorted(unknown))}")
        known = {e["id"] for meta in grader.kits.values() for e in meta["exercises"]}
        stray = sorted(e for e in points.get("points", {}) if e not in known)
        if stray:
            raise kits.KitError(f"--points {args.points}: {', '.join(stray)} is not an exercise of "
                                f"{', '.join(chapters)}")
    except kits.KitError as e:
        print(f"workbook grade: {e}", file=sys.stderr)
        return 2
    kit_s = time.monotonic() - started
    if args.prepare and not args.submissions:
        print(f"workbook grade: the kits of {', '.join(chapters)} are ready in {grader.build / 'grade-kit'} "
              f"({kit_s:.0f} s); the reference got full marks with each")
        return 0

    lock, taken = threading.Lock(), collections.Counter()

    def one(path: Path) -> gradebook.Graded:
        t0 = time.monotonic()
        with lock:  # two submissions of one name (alice/ and alice.tar.gz) are kept apart
            name = name_of(path)
            taken[name] += 1
            name += f"-{taken[name]}" if taken[name] > 1 else ""
        graded = gradebook.Graded(name=name, chapters={})
        try:
            submission = Submission(path)
            submission.name = name
            for chapter in chapters:
                graded.chapters[grader.kits[chapter]["chapter"]] = grader.grade(submission, chapter, only[chapter])
        except SubmissionError as e:
            graded.error = str(e)
        graded.seconds = time.monotonic() - t0
        print(f"{graded.name}: {graded.summary_line()} ({graded.seconds:.0f} s)", flush=True)
        return graded

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        graded = list(pool.map(one, args.submissions))
    if args.timing > 0:
        for chapter in chapters:
            grader.time_chapter(chapter, graded, args.timing)
    any_kit = next(iter(grader.kits.values()))
    context = {"commit": any_kit["commit"], "libtorch": any_kit["libtorch"], "earlier": earlier,
               "limits": dataclasses.asdict(limits), "kit_s": round(kit_s, 1), "chapters": chapters}
    gradebook.write(out, graded, context)
    print(f"workbook grade: {len(graded)} submission(s) in {time.monotonic() - started:.0f} s "
          f"(the kits {kit_s:.0f} s); the gradebook is {out / 'gradebook.csv'}, the summary {out / 'summary.md'}")
    return 0


def merge(folders: list[Path], out: Path) -> int:
    """The gradebook of a class graded in pieces (an array job's tasks, each with its own --out): their
    NAME/instructor.json files."""
    graded, contexts = [], []
    for folder in folders:
        for path in sorted(folder.glob("**/instructor.json")):
            if out in path.parents and path.parent.parent == out:
                continue  # a gradebook already merged into `out`
            g, context = gradebook.read_results(path)
            graded.append(g)
            contexts.append(context)
    if not graded:
        print(f"workbook grade --merge: no instructor.json under {', '.join(map(str, folders))}", file=sys.stderr)
        return 2
    commits = {c.get("commit") for c in contexts}
    if len(commits) > 1:
        print(f"workbook grade --merge: the pieces were graded against different checkouts ({', '.join(commits)})",
              file=sys.stderr)
        return 2
    names = collections.Counter(g.name for g in graded)
    if any(n > 1 for n in names.values()):
        print(f"workbook grade --merge: {', '.join(n for n, k in names.items() if k > 1)} graded more than once",
              file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    context = dict(contexts[0])
    context["kit_s"] = max(c.get("kit_s", 0) for c in contexts)
    gradebook.write(out, sorted(graded, key=lambda g: g.name), context)
    print(f"workbook grade --merge: {len(graded)} submission(s) into {out / 'gradebook.csv'} and {out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
