/*
 * data_parallel.c — the synchronous data-parallel training graph (see partitioner.h).
 *
 * From the training graph bound at each replica's share b_r of the batch B (B / D each, or
 * shares sized to the devices' speeds), build one graph holding D replicas of it, replica r
 * placed on device r:
 *
 *   x: f32[B, ...]                       the global inputs, as the data loader fills them
 *   x.shard<r> = slice(x, rows o_r ..)   each replica's shard, o_r = b_0 + .. + b_{r-1}
 *   ... the forward and backward graph of each replica ...              (device r)
 *   w.grad, w.grad.replica1, ... = all_reduce(each replica's w.grad.local)   (mean)
 *   ... each replica's optimizer update from the reduced gradient ...   (device r)
 *   loss, loss.replica1, ... = all_reduce(each replica's loss.local)    (what training reports)
 *
 * Replica 0 keeps the graph's names (so checkpoints, `--init` and evaluation see the params
 * they know); replica r > 0 names its values `name.replica<r>` (dpc_replica_of reads it back). The
 * replicas start from the same initializers and apply the same reduced gradients, so their params
 * stay bit-identical. Nodes are added node by node across replicas, so each all-reduce comes right
 * after the last replica computes its gradient, and the updates after it. A gradient computed
 * inside a fusion group (the weight gradient's GEMM fused into the momentum update) leaves the
 * group, which stays a valid group of the elementwise ops that remain.
 *
 * Unequal shares: a replica's loss and gradients are means over its own b_r rows, so the mean
 * over the batch weighs replica r by b_r / B. Each replica's gradient (and loss) is multiplied
 * by c_r = D b_r / B before the all-reduce's plain mean; equal shares have c_r = 1 and no
 * multiply, so their bits are those of before. Every copy's attributes are made concrete at its
 * replica's binding (a reshape to [N, ...] reads its own N), since the graph has one symbol table.
 */
#include "partitioner/partitioner.h"

#include "ir/print.h"
#include "passes/emit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct builder {
  const dpc_graph *r;           /* replica 0's graph: the structure every replica shares */
  const dpc_graph *const *reps; /* each replica's graph, bound at its share */
  dpc_graph *g;                 /* the data-parallel graph */
  uint32_t D;
  uint32_t mp; /* devices per replica (hybrid): replica rep's device k is devname[rep * mp + k] */
  uint32_t **val;    /* [replica][replica-graph value] -> value of g */
  uint32_t **node;   /* [replica][replica-graph node] -> node of g */
  uint32_t *devname; /* string id of each device in g */
  bool *is_grad;     /* replica-graph values that are a param's gradient */
  int64_t *first;    /* [replica]: rows of the global batch before its share */
  double *scale;     /* [replica]: c_r, its gradients' weight in the mean (1: equal shares) */
} builder;

/* Gradients below this share an all-reduce (reduce_bucket) */
enum { BUCKET_BYTES = 256 * 1024 };

static dpc_status nomem(dpc_diag *d) {
  return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory building the data-parallel graph");
}

/* Name value v of g after replica value rv of replica `rep`: the same name on replica 0. */
static dpc_status name_value(builder *b, uint32_t v, uint32_t rv, uint32_t rep, dpc_diag *d) {
  uint32_t nm = b->r->values[rv].name;
  if (nm == DPC_NONE) return DPC_OK;
  const char *s = dpc_graph_str(b->r, nm);
  char buf[256];
  if (rep == 0)
    snprintf(buf, sizeof buf, "%s", s);
  else
    snprintf(buf, sizeof buf, "%s" DPC_REPLICA_SUFFIX "%u", s, rep);
  return dpc_graph_set_name(b->g, v, buf, strlen(buf), d);
}

