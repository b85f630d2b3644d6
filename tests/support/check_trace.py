#!/usr/bin/python3
"""check_trace.py TRACE [--ranks N] [--expect-overlap]: a --trace file (trace.hpp) is
what Perfetto and `workbook report` read.

- valid JSON with a "traceEvents" list, and spans ("X") from every rank;
- on every track (a rank's thread) the spans nest: each one ends before the
  next one on its track starts, or lies inside it (a timeline, not a tangle);
- every rank's steps come one after another, in the order of their numbers;
- every bucket's all-reduce (Chapter 4's reducer) lies inside a step of its rank;
- with --expect-overlap: there are buckets, and in some step a bucket's all-reduce starts before
  that step's backward ends (the reducer overlapped; after-backward never does).
Exits 1 with what is wrong."""
import argparse
import json
import re
import sys
from collections import defaultdict

EPSILON_US = 0.01  # rounding of microseconds written with decimals


def fail(message):
    print(f"check_trace: {message}")
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--expect-overlap", action="store_true")
    args = parser.parse_args()
    try:
        with open(args.trace) as f:
            document = json.load(f)
    except (OSError, json.JSONDecodeError) as error:
        fail(f"{args.trace}: {error}")
    events = document.get("traceEvents")
    if not isinstance(events, list):
        fail("no traceEvents list")
    spans = [e for e in events if e.get("ph") == "X"]
    for e in spans:
        for key in ("name", "cat", "pid", "tid", "ts", "dur"):
            if key not in e:
                fail(f"a span without {key}: {e}")
        if e["dur"] < 0:
            fail(f"a span of negative length: {e}")
    ranks = sorted({e["pid"] for e in spans})
    if ranks != list(range(args.ranks)):
        fail(f"spans from ranks {ranks}, expected 0..{args.ranks - 1}")

    tracks = defaultdict(list)
    for e in spans:
        tracks[(e["pid"], e["tid"])].append(e)
    for (rank, thread), track in tracks.items():
        track.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_spans = []
        for e in track:
            while open_spans and e["ts"] >= open_spans[-1]["ts"] + open_spans[-1]["dur"] - EPSILON_US:
                open_spans.pop()
            if open_spans and e["ts"] + e["dur"] > open_spans[-1]["ts"] + open_spans[-1]["dur"] + EPSILON_US:
                fail(f"rank {rank} thread {thread}: \"{e['name']}\" at {e['ts']:.1f} us overlaps "
                     f"\"{open_spans[-1]['name']}\" without lying inside it")
            open_spans.append(e)

    steps = defaultdict(list)
    for e in spans:
        if e["cat"] == "step":
            steps[e["pid"]].append(e)
    for rank in ranks:
        if not steps[rank]:
            fail(f"rank {rank}: no step spans")
        by_time = sorted(steps[rank], key=lambda e: e["ts"])
        numbers = [tuple(int(n) for n in re.findall(r"\d+", e["name"])) for e in by_time]
        if numbers != sorted(numbers):
            fail(f"rank {rank}: steps out of order: {[e['name'] for e in by_time][:10]} ...")
        for before, after in zip(by_time, by_time[1:]):
            if after["ts"] < before["ts"] + before["dur"] - EPSILON_US:
                fail(f"rank {rank}: \"{after['name']}\" starts before \"{before['name']}\" ends")

    buckets = [e for e in spans if e["name"].startswith("all-reduce bucket")]
    if args.expect_overlap and not buckets:
        fail("no bucket all-reduce spans")
    overlapped = 0
    for b in buckets:
        inside = [s for s in steps[b["pid"]]
                  if s["ts"] - EPSILON_US <= b["ts"] and b["ts"] + b["dur"] <= s["ts"] + s["dur"] + EPSILON_US]
        if not inside:
            fail(f"rank {b['pid']}: \"{b['name']}\" at {b['ts']:.1f} us is in no step")
        step = inside[0]
        backward = [e for e in tracks[(b["pid"], step["tid"])]
                    if e["name"] == "backward" and step["ts"] <= e["ts"] <= step["ts"] + step["dur"]]
        if backward and b["ts"] < backward[0]["ts"] + backward[0]["dur"]:
            overlapped += 1
    if args.expect_overlap and overlapped == 0:
        fail("no bucket's all-reduce started before its step's backward ended: nothing overlapped")
    print(f"check_trace: {len(spans)} spans on {len(tracks)} tracks of {len(ranks)} ranks; "
          f"{sum(len(s) for s in steps.values())} steps; {len(buckets)} bucket all-reduces, "
          f"{overlapped} started during backward")


if __name__ == "__main__":
    main()
