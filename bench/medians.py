#!/usr/bin/env python3
# medians.py BEFORE.txt AFTER.txt: medians, ranges, after/before ratios and an
# exact two-sided Mann-Whitney p-value of each benchmark's per-item metrics:
# ns/span and cpu-ns/span (BenchmarkTracesProcessor's cases first, without
# their prefix), ns/record and cpu-ns/record (BenchmarkLogsProcessor),
# ns/point (BenchmarkMetrics), ns/key and cpu-ns/key (the window's
# BenchmarkObserveBatch), from two files of `go test -bench` output (for
# when benchstat cannot be fetched). Standard library only.
import re, sys, itertools, statistics as st
METRICS = ('ns/span', 'cpu-ns/span', 'ns/record', 'cpu-ns/record', 'ns/point', 'ns/key', 'cpu-ns/key')
def load(fn):
    d = {}
    for line in open(fn):
        if not line.startswith('Benchmark'): continue
        f = line.split()
        name = re.sub(r'-\d+$', '', f[0]).replace('BenchmarkTracesProcessor/', '')
        vals = {}
        for i in range(1, len(f)):
            if f[i] in METRICS + ('allocs/op', 'B/op'):
                vals[f[i]] = float(f[i-1])
        d.setdefault(name, []).append(vals)
    return d
def pval(a, b):
    # exact two-sided Mann-Whitney U by enumeration
    allv = a + b; n = len(a)
    def u(x, y): return sum((xi > yi) + 0.5*(xi == yi) for xi in x for yi in y)
    u0 = u(a, b); mean = len(a)*len(b)/2; dev0 = abs(u0-mean)
    cnt = tot = 0
    for idx in itertools.combinations(range(len(allv)), n):
        x = [allv[i] for i in idx]; y = [allv[i] for i in range(len(allv)) if i not in idx]
        tot += 1; cnt += abs(u(x, y)-mean) >= dev0 - 1e-9
    return cnt/tot
B, A = load(sys.argv[1]), load(sys.argv[2])
order = ['dup=0%', 'dup=50%', 'cached/dup=0%', 'cached/dup=50%', 'dup=0%/nested=on', 'dup=50%/nested=on', 'cached/dup=0%/nested=on']
order += sorted(k for k in B if k not in order)
for metric in METRICS:
    rows = [k for k in order if any(metric in v for v in B.get(k, []))]
    if not rows: continue
    print(f'== {metric}')
    for k in rows:
        if k not in B or k not in A: continue
        b = [v[metric] for v in B[k] if metric in v]; a = [v[metric] for v in A[k] if metric in v]
        if not b or not a: continue
        mb, ma = st.median(b), st.median(a)
        print(f'{k:44s} before {mb:7.1f} [{min(b):.1f}-{max(b):.1f}] n={len(b)}  after {ma:7.1f} [{min(a):.1f}-{max(a):.1f}] n={len(a)}  ratio {ma/mb:.3f}  p={pval(b,a):.3f}')
print('== allocs/op, B/op (median)')
for k in order:
    if k in A and all('allocs/op' in v for v in B[k] + A[k]):
        print(k, st.median([v['allocs/op'] for v in B[k]]), st.median([v['allocs/op'] for v in A[k]]), st.median([v['B/op'] for v in B[k]]), st.median([v['B/op'] for v in A[k]]))