dpc_status dpc_copy_node(dpc_graph *dst, const dpc_graph *src, uint32_t i, const uint32_t *val,
                         uint32_t device, int64_t rows_before, uint32_t *id, dpc_diag *d) {
  const dpc_node *n = &src->nodes[i];
  uint32_t mark = dpc_graph_attr_mark(dst);
  bool dropout = n->op == DPC_OP_DROPOUT;
  for (uint32_t k = 0; k < n->n_attr; k++) {
    const dpc_attr *a = &src->attrs[n->attr + k];
    if (dropout && !strcmp(dpc_graph_str(src, a->name), "offset")) continue;
    if (dpc_graph_attr_copy(dst, src, a))
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory copying a node");
    /* a symbol bound in src becomes its value: dst's one symbol table may bind it otherwise */
    const dpc_attr *c = &dst->attrs[dst->n_attrs - 1];
    for (uint32_t e = 0; c->kind == DPC_ATTR_SHAPE && e < c->n; e++) {
      int64_t *dim = &dst->ints[c->u.off + e];
      if (DPC_DIM_IS_SYM(*dim) && DPC_DIM_SYM_NO(*dim) < src->n_syms &&
          src->sym_vals[DPC_DIM_SYM_NO(*dim)] >= 0)
        *dim = src->sym_vals[DPC_DIM_SYM_NO(*dim)];
    }
  }
  /* the copy's dropout draws the mask of its rows of the whole batch, as one device would */
  if (dropout) {
    const dpc_shape *sh = &src->values[n->out].shape;
    int64_t row = sh->rank && sh->d[0] ? dpc_shape_numel(sh) / sh->d[0] : 1;
    int64_t first = dpc_attrs_int(dpc_node_attrs(src, i), "offset") + rows_before * row;
    if (dpc_graph_attr_int(dst, "offset", first))
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory copying a node");
  }
  /* a concat of K micro-batches' outputs has K inputs: as many as the node has */
  uint32_t small[64], *ins = n->n_in <= 64 ? small : malloc(n->n_in * sizeof *ins);
  if (!ins) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory copying a node");
  for (uint32_t k = 0; k < n->n_in; k++)
    if ((ins[k] = val[dpc_node_inputs(src, n)[k]]) == DPC_NONE) {
      if (ins != small) free(ins);
      return dpc_graph_fail_node(src, i, d, DPC_ERR_INTERNAL, "reads a value left out of the copy");
    }
  dpc_node_desc desc = {n->op, ins, n->n_in, mark, n->n_out, n->loc, device};
  dpc_status st = dpc_graph_add_node(dst, &desc, id, d);
  if (ins != small) free(ins);
  if (!st) dst->nodes[*id].phase = n->phase, dst->nodes[*id].mb = n->mb;
  return st;
}

/* Copy node i of the replica graph into g for replica `rep`, inputs remapped. */
static dpc_status clone_node(builder *b, uint32_t i, uint32_t rep, dpc_diag *d) {
  const dpc_graph *r = b->r;
  const dpc_node *n = &r->nodes[i];
  /* the replica graph's placement cpu:k (hybrid) becomes this replica's k-th device */
  uint32_t local = 0; /* plain data parallel (mp 1) puts a whole replica on one device */
  if (n->device != DPC_NONE && b->mp > 1) {
    const char *s = dpc_graph_str(r, n->device);
    char *end = NULL;
    unsigned long k = !strncmp(s, "cpu:", 4) ? strtoul(s + 4, &end, 10) : b->mp;
    if (!end || *end || k >= b->mp)
      return dpc_graph_fail_node(r, i, d, DPC_ERR_INVALID,
                                 "is placed on '%s': a replica has the devices cpu:0 to cpu:%u", s,
                                 b->mp - 1);
    local = (uint32_t)k;
  }
  /* replica rep's rows of the whole batch come after rep replicas' */
  uint32_t id;
  dpc_status st = dpc_copy_node(b->g, b->reps[rep], i, b->val[rep], b->devname[rep * b->mp + local],
                                b->first[rep], &id, d);
  if (st) return st;
  b->node[rep][i] = id;
  for (uint32_t k = 0; k < n->n_out && !st; k++) {
    uint32_t v = b->g->nodes[id].out + k;
    b->val[rep][n->out + k] = v;
    st = name_value(b, v, n->out + k, rep, d);
  }
  return st;
}

