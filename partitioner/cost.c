/*
 * cost.c — per-node FLOPs, bytes and memory (see cost.h).
 */
#include "partitioner/cost.h"

#include <stdlib.h>
#include <string.h>

static double numel(const dpc_value *v) {
  return (double)dpc_shape_numel(&v->shape);
}

static double bytes_of(const dpc_value *v) {
  return numel(v) * (double)dpc_dtype_size(v->dtype);
}

/* A rule gives the node's FLOPs; bytes and memory are the same for every op. */
typedef double (*cost_rule)(const dpc_graph *g, const dpc_node *n);

static const dpc_value *in(const dpc_graph *g, const dpc_node *n, uint32_t i) {
  return dpc_node_input(g, n, i);
}

static const dpc_value *out(const dpc_graph *g, const dpc_node *n) {
  return &g->values[n->out];
}

static double none(const dpc_graph *g, const dpc_node *n) {
  (void)g, (void)n;
  return 0;
}

/* Elementwise: a constant per output element, by how much work one element takes. */
static double ew1(const dpc_graph *g, const dpc_node *n) {
  return numel(out(g, n));
}
static double ew2(const dpc_graph *g, const dpc_node *n) {
  return 2 * numel(out(g, n));
}
static double ew4(const dpc_graph *g, const dpc_node *n) {
  return 4 * numel(out(g, n));
}
static double ew10(const dpc_graph *g, const dpc_node *n) { /* exp, log, tanh, erf, ... */
  return 10 * numel(out(g, n));
}
static double ew20(const dpc_graph *g, const dpc_node *n) { /* gelu: erf and a few more */
  return 20 * numel(out(g, n));
}

/* Reductions and their gradients: per element of the larger side. */
static double per_in(const dpc_graph *g, const dpc_node *n) {
  return numel(in(g, n, 0));
}
static double mse(const dpc_graph *g, const dpc_node *n) {
  return 3 * numel(in(g, n, 0));
}
static double softmax(const dpc_graph *g, const dpc_node *n) { /* max, exp, sum, divide */
  return 13 * numel(in(g, n, 0));
}
static double softmax_grad(const dpc_graph *g, const dpc_node *n) {
  return 4 * numel(in(g, n, 0));
}
static double xent(const dpc_graph *g, const dpc_node *n) {
  return 13 * numel(in(g, n, 0));
}
static double xent_grad(const dpc_graph *g, const dpc_node *n) {
  return 13 * numel(in(g, n, 1));
}
static double norm(const dpc_graph *g, const dpc_node *n) { /* mean, variance, scale, shift */
  return 8 * numel(in(g, n, 0));
}
static double norm_grad(const dpc_graph *g, const dpc_node *n) {
  return 12 * numel(in(g, n, 1));
}

/* matmul: 2 M N K, with K from a's last (or, transposed, second to last) dimension. */
static double matmul(const dpc_graph *g, const dpc_node *n) {
  const dpc_value *a = in(g, n, 0);
  int64_t k = a->shape.rank == 0 ? 1 : a->shape.d[a->shape.rank - 1];
  if (a->shape.rank >= 2 &&
      dpc_attrs_int(dpc_node_attrs(g, (uint32_t)(n - g->nodes)), "transpose_a"))
    k = a->shape.d[a->shape.rank - 2];
  return 2 * numel(out(g, n)) * (double)k;
}

/* Convolutions: 2 per output element and tap of one group's input channels; w is
 * [C_out, C_in / groups, KH, KW], so numel(w) / C_out taps. Both gradients cost the same. */
static double conv_taps(const dpc_value *w) {
  return w->shape.rank ? numel(w) / (double)(w->shape.d[0] ? w->shape.d[0] : 1) : 1;
}
static double conv(const dpc_graph *g, const dpc_node *n) {
  return 2 * numel(out(g, n)) * conv_taps(in(g, n, 1));
}
static double conv_grad_input(const dpc_graph *g, const dpc_node *n) { /* dy w x */
  return 2 * numel(in(g, n, 0)) * conv_taps(in(g, n, 1));
}
static double conv_grad_weight(const dpc_graph *g, const dpc_node *n) { /* dy x w */
  return 2 * numel(in(g, n, 0)) * conv_taps(in(g, n, 2));
}

