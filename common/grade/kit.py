"""kit.py: a chapter's grading kit, made from the instructor's own build (trusted, outside any sandbox).

Note: [the grading kit] A submission compiles its exercise files only, so
everything else is made once per chapter, into build/<preset>/grade-kit/chNN:
  chapter/      the chapter's headers, as the student has them (the skeleton's)
  uses/UU/      the headers of the chapters it uses (their libraries are linked)
  objects/      the chapter's given files compiled; each exercise file compiled
                as the skeleton (what a file not submitted, or not compiling,
                links as) and as the reference (an earlier exercise's, for the
                rule in Note [earlier exercises] of grader.py)
  link/         the test binary's other inputs: the tests' objects, the common
                library, the used chapters' reference libraries, the runners
  kit.json      the compile command of an exercise file and the link command,
                as templates; each exercise's tests and rank counts; the commit
                and a stamp of the checkout: a kit is made again only when the
                checkout changed (or with --prepare), so that the tasks of an
                array job reuse the one their first job made
A sandbox sees this folder but objects/reference, LibTorch (.venv),
common/include and the build's generated headers and precompiled header:
never solutions/ nor the build's other files. The reference objects a link
needs (the earlier exercises', Note [earlier exercises]) are copied into
the submission's own folder for it, and no others. The commands are the build's own (compile_commands.json, and
`ninja -t commands` for the link), so a submission is compiled exactly as
`workbook check` compiles it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path


class KitError(Exception):
    """The kit cannot be made: one line for the instructor."""


def load_manifest(root: Path, chapter: str) -> dict:
    """chapter: "ch13", "13" or "13_experts", under root/chapters."""
    number = re.sub(r"^ch", "", chapter)[:2]
    for manifest in sorted((root / "chapters").glob("*/chapter.json")):
        if manifest.parent.name[:2] == number.zfill(2):
            data = json.loads(manifest.read_text())
            data["folder"] = manifest.parent.name
            return data
    raise KitError(f"no chapter {chapter} in {root / 'chapters'} (give chNN, e.g. ch13)")


def _used_folders(root: Path, manifest: dict) -> list[str]:
    """The chapters it uses, and theirs, in order (their headers are on the include path)."""
    seen: list[str] = []
    todo = list(manifest.get("uses", []))
    while todo:
        folder = todo.pop(0)
        if folder not in seen:
            seen.append(folder)
            used = json.loads((root / "chapters" / folder / "chapter.json").read_text()).get("uses", [])
            todo += used
    return seen


def _run(argv: list[str], cwd: Path, what: str) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise KitError(f"{what} failed:\n{(done.stdout + done.stderr).strip()[-2000:]}")
    return done.stdout


def stamp(source: Path, build: Path, root: Path | None, own_tests: Path | None = None) -> str:
    """What a kit was made from: the checkout (its commit and any change to it), the build, the chapters'
    root and the instructor's tests. A kit whose stamp is this one is reused (Note [the grading kit])."""
    h = hashlib.sha256()
    for argv in (["git", "rev-parse", "HEAD"], ["git", "status", "--porcelain"], ["git", "diff", "HEAD"]):
        h.update(subprocess.run(argv, cwd=source, capture_output=True).stdout)
    h.update(f"{build.resolve()}\0{root}\0{own_tests}".encode())
    for test in sorted(own_tests.rglob("*")) if own_tests and own_tests.is_dir() else []:
        if test.is_file():
            h.update(str(test).encode() + test.read_bytes())
    return h.hexdigest()[:20]


