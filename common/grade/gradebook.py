"""gradebook.py: what `workbook grade` writes: per submission NAME/results.json (Gradescope's format, what
the student sees) and NAME/instructor.json (every message, for --merge); for the class gradebook.csv, and
summary.md, a page of pass rates and the commonest failures."""
from __future__ import annotations

import collections
import csv
import dataclasses
import json
import re
from pathlib import Path


@dataclasses.dataclass
class ExerciseResult:
    exercise: str
    title: str
    points: float = 0.0
    max_points: float = 0.0
    passed: int = 0
    total: int = 0
    message: str = ""     # why not full marks: the first failure, or the bound hit; "" when full
    seconds: float = 0.0  # its tests' wall time
    rule: str = "own"     # "own", or "reference-earlier" (Note [earlier exercises] in grader.py)
    shown: str = ""       # what results.json (the student) is told in place of `message`; "" for the same


@dataclasses.dataclass
class Graded:
    name: str
    chapters: dict  # chapter id -> [ExerciseResult]
    error: str = ""  # why the whole submission could not be graded
    seconds: float = 0.0
    timings: dict = dataclasses.field(default_factory=dict)  # chapter id -> the timing pass's (grader.py)

    def score(self) -> tuple[float, float]:
        results = [r for rs in self.chapters.values() for r in rs]
        return sum(r.points for r in results), sum(r.max_points for r in results)

    def summary_line(self) -> str:
        if self.error:
            return "not graded: " + self.error
        got, of = self.score()
        return f"{got:g} of {of:g} points"


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 3)


def results_json(graded: Graded, context: dict) -> dict:
    """context: "commit", "libtorch", "earlier", "limits" (what the whole grading shared)."""
    tests = []
    for cid, results in graded.chapters.items():
        for r in results:
            output = f"{r.passed} of {r.total} tests passed; {r.seconds:.1f} s"
            if r.shown or r.message:
                output = (r.shown or r.message) + "\n" + output
            tests.append({"name": f"{r.exercise} {r.title}", "number": r.exercise, "score": _number(r.points),
                          "max_score": _number(r.max_points), "output": output, "visibility": "visible",
                          "extra_data": {"chapter": cid, "passed": r.passed, "total": r.total,
                                         "seconds": round(r.seconds, 2), "rule": r.rule}})
    got, of = graded.score()
    return {
        "score": _number(got),
        "execution_time": round(graded.seconds),
        "output": ("not graded: " + graded.error) if graded.error else
                  f"{got:g} of {of:g} points; graded against the workbook at {context['commit'][:12]}, "
                  f"LibTorch {context['libtorch']}",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "leaderboard": [{"name": "points", "value": _number(got)}] +
                       [{"name": f"{cid} time / reference's", "value": t["ratio"], "order": "asc"}
                        for cid, t in graded.timings.items() if "ratio" in t],
        "extra_data": {"submission": graded.name, "error": graded.error, "seconds": round(graded.seconds, 2),
                       **context},
    }


def read_results(path: Path) -> tuple[Graded, dict]:
    """A submission's instructor.json, written below, back (`workbook grade --merge`)."""
    data = json.loads(path.read_text())
    graded = Graded(name=data["name"], chapters={}, error=data["error"], seconds=float(data["seconds"]),
                    timings=data.get("timings", {}))
    for cid, results in data["chapters"].items():
        graded.chapters[cid] = [ExerciseResult(**r) for r in results]
    return graded, data["context"]


def write(out: Path, graded: list[Graded], context: dict) -> None:
    for g in graded:
        folder = out / g.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps(results_json(g, context), indent=1))
        # Everything, the messages of hidden tests too, for the instructor and --merge (not for Gradescope).
        (folder / "instructor.json").write_text(json.dumps(
            {"name": g.name, "error": g.error, "seconds": g.seconds, "context": context, "timings": g.timings,
             "chapters": {cid: [dataclasses.asdict(r) for r in rs] for cid, rs in g.chapters.items()}}, indent=1))
    with open(out / "gradebook.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "chapter", "exercise", "points", "max_points", "tests_passed", "tests_total",
                    "seconds", "rule", "message", "time_vs_reference"])
        for g in graded:
            if g.error:
                w.writerow([g.name, "", "", 0, "", "", "", round(g.seconds, 1), "", g.error, ""])
            for cid, results in g.chapters.items():
                for r in results:
                    t = g.timings.get(cid, {})
                    w.writerow([g.name, cid, r.exercise, _number(r.points), _number(r.max_points), r.passed,
                                r.total, round(r.seconds, 1), r.rule, r.message, t.get("ratio", t.get("message", ""))])
    (out / "summary.md").write_text(summary(graded, context))