/* Pools: one operation per output element and window tap. */
static double pool_taps(const dpc_graph *g, const dpc_node *n) {
  int64_t k[2] = {1, 1};
  dpc_attrs_ints(dpc_node_attrs(g, (uint32_t)(n - g->nodes)), "kernel", k, 2, 2);
  return (double)(k[0] * k[1]);
}
static double pool(const dpc_graph *g, const dpc_node *n) {
  return numel(out(g, n)) * pool_taps(g, n);
}
static double pool_grad(const dpc_graph *g, const dpc_node *n) { /* dy x */
  return numel(in(g, n, 0)) * pool_taps(g, n);
}

/* all_reduce: one add per element of every input but the first. */
static double all_reduce(const dpc_graph *g, const dpc_node *n) {
  return numel(out(g, n)) * (double)(n->n_in ? n->n_in - 1 : 0);
}

static const cost_rule rules[DPC_OP_COUNT] = {
    [DPC_OP_INPUT] = none,
    [DPC_OP_PARAM] = none,
    [DPC_OP_STATE] = none,
    [DPC_OP_CONSTANT] = none,
    [DPC_OP_ADD] = ew1,
    [DPC_OP_SUB] = ew1,
    [DPC_OP_MUL] = ew1,
    [DPC_OP_DIV] = ew4,
    [DPC_OP_POW] = ew20,
    [DPC_OP_MAX] = ew1,
    [DPC_OP_MIN] = ew1,
    [DPC_OP_NEG] = ew1,
    [DPC_OP_ABS] = ew1,
    [DPC_OP_RELU] = ew1,
    [DPC_OP_RELU6] = ew2,
    [DPC_OP_CLIP] = ew2,
    [DPC_OP_LEAKY_RELU] = ew2,
    [DPC_OP_GELU] = ew20,
    [DPC_OP_SIGMOID] = ew10,
    [DPC_OP_TANH] = ew10,
    [DPC_OP_EXP] = ew10,
    [DPC_OP_LOG] = ew10,
    [DPC_OP_SQRT] = ew4,
    [DPC_OP_RSQRT] = ew4,
    [DPC_OP_ERF] = ew10,
    [DPC_OP_FLOOR] = ew1,
    [DPC_OP_SIGN] = ew1,
    [DPC_OP_COS] = ew10,
    [DPC_OP_SIN] = ew10,
    [DPC_OP_EQUAL] = ew1,
    [DPC_OP_LESS] = ew1,
    [DPC_OP_GREATER] = ew1,
    [DPC_OP_NOT] = ew1,
    [DPC_OP_WHERE] = ew1,
    [DPC_OP_SOFTMAX] = softmax,
    [DPC_OP_LOG_SOFTMAX] = softmax,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY] = xent,
    [DPC_OP_MSE] = mse,
    [DPC_OP_REDUCE_SUM] = per_in,
    [DPC_OP_REDUCE_MEAN] = per_in,
    [DPC_OP_REDUCE_MAX] = per_in,
    [DPC_OP_TRANSPOSE] = none,
    [DPC_OP_RESHAPE] = none,
    [DPC_OP_FLATTEN] = none,
    [DPC_OP_CONCAT] = none,
    [DPC_OP_SPLIT] = none,
    [DPC_OP_SLICE] = none,
    [DPC_OP_GATHER] = none,
    [DPC_OP_CAST] = ew1,
    [DPC_OP_MATMUL] = matmul,
    [DPC_OP_CONV2D] = conv,
    [DPC_OP_MAX_POOL2D] = pool,
    [DPC_OP_AVG_POOL2D] = pool,
    [DPC_OP_BATCH_NORM] = norm,
    [DPC_OP_LAYER_NORM] = norm,
    [DPC_OP_DROPOUT] = ew2,
    [DPC_OP_SUM_TO] = per_in,
    [DPC_OP_EXPAND] = none,
    [DPC_OP_ZEROS_LIKE] = none,
    [DPC_OP_SOFTMAX_GRAD] = softmax_grad,
    [DPC_OP_LOG_SOFTMAX_GRAD] = softmax_grad,
    [DPC_OP_SOFTMAX_CROSS_ENTROPY_GRAD] = xent_grad,
    [DPC_OP_SLICE_GRAD] = none,
    [DPC_OP_GATHER_GRAD] = per_in,
    [DPC_OP_CONV2D_GRAD_INPUT] = conv_grad_input,
    [DPC_OP_CONV2D_GRAD_WEIGHT] = conv_grad_weight,
    [DPC_OP_MAX_POOL2D_GRAD] = pool_grad,
    [DPC_OP_AVG_POOL2D_GRAD] = pool_grad,
    [DPC_OP_BATCH_NORM_GRAD] = norm_grad,
    [DPC_OP_LAYER_NORM_GRAD] = norm_grad,
    [DPC_OP_ALL_REDUCE] = all_reduce,
};

