#!/usr/bin/env python3
"""Training curves of several `dpc train` runs as one SVG (no plotting library needed).

  bench/plot_curves.py OUT.svg LABEL=STDOUT.txt,LOG.jsonl [LABEL=...]

STDOUT.txt is what `dpc train` printed (its "epoch N/M: ... test accuracy X%" lines); LOG.jsonl
is its --log (one line per optimizer step with "loss"). Left panel: test accuracy after each
epoch; right panel: the training loss per step, averaged over windows of 50 steps.
"""
import json
import re
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def read_run(spec):
    label, files = spec.rsplit("=", 1)
    out, log = files.split(",")
    acc = [float(m.group(1)) for m in re.finditer(r"^epoch .*test accuracy ([0-9.]+)%", open(out).read(), re.M)]
    losses = []
    for line in open(log):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "loss" in rec and "step" in rec:
            losses.append(rec["loss"])
    window = 50
    smooth = [sum(losses[i:i + window]) / len(losses[i:i + window])
              for i in range(0, len(losses), window)]
    return label, acc, smooth, window


def panel(x0, y0, w, h, series, xlabel, ylabel, xmax, ymin, ymax, xstep):
    out = [f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>']
    for k in range(5):
        v = ymin + (ymax - ymin) * k / 4
        y = y0 + h - h * k / 4
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{v:.3g}</text>')
    for k in range(int(xmax // xstep) + 1):
        x = x0 + w * k * xstep / xmax
        out.append(f'<text x="{x:.1f}" y="{y0 + h + 16}" font-size="11" text-anchor="middle">{k * xstep:g}</text>')
    out.append(f'<text x="{x0 + w / 2}" y="{y0 + h + 34}" font-size="12" text-anchor="middle">{xlabel}</text>')
    out.append(f'<text x="{x0 - 44}" y="{y0 + h / 2}" font-size="12" text-anchor="middle" '
               f'transform="rotate(-90 {x0 - 44} {y0 + h / 2})">{ylabel}</text>')
    for i, (pts, color) in enumerate(series):
        path = " ".join(f"{x0 + w * px / xmax:.1f},{y0 + h - h * (py - ymin) / (ymax - ymin):.1f}"
                        for px, py in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for px, py in pts if len(pts) < 20 else []:
            out.append(f'<circle cx="{x0 + w * px / xmax:.1f}" '
                       f'cy="{y0 + h - h * (py - ymin) / (ymax - ymin):.1f}" r="3" fill="{color}"/>')
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    runs = [read_run(a) for a in sys.argv[2:]]
    epochs = max(len(r[1]) for r in runs)
    accs = [a for r in runs for a in r[1]]
    amin, amax = min(accs) - 1, max(accs) + 1
    lmax = max(max(r[2]) for r in runs)
    steps = max(len(r[2]) * r[3] for r in runs)
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="900" height="380" '
           'font-family="Helvetica, Arial, sans-serif">',
           '<rect width="900" height="380" fill="white"/>']
    acc_series = [([(e + 1, a) for e, a in enumerate(r[1])], COLORS[i % 5]) for i, r in enumerate(runs)]
    loss_series = [([(k * r[3], v) for k, v in enumerate(r[2])], COLORS[i % 5])
                   for i, r in enumerate(runs)]
    svg += panel(70, 40, 340, 260, acc_series, "epoch", "test accuracy (%)", epochs, amin, amax, 1)
    svg += panel(520, 40, 340, 260, loss_series, "optimizer step", "training loss (mean of 50)",
                 steps, 0, lmax * 1.05, max(500, (steps // 5 // 500) * 500))
    for i, r in enumerate(runs):
        y = 352 + 0
        x = 70 + i * 270
        svg.append(f'<line x1="{x}" y1="{y}" x2="{x + 24}" y2="{y}" stroke="{COLORS[i % 5]}" stroke-width="3"/>')
        final = f" ({r[1][-1]:.2f}%)" if r[1] else ""
        svg.append(f'<text x="{x + 30}" y="{y + 4}" font-size="12">{r[0]}{final}</text>')
    svg.append("</svg>")
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
