#!/usr/bin/env python3
"""p99 latency against throughput for each serving mode, and a step in load over time, as one SVG
(no plotting library needed).

  bench/plot_serving.py OUT.svg RESULTS.txt [MODE ...]

RESULTS.txt is what bench/serve_load.sh wrote: a table per mode ("## no batching", "## delay 500
us", "## auto", each with offered/s, achieved/s, ..., p99_us columns) and, when it ran one, "##
auto, a step in load" (t_s, offered/s, answered, p50_us, p99_us, delay_us per window). MODE
names the modes to draw, as the "##" lines name them (default: no batching, the fixed delay
with the lowest p99 at the highest rate all fixed delays kept up with, and auto). Left panel: each
mode's p99 (log scale) against the requests per second it achieved, one point per offered rate;
right panel, when the file has a step: p99 per window and the offered rate over time.
"""
import math
import re
import sys

COLORS = {"no batching": "#d62728", "auto": "#1f77b4"}
FIXED_COLOR = "#2ca02c"


def read(path):
    modes, step, cur = {}, [], None
    for line in open(path):
        line = line.rstrip("\n")
        m = re.match(r"^## (.*)$", line)
        if m:
            cur = m.group(1)
            continue
        if line.startswith("#") or not line.strip() or cur is None:
            continue
        cols = line.split()
        if not re.match(r"^[0-9.]+$", cols[0]):
            continue  # a header line
        if cur.startswith("auto, a step"):
            step.append([float(c) for c in cols[:6]])
        else:  # offered achieved p50 p90 p99 p99.9 errors rows/batch delay
            modes.setdefault(cur, []).append((float(cols[0]), float(cols[1]), float(cols[4])))
    return modes, step


def best_fixed(modes):
    fixed = [k for k in modes if k.startswith("delay")]
    if not fixed:
        return None
    # the highest offered rate every fixed delay kept up with (within 2%), then the lowest p99
    rates = sorted({p[0] for k in fixed for p in modes[k]})
    kept = [r for r in rates
            if all(any(p[0] == r and p[1] >= 0.98 * r for p in modes[k]) for k in fixed)]
    r = kept[-1] if kept else rates[0]
    return min(fixed, key=lambda k: min((p[2] for p in modes[k] if p[0] == r), default=1e18))


def panel(x0, y0, w, h, title, xlabel, ylabel, xmax, ymin, ymax, log):
    out = ['<g font-family="sans-serif" font-size="12">',
           '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>' % (x0, y0, w, h),
           '<text x="%d" y="%d" text-anchor="middle" font-size="14">%s</text>' %
           (x0 + w / 2, y0 - 10, title),
           '<text x="%d" y="%d" text-anchor="middle">%s</text>' % (x0 + w / 2, y0 + h + 36, xlabel),
           '<text transform="translate(%d,%d) rotate(-90)" text-anchor="middle">%s</text>' %
           (x0 - 52, y0 + h / 2, ylabel)]
    for i in range(6):
        xv = xmax * i / 5
        out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' %
                   (x0 + w * i / 5, y0 + h + 16, "%g" % round(xv, 1)))
    if log:
        v = 10 ** math.floor(math.log10(ymin))
        while v <= ymax * 1.0001:
            y = y0 + h - h * (math.log10(v) - math.log10(ymin)) / (math.log10(ymax) - math.log10(ymin))
            if y0 - 1 <= y <= y0 + h + 1:
                out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>' %
                           (x0, y, x0 + w, y))
                out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' %
                           (x0 - 6, y + 4, "%g" % v))
            v *= 10
    return out


def ymap(v, y0, h, ymin, ymax):
    v = min(max(v, ymin), ymax)
    return y0 + h - h * (math.log10(v) - math.log10(ymin)) / (math.log10(ymax) - math.log10(ymin))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out_path, res = sys.argv[1], sys.argv[2]
    modes, step = read(res)
    chosen = sys.argv[3:] or [m for m in ("no batching", best_fixed(modes), "auto") if m in modes]
    W, H = (1000 if step else 520), 420
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">' %
           (W, H, W, H), '<rect width="100%" height="100%" fill="white"/>']
    x0, y0, w, h = 80, 40, 400, 300
    pts = [p for m in chosen for p in modes[m]]
    xmax = max(p[1] for p in pts) / 1000 * 1.1
    ymin = 10 ** math.floor(math.log10(min(p[2] for p in pts) / 1000))
    ymax = 10 ** math.ceil(math.log10(max(p[2] for p in pts) / 1000))
    svg += panel(x0, y0, w, h, "p99 latency against throughput", "requests/s answered (thousands)",
                 "p99 latency (ms, log scale)", xmax, ymin, ymax, True)
    for i, m in enumerate(chosen):
        color = COLORS.get(m, FIXED_COLOR)
        xy = [(x0 + w * p[1] / 1000 / xmax, ymap(p[2] / 1000, y0, h, ymin, ymax))
              for p in sorted(modes[m], key=lambda p: p[0])]
        svg.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' %
                   (color, " ".join("%.1f,%.1f" % q for q in xy)))
        svg += ['<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (q[0], q[1], color) for q in xy]
        svg.append('<text x="%d" y="%d" font-family="sans-serif" font-size="12" fill="%s">%s</text>'
                   % (x0 + 10, y0 + 18 + 16 * i, color, m))
    svg.append('</g>')
    if step:
        x0 = 580
        tmax = max(s[0] for s in step) + (step[1][0] - step[0][0] if len(step) > 1 else 0.5)
        smin = 10 ** math.floor(math.log10(min(s[4] for s in step) / 1000))
        smax = 10 ** math.ceil(math.log10(max(s[4] for s in step) / 1000))
        svg += panel(x0, y0, w, h, "auto through a step in load", "time (s)",
                     "p99 latency per window (ms, log scale)", tmax, smin, smax, True)
        xy = [(x0 + w * s[0] / tmax, ymap(s[4] / 1000, y0, h, smin, smax)) for s in step]
        svg.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' %
                   (COLORS["auto"], " ".join("%.1f,%.1f" % q for q in xy)))
        rmax = max(s[1] for s in step) * 1.1
        rate = [(x0 + w * s[0] / tmax, y0 + h - h * s[1] / rmax) for s in step]
        svg.append('<polyline fill="none" stroke="#999" stroke-dasharray="4 3" points="%s"/>' %
                   " ".join("%.1f,%.1f" % q for q in rate))
        svg.append('<text x="%d" y="%d" fill="%s">p99 (left axis)</text>' %
                   (x0 + 10, y0 + 18, COLORS["auto"]))
        svg.append('<text x="%d" y="%d" fill="#999">offered rate, to %d requests/s at the top</text>'
                   % (x0 + 10, y0 + 34, rmax))
        svg.append('</g>')
    svg.append('</svg>')
    open(out_path, "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