bool dpc_cost_has_rule(dpc_op op) {
  return op < DPC_OP_COUNT && rules[op] != NULL;
}

/* Whether value v is computed inside the group rooted at `root`. */
static bool in_group(const dpc_graph *g, uint32_t v, uint32_t root) {
  uint32_t p = g->values[v].node;
  return p == root || g->nodes[p].fused == root;
}

/* Each kernel's sums over its fusion group (its members come before its root), made once here
 * so that a kernel's time is a lookup: summed at each dpc_cost_kernel_seconds, by scanning the
 * nodes before the root, a simulation was quadratic in the nodes, and a plan replicated over
 * 256 devices took minutes. */
static dpc_status kernel_sums(const dpc_graph *g, dpc_node_cost *c, dpc_diag *d) {
  uint32_t n = g->n_nodes;
  uint32_t *head = malloc((n ? n : 1) * sizeof *head), *next = malloc((n ? n : 1) * sizeof *next);
  uint32_t *seen = calloc(g->n_values ? g->n_values : 1, sizeof *seen);
  if (!head || !next || !seen) {
    free(head), free(next), free(seen);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory costing the graph");
  }
  for (uint32_t i = 0; i < n; i++) head[i] = DPC_NONE;
  for (uint32_t i = n; i-- > 0;) { /* each root's members, in node order, the root last */
    uint32_t r = g->nodes[i].fused == DPC_NONE ? i : g->nodes[i].fused;
    if (r < i || r >= n) continue;
    next[i] = head[r], head[r] = i;
  }
  for (uint32_t r = 0; r < n; r++) {
    if (g->nodes[r].fused != DPC_NONE) continue;
    dpc_node_cost *k = &c[r];
    k->kernel_gemm = k->kernel_other = 0, k->kernel_bytes = k->bytes_out;
    for (uint32_t i = head[r]; i != DPC_NONE; i = next[i]) {
      const dpc_node *m = &g->nodes[i];
      bool heavy = m->op == DPC_OP_MATMUL || m->op == DPC_OP_CONV2D ||
                   m->op == DPC_OP_CONV2D_GRAD_INPUT || m->op == DPC_OP_CONV2D_GRAD_WEIGHT;
      *(heavy ? &k->kernel_gemm : &k->kernel_other) += c[i].flops;
      for (uint32_t q = 0; q < m->n_in; q++) {
        uint32_t v = dpc_node_inputs(g, m)[q];
        if (in_group(g, v, r) || seen[v] == r + 1) continue;
        seen[v] = r + 1; /* a group at a time: its stamp marks what it read already */
        k->kernel_bytes += bytes_of(&g->values[v]);
      }
    }
  }
  free(head), free(next), free(seen);
  return DPC_OK;
}

dpc_status dpc_cost_graph(const dpc_graph *g, dpc_node_cost *c, dpc_diag *d) {
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const dpc_node *n = &g->nodes[i];
    if (!dpc_cost_has_rule(n->op))
      return dpc_graph_fail_node(g, i, d, DPC_ERR_INTERNAL, "%s has no cost rule",
                                 dpc_op_name(n->op));
    for (uint32_t k = 0; k < n->n_out; k++)
      if (!dpc_shape_is_concrete(&g->values[n->out + k].shape))
        return dpc_graph_fail_node(g, i, d, DPC_ERR_INVALID,
                                   "cannot cost a graph with symbolic shapes: bind it first");
    dpc_node_cost nc = {0};
    bool source = dpc_op_has(n->op, DPC_OPF_SOURCE);
    nc.flops = rules[n->op](g, n);
    for (uint32_t k = 0; !source && k < n->n_in; k++) nc.bytes_in += bytes_of(in(g, n, k));
    for (uint32_t k = 0; k < n->n_out; k++) nc.memory += bytes_of(&g->values[n->out + k]);
    nc.bytes_out = source ? 0 : nc.memory;
    c[i] = nc;
  }
  return kernel_sums(g, c, d);
}

