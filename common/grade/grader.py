"""grader.py: one submission's chapter built and tested against the chapter's kit (kit.py), each command in
its own sandbox (sandbox.py); the reference graded once per kit; and the timing pass.

Note: [earlier exercises] A chapter's exercises build on each other: ex13.3's
tests call ex13.2's router. Each exercise is first graded on the student's
own files. With `--earlier both` (the default), an exercise that fails there
is graded again with the reference's objects in place of the files of the
exercises before it (never its own file's), and keeps the better result: a
mistake in ex13.2 then costs ex13.2's points only. With `--earlier own` it
costs every exercise that fails because of it.

Note: [the instructor's tests] `--tests DIR` adds the instructor's own Catch2
tests, DIR/chNN/*.cpp, written as the chapter's are and tagged with their
exercise ([ex13.2]); they are compiled into the kit (outside any sandbox) and
count among the exercise's tests. Tagged [hidden] as well, a failure of theirs
is "a test your instructor keeps failed" in results.json, which students see;
gradebook.csv, the instructor's, keeps its message.
"""
from __future__ import annotations

import atexit
import dataclasses
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import kit as kits
from gradebook import ExerciseResult
from sandbox import NOBODY, Limits, Sandbox
from submissions import Submission

QUICK = "~[.]~[slow]~[timing]~[gpu]"  # what `workbook check` runs


