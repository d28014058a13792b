/*
 * report_html.h — the plan as one self-contained HTML page (`dpc plan --html`): the placement
 * picture, the predicted timeline of one step per device, memory per device against its limit,
 * the per-device figures, and with --strategy auto the ranked strategies, measured beside
 * predicted when they were run. Everything is inline (CSS and SVG; no script, no URL), so the
 * page opens from disk and makes no request.
 */
#ifndef DPC_DRIVER_REPORT_HTML_H
#define DPC_DRIVER_REPORT_HTML_H

#include "ir/graph.h"
#include "partitioner/partitioner.h"
#include <dpc/plan.h>

/* What the page is made of. */
typedef struct dpc_html_input {
  const char *model;            /* the model's name */
  const dpc_plan_report *plan;  /* the plan's figures (n_devices > 0) */
  const dpc_auto_report *autos; /* the strategies tried (NULL: the strategy was given) */
  const dpc_graph *g;           /* the step graph, to name the trace's kernels */
  const dpc_sim_trace *trace;   /* the simulated step's intervals */
  const char *placement_svg;    /* Graphviz's SVG of the placement (dpc_report_dot_svg), or NULL
                                   when it has more than DPC_REPORT_PICTURE_NODES nodes */
  uint32_t placement_nodes;     /* the nodes of the picture (drawn or not) */
  uint64_t memory_limit;        /* bytes each device may hold */
  bool limit_given;             /* memory_limit was asked for, else it is this machine's */
} dpc_html_input;

/* Write the page to path (replaced). An error names the path. */
dpc_status dpc_report_html_write(const char *path, const dpc_html_input *in, dpc_diag *d);

/* dot lays out a few hundred nodes in seconds, and several thousand (a plan over 64 devices) in
 * many minutes: past this many the page says how to draw the picture instead of drawing it. */
#define DPC_REPORT_PICTURE_NODES 600
/* Past this many, dot gives up some of its search for fewer crossings and draws straight edges:
 * seconds instead of a minute for 500 nodes. */
#define DPC_REPORT_PICTURE_FAST 150

/* The nodes of Graphviz text as partitioner/dot_view.c writes it (each node with a shape). */
uint32_t dpc_report_dot_nodes(const char *dot);

/* Graphviz text (len bytes) laid out as SVG by Graphviz's dot program (driver/dot_svg.c),
 * quickly rather than at its best when `fast`: *svg is malloc'd. Without dot on PATH,
 * DPC_ERR_UNSUPPORTED saying how to install it. */
dpc_status dpc_report_dot_svg(const char *dot, size_t len, bool fast, char **svg, dpc_diag *d);

#endif