dpc_cost_total dpc_cost_sum(const dpc_graph *g, const dpc_node_cost *c) {
  dpc_cost_total t = {0};
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    t.flops += c[i].flops;
    t.bytes += c[i].bytes_in + c[i].bytes_out;
    switch (g->nodes[i].op) {
    case DPC_OP_PARAM: t.param_bytes += c[i].memory; break;
    case DPC_OP_STATE: t.state_bytes += c[i].memory; break;
    default: t.activation_bytes += c[i].memory; break;
    }
  }
  return t;
}

/* A power-of-two size class of a kernel's output: kernels of the same ops in one class run at
 * much the same efficiency (a tiny kernel's time is mostly overhead, a large one's is not). */
static uint64_t size_class(uint64_t numel) {
  uint64_t c = 0;
  while (numel > 1) numel >>= 1, c++;
  return c;
}

/* A kernel's size: the elements its root writes and reads. The output alone would give a weight
 * gradient the same size at every batch, and its factor timed at one batch would stand for all
 * (a data-parallel share's is not the whole batch's). */
static uint64_t kernel_numel(const dpc_graph *g, uint32_t node) {
  const dpc_node *n = &g->nodes[node];
  uint64_t e = (uint64_t)dpc_shape_numel(&g->values[n->out].shape);
  for (uint32_t k = 0; k < n->n_in; k++)
    e += (uint64_t)dpc_shape_numel(&g->values[dpc_node_inputs(g, n)[k]].shape);
  return e;
}

/* FNV-1a over a kernel's ops: its fusion group's, then its root's. */
static uint64_t ops_hash(const dpc_graph *g, uint32_t node) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t i = 0; i <= node; i++) {
    const dpc_node *n = &g->nodes[i];
    if (i != node && n->fused != node) continue;
    h = (h ^ (uint64_t)n->op) * 1099511628211ull;
  }
  return (h ^ (uint64_t)g->nodes[node].op) * 1099511628211ull;
}

/* The key of a kernel with these ops and this output size. */
static uint64_t size_key(uint64_t ops, uint64_t numel) {
  return (ops ^ numel) * 1099511628211ull;
}

/* The index of `key` in p, or p->n. */
static uint32_t find(const dpc_cost_profile *p, uint64_t key) {
  uint32_t i = 0;
  while (i < p->n && p->key[i] != key) i++;
  return i;
}

/* The key of kernels with these ops in this size class (salted apart from size_key's). */
static uint64_t sig_key(uint64_t ops, uint64_t size_class) {
  return (ops ^ 0x9e3779b97f4a7c15ull ^ (size_class + 1)) * 1099511628211ull;
}

static bool is_gemm(dpc_op op) {
  return op == DPC_OP_MATMUL || op == DPC_OP_CONV2D || op == DPC_OP_CONV2D_GRAD_INPUT ||
         op == DPC_OP_CONV2D_GRAD_WEIGHT;
}

/* The key of a kernel's GEMM or convolution by its op and operands' sizes, whatever is fused
 * around it (salted apart from the others), or 0 when it has none: a weight gradient that data
 * parallel keeps apart for its all-reduce runs the same GEMM as the one fused into the momentum
 * update on one device, which the profile timed. */
static uint64_t gemm_key(const dpc_graph *g, uint32_t node) {
  for (uint32_t i = 0; i <= node; i++) {
    const dpc_node *n = &g->nodes[i];
    if ((i != node && n->fused != node) || !is_gemm(n->op)) continue;
    uint64_t h = (0xc2b2ae3d27d4eb4full ^ (uint64_t)n->op) * 1099511628211ull;
    for (uint32_t k = 0; k < n->n_in; k++)
      h = (h ^ (uint64_t)dpc_shape_numel(&g->values[dpc_node_inputs(g, n)[k]].shape)) *
          1099511628211ull;
    return h ? h : 1;
  }
  return 0;
}