/* The global input for replica input node i, and each replica's slice of it. */
static dpc_status split_input(builder *b, uint32_t i, int64_t batch, dpc_diag *d) {
  const dpc_graph *r = b->r;
  const dpc_value *x = &r->values[r->nodes[i].out];
  if (x->shape.rank == 0)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "input '%s' has no batch dimension to shard",
                         dpc_graph_str(r, x->name));
  int64_t dims[DPC_MAX_RANK];
  for (uint32_t k = 0; k < x->shape.rank; k++) dims[k] = x->shape.d[k];
  dims[0] = batch;
  uint32_t mark = dpc_graph_attr_mark(b->g);
  if (dpc_graph_attr_dtype(b->g, "dtype", x->dtype) ||
      dpc_graph_attr_shape(b->g, "shape", dims, x->shape.rank))
    return nomem(d);
  dpc_node_desc desc = {DPC_OP_INPUT, NULL, 0, mark, 1, r->nodes[i].loc, b->devname[0]};
  uint32_t id;
  dpc_status st = dpc_graph_add_node(b->g, &desc, &id, d);
  if (st) return st;
  uint32_t global = b->g->nodes[id].out;
  uint8_t phase = r->nodes[i].phase ? DPC_PHASE_SHARED : DPC_PHASE_NONE; /* before micro-batches */
  b->g->nodes[id].phase = phase;
  if ((st = name_value(b, global, r->nodes[i].out, 0, d))) return st;
  for (uint32_t rep = 0; rep < b->D && !st; rep++) {
    int64_t start = b->first[rep], axis = 0;
    int64_t end = start + b->reps[rep]->values[r->nodes[i].out].shape.d[0];
    mark = dpc_graph_attr_mark(b->g);
    if (dpc_graph_attr_ints(b->g, "starts", &start, 1) ||
        dpc_graph_attr_ints(b->g, "ends", &end, 1) || dpc_graph_attr_ints(b->g, "axes", &axis, 1))
      return nomem(d);
    dpc_node_desc sd = {DPC_OP_SLICE,           &global, 1, mark, 1, r->nodes[i].loc,
                        b->devname[rep * b->mp]};
    if ((st = dpc_graph_add_node(b->g, &sd, &id, d))) return st;
    b->g->nodes[id].phase = phase;
    b->node[rep][i] = id;
    b->val[rep][r->nodes[i].out] = b->g->nodes[id].out;
    char nm[256];
    snprintf(nm, sizeof nm, "%s.shard%u", dpc_graph_str(r, x->name), rep);
    st = dpc_graph_set_name(b->g, b->g->nodes[id].out, nm, strlen(nm), d);
  }
  return st;
}

/* Value v of g times replica rep's weight c_r, beside v (v itself when c_r is 1): what the
 * all-reduce's mean reads. */
static uint32_t weigh(builder *b, uint32_t v, uint32_t rep, dpc_diag *d, dpc_status *st) {
  if (*st || b->scale[rep] == 1.0) return v;
  const dpc_node *from = &b->g->nodes[b->g->values[v].node];
  uint8_t phase = from->phase;
  uint32_t mb = from->mb;
  dpc_emit e = dpc_emit_start(b->g, from->device, d);
  uint32_t w =
      dpc_emit2(&e, DPC_OP_MUL, v, dpc_emit_scalar(&e, b->scale[rep], b->g->values[v].dtype));
  if ((*st = e.st)) return DPC_NONE;
  b->g->nodes[b->g->values[w].node].phase = phase, b->g->nodes[b->g->values[w].node].mb = mb;
  return w;
}

/* all_reduce(mean) of replica value rv across the replicas; its outputs take rv's place (and
 * names) from here on. */
