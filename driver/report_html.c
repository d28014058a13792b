/*
 * report_html.c — the plan as one self-contained HTML page (report_html.h). The page is built
 * in memory and written at once; every string that comes from the model or the machine (names,
 * messages) is escaped. The timeline and the memory bars are SVG drawn here; the placement is
 * Graphviz's SVG, inlined without its XML prologue and namespace URLs.
 */
#include "driver/report_html.h"
#include "ir/op.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The timeline's geometry, in SVG units (the picture is scaled to the page's width). */
enum {
  TL_WIDTH = 1000,
  TL_LABEL = 92,                      /* device names on the left */
  TL_PLOT = TL_WIDTH - TL_LABEL - 14, /* the step's time across */
  TL_ROW = 18,                        /* one device */
  TL_GAP = 6,                         /* between devices */
  TL_TOP = 24,                        /* the time axis */
  TL_MAX_ROWS = 64,                   /* more devices are summarised, not drawn */
};

static void esc(dpc_buf *b, const char *s) {
  for (; s && *s; s++) switch (*s) {
    case '&': dpc_buf_puts(b, "&amp;"); break;
    case '<': dpc_buf_puts(b, "&lt;"); break;
    case '>': dpc_buf_puts(b, "&gt;"); break;
    case '"': dpc_buf_puts(b, "&quot;"); break;
    case '\'': dpc_buf_puts(b, "&#39;"); break;
    default: dpc_buf_putn(b, s, 1);
    }
}

/* Milliseconds with three significant digits or so: 0.0123, 1.23, 12.3, 123. */
static const char *ms_text(double ms, char *buf, size_t n) {
  double a = fabs(ms);
  snprintf(buf, n, a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : a >= 1 ? "%.2f" : "%.3g", ms);
  return buf;
}

/* Bytes in MB, or GB past a thousand MB. */
static const char *size_text(double bytes, char *buf, size_t n) {
  snprintf(buf, n, bytes >= 1e9 ? "%.1f GB" : "%.1f MB", bytes >= 1e9 ? bytes / 1e9 : bytes / 1e6);
  return buf;
}

static const char *strategy_words(dpc_strategy_kind k) {
  switch (k) {
  case DPC_STRATEGY_SINGLE: return "one device";
  case DPC_STRATEGY_DATA: return "data parallel";
  case DPC_STRATEGY_MODEL: return "model parallel";
  case DPC_STRATEGY_HYBRID: return "hybrid (data parallel over model-parallel replicas)";
  case DPC_STRATEGY_PIPELINE: return "pipeline";
  default: return dpc_strategy_kind_name(k);
  }
}

