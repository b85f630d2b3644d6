"""class_of.py CHAPTER N DIR: a class of N submissions of a chapter, for timing `workbook grade`.

They cycle through the reference, each known-wrong solution of tests/mutants/ and the skeleton with
only the first exercise done, as folders DIR/student-01 ... ; their paths are printed, one a line
(a CLASS_LIST for hpc/slurm/grade-class.sh).
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

chapter, count, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
source = Path(__file__).resolve().parents[2]
manifest_path = next(p for p in (source / "chapters").glob("*/chapter.json") if json.loads(p.read_text())["id"] == chapter)
folder, manifest = manifest_path.parent.name, json.loads(manifest_path.read_text())
files = sorted({e["file"] for e in manifest["exercises"]})
number = chapter[2:].lstrip("0")
mutants = sorted((source / "tests" / "mutants").glob(f"ex{number}.*.patch"))
kinds = ["reference", *mutants, "first-only"]
shutil.rmtree(out, ignore_errors=True)
for i in range(count):
    kind = kinds[i % len(kinds)]
    d = out / f"student-{i + 1:02d}" / "chapters" / folder
    d.mkdir(parents=True)
    for f in files:
        shutil.copy(source / "solutions" / folder / f, d / f)
    if kind == "first-only":
        for f in files:
            if f != manifest["exercises"][0]["file"]:
                shutil.copy(source / "chapters" / folder / f, d / f)
    elif kind != "reference":
        subprocess.run(["patch", "-s", "-p2", "-d", str(d), "-i", str(kind)], check=True)  # solutions/NN_x/FILE
    print(d.parents[1])