def prepare(source: Path, build: Path, chapter: str, workbook: Path, libtorch: str, root: Path | None = None,
            own_tests: Path | None = None) -> Path:
    """root: where chapters/ and solutions/ are; the workbook's own (source) unless the grader's fixture
    chapter (tests/grade/fixture) is graded. own_tests: the instructor's tests, OWN_TESTS/chNN/*.cpp,
    compiled into the test binary beside the chapter's (Note [the instructor's tests] in grader.py)."""
    root = root or source
    manifest = load_manifest(root, chapter)
    folder, cid = manifest["folder"], manifest["id"]
    uses = _used_folders(root, manifest)
    # The instructor's chapters/ must hold the skeletons: a student's headers are those.
    stale = []
    if root == source:
        stale = [line.split()[-1] for line in _run([str(workbook), "dev", "sync", "--dry-run"], source,
                                                    "workbook dev sync --dry-run").splitlines()
                 if line.startswith("would write")]
        stale = [s for s in stale if any(s.startswith(f"chapters/{f}/") for f in [folder, *uses])]
    if stale:
        raise KitError(f"{stale[0]} is not its skeleton: grade from a clean checkout of the workbook "
                       f"(a fresh clone, or `workbook dev sync` after saving your work)")
    program = manifest.get("program", "")
    _run(["cmake", "--build", str(build), "--target", f"test_{cid}_student"] + [f"{program}_student"] * bool(program),
         source, f"building test_{cid}_student (the skeleton and the tests' objects)")

    kit = build / "grade-kit" / cid
    if kit.exists():
        shutil.rmtree(kit)
    for sub in ("chapter", "objects/skeleton", "objects/reference", "objects/given", "link"):
        (kit / sub).mkdir(parents=True)
    for header in sorted((root / "chapters" / folder).glob("*.hpp")):
        shutil.copy2(header, kit / "chapter" / header.name)
    for used in uses:
        (kit / "uses" / used).mkdir(parents=True)
        for header in sorted((root / "chapters" / used).glob("*.hpp")):
            shutil.copy2(header, kit / "uses" / used / header.name)

    exercise_files = []
    for e in manifest["exercises"]:
        if e["file"] not in exercise_files:
            exercise_files.append(e["file"])

    # The compile command of an exercise file, from the build's own.
    commands = {Path(e["file"]).resolve(): e for e in json.loads((build / "compile_commands.json").read_text())}
    chapter_dir = (root / "chapters" / folder).resolve()

    def template(file: str, entry: dict | None = None) -> list[str]:
        entry = entry or commands.get(chapter_dir / file)
        if entry is None:
            raise KitError(f"compile_commands.json has no command for chapters/{folder}/{file}: configure again")
        argv = shlex.split(entry["command"])
        out = []
        i = 0
        while i < len(argv):
            a = argv[i]
            if a == f"-I{chapter_dir}":
                out.append("-I@CHAPTER@")
            elif a.startswith("-I") and Path(a[2:]).parent == (root / "solutions").resolve():
                # The tests' objects see the chapter's headers in solutions/: the kit's are the same code.
                name = Path(a[2:]).name
                out.append(f"-I{kit / 'chapter'}" if name == folder else f"-I{kit / 'uses' / name}")
            elif a == "-o":
                out += ["-o", "@OBJECT@"]
                i += 1
            elif a == "-c":
                out += ["-c", "@SOURCE@"]
                i += 1
            elif a in ("-MD", "-MMD"):
                pass
            elif a in ("-MT", "-MF"):
                i += 1
            else:
                out.append(a)
            i += 1
        return out

    def built_object(file: str) -> Path:  # where the build put the skeleton's object of a chapter file
        entry = commands[chapter_dir / file]
        argv = shlex.split(entry["command"])
        return Path(entry["directory"]) / argv[argv.index("-o") + 1]

    compile_template = template(exercise_files[0])
    for file in exercise_files:
        shutil.copy2(built_object(file), kit / "objects" / "skeleton" / (file + ".o"))
        argv = [a.replace("@CHAPTER@", str(kit / "chapter")).replace("@SOURCE@", str(root / "solutions" / folder / file))
                .replace("@OBJECT@", str(kit / "objects" / "reference" / (file + ".o"))) for a in template(file)]
        _run(argv, build, f"compiling the reference's {file}")
    given = []
    for cpp in sorted((root / "chapters" / folder).glob("*.cpp")):
        if cpp.name.startswith("main_") or cpp.name in exercise_files:
            continue
        shutil.copy2(built_object(cpp.name), kit / "objects" / "given" / (cpp.name + ".o"))
        given.append(str(kit / "objects" / "given" / (cpp.name + ".o")))

    link = _link_template(build, source, kit, cid, f"test_{cid}_student", "link")
    program_link = _link_template(build, source, kit, cid, f"{program}_student", "program") if program else []

    # The instructor's tests, compiled as the chapter's tests are, linked beside them.
    own = sorted((own_tests / cid).glob("*.cpp")) if own_tests and (own_tests / cid).is_dir() else []
    if own:
        test_entry = next((e for e in commands.values() if re.search(
            rf"-o \S*(test_{cid}_objects|test_{cid}_student)\.dir/", e["command"])), None)
        if test_entry is None:
            raise KitError(f"compile_commands.json has no command for the tests of {cid}: configure again")
        for test in own:
            obj = kit / "link" / f"instructor_{test.stem}.o"
            argv = [a.replace("@SOURCE@", str(test)).replace("@OBJECT@", str(obj)).replace("@CHAPTER@", str(kit / "chapter"))
                    for a in template(test.name, test_entry)] + [f"-I{root / 'tests' / folder}"]
            _run(argv, build, f"compiling your test {test}")
            link.insert(link.index("@OBJECTS@"), str(obj))

    meta = {
        "chapter": cid, "folder": folder, "title": manifest.get("title", ""),
        "exercises": [{"id": e["id"], "title": e["title"], "file": e["file"]} for e in manifest["exercises"]],
        "exercise_files": exercise_files,
        "test_ranks": manifest.get("test_ranks", []),
        "compile": compile_template, "link": link, "given_objects": given,
        "program": program, "program_link": program_link, "tour": manifest.get("tour", []),
        "commit": _run(["git", "rev-parse", "HEAD"], source, "git rev-parse").strip(),
        "stamp": stamp(source, build, root if root != source else None, own_tests),
        "own_tests": [str(t) for t in own],
        "libtorch": libtorch,
        # What a sandbox must see, read-only, besides the kit itself.
        "sees": sorted({str(p) for p in _seen_paths(source, build, compile_template + link)}),
    }
    (kit / "kit.json").write_text(json.dumps(meta, indent=1))
    return kit


