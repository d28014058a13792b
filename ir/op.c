/*
 * op.c — the op property table, and readers for the little spec strings in ops.def.
 */
#include "ir/op.h"

#include <stdio.h>
#include <string.h>

const dpc_op_info dpc_op_table[DPC_OP_COUNT] = {
#define DPC_OP(id, nm, ins, outs, fl, at) [DPC_OP_##id] = {nm, ins, outs, at, fl},
#include "ir/ops.def"
#undef DPC_OP
};

#define LR_SCHEDULE                                                                                \
  "schedule:str=constant warmup:int=0 step_size:int=0 gamma:float=0.1 min_lr:float=0 "             \
  "total_steps:int=0"

const dpc_callspec dpc_optimizer_specs[] = {
    {"sgd", "lr:float=0.01 momentum:float=0 nesterov:int=0 weight_decay:float=0 " LR_SCHEDULE},
    {"adam", "lr:float=0.001 beta1:float=0.9 beta2:float=0.999 eps:float=1e-8 "
             "weight_decay:float=0 " LR_SCHEDULE},
    {"adamw", "lr:float=0.001 beta1:float=0.9 beta2:float=0.999 eps:float=1e-8 "
              "weight_decay:float=0.01 " LR_SCHEDULE},
};
const uint32_t dpc_optimizer_count = sizeof dpc_optimizer_specs / sizeof dpc_optimizer_specs[0];

/* Fan-based initializers follow PyTorch's nn.init; fans are defined in docs/graph-format.md. */
const dpc_callspec dpc_init_specs[] = {
    {"zeros", ""},
    {"ones", ""},
    {"constant", "value:float"},
    {"uniform", "low:float=0 high:float=1 seed:int?"},
    {"normal", "mean:float=0 std:float=1 seed:int?"},
    {"xavier_uniform", "gain:float=1 seed:int?"},
    {"xavier_normal", "gain:float=1 seed:int?"},
    {"glorot_uniform", "gain:float=1 seed:int?"},
    {"glorot_normal", "gain:float=1 seed:int?"},
    {"he_uniform", "gain:float=1.4142135623730951 mode:str=fan_in seed:int?"},
    {"he_normal", "gain:float=1.4142135623730951 mode:str=fan_in seed:int?"},
    {"kaiming_uniform", "gain:float=1.4142135623730951 mode:str=fan_in seed:int?"},
    {"kaiming_normal", "gain:float=1.4142135623730951 mode:str=fan_in seed:int?"},
    /* the values themselves, in the shape of the param (an imported model's initializer) */
    {"data", "data:tensor"},
};
const uint32_t dpc_init_count = sizeof dpc_init_specs / sizeof dpc_init_specs[0];

bool dpc_op_find(const char *name, size_t n, dpc_op *out) {
  for (int i = 0; i < DPC_OP_COUNT; i++) {
    const char *s = dpc_op_table[i].name;
    if (strlen(s) == n && memcmp(s, name, n) == 0) {
      *out = (dpc_op)i;
      return true;
    }
  }
  return false;
}

const char *dpc_op_suggest(const char *name) {
  const char *best = NULL;
  uint32_t bd = 3; /* suggest only close misspellings */
  for (int i = 0; i < DPC_OP_COUNT; i++) {
    if (dpc_op_has((dpc_op)i, DPC_OPF_SOURCE) && i != DPC_OP_CONSTANT) continue;
    uint32_t d = dpc_edit_distance(name, dpc_op_table[i].name);
    if (d < bd) {
      bd = d;
      best = dpc_op_table[i].name;
    }
  }
  return best;
}

/* Walk space-separated words of a spec string. */
static const char *next_word(const char *s, const char **end) {
  while (*s == ' ') s++;
  if (!*s) return NULL;
  const char *e = s;
  while (*e && *e != ' ') e++;
  *end = e;
  return s;
}

void dpc_op_arity(dpc_op op, uint32_t *min_in, uint32_t *max_in) {
  uint32_t lo = 0, hi = 0;
  const char *e, *w = dpc_op_table[op].inputs;
  while ((w = next_word(w, &e))) {
    size_t n = (size_t)(e - w);
    if (n > 3 && memcmp(e - 3, "...", 3) == 0) {
      *min_in = 1;
      *max_in = UINT32_MAX;
      return;
    }
    hi++;
    if (e[-1] != '?') lo++;
    w = e;
  }
  *min_in = lo;
  *max_in = hi;
}

