#!/usr/bin/env python3
"""What the nested detector adds to BenchmarkTracesProcessor, paired by round.

    python3 bench/paired.py BEFORE.txt [AFTER.txt ...]

Each file holds alternating rounds of one test binary (`-test.count 1` per
round, in the order they ran). For each case X with an X/nested=on twin, it
prints the median over rounds of (nested=on - off) in cpu-ns/span, each
difference taken within one round of one binary, the rounds' differences,
the difference of the medians, and the same paired median in wall ns/span.
"""
import re
import statistics as st
import sys


def load(path):
    cases = {}
    for line in open(path):
        m = re.match(r"BenchmarkTracesProcessor/(\S+)-\d+\s", line)
        if not m:
            continue
        cpu = re.search(r"([\d.]+) cpu-ns/span", line)
        wall = re.search(r"([\d.]+) ns/span", line)
        cases.setdefault(m.group(1), []).append((float(cpu.group(1)), float(wall.group(1))))
    return cases


for path in sys.argv[1:]:
    cases = load(path)
    for base in ["dup=0%", "cached/dup=0%", "dup=50%", "cached/dup=50%"]:
        on, off = cases.get(base + "/nested=on"), cases.get(base)
        if not on or not off:
            continue
        diffs = [a[0] - b[0] for a, b in zip(on, off)]
        wall = [a[1] - b[1] for a, b in zip(on, off)]
        of_medians = st.median(a[0] for a in on) - st.median(b[0] for b in off)
        print(f"{path} {base}: nested added {st.median(diffs):.1f} cpu-ns/span, paired median"
              f" (rounds {', '.join('%.0f' % x for x in diffs)}); difference of the medians"
              f" {of_medians:.1f}; wall ns/span paired median {st.median(wall):.1f}")