def _link_template(build: Path, source: Path, kit: Path, cid: str, target: str, folder: str) -> list[str]:
    """The link command of a student target (its test binary, its program) as a template: the chapter's
    student library is @OBJECTS@, the output @OUTPUT@, and every input from the build is copied into
    kit/folder."""
    line = _run(["ninja", "-C", str(build), "-t", "commands", target], source,
                f"ninja -t commands {target}").strip().splitlines()[-1]
    line = re.sub(r"\s*&&\s*:\s*$", "", re.sub(r"^:\s*&&\s*", "", line))
    (kit / folder).mkdir(exist_ok=True)
    link: list[str] = []
    argv = shlex.split(line)
    i = 0
    while i < len(argv):
        a = argv[i]
        candidate = (build / a) if not os.path.isabs(a) else Path(a)
        if a == "-o":
            link += ["-o", "@OUTPUT@"]
            i += 2
            continue
        if a.endswith(f"lib{cid}_student.a"):
            link.append("@OBJECTS@")
        elif candidate.is_file() and build.resolve() in candidate.resolve().parents:
            copy = kit / folder / f"{len(link):03d}_{candidate.name}"
            shutil.copy2(candidate, copy)
            link.append(str(copy))
        else:
            link.append(a)
        i += 1
    return link


def _seen_paths(source: Path, build: Path, argv: list[str]) -> set[Path]:
    """The paths outside /usr the compile and link commands name: .venv's LibTorch, common/include, the
    generated headers and the precompiled header (a folder each)."""
    paths: set[Path] = set()
    source, build = source.resolve(), build.resolve()
    for a in argv:
        for piece in re.split(r"[=,]", a):
            for prefix in ("-I", "-isystem", "-L", ""):
                if piece.startswith(prefix) and piece[len(prefix):].startswith("/"):
                    p = Path(piece[len(prefix):])
                    if str(p).startswith("/usr") or "@" in str(p) or "grade-kit" in str(p):
                        continue
                    if p == build / "generated" or (source / "common" / "include") == p:
                        paths.add(p)
                    elif (source / ".venv") in p.parents or p == source / ".venv":
                        paths.add(source / ".venv")
                    elif build in p.parents and p.suffix in (".pch", ".hxx"):
                        paths.add(p.parent)
                    elif source not in p.parents and p.exists():
                        paths.add(p if p.is_dir() else p.parent)
    return paths