static dpc_status reduce_value(builder *b, uint32_t rv, dpc_diag *d) {
  uint32_t ins[DPC_MAX_DEVICES]; /* one per replica (checked at the start) */
  for (uint32_t rep = 0; rep < b->D; rep++) ins[rep] = b->val[rep][rv];
  /* the replicas' own values give up their names to the reduced ones */
  for (uint32_t rep = 0; rep < b->D; rep++) {
    const dpc_value *v = &b->g->values[ins[rep]];
    if (v->name == DPC_NONE) continue;
    char nm[300];
    snprintf(nm, sizeof nm, "%s.local", dpc_graph_str(b->g, v->name));
    dpc_status st = dpc_graph_set_name(b->g, ins[rep], nm, strlen(nm), d);
    if (st) return st;
  }
  dpc_status wst = DPC_OK;
  for (uint32_t rep = 0; rep < b->D; rep++) ins[rep] = weigh(b, ins[rep], rep, d, &wst);
  if (wst) return wst;
  uint32_t mark = dpc_graph_attr_mark(b->g);
  if (dpc_graph_attr_str(b->g, "op", "mean")) return nomem(d);
  dpc_node_desc desc = {
      DPC_OP_ALL_REDUCE,
      ins,
      b->D,
      mark,
      b->D,
      b->r->values[rv].node < b->r->n_nodes ? b->r->nodes[b->r->values[rv].node].loc : (dpc_loc){0},
      DPC_NONE};
  uint32_t id;
  dpc_status st = dpc_graph_add_node(b->g, &desc, &id, d);
  if (!st && b->r->values[rv].node < b->r->n_nodes) { /* a micro-batched step's averages */
    const dpc_node *from = &b->r->nodes[b->r->values[rv].node];
    b->g->nodes[id].phase = from->phase, b->g->nodes[id].mb = from->mb;
  }
  for (uint32_t rep = 0; rep < b->D && !st; rep++) {
    uint32_t v = b->g->nodes[id].out + rep;
    b->val[rep][rv] = v;
    st = name_value(b, v, rv, rep, d);
  }
  return st;
}

/* Small gradients (a bias, a narrow layer's weights) share one all-reduce: each replica's are
 * flattened and concatenated, the concatenation is reduced, and slices of it become the
 * reduced gradients. One collective instead of many: each costs a rendezvous of every device,
 * which for a few kilobytes is most of its time. A gradient of BUCKET_BYTES or more has its own. */

static dpc_status reduce_bucket(builder *b, const uint32_t *rv, uint32_t n, dpc_diag *d) {
  if (n == 1) return reduce_value(b, rv[0], d);
  const dpc_graph *r = b->r;
  const dpc_node *from = &r->nodes[r->values[rv[n - 1]].node];
  uint32_t first_new = b->g->n_nodes;
  uint32_t flat[DPC_MAX_DEVICES]; /* one per replica */
  dpc_status st = DPC_OK;
  for (uint32_t rep = 0; rep < b->D && !st; rep++) {
    dpc_emit e = dpc_emit_start(b->g, b->devname[rep], d);
    uint32_t parts[64];
    for (uint32_t k = 0; k < n; k++) {
      int64_t numel = dpc_shape_numel(&r->values[rv[k]].shape);
      dpc_emit_begin(&e);
      dpc_emit_shape(&e, "shape", &numel, 1);
      uint32_t id = dpc_emit_node(&e, DPC_OP_RESHAPE, &b->val[rep][rv[k]], 1, 1);
      parts[k] = e.st ? DPC_NONE : b->g->nodes[id].out;
    }
    dpc_emit_begin(&e);
    dpc_emit_int(&e, "axis", 0);
    uint32_t id = dpc_emit_node(&e, DPC_OP_CONCAT, parts, n, 1);
    if ((st = e.st)) break;
    flat[rep] = b->g->nodes[id].out;
    char nm[64];
    snprintf(nm, sizeof nm, "grad.bucket%u" DPC_REPLICA_SUFFIX "%u", from->out, rep);
    st = dpc_graph_set_name(b->g, flat[rep], nm, strlen(nm), d);
    flat[rep] = weigh(b, flat[rep], rep, d, &st);
  }
  uint32_t mark = dpc_graph_attr_mark(b->g), id = DPC_NONE;
  if (!st && dpc_graph_attr_str(b->g, "op", "mean")) st = nomem(d);
  dpc_node_desc desc = {DPC_OP_ALL_REDUCE, flat, b->D, mark, b->D, from->loc, DPC_NONE};
  if (!st) st = dpc_graph_add_node(b->g, &desc, &id, d);
  /* each gradient: its slice of the reduced bucket, in its shape; the replicas' own values give
   * up their names */
  for (uint32_t rep = 0; rep < b->D && !st; rep++) {
    dpc_emit e = dpc_emit_start(b->g, b->devname[rep], d);
    uint32_t out = b->g->nodes[id].out + rep;
    int64_t off = 0, axis = 0;
    for (uint32_t k = 0; k < n && !st; k++) {
      const dpc_value *gv = &r->values[rv[k]];
      int64_t numel = dpc_shape_numel(&gv->shape), end = off + numel;
      dpc_emit_begin(&e);
      dpc_emit_ints(&e, "starts", &off, 1);
      dpc_emit_ints(&e, "ends", &end, 1);
      dpc_emit_ints(&e, "axes", &axis, 1);
      uint32_t sl = dpc_emit_node(&e, DPC_OP_SLICE, &out, 1, 1);
      dpc_emit_begin(&e);
      dpc_emit_shape(&e, "shape", gv->shape.d, gv->shape.rank);
      uint32_t slv = e.st ? DPC_NONE : b->g->nodes[sl].out;
      uint32_t rs = dpc_emit_node(&e, DPC_OP_RESHAPE, &slv, 1, 1);
      if ((st = e.st)) break;
      const dpc_value *own = &b->g->values[b->val[rep][rv[k]]];
      if (own->name != DPC_NONE) {
        char nm[300];
        snprintf(nm, sizeof nm, "%s.local", dpc_graph_str(b->g, own->name));
        st = dpc_graph_set_name(b->g, b->val[rep][rv[k]], nm, strlen(nm), d);
      }
      b->val[rep][rv[k]] = b->g->nodes[rs].out;
      if (!st) st = name_value(b, b->g->nodes[rs].out, rv[k], rep, d);
      off = end;
    }
  }
  /* a micro-batched step's schedule places them where their gradients are */
  for (uint32_t i = first_new; !st && i < b->g->n_nodes; i++)
    b->g->nodes[i].phase = from->phase, b->g->nodes[i].mb = from->mb;
  return st;
}

