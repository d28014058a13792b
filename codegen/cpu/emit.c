/*
 * emit.c — writing LLVM IR text: values, loads and stores of every dtype, loops (see cg.h).
 */
#include "codegen/cpu/cg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cg_fn_init(cg_fn *f, const dpc_graph *g, uint32_t node, int vector_bits) {
  memset(f, 0, sizeof *f);
  f->g = g;
  f->node = node;
  f->vector_bits = vector_bits;
}

void cg_fn_free(cg_fn *f) {
  dpc_buf_free(&f->head);
  dpc_buf_free(&f->body);
  dpc_buf_free(&f->md);
}

void cg_fn_finish(cg_fn *f, const char *name, dpc_buf *out) {
  dpc_buf_printf(out,
                 "define i32 @%s(i8** noalias nocapture readonly %%args, i64 %%begin, i64 %%end, "
                 "i64 %%step, i32 %%training) #0 {\nentry:\n",
                 name);
  dpc_buf_puts(out, "  %status = alloca i32\n");
  if (f->head.data) dpc_buf_puts(out, f->head.data);
  dpc_buf_puts(out, "  store i32 0, i32* %status\n");
  if (f->body.data) dpc_buf_puts(out, f->body.data);
  dpc_buf_puts(out, "  %st = load i32, i32* %status\n  ret i32 %st\n}\n\n");
  if (f->md.data) dpc_buf_printf(out, "%s\n", f->md.data);
}

void cg_line(cg_fn *f, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  dpc_buf_printf(&f->body, "  %s\n", line);
}

cg_val cg_tmp(cg_fn *f) {
  cg_val v;
  snprintf(v.s, sizeof v.s, "%%t%u", f->n_tmp++);
  return v;
}

uint32_t cg_label(cg_fn *f) {
  return f->n_label++;
}

const char *cg_store_type(dpc_dtype t) {
  switch (t) {
  case DPC_F32: return "float";
  case DPC_F64: return "double";
  case DPC_F16: return "half";
  case DPC_BF16: return "i16";
  case DPC_I32: return "i32";
  case DPC_I64: return "i64";
  case DPC_BOOL: return "i8";
  default: return "void";
  }
}

const char *cg_calc_type(dpc_dtype t) {
  switch (t) {
  case DPC_F16:
  case DPC_BF16: return "float";
  default: return cg_store_type(t);
  }
}

bool cg_is_fp(dpc_dtype t) {
  return dpc_dtype_is_float(t);
}

cg_val cg_const(dpc_dtype t, double v) {
  cg_val c;
  if (cg_is_fp(t)) {
    /* LLVM reads floating constants as the hex of a double that the type holds exactly */
    double x = (t == DPC_F64) ? v : (double)(float)v;
    uint64_t bits;
    memcpy(&bits, &x, 8);
    snprintf(c.s, sizeof c.s, "0x%016llX", (unsigned long long)bits);
  } else if (t == DPC_BOOL) {
    snprintf(c.s, sizeof c.s, "%d", v != 0);
  } else {
    snprintf(c.s, sizeof c.s, "%lld", (long long)v);
  }
  return c;
}

cg_val cg_const_i64(int64_t v) {
  cg_val c;
  snprintf(c.s, sizeof c.s, "%lld", (long long)v);
  return c;
}

cg_val cg_arg_ptr(cg_fn *f, uint32_t i, dpc_dtype t) {
  cg_val slot = cg_tmp(f), raw = cg_tmp(f), p = cg_tmp(f);
  cg_line(f, "%s = getelementptr inbounds i8*, i8** %%args, i64 %u", slot.s, i);
  cg_line(f, "%s = load i8*, i8** %s", raw.s, slot.s);
  cg_line(f, "%s = bitcast i8* %s to %s*", p.s, raw.s, cg_store_type(t));
  return p;
}

/* The metadata a load or store carries inside a parallel nest, into s. */
typedef struct md_tag {
  char s[40];
} md_tag;
static md_tag access_group(const cg_fn *f) {
  md_tag t = {""};
  if (f->par_group) snprintf(t.s, sizeof t.s, ", !llvm.access.group !%u", f->par_group);
  return t;
}

