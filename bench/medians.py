import re,sys,statistics as st
def load(f):
    d={}
    for l in open(f):
        m=re.match(r'(Benchmark\S+?)-\d+\s+\d+\s+.*?([\d.]+) ns/span',l)
        if m: d.setdefault(m.group(1),[]).append(float(m.group(2)))
    return d
b,a=load(sys.argv[1]),load(sys.argv[2])
for k in b:
    if k in a:
        mb,ma=st.median(b[k]),st.median(a[k])
        print(f"{k}: before {mb:.1f} (n={len(b[k])}, {min(b[k]):.0f}-{max(b[k]):.0f}) after {ma:.1f} (n={len(a[k])}, {min(a[k]):.0f}-{max(a[k]):.0f}) ratio {ma/mb:.3f}")