static dpc_status build(builder *b, int64_t batch, dpc_diag *d) {
  const dpc_graph *r = b->r;
  dpc_status st = DPC_OK;
  uint32_t pend[64], n_pend = 0; /* small gradients waiting for their bucket */
  uint64_t pend_bytes = 0;
  bool bucket = b->mp == 1;
  for (uint32_t i = 0; i < r->n_nodes && !st; i++) {
    const dpc_node *n = &r->nodes[i];
    if (n->op == DPC_OP_INPUT) {
      st = split_input(b, i, batch, d);
      continue;
    }
    /* a node about to read a waiting gradient: the bucket goes first */
    bool reads = false;
    for (uint32_t k = 0; k < n->n_in; k++)
      for (uint32_t q = 0; q < n_pend; q++) reads |= dpc_node_inputs(r, n)[k] == pend[q];
    if (reads) st = reduce_bucket(b, pend, n_pend, d), n_pend = 0, pend_bytes = 0;
    for (uint32_t rep = 0; rep < b->D && !st; rep++) st = clone_node(b, i, rep, d);
    for (uint32_t k = 0; k < n->n_out && !st; k++) {
      uint32_t v = n->out + k;
      if (!b->is_grad[v] && v != r->obj.loss) continue;
      uint64_t bytes =
          (uint64_t)dpc_shape_numel(&r->values[v].shape) * dpc_dtype_size(r->values[v].dtype);
      if (!bucket || v == r->obj.loss || bytes >= BUCKET_BYTES) {
        st = reduce_value(b, v, d);
        continue;
      }
      pend[n_pend++] = v, pend_bytes += bytes;
      if (pend_bytes >= BUCKET_BYTES || n_pend == 64)
        st = reduce_bucket(b, pend, n_pend, d), n_pend = 0, pend_bytes = 0;
    }
  }
  if (!st && n_pend) st = reduce_bucket(b, pend, n_pend, d);
  /* fusion groups, with the gradients taken out of them */
  for (uint32_t i = 0; i < r->n_nodes && !st; i++) {
    const dpc_node *n = &r->nodes[i];
    if (n->fused == DPC_NONE || n->op == DPC_OP_INPUT) continue;
    bool grad = false;
    for (uint32_t k = 0; k < n->n_out; k++) grad |= b->is_grad[n->out + k];
    for (uint32_t rep = 0; rep < b->D; rep++)
      b->g->nodes[b->node[rep][i]].fused = grad ? DPC_NONE : b->node[rep][n->fused];
  }
  for (uint32_t i = 0; i < r->n_updates && !st; i++)
    for (uint32_t rep = 0; rep < b->D && !st; rep++)
      st = dpc_graph_add_update(b->g, b->val[rep][r->updates[i].target],
                                b->val[rep][r->updates[i].value], r->updates[i].loc, d);
  for (uint32_t i = 0; i < r->n_outputs && !st; i++)
    st = dpc_graph_add_output(b->g, b->val[0][r->outputs[i]], d);
  if (!st && r->obj.loss != DPC_NONE) {
    uint32_t mark = dpc_graph_attr_mark(b->g);
    for (uint32_t k = 0; k < r->obj.n_attr && !st; k++)
      if (dpc_graph_attr_copy(b->g, r, &r->attrs[r->obj.attr + k])) st = nomem(d);
    if (!st)
      st = dpc_graph_set_objective(b->g, b->val[0][r->obj.loss], dpc_graph_str(r, r->obj.optimizer),
                                   mark, r->obj.loc, d);
  }
  return st;
}

