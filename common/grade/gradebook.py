"""gradebook.py: what `workbook grade` writes: results.json per submission (Gradescope's format),
gradebook.csv for the class, and summary.md, a page of pass rates and the commonest failures."""
from __future__ import annotations

import collections
import csv
import dataclasses
import json
import re
from pathlib import Path


@dataclasses.dataclass
class Graded:
    name: str
    chapters: dict  # chapter id -> [ExerciseResult]
    error: str = ""  # why the whole submission could not be graded
    seconds: float = 0.0

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


def results_json(graded: Graded, kits: dict, chapters: list[str], earlier: str, limits) -> dict:
    meta = {k["chapter"]: k for k in kits.values()}
    tests = []
    for cid, results in graded.chapters.items():
        for r in results:
            output = r.message or f"all {r.total} tests passed"
            output += f"\n{r.passed} of {r.total} tests passed; {r.seconds:.1f} s"
            if r.rule != "own":
                output += "\n(graded with the reference's earlier exercises linked: Note [earlier exercises])"
            tests.append({"name": f"{r.exercise} {r.title}", "number": r.exercise, "score": _number(r.points),
                          "max_score": _number(r.max_points), "output": output, "visibility": "visible",
                          "extra_data": {"passed": r.passed, "total": r.total, "seconds": round(r.seconds, 2),
                                         "rule": r.rule}})
    got, of = graded.score()
    any_kit = next(iter(kits.values()), {})
    return {
        "score": _number(got),
        "execution_time": round(graded.seconds),
        "output": graded.error or f"{got:g} of {of:g} points; graded against the workbook at "
                                  f"{any_kit.get('commit', '?')[:12]}, LibTorch {any_kit.get('libtorch', '?')}",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "leaderboard": [{"name": "points", "value": _number(got)}],
        "extra_data": {"submission": graded.name, "chapters": chapters, "earlier": earlier,
                       "reference_commit": any_kit.get("commit"), "libtorch": any_kit.get("libtorch"),
                       "limits": dataclasses.asdict(limits), "kits": {c: m.get("commit") for c, m in meta.items()}},
    }


def write(out: Path, graded: list[Graded], kits: dict, chapters: list[str], earlier: str, limits,
          kit_s: float) -> None:
    for g in graded:
        folder = out / g.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps(results_json(g, kits, chapters, earlier, limits), indent=1))
    with open(out / "gradebook.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "chapter", "exercise", "points", "max_points", "tests_passed", "tests_total",
                    "seconds", "rule", "message"])
        for g in graded:
            if g.error:
                w.writerow([g.name, "", "", 0, "", "", "", round(g.seconds, 1), "", g.error])
            for cid, results in g.chapters.items():
                for r in results:
                    w.writerow([g.name, cid, r.exercise, _number(r.points), _number(r.max_points), r.passed, r.total,
                                round(r.seconds, 1), r.rule, r.message])
    (out / "summary.md").write_text(summary(graded, kits, earlier, kit_s))


def _common_form(message: str) -> str:
    """A message with its numbers and rank counts taken out, so that the same failure counts once."""
    message = re.sub(r" \(at \d+ ranks\)", "", message)
    return re.sub(r"(?<![\w.])-?\d+(\.\d+)?(e-?\d+)?", "N", message)[:120]


def summary(graded: list[Graded], kits: dict, earlier: str, kit_s: float) -> str:
    lines = [f"# The class: {len(graded)} submission(s)", ""]
    any_kit = next(iter(kits.values()), {})
    lines += [f"Graded against the workbook at {any_kit.get('commit', '?')[:12]}, LibTorch "
              f"{any_kit.get('libtorch', '?')}; earlier exercises: `{earlier}` (Note [earlier exercises]); "
              f"the kits took {kit_s:.0f} s, the submissions "
              f"{sum(g.seconds for g in graded):.0f} s in all.", ""]
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
    return "\n".join(lines) + "\n"
