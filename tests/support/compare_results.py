#!/usr/bin/python3
"""compare_results.py KEY:TOLERANCE... -- COMMAND_A... -- COMMAND_B...

Runs two programs, each with --json into a temporary file, and checks that
their result lines agree on every KEY: within its absolute TOLERANCE, or
equal when the tolerance is "exact" (e.g. weights_sha256:exact). Two
implementations of the same training (ch03_train and ch04_train, which
differ only in how gradients are summed) must train the same model."""
import json
import subprocess
import sys
import tempfile


def result_of(command: list[str]) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as out:
        subprocess.run([*command, "--json", out.name], check=True, stdout=subprocess.DEVNULL, timeout=300)
        lines = [line for line in open(out.name).read().splitlines() if line.strip()]
    return json.loads(lines[-1])


def main() -> int:
    args = sys.argv[1:]
    first = args.index("--")
    second = args.index("--", first + 1)
    checks = [spec.rsplit(":", 1) for spec in args[:first]]
    a, b = result_of(args[first + 1:second]), result_of(args[second + 1:])
    failed = 0
    for key, tolerance in checks:
        if tolerance == "exact":
            ok = a[key] == b[key]
            failed += not ok
            print(f"{key}: {a[key]} and {b[key]}: {'equal' if ok else 'DIFFERENT'}")
            continue
        difference = abs(float(a[key]) - float(b[key]))
        ok = difference <= float(tolerance)
        failed += not ok
        print(f"{key}: {a[key]} and {b[key]}, difference {difference:.3g} {'<=' if ok else '>'} {tolerance}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