/* Momentum instead of gradient: where a gradient's one reader is the momentum update
 * v' = a + g, with `a` the same on every replica (it reads params, state and constants only, so
 * a = mu * v), the mean of the replicas' v' equals a + mean(g). Reducing v' rather than g lets
 * each replica keep its fused kernel that computes g and adds it to a as the GEMM stores it —
 * what one device runs — instead of reducing g and then reading it again in an `add` kernel of
 * its own (fashion_mlp: 0.29 ms of a 2.8 ms step per replica). Results differ from reducing g
 * by rounding only. Gradients below BUCKET_BYTES are left to their buckets (below). */
static bool reduce_momentum(const dpc_graph *r, bool *is_grad) {
  uint32_t nv = r->n_values ? r->n_values : 1;
  uint8_t *cls = malloc((r->n_nodes ? r->n_nodes : 1) * sizeof *cls);
  uint32_t *reads = calloc(nv, sizeof *reads), *reader = calloc(nv, sizeof *reader);
  if (!cls || !reads || !reader) {
    free(cls), free(reads), free(reader);
    return false;
  }
  /* `a` must be shared: read neither from the batch nor from a gradient. A graph the
   * classification refuses (a node reading both) keeps its gradients reduced as they are. */
  dpc_diag quiet;
  dpc_diag_init(&quiet);
  bool classified = dpc_step_classify(r, is_grad, cls, &quiet) == DPC_OK;
  dpc_diag_free(&quiet);
  for (uint32_t i = 0; i < r->n_nodes; i++)
    for (uint32_t k = 0; k < r->nodes[i].n_in; k++) {
      uint32_t v = dpc_node_inputs(r, &r->nodes[i])[k];
      reads[v]++, reader[v] = i;
    }
  for (uint32_t v = 0; classified && v < r->n_values; v++) {
    /* a small gradient waits for its bucket, which its update, right after v', would not */
    uint64_t bytes =
        (uint64_t)dpc_shape_numel(&r->values[v].shape) * dpc_dtype_size(r->values[v].dtype);
    if (!is_grad[v] || reads[v] != 1 || bytes < BUCKET_BYTES) continue;
    const dpc_node *u = &r->nodes[reader[v]];
    if (u->op != DPC_OP_ADD || u->n_in != 2) continue;
    uint32_t a =
        dpc_node_inputs(r, u)[0] == v ? dpc_node_inputs(r, u)[1] : dpc_node_inputs(r, u)[0];
    bool updates = false;
    for (uint32_t k = 0; k < r->n_updates; k++) updates |= r->updates[k].value == u->out;
    if (a == v || cls[r->values[a].node] != DPC_STEP_SHARED || !updates) continue;
    is_grad[v] = false, is_grad[u->out] = true;
  }
  free(cls), free(reads), free(reader);
  return true;
}

int64_t dpc_replica_rows(const dpc_graph *g) {
  for (uint32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == DPC_OP_INPUT && g->values[g->nodes[i].out].shape.rank)
      return g->values[g->nodes[i].out].shape.d[0];
  return -1;
}