def _common_form(message: str) -> str:
    """A message with its numbers and rank counts taken out, so that the same failure counts once."""
    message = re.sub(r" \(at \d+ ranks\)", "", message)
    message = re.sub(r"(?<![\w./:-])-?\d+(\.\d+)?(e-?\d+)?(?![\w./])", "N", message)
    return message if len(message) <= 240 else message[:240].rsplit(" ", 1)[0] + " …"


def summary(graded: list[Graded], context: dict) -> str:
    lines = [f"# The class: {len(graded)} submission(s)", ""]
    lines += [f"Graded against the workbook at {context['commit'][:12]}, LibTorch {context['libtorch']}; "
              f"earlier exercises: `{context['earlier']}`; the kits took "
              f"{context.get('kit_s', 0):.0f} s, the submissions {sum(g.seconds for g in graded):.0f} s in all.", ""]
    not_graded = [g for g in graded if g.error]
    if not_graded:
        lines += ["Not graded:", ""] + [f"- {g.name}: {g.error}" for g in not_graded] + [""]
    by_exercise: dict[tuple[str, str], list] = collections.defaultdict(list)
    for g in graded:
        for cid, results in g.chapters.items():
            for r in results:
                by_exercise[(cid, r.exercise)].append(r)
    lines += ["| exercise | full marks | mean points | most common reasons for less |", "|---|---:|---:|---|"]
    for (cid, exercise), results in by_exercise.items():
        full = sum(1 for r in results if r.points >= r.max_points)
        mean = sum(r.points for r in results) / len(results)
        reasons = collections.Counter(_common_form(r.message) for r in results if r.points < r.max_points)
        common = "; ".join(f"{n}× {m.replace('|', '/')}" for m, n in reasons.most_common(3))
        lines.append(f"| {exercise} | {full} of {len(results)} | {mean:.1f} of {results[0].max_points:g} | {common} |")
    timed: dict[str, list] = collections.defaultdict(list)
    for g in graded:
        for cid, t in g.timings.items():
            timed[cid].append(t)
    for cid, ts in timed.items():
        ratios = sorted(t["ratio"] for t in ts if "ratio" in t)
        t0 = ts[0]
        lines += ["", f"{cid}'s timing (`{t0['program']} {' '.join(t0['args'])}` at {t0['ranks']} rank(s), "
                      f"against the reference, interleaved): {len(ratios)} of {len(ts)} timed" +
                  (f"; median {ratios[len(ratios) // 2]:.2f}×, fastest {ratios[0]:.2f}×, slowest {ratios[-1]:.2f}×"
                   if ratios else "")]
    return "\n".join(lines) + "\n"


def read_grading_file(path: Path) -> dict:
    """The grading file: {"default": points, "points": {"exN.M": points}, "partial": bool, "earlier": "both"|"own"};
    a ValueError, one line, for anything else."""
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ValueError(f"--points {path}: {e.strerror.lower() if e.strerror else e}") from None
    except ValueError as e:
        raise ValueError(f"--points {path} is not JSON: {e}") from None
    number = (int, float)
    kinds = {"default": number, "points": dict, "partial": bool, "earlier": str}
    if not isinstance(data, dict):
        raise ValueError(f"--points {path}: an object is expected, with keys {', '.join(kinds)}")
    for key, value in data.items():
        if key not in kinds:
            raise ValueError(f"--points {path}: unknown key {key!r} (the keys are {', '.join(kinds)})")
        if not isinstance(value, kinds[key]) or isinstance(value, bool) != (kinds[key] is bool):
            raise ValueError(f"--points {path}: {key!r} is {value!r}; it takes "
                             f"{ {'default': 'a number', 'points': 'an object', 'partial': 'true or false', 'earlier': 'a string'}[key]}")
    if data.get("earlier", "both") not in ("both", "own"):
        raise ValueError(f"--points {path}: 'earlier' is {data['earlier']!r}; it takes \"both\" or \"own\"")
    for exercise, value in data.get("points", {}).items():
        if not re.fullmatch(r"ex\d+\.\d+", exercise) or not isinstance(value, number) or isinstance(value, bool) \
                or value < 0:
            raise ValueError(f"--points {path}: \"points\" maps exercises (ex13.2) to points >= 0, not "
                             f"{exercise!r}: {value!r}")
    return data
