#!/usr/bin/env python3
"""Per device (per rank across MPI ranks), the mean microseconds a recorded step spends in each
kind of step of a `dpc train --trace` file: kernel, communication (collectives), wait (for a
value from another device or rank), copy.

    bench/trace_summary.py TRACE.json
"""
import json, sys
from collections import defaultdict
t = json.load(open(sys.argv[1]))['traceEvents']
names = {e['pid']: e['args']['name'] for e in t if e['ph'] == 'M'}
agg = defaultdict(lambda: defaultdict(float)); runs = defaultdict(set)
for e in t:
    if e['ph'] != 'X': continue
    agg[e['pid']][e['cat']] += e['dur']; runs[e['pid']].add(e['args']['step'])
for p in sorted(agg):
    n = len(runs[p])
    print(names[p], ' '.join('%s %.0f us' % (k, v / n) for k, v in sorted(agg[p].items())), '(%d steps)' % n)
