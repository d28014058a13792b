/*
 * intern.h — interned strings and integer maps.
 *
 * A graph names things (values, attributes, devices, symbols) by 32-bit string ids into its own
 * pool, so names compare as integers and a graph copies with memcpy. The pool stores each
 * distinct string once, NUL-terminated.
 */
#ifndef DPC_IR_INTERN_H
#define DPC_IR_INTERN_H

#include "ir/base.h"

typedef struct dpc_strpool {
  char *data;
  uint32_t len, cap;
  uint32_t *slots; /* open addressing: string id + 1, 0 = empty */
  uint32_t nslots, count;
} dpc_strpool;

void dpc_strpool_init(dpc_strpool *p);
void dpc_strpool_free(dpc_strpool *p);
/* Deep copy; returns -1 when out of memory (dst is left empty). */
int dpc_strpool_copy(dpc_strpool *dst, const dpc_strpool *src);
/* The id of the string s[0..n), adding it if new; DPC_NONE when out of memory. */
uint32_t dpc_strpool_intern(dpc_strpool *p, const char *s, size_t n);
/* The id if present, else DPC_NONE. */
uint32_t dpc_strpool_find(const dpc_strpool *p, const char *s, size_t n);
static inline const char *dpc_strpool_get(const dpc_strpool *p, uint32_t id) {
  return p->data + id;
}

/* A map from uint32 keys to uint32 values (key DPC_NONE is reserved). */
typedef struct dpc_idmap {
  uint32_t *keys, *vals;
  uint32_t nslots, count;
} dpc_idmap;

void dpc_idmap_init(dpc_idmap *m);
void dpc_idmap_free(dpc_idmap *m);
int dpc_idmap_copy(dpc_idmap *dst, const dpc_idmap *src);
/* Insert or overwrite; -1 when out of memory. */
int dpc_idmap_put(dpc_idmap *m, uint32_t key, uint32_t val);
/* The value, or DPC_NONE. */
uint32_t dpc_idmap_get(const dpc_idmap *m, uint32_t key);
void dpc_idmap_del(dpc_idmap *m, uint32_t key);

#endif