cg_val cg_load(cg_fn *f, cg_val ptr, dpc_dtype t, cg_val idx) {
  const char *st = cg_store_type(t);
  cg_val p = cg_tmp(f), v = cg_tmp(f);
  cg_line(f, "%s = getelementptr inbounds %s, %s* %s, i64 %s", p.s, st, st, ptr.s, idx.s);
  cg_line(f, "%s = load %s, %s* %s%s", v.s, st, st, p.s, access_group(f).s);
  if (t == DPC_F16) {
    cg_val x = cg_tmp(f);
    cg_line(f, "%s = fpext half %s to float", x.s, v.s);
    return x;
  }
  if (t == DPC_BF16) {
    cg_val z = cg_tmp(f), s = cg_tmp(f), x = cg_tmp(f);
    cg_line(f, "%s = zext i16 %s to i32", z.s, v.s);
    cg_line(f, "%s = shl i32 %s, 16", s.s, z.s);
    cg_line(f, "%s = bitcast i32 %s to float", x.s, s.s);
    return x;
  }
  return v;
}

void cg_store(cg_fn *f, cg_val ptr, dpc_dtype t, cg_val idx, cg_val v) {
  const char *st = cg_store_type(t);
  cg_val out = v;
  if (t == DPC_F16) {
    out = cg_tmp(f);
    cg_line(f, "%s = fptrunc float %s to half", out.s, v.s);
  } else if (t == DPC_BF16) {
    /* round to nearest even, as dpc_f32_to_bf16; NaN stays a (quiet) NaN */
    cg_val u = cg_tmp(f), hi = cg_tmp(f), lsb = cg_tmp(f), bias = cg_tmp(f), r = cg_tmp(f),
           rh = cg_tmp(f);
    cg_val q = cg_tmp(f), nan = cg_tmp(f), sel = cg_tmp(f);
    cg_line(f, "%s = bitcast float %s to i32", u.s, v.s);
    cg_line(f, "%s = lshr i32 %s, 16", hi.s, u.s);
    cg_line(f, "%s = and i32 %s, 1", lsb.s, hi.s);
    cg_line(f, "%s = add i32 %s, 32767", bias.s, lsb.s);
    cg_line(f, "%s = add i32 %s, %s", r.s, u.s, bias.s);
    cg_line(f, "%s = lshr i32 %s, 16", rh.s, r.s);
    cg_line(f, "%s = or i32 %s, 64", q.s, hi.s);
    cg_line(f, "%s = fcmp uno float %s, %s", nan.s, v.s, v.s);
    cg_line(f, "%s = select i1 %s, i32 %s, i32 %s", sel.s, nan.s, q.s, rh.s);
    out = cg_tmp(f);
    cg_line(f, "%s = trunc i32 %s to i16", out.s, sel.s);
  }
  cg_val p = cg_tmp(f);
  cg_line(f, "%s = getelementptr inbounds %s, %s* %s, i64 %s", p.s, st, st, ptr.s, idx.s);
  cg_line(f, "store %s %s, %s* %s%s", st, out.s, st, p.s, access_group(f).s);
}

cg_val cg_add(cg_fn *f, cg_val a, cg_val b) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = add i64 %s, %s", r.s, a.s, b.s);
  return r;
}

cg_val cg_mul(cg_fn *f, cg_val a, cg_val b) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = mul i64 %s, %s", r.s, a.s, b.s);
  return r;
}

cg_val cg_op2(cg_fn *f, const char *ins, const char *ty, cg_val a, cg_val b) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = %s %s %s, %s", r.s, ins, ty, a.s, b.s);
  return r;
}

cg_val cg_sel(cg_fn *f, cg_val c, const char *ty, cg_val a, cg_val b) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = select i1 %s, %s %s, %s %s", r.s, c.s, ty, a.s, ty, b.s);
  return r;
}

cg_val cg_conv(cg_fn *f, const char *ins, const char *from, cg_val v, const char *to) {
  cg_val r = cg_tmp(f);
  cg_line(f, "%s = %s %s %s to %s", r.s, ins, from, v.s, to);
  return r;
}

cg_val cg_fconst(const char *ty, double v) {
  return cg_const(strcmp(ty, "double") ? DPC_F32 : DPC_F64, v);
}