static const char STYLE[] =
    "*{box-sizing:border-box}"
    "body{margin:0;background:#f4f5f7;color:#1d2330;font:14px/1.45 system-ui,-apple-system,"
    "'Segoe UI',Roboto,'DejaVu Sans',sans-serif}"
    "main{max-width:1320px;margin:0 auto;padding:14px 20px 28px}"
    "h1{font-size:20px;margin:0 0 2px}h2{font-size:15px;margin:0 0 8px}"
    ".sub{color:#555;margin:0 0 10px}nav{font-size:13px;margin:0 0 12px}"
    "nav a{color:#2f5d8a;margin-right:14px;text-decoration:none}"
    ".cards{display:flex;flex-wrap:wrap;gap:10px;margin:0 0 12px}"
    ".card{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:7px 12px;"
    "min-width:150px}.card b{display:block;font-size:18px}.card span{color:#555;font-size:12px}"
    "section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:12px 14px;"
    "margin:0 0 12px}"
    ".note{color:#555;font-size:12.5px;margin:6px 0 0}.warn{color:#a12a1f}"
    ".legend{font-size:12.5px;margin:0 0 6px}.legend i{display:inline-block;width:11px;"
    "height:11px;margin:0 4px 0 12px;vertical-align:-1px;border-radius:2px}"
    "svg.chart{width:100%;height:auto;display:block}"
    "svg.chart text{font-size:11px;fill:#333}svg.chart .axis{stroke:#bbb;stroke-width:.6}"
    /* each colour fills the SVG shapes and the legend's swatches alike */
    ".lane{fill:#eceef1;background:#eceef1}.k-compute{fill:#4e79a7;background:#4e79a7}"
    ".k-fwd{fill:#8cb8e6;background:#8cb8e6}"
    ".k-bwd{fill:#59a14f;background:#59a14f}.k-copy{fill:#b07aa1;background:#b07aa1}"
    ".k-comm{fill:#f28e2b;background:#f28e2b}.k-wait{fill:#e15759;background:#e15759}"
    ".mem{fill:#4e79a7}.mem-over{fill:#e15759}"
    ".limit{stroke:#1d2330;stroke-width:1.2;stroke-dasharray:4 3}"
    "table{border-collapse:collapse;width:100%;font-size:13px}"
    "th,td{border-bottom:1px solid #e6e8ec;padding:4px 7px;text-align:left;vertical-align:top}"
    "th{background:#f7f8fa;font-weight:600;white-space:nowrap}td.n,th.n{text-align:right;"
    "white-space:nowrap;font-variant-numeric:tabular-nums}tr.chosen td{background:#eaf3e6}"
    "td.why{color:#444;font-size:12.5px;min-width:300px}.mono{font-family:ui-monospace,'DejaVu "
    "Sans Mono',"
    "monospace;font-size:12.5px}"
    ".scroll{overflow-x:auto}"
    /* the placement fits the page's width; the box ticked, it is drawn at full size in a
     * scrolling frame (CSS alone: the page runs no script) */
    ".pic{max-height:80vh;overflow:auto;border:1px solid #eee}"
    ".pic svg{max-width:100%;height:auto;display:block;margin:0 auto}"
    "#full:checked~.pic svg{max-width:none}label{font-size:12.5px;color:#444}";

/* The colour classes of the timeline, each with its legend entry. */
enum { C_COMPUTE, C_FWD, C_BWD, C_COPY, C_COMM, C_WAIT, C_KINDS };
static const char *const CLASS_CSS[C_KINDS] = {"k-compute", "k-fwd",  "k-bwd",
                                               "k-copy",    "k-comm", "k-wait"};
static const char *const CLASS_WHAT[C_KINDS] = {
    "compute",    "forward (micro-batch)",      "backward (micro-batch)",
    "local copy", "communication (collective)", "waiting for another device"};

/* A kernel's, collective's, copy's or wait's colour class. */
static int span_class(const dpc_graph *g, const dpc_sim_span *s) {
  switch (s->kind) {
  case DPC_SIM_COPY: return C_COPY;
  case DPC_SIM_COMM: return C_COMM;
  case DPC_SIM_WAIT: return C_WAIT;
  default: break;
  }
  uint8_t ph = g->nodes[s->node].phase;
  return ph == DPC_PHASE_FORWARD ? C_FWD : ph == DPC_PHASE_BACKWARD ? C_BWD : C_COMPUTE;
}

/* What one interval is, for its tooltip: "matmul h1", "all_reduce", "waiting". */
static void span_name(const dpc_graph *g, const dpc_sim_span *s, char *buf, size_t n) {
  if (s->kind == DPC_SIM_WAIT) {
    snprintf(buf, n, "waiting for another device");
    return;
  }
  if (s->kind == DPC_SIM_COPY) {
    snprintf(buf, n, "local copy");
    return;
  }
  const dpc_node *nd = &g->nodes[s->node];
  char v[96] = "";
  if (nd->n_out && g->values[nd->out].name != DPC_NONE)
    dpc_graph_value_label(g, nd->out, v, sizeof v);
  char mb[24] = "";
  if (nd->phase == DPC_PHASE_FORWARD || nd->phase == DPC_PHASE_BACKWARD)
    snprintf(mb, sizeof mb, " (%c%u)", nd->phase == DPC_PHASE_FORWARD ? 'F' : 'B', nd->mb);
  snprintf(buf, n, "%s%s%s%s", dpc_op_name(nd->op), v[0] ? " " : "", v, mb);
}