class Grader:
    def __init__(self, source: Path, build: Path, workbook: Path, out: Path, limits: Limits, points: dict,
                 earlier: str):
        self.source, self.build, self.workbook, self.out = source, build, workbook, out
        self.limits, self.points, self.earlier = limits, points, earlier
        self.kits: dict[str, dict] = {}
        # Note: [scratch under /tmp] Each submission's files and build are in a folder of
        # its own under one made here, in /tmp, that the sandbox's user (nobody) can reach
        # wherever --out is (a folder in a home of mode 700 is not reachable by it).
        self.scratch = Path(tempfile.mkdtemp(prefix="workbook-grade-"))
        os.chmod(self.scratch, 0o711)
        atexit.register(shutil.rmtree, self.scratch, ignore_errors=True)  # SIGTERM too: main()
        self.libtorch = "unknown"
        self.root: Path | None = None  # the fixture's tree instead of the workbook's (tests/grade)
        self.own_tests: Path | None = None  # Note [the instructor's tests]
        self.objects: dict[tuple[str, str], tuple] = {}  # (submission, chapter) -> (scratch, objects, problems)

    # ---- the kit, and the reference graded as a student: the test names ----
    def kit(self, chapter: str, remake: bool = False, ready: bool = False) -> dict:
        """remake: made again even when its stamp is current (--prepare); ready: never made here, only
        reused (the tasks of an array job, which run at once: --kits-ready)."""
        if chapter not in self.kits:
            cid = kits.load_manifest(self.root or self.source, chapter)["id"]
            path = self.build / "grade-kit" / cid
            stamp = kits.stamp(self.source, self.build, self.root, self.own_tests)
            try:
                meta = json.loads((path / "kit.json").read_text())
            except (OSError, ValueError):
                meta = {}
            reusable = meta.get("stamp") == stamp and "tests" in meta
            if ready and not reusable:
                raise kits.KitError(f"the kit of {cid} is {'stale' if meta else 'not made'}: run `workbook grade "
                                    f"--prepare --chapters {cid}` first (and nothing in the checkout changed since)")
            if reusable and not remake:
                meta["path"] = str(path)
                self.kits[chapter] = meta
                return meta
            path = kits.prepare(self.source, self.build, chapter, self.workbook, self.libtorch, self.root,
                                self.own_tests)
            meta = json.loads((path / "kit.json").read_text())
            meta["path"] = str(path)
            meta["sees"] = meta["sees"] + [str(self.source / "data")] * (self.source / "data").is_dir()
            self.kits[chapter] = meta
            for seen in [path] + [Path(p) for p in meta["sees"]]:
                closed = unreachable(seen)
                if closed:
                    raise kits.KitError(f"the sandbox runs as nobody, who cannot reach {seen}: {closed} lets no "
                                        f"one else through (chmod o+x {closed}, or keep the workbook elsewhere)")
            scratch = self.scratch / "reference" / meta["chapter"]
            reference = self._reference_objects(meta, meta["exercise_files"], scratch)
            binary, why = self._link(meta, scratch, reference, "test_reference")
            if binary is None:
                raise kits.KitError(f"the reference does not link in the kit: {why}")
            meta["tests"] = {}
            for e in meta["exercises"]:
                records, reason, _ = self._run_tests(meta, scratch, binary, e["id"])
                failed = [record["message"] for record in records.values() if not record["passed"]]
                if reason or failed or not records:
                    raise kits.KitError(f"the reference fails {e['id']}'s tests in the sandbox (one of your --tests?): "
                                        f"{reason or (failed[:1] or ['no test ran'])[0]}")
                meta["tests"][e["id"]] = sorted(records)
            (path / "kit.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "path"}, indent=1))
        return self.kits[chapter]

    def _sandbox(self, meta: dict, scratch: Path, rw: list[Path], cwd: Path) -> Sandbox:
        return Sandbox("grade", self.limits, ro=self._seen(meta) + [scratch], rw=rw, cwd=cwd)

    @staticmethod
    def _seen(meta: dict) -> list[Path]:
        """What every sandbox of a chapter reads: the kit but its reference objects (Note [the grading kit]),
        LibTorch, the common headers, the data."""
        kit = Path(meta["path"])
        parts = [kit / "chapter", kit / "objects" / "skeleton", kit / "objects" / "given", kit / "link",
                 kit / "uses", kit / "program"]
        return [p for p in parts if p.exists()] + [Path(p) for p in meta["sees"]]

    @staticmethod
    def _reference_objects(meta: dict, files: list[str], scratch: Path) -> dict[str, Path]:
        """The reference's objects of `files`, copied into `scratch`: a sandbox sees those and no other."""
        folder = scratch / "reference-objects"
        folder.mkdir(parents=True, exist_ok=True)
        copies = {}
        for f in files:
            copies[f] = folder / (f + ".o")
            shutil.copy2(Path(meta["path"]) / "objects" / "reference" / (f + ".o"), copies[f])
        return copies

    def _link(self, meta: dict, scratch: Path, objects: dict[str, Path], name: str,
              template: str = "link") -> tuple[Path | None, str]:
        scratch.mkdir(parents=True, exist_ok=True)
        _own(scratch)
        output = scratch / name
        argv = []
        for a in meta[template]:
            if a == "@OBJECTS@":
                argv += [str(objects[f]) for f in meta["exercise_files"]] + meta["given_objects"]
            else:
                argv.append(a.replace("@OUTPUT@", str(output)))
        done = self._sandbox(meta, scratch, [scratch], scratch).run(argv)
        if done.reason or done.exit_code != 0:
            return None, done.reason or first_error(done.output)
        return output, ""

    def _run_tests(self, meta: dict, scratch: Path, binary: Path, exercise: str) -> tuple[dict, str, float]:
        """{test name: {"passed", "message"}} merged over the rank counts, a bound hit ("" for none), seconds."""
        results = scratch / "results"
        results.mkdir(exist_ok=True)
        _own(results)
        records: dict[str, dict] = {}
        started = time.monotonic()
        ranks = meta["test_ranks"] or [0]
        for i, n in enumerate(ranks):
            filter_ = (f"[np{n}]" if i else "") + f"[{exercise}]" + QUICK
            file = results / f"{exercise}-np{n}.json"
            argv = [str(binary), filter_]
            if n:
                argv = ["mpiexec", "--oversubscribe", "-n", str(n)] + argv
            # A rank left waiting by a peer's exception fails in 10 s, not 30; a test left waiting
            # elsewhere (a rank stuck in an exchange) in 30 s, not 120. The reference's tests take a few
            # seconds each: `dev mutants` refuses every known-wrong solution under the first bound.
            env = {"WORKBOOK_RESULTS": str(file), "OMP_NUM_THREADS": "1", "OMPI_MCA_mpi_yield_when_idle": "1",
                   "WORKBOOK_COMM_TIMEOUT": "10", "WORKBOOK_TEST_TIME_LIMIT": "30"}
            done = self._sandbox(meta, scratch, [results], scratch).run(argv, env)
            try:
                ran = json.loads(file.read_text()) if file.exists() else []
            except (ValueError, OSError):
                ran = []
            for r in ran if isinstance(ran, list) else []:
                if not isinstance(r, dict) or exercise not in r.get("tags", []):
                    continue
                name = str(r.get("name", ""))
                message = failure_text(name, r.get("failure"))
                before = records.get(name, {"passed": True, "message": ""})
                passed = before["passed"] and bool(r.get("passed"))
                records[name] = {"passed": passed, "hidden": "hidden" in r.get("tags", []),
                                 "message": before["message"] or
                                 ("" if r.get("passed") else (message or "failed") + (f" (at {n} ranks)" if n else ""))}
            if done.reason:
                return records, done.reason + (f" (at {n} ranks)" if n else ""), time.monotonic() - started
            if not ran and done.exit_code != 0:
                return records, "the tests ended before writing their results: " + last_line(done.output), \
                    time.monotonic() - started
            # All or nothing: a test failed at this rank count decides; the next counts are not run.
            if not self.points.get("partial") and any(not r["passed"] for r in records.values()):
                break
        return records, "", time.monotonic() - started

    # ---- one submission, one chapter ----
    def grade(self, submission: Submission, chapter: str, only: set[str] | None = None) -> list[ExerciseResult]:
        """only: the exercises graded (the rest are not in the results); None for every one."""
        meta = self.kit(chapter)
        folder = meta["folder"]
        chosen = [e for e in meta["exercises"] if only is None or e["id"] in only]
        results = [ExerciseResult(e["id"], e["title"], max_points=self.points_of(e["id"])) for e in chosen]
        files = submission.files([f"{folder}/{f}" for f in meta["exercise_files"]])
        if not files:
            for r in results:
                r.message = f"the submission has no chapters/{folder}/"
            return results
        scratch = self.scratch / submission.name / meta["chapter"]
        if scratch.exists():
            shutil.rmtree(scratch)
        (scratch / "chapter").mkdir(parents=True)
        (scratch / "objects").mkdir()
        for header in (Path(meta["path"]) / "chapter").iterdir():
            shutil.copy2(header, scratch / "chapter" / header.name)
        problems: dict[str, str] = {}  # exercise file -> why its skeleton is linked instead
        own: dict[str, Path] = {}
        for f in meta["exercise_files"]:
            data = files.get(f"{folder}/{f}")
            own[f] = Path(meta["path"]) / "objects" / "skeleton" / (f + ".o")
            if data is None:
                problems[f] = f"chapters/{folder}/{f} is not in the submission"
                continue
            (scratch / "chapter" / f).write_bytes(data)
        _own(scratch)
        for f in meta["exercise_files"]:
            if f in problems:
                continue
            obj = scratch / "objects" / (f + ".o")
            argv = [a.replace("@CHAPTER@", str(scratch / "chapter")).replace("@SOURCE@", str(scratch / "chapter" / f))
                    .replace("@OBJECT@", str(obj)) for a in meta["compile"]]
            done = self._sandbox(meta, scratch, [scratch / "objects"], scratch).run(argv)
            if done.reason or done.exit_code != 0:
                problems[f] = "does not compile: " + (done.reason or first_error(done.output))
            else:
                own[f] = obj
        self.objects[(submission.name, meta["chapter"])] = (scratch, own, problems)
        binary, why = self._link(meta, scratch, own, "test_own")
        for r, e in zip(results, chosen):
            if e["file"] in problems:
                r.message = problems[e["file"]]
                r.total = len(meta["tests"][r.exercise])
                continue
            if binary is None:
                r.message, r.total = "does not link: " + why, len(meta["tests"][r.exercise])
                continue
            self._score(meta, scratch, binary, r)
            if r.points < r.max_points and self.earlier == "both":
                self._again_with_reference_earlier(meta, scratch, own, problems, r)
        for r in results:  # the student's own path to their file, not the grader's scratch folder
            r.message = r.message.replace(str(scratch / "chapter"), f"chapters/{folder}")
        return results

    def _score(self, meta: dict, scratch: Path, binary: Path, r: ExerciseResult) -> None:
        records, reason, seconds = self._run_tests(meta, scratch, binary, r.exercise)
        expected = meta["tests"][r.exercise]
        r.total = len(expected)
        r.passed = 0 if reason else sum(1 for name in expected if records.get(name, {}).get("passed"))
        r.seconds = seconds
        partial = bool(self.points.get("partial", False))
        r.points = r.max_points * (r.passed / r.total if partial else float(r.passed == r.total)) if r.total else 0.0
        if reason:
            r.message = reason
        elif r.passed < r.total:
            failing = [records[n] for n in expected if n in records and not records[n]["passed"]]
            r.message = failing[0]["message"] if failing else f"{r.total - r.passed} of its tests did not run"
            if failing and failing[0]["hidden"]:  # Note [the instructor's tests]
                r.shown = "a test your instructor keeps failed"
        else:
            r.message = ""

    def _again_with_reference_earlier(self, meta, scratch, own, problems, r: ExerciseResult) -> None:
        order = [e["id"] for e in meta["exercises"]]
        mine = next(e["file"] for e in meta["exercises"] if e["id"] == r.exercise)
        if mine in problems:
            return
        earlier_ids, earlier_files = [], []
        for e in meta["exercises"]:
            holds_later = any(x["file"] == e["file"] and order.index(x["id"]) >= order.index(r.exercise)
                              for x in meta["exercises"])
            if order.index(e["id"]) < order.index(r.exercise) and not holds_later:
                earlier_ids.append(e["id"])
                earlier_files += [e["file"]] if e["file"] not in earlier_files else []
        if not earlier_ids:
            return
        # Only the earlier exercises' reference objects reach the submission's folder, never its own one's.
        swapped = {**own, **self._reference_objects(meta, earlier_files, scratch)}
        binary, _ = self._link(meta, scratch, swapped, f"test_{r.exercise}")
        if binary is None:
            return
        again = dataclasses.replace(r, shown="")
        self._score(meta, scratch, binary, again)
        if again.points > r.points:
            again.rule = "reference-earlier"
            linked = f"passes only with the reference's {', '.join(earlier_ids)} in place of yours"
            again.message = f"{linked}; with yours: {r.message}"
            again.shown = f"{linked}; with yours: {r.shown or r.message}"
            for field in dataclasses.fields(r):
                setattr(r, field.name, getattr(again, field.name))

    # ---- the timing pass (--timing) ----
    def time_chapter(self, chapter: str, graded: list, repeats: int) -> None:
        """Note: [the timing pass] After every submission is graded, each whose exercises of a chapter all
        passed runs the chapter's program at the tour's default size, in the sandbox, alternately with
        the reference built the same way, `repeats` times each, one run at a time: its median wall time
        over the reference's is its column (lower is faster). Serial and interleaved, so that a busy
        moment of the machine falls on both."""
        meta = self.kit(chapter)
        cid = meta["chapter"]
        entry = next((e for e in meta["tour"] if not e.get("nodes") and e.get("program", meta["program"])
                      == meta["program"]), None)
        if not meta["program_link"] or entry is None:
            return
        args = [str(a) for a in entry.get("args", [])]
        ranks = int(entry.get("ranks", 1))
        reference_dir = self.scratch / "reference" / cid
        reference_objects = self._reference_objects(meta, meta["exercise_files"], reference_dir)
        reference, why = self._link(meta, reference_dir, reference_objects, "program_reference", "program_link")
        if reference is None:
            raise kits.KitError(f"the reference's {meta['program']} does not link in the kit: {why}")
        for g in graded:
            results = g.chapters.get(cid)
            if g.error or not results:
                continue
            timing = g.timings.setdefault(cid, {"program": meta["program"], "args": args, "ranks": ranks})
            if len(results) < len(meta["exercises"]) or any(r.points < r.max_points or r.rule != "own"
                                                              for r in results):
                timing["message"] = "not timed: not every exercise passes on the student's own code"
                continue
            scratch, own, _ = self.objects[(g.name, cid)]
            binary, why = self._link(meta, scratch, own, "program_own", "program_link")
            if binary is None:
                timing["message"] = "not timed: the program does not link: " + why
                continue
            times: dict[str, list[float]] = {"own": [], "reference": []}
            for _ in range(repeats):
                for which, program in (("reference", reference), ("own", binary)):
                    run_dir = (scratch if which == "own" else reference_dir) / "run"
                    run_dir.mkdir(exist_ok=True)
                    _own(run_dir)
                    argv = [str(program)] + args
                    if ranks > 1:
                        argv = ["mpiexec", "--oversubscribe", "-n", str(ranks)] + argv
                    done = Sandbox("time", self.limits, ro=self._seen(meta) + [run_dir.parent], rw=[run_dir],
                                   cwd=run_dir).run(argv)
                    if done.reason or done.exit_code != 0:
                        timing["message"] = f"not timed: the {'reference' if which == 'reference' else 'program'} " \
                                            f"failed: {done.reason or last_line(done.output)}"
                        break
                    times[which].append(done.wall_s)
                if "message" in timing:
                    break
            if "message" not in timing:
                timing.update(seconds=round(statistics.median(times["own"]), 3),
                              reference_seconds=round(statistics.median(times["reference"]), 3),
                              repeats=repeats)
                timing["ratio"] = round(timing["seconds"] / timing["reference_seconds"], 3)
            print(f"timed {g.name} {cid}: {timing.get('ratio', timing.get('message'))}", flush=True)

    def points_of(self, exercise: str) -> float:
        return float(self.points.get("points", {}).get(exercise, self.points.get("default", 10)))


def unreachable(path: Path) -> Path | None:
    """The first folder above `path` that the sandbox's user cannot pass through (root only), or None."""
    if os.geteuid() != 0:
        return None
    for folder in reversed(path.resolve().parents):
        st = folder.stat()
        if not st.st_mode & 0o001 and st.st_uid != NOBODY:
            return folder
    return None


def _own(path: Path) -> None:
    """Scratch folders belong to the sandbox's user (nobody) when the grader is root."""
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
        for p in path.rglob("*"):
            if not p.is_symlink():
                os.chown(p, NOBODY, NOBODY)


def failure_text(test: str, failure) -> str:
    """A failed test as `workbook check` shows it, on one line: the test, the check and its values, the
    message, and the innermost INFO (which case of a loop)."""
    if not isinstance(failure, dict):
        return f"{test}: failed"
    parts = []
    expression = str(failure.get("expression") or "")
    if expression and not expression.startswith("{"):
        expanded = str(failure.get("expanded") or "")
        parts.append(expression + (f" with {expanded}" if expanded and expanded != expression else ""))
    if failure.get("message"):
        parts.append(str(failure["message"]))
    infos = failure.get("infos") or []
    if isinstance(infos, list) and infos:
        parts.append(str(infos[-1]))
    return (f"{test}: " + "; ".join(parts or ["failed"])).replace("\n", " ")[:400]


def first_error(output: str) -> str:
    for line in output.splitlines():
        if "error:" in line or "error " in line.lower():
            return line.strip()[:300]
    return last_line(output)


def last_line(output: str) -> str:
    lines = [l for l in output.strip().splitlines() if l.strip()]
    return lines[-1].strip()[:300] if lines else "(nothing printed)"