cg_loop cg_loop_begin(cg_fn *f, cg_val lo, cg_val hi) {
  cg_loop l = {cg_label(f), {{0}}};
  dpc_buf_printf(&f->head, "  %%i%u.slot = alloca i64\n", l.id);
  cg_line(f, "store i64 %s, i64* %%i%u.slot", lo.s, l.id);
  cg_line(f, "br label %%L%u.head", l.id);
  dpc_buf_printf(&f->body, "L%u.head:\n", l.id);
  snprintf(l.i.s, sizeof l.i.s, "%%i%u", l.id);
  cg_line(f, "%s = load i64, i64* %%i%u.slot", l.i.s, l.id);
  cg_val c = cg_tmp(f);
  cg_line(f, "%s = icmp slt i64 %s, %s", c.s, l.i.s, hi.s);
  cg_line(f, "br i1 %s, label %%L%u.body, label %%L%u.exit", c.s, l.id, l.id);
  dpc_buf_printf(&f->body, "L%u.body:\n", l.id);
  return l;
}

void cg_loop_end(cg_fn *f, cg_loop l) {
  cg_val n = cg_tmp(f);
  cg_line(f, "%s = add nsw i64 %s, 1", n.s, l.i.s);
  cg_line(f, "store i64 %s, i64* %%i%u.slot", n.s, l.id);
  if (f->par_group) {
    uint32_t id = ++f->n_md, par = ++f->n_md;
    dpc_buf_printf(&f->md, "!%u = distinct !{!%u, !%u}\n", id, id, par);
    dpc_buf_printf(&f->md, "!%u = !{!\"llvm.loop.parallel_accesses\", !%u}\n", par, f->par_group);
    cg_line(f, "br label %%L%u.head, !llvm.loop !%u", l.id, id);
  } else {
    cg_line(f, "br label %%L%u.head", l.id);
  }
  dpc_buf_printf(&f->body, "L%u.exit:\n", l.id);
}

void cg_parallel_begin(cg_fn *f) {
  f->par_group = ++f->n_md;
  dpc_buf_printf(&f->md, "!%u = distinct !{}\n", f->par_group);
}

void cg_parallel_end(cg_fn *f) {
  f->par_group = 0;
}

void cg_append_kernel_text(dpc_buf *out, const char *text, uint32_t *next) {
  uint32_t most = 0;
  for (const char *p = text; *p;) {
    const char *bang = strchr(p, '!');
    if (!bang) {
      dpc_buf_puts(out, p);
      break;
    }
    dpc_buf_putn(out, p, (size_t)(bang - p) + 1);
    p = bang + 1;
    if (*p < '0' || *p > '9') continue; /* a name: !llvm.loop, !{ */
    char *end;
    unsigned long id = strtoul(p, &end, 10);
    if (id > most) most = (uint32_t)id;
    dpc_buf_printf(out, "%lu", id + *next);
    p = end;
  }
  *next += most;
}

cg_val cg_acc_new(cg_fn *f, const char *type, cg_val init) {
  cg_val a;
  snprintf(a.s, sizeof a.s, "%%acc%u", f->n_label++);
  dpc_buf_printf(&f->head, "  %s = alloca %s\n", a.s, type);
  cg_line(f, "store %s %s, %s* %s", type, init.s, type, a.s);
  return a;
}

cg_val cg_acc_get(cg_fn *f, cg_val acc, const char *type) {
  cg_val v = cg_tmp(f);
  cg_line(f, "%s = load %s, %s* %s", v.s, type, type, acc.s);
  return v;
}

void cg_acc_set(cg_fn *f, cg_val acc, const char *type, cg_val v) {
  cg_line(f, "store %s %s, %s* %s", type, v.s, type, acc.s);
}

void cg_fail_if(cg_fn *f, cg_val cond) {
  cg_val old = cg_tmp(f), nv = cg_tmp(f);
  cg_line(f, "%s = load i32, i32* %%status", old.s);
  cg_line(f, "%s = select i1 %s, i32 1, i32 %s", nv.s, cond.s, old.s);
  cg_line(f, "store i32 %s, i32* %%status", nv.s);
}