dpc_status dpc_data_parallel_graph(const dpc_graph *const *reps, int64_t batch, uint32_t replicas,
                                   uint32_t mp, const char *const *devices, bool reduce_grads,
                                   dpc_graph **out, dpc_diag *d) {
  *out = NULL;
  if (replicas < 2 || replicas > DPC_MAX_DEVICES)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "data parallel needs 2 to %u replicas, not %u",
                         DPC_MAX_DEVICES, replicas);
  if (mp < 1) mp = 1;
  const dpc_graph *replica = reps[0];
  builder b = {replica, reps, dpc_graph_new(), replicas, mp, NULL, NULL, NULL, NULL, NULL, NULL};
  dpc_status st = b.g ? DPC_OK : nomem(d);
  if (!st) {
    b.val = calloc(replicas, sizeof *b.val);
    b.node = calloc(replicas, sizeof *b.node);
    b.devname = calloc((size_t)replicas * mp, sizeof *b.devname);
    b.is_grad = calloc(replica->n_values ? replica->n_values : 1, sizeof *b.is_grad);
    b.first = calloc(replicas, sizeof *b.first);
    b.scale = calloc(replicas, sizeof *b.scale);
    if (!b.val || !b.node || !b.devname || !b.is_grad || !b.first || !b.scale) st = nomem(d);
  }
  /* each replica's first row and weight; the shares must make up the batch */
  int64_t rows = 0;
  for (uint32_t rep = 0; !st && rep < replicas; rep++) {
    int64_t n = dpc_replica_rows(reps[rep]);
    if (n < 0) n = batch / replicas; /* no input with a batch: an even share */
    b.first[rep] = rows, rows += n;
    b.scale[rep] = (double)n * replicas / (double)batch;
  }
  if (!st && rows != batch)
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "the replicas' shares add up to %lld samples, not the batch of %lld",
                       (long long)rows, (long long)batch);
  for (uint32_t rep = 0; !st && rep < replicas; rep++) {
    b.val[rep] = malloc((replica->n_values ? replica->n_values : 1) * sizeof **b.val);
    b.node[rep] = malloc((replica->n_nodes ? replica->n_nodes : 1) * sizeof **b.node);
    if (!b.val[rep] || !b.node[rep]) st = nomem(d);
  }
  for (uint32_t k = 0; !st && k < replicas * mp; k++)
    if ((b.devname[k] = dpc_graph_intern(b.g, devices[k], strlen(devices[k]))) == DPC_NONE)
      st = nomem(d);
  if (!st && reduce_grads) dpc_mark_grads(replica, b.is_grad);
  if (!st && reduce_grads && !reduce_momentum(replica, b.is_grad)) st = nomem(d);
  /* the replica graph's symbols, bound as there (the shard size) */
  for (uint32_t k = 0; !st && k < replica->n_syms; k++) {
    const char *s = dpc_graph_str(replica, replica->syms[k]);
    if (dpc_graph_symbol(b.g, s, strlen(s)) != k) st = nomem(d);
  }
  for (uint32_t k = 0; !st && k < replica->n_syms; k++) b.g->sym_vals[k] = replica->sym_vals[k];
  if (!st && replica->name != DPC_NONE) {
    const char *s = dpc_graph_str(replica, replica->name);
    b.g->name = dpc_graph_intern(b.g, s, strlen(s));
  }
  if (!st) st = build(&b, batch, d);
  if (!st) st = dpc_verify(b.g, d);
  for (uint32_t rep = 0; rep < replicas && b.val; rep++) {
    free(b.val[rep]);
    if (b.node) free(b.node[rep]);
  }
  free(b.val);
  free(b.node);
  free(b.devname);
  free(b.is_grad);
  free(b.first);
  free(b.scale);
  if (st) {
    dpc_graph_free(b.g);
    return st;
  }
  *out = b.g;
  return DPC_OK;
}

bool dpc_replica_of(const char *name, char *base, size_t n) {
  const char *p = strstr(name, DPC_REPLICA_SUFFIX), *last = NULL;
  for (; p; p = strstr(p + 1, DPC_REPLICA_SUFFIX)) last = p;
  if (!last) return false;
  const char *digits = last + strlen(DPC_REPLICA_SUFFIX);
  if (!*digits || strspn(digits, "0123456789") != strlen(digits)) return false;
  snprintf(base, n, "%.*s", (int)(last - name), name);
  return true;
}