/* A round step for an axis of `span` units, about six ticks across. */
static double tick_step(double span) {
  double raw = span / 6, p = pow(10, floor(log10(raw))), f = raw / p;
  return p * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

/* Flush one drawn block of a device's row: [a, b] seconds, `count` intervals merged. */
static void put_block(dpc_buf *b, double scale, double y, int cls, double a, double e,
                      uint32_t count, const char *first) {
  char t0[32], t1[32], dur[32];
  double x = TL_LABEL + a * scale, w = (e - a) * scale;
  if (w < 0.4) w = 0.4;
  dpc_buf_printf(b, "<rect class=\"span %s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\">",
                 CLASS_CSS[cls], x, y, w, TL_ROW);
  dpc_buf_puts(b, "<title>");
  if (count > 1) dpc_buf_printf(b, "%u intervals from ", count);
  esc(b, first);
  dpc_buf_printf(b, ": %s to %s ms (%s ms)</title></rect>", ms_text(a * 1e3, t0, sizeof t0),
                 ms_text(e * 1e3, t1, sizeof t1), ms_text((e - a) * 1e3, dur, sizeof dur));
}

/* Each device's busy time (kernels, copies, its part of collectives) from the trace. */
static void busy_times(const dpc_html_input *in, double *busy) {
  for (uint32_t i = 0; i < in->trace->n; i++) {
    const dpc_sim_span *s = &in->trace->spans[i];
    if (s->kind != DPC_SIM_WAIT && s->device < in->plan->n_devices)
      busy[s->device] += s->end_s - s->start_s;
  }
}

/* One row per device across the step: compute, copies, collectives and waits; the grey lane
 * left showing is idle, the step's bubbles. */
static void timeline(dpc_buf *b, const dpc_html_input *in) {
  const dpc_plan_report *r = in->plan;
  const dpc_sim_trace *t = in->trace;
  uint32_t D = r->n_devices, rows = D < TL_MAX_ROWS ? D : TL_MAX_ROWS;
  double end = r->step_ms / 1e3;
  for (uint32_t i = 0; i < t->n; i++)
    if (t->spans[i].end_s > end) end = t->spans[i].end_s;
  if (end <= 0) end = 1e-6;
  double scale = TL_PLOT / end;
  /* the intervals of each device in order: a counting sort keeps the simulation's order */
  uint32_t *first = calloc((size_t)D + 1, sizeof *first),
           *order = malloc((t->n + 1) * sizeof *order);
  bool seen[C_KINDS] = {false};
  if (!first || !order) {
    b->oom = true;
    free(first), free(order);
    return;
  }
  for (uint32_t i = 0; i < t->n; i++)
    if (t->spans[i].device < D) first[t->spans[i].device + 1]++;
  for (uint32_t dv = 0; dv < D; dv++) first[dv + 1] += first[dv];
  uint32_t *at = calloc(D ? D : 1, sizeof *at);
  for (uint32_t i = 0; at && i < t->n; i++) {
    uint32_t dv = t->spans[i].device;
    if (dv < D) order[first[dv] + at[dv]++] = i;
  }
  free(at);
  int height = TL_TOP + (int)rows * (TL_ROW + TL_GAP) + 4;
  dpc_buf_printf(b, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" role=\"img\">", TL_WIDTH, height);
  double step = tick_step(end * 1e3);
  for (double ms = 0; ms <= end * 1e3 * 1.0001; ms += step) {
    char tx[32];
    double x = TL_LABEL + ms / 1e3 * scale;
    dpc_buf_printf(b,
                   "<line class=\"axis\" x1=\"%.2f\" x2=\"%.2f\" y1=\"%d\" y2=\"%d\"/>"
                   "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%s ms</text>",
                   x, x, TL_TOP - 6, height - 2, x, TL_TOP - 10, ms_text(ms, tx, sizeof tx));
  }
  char firstname[160];
  for (uint32_t dv = 0; dv < rows; dv++) {
    double y = TL_TOP + dv * (TL_ROW + TL_GAP);
    dpc_buf_printf(b, "<g class=\"device\"><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">",
                   TL_LABEL - 8, y + TL_ROW - 5);
    esc(b, r->devices[dv].name);
    dpc_buf_printf(b,
                   "</text><rect class=\"lane\" x=\"%d\" y=\"%.1f\" width=\"%.2f\" height=\"%d\"/>",
                   TL_LABEL, y, end * scale, TL_ROW);
    /* intervals closer than half a unit of the picture, of one kind, are drawn as one block */
    int cls = -1;
    double a = 0, e = 0;
    uint32_t count = 0;
    for (uint32_t k = first[dv]; k < first[dv + 1]; k++) {
      const dpc_sim_span *s = &t->spans[order[k]];
      int c = span_class(in->g, s);
      seen[c] = true;
      if (c == cls && (s->start_s - e) * scale < 0.5) {
        if (s->end_s > e) e = s->end_s;
        count++;
        continue;
      }
      if (cls >= 0) put_block(b, scale, y, cls, a, e, count, firstname);
      cls = c, a = s->start_s, e = s->end_s, count = 1;
      span_name(in->g, s, firstname, sizeof firstname);
    }
    if (cls >= 0) put_block(b, scale, y, cls, a, e, count, firstname);
    dpc_buf_puts(b, "</g>");
  }
  dpc_buf_puts(b, "</svg>");
  free(first), free(order);
  /* the legend, of the kinds drawn */
  dpc_buf_puts(b, "<div class=\"legend\">");
  for (int k = 0; k < C_KINDS; k++)
    if (seen[k])
      dpc_buf_printf(b, "<i class=\"%s\"></i>%s", CLASS_CSS[k],
                     k == C_COMPUTE && (seen[C_FWD] || seen[C_BWD]) ? "optimizer and other compute"
                                                                    : CLASS_WHAT[k]);
  dpc_buf_puts(b, "<i class=\"lane\" style=\"border:1px solid #ccc\"></i>idle (bubble)</div>");
  if (rows < D)
    dpc_buf_printf(b, "<p class=\"note\">The first %u of the %u devices are drawn.</p>", rows, D);
  if (t->oom)
    dpc_buf_puts(b, "<p class=\"note warn\">Out of memory while tracing: some intervals are "
                    "missing.</p>");
}

/* A bar per device: what the plan holds on it against the memory it has. */
static void memory_bars(dpc_buf *b, const dpc_html_input *in) {
  const dpc_plan_report *r = in->plan;
  uint32_t D = r->n_devices, rows = D < TL_MAX_ROWS ? D : TL_MAX_ROWS;
  double most = (double)in->memory_limit;
  for (uint32_t i = 0; i < D; i++)
    if ((double)r->devices[i].memory_bytes > most) most = (double)r->devices[i].memory_bytes;
  if (most <= 0) most = 1;
  const int label = TL_LABEL, bar = 560, row = 18, gap = 6;
  int height = (int)rows * (row + gap) + 6;
  double scale = bar / most;
  dpc_buf_printf(b, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" role=\"img\">", TL_WIDTH, height);
  for (uint32_t i = 0; i < rows; i++) {
    const dpc_plan_report_device *v = &r->devices[i];
    double y = 3 + i * (row + gap);
    bool over = in->memory_limit && v->memory_bytes > in->memory_limit;
    dpc_buf_printf(b, "<g class=\"memdev\"><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">",
                   label - 8, y + row - 6);
    esc(b, v->name);
    dpc_buf_printf(b,
                   "</text><rect class=\"lane\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\"/>"
                   "<rect class=\"%s\" x=\"%d\" y=\"%.1f\" width=\"%.2f\" height=\"%d\"/>",
                   label, y, bar, row, over ? "mem-over" : "mem", label, y,
                   fmax((double)v->memory_bytes * scale, 0.5), row);
    if (in->memory_limit)
      dpc_buf_printf(b, "<line class=\"limit\" x1=\"%.2f\" x2=\"%.2f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                     label + (double)in->memory_limit * scale,
                     label + (double)in->memory_limit * scale, y - 2, y + row + 2);
    char t0[32], t1[32];
    dpc_buf_printf(b, "<text x=\"%d\" y=\"%.1f\">%s", label + bar + 10, y + row - 6,
                   size_text((double)v->memory_bytes, t0, sizeof t0));
    if (in->memory_limit) {
      double pct = 100.0 * (double)v->memory_bytes / (double)in->memory_limit;
      dpc_buf_printf(b, pct < 1 ? " of %s (%.2f%%)" : " of %s (%.0f%%)",
                     size_text((double)in->memory_limit, t1, sizeof t1), pct);
    }
    if (r->stages)
      dpc_buf_printf(b, "; activations %s at most",
                     size_text((double)v->live_peak_bytes, t1, sizeof t1));
    dpc_buf_puts(b, "</text></g>");
  }
  dpc_buf_puts(b, "</svg>");
  if (in->memory_limit)
    dpc_buf_printf(b, "<p class=\"note\">The dashed line is each device's memory: %s, %s.</p>",
                   size_text((double)in->memory_limit, (char[32]){0}, 32),
                   in->limit_given ? "as given (--device-memory)"
                                   : "this machine's memory shared evenly by the devices");
}

/* Each device's figures, as `dpc plan` prints them, with its busy share of the step. */
static void device_table(dpc_buf *b, const dpc_html_input *in) {
  const dpc_plan_report *r = in->plan;
  double *busy = calloc(r->n_devices ? r->n_devices : 1, sizeof *busy);
  if (!busy) {
    b->oom = true;
    return;
  }
  busy_times(in, busy);
  dpc_buf_printf(b,
                 "<table><thead><tr><th>device</th>%s<th class=\"n\">kernels</th>"
                 "<th class=\"n\">collectives</th><th class=\"n\">compute ms</th>"
                 "<th class=\"n\">comm ms</th><th class=\"n\">busy</th>"
                 "<th class=\"n\">memory MB</th><th class=\"n\">comm MB</th></tr></thead><tbody>",
                 r->stages ? "<th class=\"n\">stage</th>" : "");
  char c0[32], c1[32];
  for (uint32_t i = 0; i < r->n_devices; i++) {
    const dpc_plan_report_device *v = &r->devices[i];
    dpc_buf_puts(b, "<tr><td>");
    esc(b, v->name);
    dpc_buf_puts(b, "</td>");
    if (r->stages) dpc_buf_printf(b, "<td class=\"n\">%u</td>", v->stage);
    dpc_buf_printf(b,
                   "<td class=\"n\">%u</td><td class=\"n\">%u</td><td class=\"n\">%s</td>"
                   "<td class=\"n\">%s</td><td class=\"n\">%.0f%%</td><td class=\"n\">%.1f</td>"
                   "<td class=\"n\">%.2f</td></tr>",
                   v->kernels, v->collectives, ms_text(v->compute_ms, c0, sizeof c0),
                   ms_text(v->comm_ms, c1, sizeof c1),
                   r->step_ms > 0 ? 100 * busy[i] * 1e3 / r->step_ms : 0,
                   (double)v->memory_bytes / 1e6, v->comm_bytes / 1e6);
  }
  dpc_buf_puts(b, "</tbody></table>");
  free(busy);
  if (r->stages) {
    dpc_buf_puts(b, "<p class=\"note\">Each stage's order of micro-batches:</p><table>");
    for (uint32_t i = 0; i < r->n_devices; i++) {
      dpc_buf_puts(b, "<tr><td>");
      esc(b, r->devices[i].name);
      dpc_buf_puts(b, "</td><td class=\"mono\">");
      esc(b, r->devices[i].order);
      dpc_buf_puts(b, "</td></tr>");
    }
    dpc_buf_puts(b, "</table>");
  }
}

/* The strategies --strategy auto tried, fastest predicted first, measured beside predicted. */
static void candidates_table(dpc_buf *b, const dpc_auto_report *a) {
  bool measured = a->n_measured > 0;
  for (uint32_t i = 0; i < a->n_candidates; i++)
    if (a->candidates[i].measure_note[0]) measured = true;
  dpc_buf_printf(b,
                 "<table><thead><tr><th class=\"n\">rank</th><th>strategy</th>"
                 "<th class=\"n\">predicted ms</th>%s<th class=\"n\">samples/s</th>"
                 "<th class=\"n\">memory MB</th><th class=\"n\">comm MB</th>"
                 "<th class=\"n\">bubble</th><th>why</th></tr></thead><tbody>",
                 measured ? "<th class=\"n\">measured ms</th><th class=\"n\">error</th>" : "");
  char t[32];
  for (uint32_t i = 0; i < a->n_candidates; i++) {
    const dpc_auto_candidate *c = &a->candidates[i];
    dpc_buf_printf(b, "<tr%s><td class=\"n\">", i == a->best ? " class=\"chosen\"" : "");
    if (c->planned && c->fits)
      dpc_buf_printf(b, "%u", i + 1);
    else
      dpc_buf_puts(b, "&ndash;");
    dpc_buf_puts(b, "</td><td class=\"mono\">");
    esc(b, c->strategy);
    dpc_buf_puts(b, "</td>");
    if (c->planned)
      dpc_buf_printf(b, "<td class=\"n\">%s</td>", ms_text(c->step_ms, t, sizeof t));
    else
      dpc_buf_puts(b, "<td class=\"n\">&ndash;</td>");
    if (measured && c->measured)
      dpc_buf_printf(b, "<td class=\"n\">%s</td><td class=\"n\">%+.0f%%</td>",
                     ms_text(c->measured_ms, t, sizeof t), c->error_pct);
    else if (measured)
      dpc_buf_puts(b, "<td class=\"n\">&ndash;</td><td class=\"n\">&ndash;</td>");
    if (c->planned)
      dpc_buf_printf(b,
                     "<td class=\"n\">%.0f</td><td class=\"n\">%.1f</td><td class=\"n\">%.2f</td>",
                     c->samples_per_s, (double)c->max_memory_bytes / 1e6, c->comm_bytes / 1e6);
    else
      dpc_buf_puts(b, "<td class=\"n\">&ndash;</td><td class=\"n\">&ndash;</td>"
                      "<td class=\"n\">&ndash;</td>");
    if (c->planned && c->kind == DPC_STRATEGY_PIPELINE)
      dpc_buf_printf(b, "<td class=\"n\">%.0f%%</td>", c->bubble_pct);
    else
      dpc_buf_puts(b, "<td class=\"n\">&ndash;</td>");
    dpc_buf_puts(b, "<td class=\"why\">");
    esc(b, c->reason);
    if (c->measure_note[0]) {
      dpc_buf_puts(b, " (");
      esc(b, c->measure_note);
      dpc_buf_puts(b, ")");
    }
    dpc_buf_puts(b, "</td></tr>");
  }
  dpc_buf_puts(b, "</tbody></table>");
}

/* Graphviz's SVG from its <svg> on, without the namespace attributes (inline SVG in HTML needs
 * none, and the page names no URL at all). */
static void placement(dpc_buf *b, const char *svg) {
  const char *s = strstr(svg, "<svg");
  if (!s) return;
  const char *tag_end = strchr(s, '>');
  if (!tag_end) return;
  /* the start tag, attribute by attribute up to its end, dropping xmlns ones */
  const char *p = s;
  while (p < tag_end) {
    const char *x = strstr(p, " xmlns");
    if (!x || x > tag_end) break;
    const char *q1 = strchr(x, '"'), *q2 = q1 ? strchr(q1 + 1, '"') : NULL;
    if (!q2 || q2 > tag_end) break;
    dpc_buf_putn(b, p, (size_t)(x - p));
    p = q2 + 1;
  }
  dpc_buf_puts(b, p);
}

static void card(dpc_buf *b, const char *value, const char *what) {
  dpc_buf_puts(b, "<div class=\"card\"><b>");
  esc(b, value);
  dpc_buf_puts(b, "</b><span>");
  esc(b, what);
  dpc_buf_puts(b, "</span></div>");
}

static void page(dpc_buf *b, const dpc_html_input *in) {
  const dpc_plan_report *r = in->plan;
  const dpc_auto_report *a = in->autos;
  char t[64], v[96];
  dpc_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                  "<link rel=\"icon\" href=\"data:,\"><title>dpc plan: ");
  esc(b, in->model);
  dpc_buf_printf(b, "</title><style>%s</style></head><body><main>\n<h1>", STYLE);
  esc(b, in->model);
  dpc_buf_puts(b, ": the training step planned</h1><p class=\"sub\">Batch ");
  dpc_buf_printf(b, "%u, ", r->batch);
  esc(b, strategy_words(r->kind));
  dpc_buf_printf(b, " on %u device%s (", r->n_devices, r->n_devices == 1 ? "" : "s");
  esc(b, r->devices_spec);
  dpc_buf_puts(b, ")");
  if (a && a->best < a->n_candidates) {
    dpc_buf_puts(b, ": <span class=\"mono\">");
    esc(b, a->candidates[a->best].strategy);
    dpc_buf_printf(b,
                   "</span>, chosen by <span class=\"mono\">--strategy auto</span> from %u "
                   "strategies%s",
                   a->n_candidates, a->by_measurement ? " by measurement" : "");
  }
  dpc_buf_puts(b, ". Times are the cost model's, with this machine's calibrated speeds.</p>\n"
                  "<nav><a href=\"#timeline\">Timeline</a>");
  if (a) dpc_buf_puts(b, "<a href=\"#candidates\">Strategies</a>");
  dpc_buf_puts(b, "<a href=\"#memory\">Memory</a>");
  dpc_buf_puts(b, "<a href=\"#devices\">Devices</a><a href=\"#placement\">Placement</a></nav>"
                  "<div class=\"cards\" id=\"summary\">");
  card(b, strcat(strcpy(v, ms_text(r->step_ms, t, sizeof t)), " ms"), "predicted step");
  if (r->measured) {
    snprintf(v, sizeof v, "%s ms", ms_text(r->measured_ms, t, sizeof t));
    char w[64];
    snprintf(w, sizeof w, "measured step (prediction %+.0f%%)", r->error_pct);
    card(b, v, w);
  } else if (a && a->best < a->n_candidates && a->candidates[a->best].measured) {
    const dpc_auto_candidate *c = &a->candidates[a->best];
    snprintf(v, sizeof v, "%s ms", ms_text(c->measured_ms, t, sizeof t));
    char w[64];
    snprintf(w, sizeof w, "measured step (prediction %+.0f%%)", c->error_pct);
    card(b, v, w);
  }
  snprintf(v, sizeof v, "%.0f", r->samples_per_s);
  card(b, v, "samples/s predicted");
  snprintf(v, sizeof v, "%.2f MB", r->bytes_moved / 1e6);
  card(b, v, "between devices per step");
  uint64_t most = 0;
  for (uint32_t i = 0; i < r->n_devices; i++)
    if (r->devices[i].memory_bytes > most) most = r->devices[i].memory_bytes;
  snprintf(v, sizeof v, "%.1f MB", (double)most / 1e6);
  card(b, v, "memory of the fullest device");
  if (r->stages) {
    snprintf(v, sizeof v, "%.1f%%", r->bubble_pct);
    if (r->filled_stages < r->stages)
      snprintf(t, sizeof t, "bubble, %u stages (%u filled) x %u micro-batches", r->stages,
               r->filled_stages, r->microbatches);
    else
      snprintf(t, sizeof t, "bubble, %u stages x %u micro-batches", r->stages, r->microbatches);
    card(b, v, t);
  }
  dpc_buf_puts(b, "</div>\n");
  for (uint32_t i = 0; i < r->n_warnings; i++) {
    dpc_buf_puts(b, "<p class=\"note warn\">");
    esc(b, r->warnings[i]);
    dpc_buf_puts(b, "</p>");
  }
  if (a && a->by_measurement) {
    dpc_buf_puts(b, "<p class=\"note\">Chosen by measurement, against the prediction: ");
    esc(b, a->candidates[a->best].reason);
    dpc_buf_puts(b, "</p>");
  }
  dpc_buf_puts(b, "<section id=\"timeline\"><h2>One step, predicted, per device</h2>");
  timeline(b, in);
  dpc_buf_puts(b, "</section>\n");
  if (a) {
    dpc_buf_printf(b, "<section id=\"candidates\"><h2>Strategies tried (%.1f s)</h2>", a->seconds);
    dpc_buf_puts(b, "<div class=\"scroll\">");
    candidates_table(b, a);
    dpc_buf_puts(b, "</div></section>\n");
  }
  dpc_buf_puts(b, "<section id=\"memory\"><h2>Memory per device</h2>");
  memory_bars(b, in);
  dpc_buf_puts(b, "</section>\n<section id=\"devices\"><h2>Devices</h2><div class=\"scroll\">");
  device_table(b, in);
  dpc_buf_puts(b, "</div></section>\n");
  if (!in->placement_svg) {
    dpc_buf_printf(b,
                   "<section id=\"placement\"><h2>Placement</h2><p class=\"note\">The picture "
                   "would have %u nodes over %u devices, more than the %u Graphviz lays out in "
                   "seconds: <span class=\"mono\">dpc plan ... --dot plan.dot</span> writes it, "
                   "for <span class=\"mono\">dot -Tsvg plan.dot</span> to draw.</p></section>\n"
                   "</main></body></html>\n",
                   in->placement_nodes, r->n_devices, DPC_REPORT_PICTURE_NODES);
    return;
  }
  dpc_buf_puts(b, "<section id=\"placement\"><h2>Placement</h2><input type=\"checkbox\" "
                  "id=\"full\"><label for=\"full\"> full size</label><div class=\"pic\">");
  placement(b, in->placement_svg);
  dpc_buf_puts(b, "</div><p class=\"note\">A cluster per device, a node per fused kernel or named "
                  "value with its predicted time; edges between devices carry the bytes that "
                  "cross.</p></section>\n</main></body></html>\n");
}

dpc_status dpc_report_html_write(const char *path, const dpc_html_input *in, dpc_diag *d) {
  dpc_buf b = {0};
  page(&b, in);
  if (b.oom) {
    dpc_buf_free(&b);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory making the HTML report '%s'", path);
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    dpc_buf_free(&b);
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot create the HTML report '%s': %s", path,
                         strerror(errno));
  }
  size_t len = b.len, put = fwrite(b.data, 1, len, f);
  int closed = fclose(f);
  dpc_buf_free(&b);
  if (put != len || closed)
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot write the HTML report '%s'", path);
  return DPC_OK;
}