uint32_t dpc_op_num_outputs(dpc_op op) {
  uint32_t n = 0;
  const char *e, *w = dpc_op_table[op].outputs;
  while ((w = next_word(w, &e))) {
    if (e - w > 3 && memcmp(e - 3, "...", 3) == 0) return 0;
    n++;
    w = e;
  }
  return n;
}

void dpc_op_input_name(dpc_op op, uint32_t i, char *buf, size_t n) {
  const char *e, *w = dpc_op_table[op].inputs;
  uint32_t k = 0;
  snprintf(buf, n, "input %u", i);
  while ((w = next_word(w, &e))) {
    size_t len = (size_t)(e - w);
    bool var = len > 3 && memcmp(e - 3, "...", 3) == 0;
    if (var) len -= 3;
    if (len && w[len - 1] == '?') len--;
    if (k == i || var) {
      snprintf(buf, n, "%.*s", (int)len, w);
      return;
    }
    k++;
    w = e;
  }
}

static const char *const kind_names[DPC_ATTR_KIND_COUNT] = {
    "int", "float", "str", "ints", "floats", "dtype", "shape", "tensor",
};

const char *dpc_attr_kind_name(dpc_attr_kind k) {
  return (unsigned)k < DPC_ATTR_KIND_COUNT ? kind_names[k] : "?";
}

uint32_t dpc_spec_count(const char *attrs) {
  uint32_t n = 0;
  const char *e, *w = attrs;
  while ((w = next_word(w, &e))) n++, w = e;
  return n;
}

static void parse_spec(const char *w, const char *e, dpc_attr_spec *out) {
  memset(out, 0, sizeof *out);
  const char *colon = memchr(w, ':', (size_t)(e - w));
  DPC_ASSERT(colon && colon - w < (ptrdiff_t)sizeof out->name);
  memcpy(out->name, w, (size_t)(colon - w));
  const char *k = colon + 1, *ke = k;
  while (ke < e && *ke != '=' && *ke != '?') ke++;
  bool found = false;
  for (int i = 0; i < DPC_ATTR_KIND_COUNT; i++) {
    if (strlen(kind_names[i]) == (size_t)(ke - k) &&
        memcmp(kind_names[i], k, (size_t)(ke - k)) == 0) {
      out->kind = (dpc_attr_kind)i;
      found = true;
    }
  }
  DPC_ASSERT(found);
  out->need = DPC_ATTR_REQUIRED;
  if (ke < e && *ke == '?') out->need = DPC_ATTR_OPTIONAL;
  if (ke < e && *ke == '=') {
    out->need = DPC_ATTR_DEFAULT;
    DPC_ASSERT(e - ke - 1 < (ptrdiff_t)sizeof out->def);
    memcpy(out->def, ke + 1, (size_t)(e - ke - 1));
  }
}

void dpc_spec_at(const char *attrs, uint32_t i, dpc_attr_spec *out) {
  const char *e, *w = attrs;
  uint32_t k = 0;
  while ((w = next_word(w, &e))) {
    if (k++ == i) {
      parse_spec(w, e, out);
      return;
    }
    w = e;
  }
  DPC_ASSERT(!"attribute index out of range");
}

bool dpc_spec_find(const char *attrs, const char *name, dpc_attr_spec *out) {
  size_t n = strlen(name);
  const char *e, *w = attrs;
  while ((w = next_word(w, &e))) {
    if ((size_t)(e - w) > n && memcmp(w, name, n) == 0 && w[n] == ':') {
      parse_spec(w, e, out);
      return true;
    }
    w = e;
  }
  return false;
}

uint32_t dpc_op_attr_count(dpc_op op) {
  return dpc_spec_count(dpc_op_table[op].attrs);
}

void dpc_op_attr_at(dpc_op op, uint32_t i, dpc_attr_spec *out) {
  dpc_spec_at(dpc_op_table[op].attrs, i, out);
}

bool dpc_op_attr_find(dpc_op op, const char *name, dpc_attr_spec *out) {
  return dpc_spec_find(dpc_op_table[op].attrs, name, out);
}