double dpc_cost_kernel_seconds(const dpc_graph *g, const dpc_node_cost *c, uint32_t node,
                               const dpc_device_speed *s) {
  const dpc_node *root = &g->nodes[node];
  if (dpc_op_has(root->op, DPC_OPF_SOURCE) || root->fused != DPC_NONE) return 0;
  /* only what comes from outside the group is read from memory (dpc_cost_graph's sums) */
  double gemm = c[node].kernel_gemm, other = c[node].kernel_other, bytes = c[node].kernel_bytes;
  double compute = (gemm + 4 * other) / (s->gflops * 1e9);
  double memory = bytes / (s->mem_gbs * 1e9);
  double t = compute > memory ? compute : memory;
  if (s->profile) {
    /* this kernel at this size; else its GEMM timed with other ops around it; else the same
     * ops timed at a size of its class or the next (a pipeline's sums of gradients over
     * micro-batches, a fusion group cut by a stage); else the roofline alone */
    const dpc_cost_profile *p = s->profile;
    uint64_t ops = ops_hash(g, node), numel = kernel_numel(g, node);
    uint32_t i = find(p, size_key(ops, numel));
    uint64_t gk = i == p->n ? gemm_key(g, node) : 0;
    if (gk) i = find(p, gk);
    if (i == p->n) {
      uint64_t sc = size_class(numel);
      i = find(p, sig_key(ops, sc));
      if (i == p->n) i = find(p, sig_key(ops, sc + 1));
      if (i == p->n && sc) i = find(p, sig_key(ops, sc - 1));
    }
    if (i < p->n) return t * p->factor[i];
  }
  return t;
}

/* ---- measured corrections ------------------------------------------------------------------- */

uint64_t dpc_cost_kernel_key(const dpc_graph *g, uint32_t node) {
  return size_key(ops_hash(g, node), kernel_numel(g, node));
}

/* While adding, factor[i] holds kernel kind i's measured sum and factor[cap + i] its predicted
 * sum; finish divides. The index of `key` in p, appended with zero sums when new; p->cap when
 * out of memory. */
static uint32_t entry(dpc_cost_profile *p, uint64_t key) {
  uint32_t i = find(p, key);
  if (i < p->n) return i;
  if (p->n == p->cap) {
    uint32_t cap = p->cap ? 2 * p->cap : 64;
    uint64_t *k = realloc(p->key, cap * sizeof *k);
    if (k) p->key = k;
    double *f = realloc(p->factor, 2 * (size_t)cap * sizeof *f);
    if (f) p->factor = f;
    if (!k || !f) return p->cap;
    memmove(p->factor + cap, p->factor + p->cap, p->cap * sizeof *f);
    p->cap = cap;
  }
  p->key[i] = key, p->factor[i] = 0, p->factor[p->cap + i] = 0, p->n++;
  return i;
}

static dpc_status add_timing(dpc_cost_profile *p, uint64_t key, double measured, double predicted) {
  uint32_t i = entry(p, key);
  if (i == p->cap) return DPC_ERR_NOMEM;
  p->factor[i] += measured, p->factor[p->cap + i] += predicted;
  return DPC_OK;
}

dpc_status dpc_cost_profile_add(dpc_cost_profile *p, const dpc_graph *g, uint32_t node,
                                double measured, double predicted) {
  /* the kernel at its size, its ops in its size class, and its GEMM */
  uint64_t ops = ops_hash(g, node), numel = kernel_numel(g, node);
  uint64_t gk = gemm_key(g, node);
  if (add_timing(p, size_key(ops, numel), measured, predicted) ||
      add_timing(p, sig_key(ops, size_class(numel)), measured, predicted) ||
      (gk && add_timing(p, gk, measured, predicted)))
    return DPC_ERR_NOMEM;
  dpc_op op = g->nodes[node].op;
  p->op_ms[op] += measured * 1e3, p->op_pred_ms[op] += predicted * 1e3;
  return DPC_OK;
}

/* A factor from timings: measured over predicted, kept within what a timer's noise on a
 * microsecond kernel allows. */
static double ratio(double measured, double predicted) {
  double f = predicted > 0 ? measured / predicted : 1;
  return f < 0.05 ? 0.05 : f > 200 ? 200 : f;
}

void dpc_cost_profile_finish(dpc_cost_profile *p) {
  for (uint32_t i = 0; i < p->n; i++) p->factor[i] = ratio(p->factor[i], p->factor[p->cap + i]);
  for (int k = 0; k < DPC_OP_COUNT; k++)
    p->op_factor[k] = p->op_pred_ms[k] > 0 ? ratio(p->op_ms[k], p->op_pred_ms[k]) : 0;
}

dpc_status dpc_cost_profile_merge(dpc_cost_profile *into, const dpc_cost_profile *from) {
  for (uint32_t j = 0; j < from->n; j++) {
    if (find(into, from->key[j]) < into->n) continue;
    uint32_t i = entry(into, from->key[j]);
    if (i == into->cap) return DPC_ERR_NOMEM;
    into->factor[i] = from->factor[j];
  }
  return DPC_OK;
}

void dpc_cost_profile_free(dpc_cost_profile *p) {
  free(p->key);
  free(p->factor);
  memset(p, 0, sizeof *p);
}
