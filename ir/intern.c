/*
 * intern.c — the string pool and the integer map, both open addressing with linear probing.
 */
#include "ir/intern.h"

#include <stdlib.h>
#include <string.h>

static uint32_t hash_bytes(const char *s, size_t n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

static uint32_t hash_u32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

void dpc_strpool_init(dpc_strpool *p) {
  memset(p, 0, sizeof *p);
}

void dpc_strpool_free(dpc_strpool *p) {
  free(p->data);
  free(p->slots);
  memset(p, 0, sizeof *p);
}

int dpc_strpool_copy(dpc_strpool *dst, const dpc_strpool *src) {
  dpc_strpool_init(dst);
  if (src->cap) {
    dst->data = malloc(src->cap);
    if (!dst->data) return -1;
    memcpy(dst->data, src->data, src->len);
  }
  if (src->nslots) {
    dst->slots = malloc(src->nslots * sizeof *dst->slots);
    if (!dst->slots) {
      dpc_strpool_free(dst);
      return -1;
    }
    memcpy(dst->slots, src->slots, src->nslots * sizeof *dst->slots);
  }
  dst->len = src->len;
  dst->cap = src->cap;
  dst->nslots = src->nslots;
  dst->count = src->count;
  return 0;
}

static uint32_t probe(const dpc_strpool *p, const char *s, size_t n, uint32_t h) {
  uint32_t mask = p->nslots - 1, i = h & mask;
  for (;;) {
    uint32_t slot = p->slots[i];
    if (!slot) return i;
    const char *t = p->data + (slot - 1);
    if (strncmp(t, s, n) == 0 && t[n] == 0) return i;
    i = (i + 1) & mask;
  }
}

uint32_t dpc_strpool_find(const dpc_strpool *p, const char *s, size_t n) {
  if (!p->nslots || memchr(s, 0, n)) return DPC_NONE;
  uint32_t slot = p->slots[probe(p, s, n, hash_bytes(s, n))];
  return slot ? slot - 1 : DPC_NONE;
}

static int rehash(dpc_strpool *p) {
  uint32_t ns = p->nslots ? p->nslots * 2 : 64;
  uint32_t *slots = calloc(ns, sizeof *slots);
  if (!slots) return -1;
  uint32_t *old = p->slots, olds = p->nslots;
  p->slots = slots;
  p->nslots = ns;
  for (uint32_t i = 0; i < olds; i++) {
    if (!old[i]) continue;
    const char *t = p->data + (old[i] - 1);
    size_t n = strlen(t);
    p->slots[probe(p, t, n, hash_bytes(t, n))] = old[i];
  }
  free(old);
  return 0;
}

uint32_t dpc_strpool_intern(dpc_strpool *p, const char *s, size_t n) {
  /* Strings with NUL inside cannot be names; callers reject them first. */
  if (memchr(s, 0, n) || n >= UINT32_MAX / 2) return DPC_NONE;
  if ((p->count + 1) * 2 > p->nslots && rehash(p)) return DPC_NONE;
  uint32_t h = hash_bytes(s, n), i = probe(p, s, n, h);
  if (p->slots[i]) return p->slots[i] - 1;
  if (DPC_VEC_RESERVE(p->data, p->cap, (size_t)p->len + n + 1)) return DPC_NONE;
  uint32_t id = p->len;
  memcpy(p->data + id, s, n);
  p->data[id + n] = 0;
  p->len += (uint32_t)n + 1;
  p->slots[i] = id + 1;
  p->count++;
  return id;
}

/* ---- integer map ------------------------------------------------------------------------- */

void dpc_idmap_init(dpc_idmap *m) {
  memset(m, 0, sizeof *m);
}

void dpc_idmap_free(dpc_idmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

int dpc_idmap_copy(dpc_idmap *dst, const dpc_idmap *src) {
  dpc_idmap_init(dst);
  if (!src->nslots) return 0;
  dst->keys = malloc(src->nslots * sizeof *dst->keys);
  dst->vals = malloc(src->nslots * sizeof *dst->vals);
  if (!dst->keys || !dst->vals) {
    dpc_idmap_free(dst);
    return -1;
  }
  memcpy(dst->keys, src->keys, src->nslots * sizeof *dst->keys);
  memcpy(dst->vals, src->vals, src->nslots * sizeof *dst->vals);
  dst->nslots = src->nslots;
  dst->count = src->count;
  return 0;
}

static uint32_t idprobe(const dpc_idmap *m, uint32_t key) {
  uint32_t mask = m->nslots - 1, i = hash_u32(key) & mask;
  while (m->keys[i] != DPC_NONE && m->keys[i] != key) i = (i + 1) & mask;
  return i;
}

static int idrehash(dpc_idmap *m) {
  uint32_t ns = m->nslots ? m->nslots * 2 : 64;
  uint32_t *k = malloc(ns * sizeof *k), *v = malloc(ns * sizeof *v);
  if (!k || !v) {
    free(k);
    free(v);
    return -1;
  }
  memset(k, 0xff, ns * sizeof *k);
  uint32_t *ok = m->keys, *ov = m->vals, os = m->nslots;
  m->keys = k;
  m->vals = v;
  m->nslots = ns;
  for (uint32_t i = 0; i < os; i++) {
    if (ok[i] == DPC_NONE) continue;
    uint32_t j = idprobe(m, ok[i]);
    m->keys[j] = ok[i];
    m->vals[j] = ov[i];
  }
  free(ok);
  free(ov);
  return 0;
}

int dpc_idmap_put(dpc_idmap *m, uint32_t key, uint32_t val) {
  DPC_ASSERT(key != DPC_NONE);
  if ((m->count + 1) * 2 > m->nslots && idrehash(m)) return -1;
  uint32_t i = idprobe(m, key);
  if (m->keys[i] == DPC_NONE) m->count++;
  m->keys[i] = key;
  m->vals[i] = val;
  return 0;
}

uint32_t dpc_idmap_get(const dpc_idmap *m, uint32_t key) {
  if (!m->nslots) return DPC_NONE;
  uint32_t i = idprobe(m, key);
  return m->keys[i] == key ? m->vals[i] : DPC_NONE;
}

void dpc_idmap_del(dpc_idmap *m, uint32_t key) {
  if (!m->nslots) return;
  uint32_t mask = m->nslots - 1, i = idprobe(m, key);
  if (m->keys[i] != key) return;
  /* Backward-shift deletion keeps probe chains intact without tombstones. */
  uint32_t j = i;
  for (;;) {
    m->keys[i] = DPC_NONE;
    for (;;) {
      j = (j + 1) & mask;
      if (m->keys[j] == DPC_NONE) {
        m->count--;
        return;
      }
      uint32_t home = hash_u32(m->keys[j]) & mask;
      /* Move j back to i unless its home lies cyclically in (i, j]. */
      if (i <= j ? (i < home && home <= j) : (i < home || home <= j)) continue;
      break;
    }
    m->keys[i] = m->keys[j];
    m->vals[i] = m->vals[j];
    i = j;
  }
}
