/*
 * arena.c — a chain of blocks, each at least 64 KiB or as large as the request that made it.
 */
#include "ir/arena.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK_MIN (64u * 1024u)

struct dpc_arena_block {
  dpc_arena_block *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
};

void dpc_arena_init(dpc_arena *a) {
  a->head = NULL;
  a->used_total = 0;
}

void *dpc_arena_alloc(dpc_arena *a, size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  dpc_arena_block *b = a->head;
  if (!b || b->size - b->used < size) {
    size_t bs = size > BLOCK_MIN ? size : BLOCK_MIN;
    if (bs > SIZE_MAX - sizeof *b) return NULL;
    b = malloc(sizeof *b + bs);
    if (!b) return NULL;
    b->next = a->head;
    b->used = 0;
    b->size = bs;
    a->head = b;
  }
  void *p = b->data + b->used;
  b->used += size;
  a->used_total += size;
  memset(p, 0, size);
  return p;
}

char *dpc_arena_strndup(dpc_arena *a, const char *s, size_t n) {
  char *p = dpc_arena_alloc(a, n + 1);
  if (p) {
    memcpy(p, s, n);
    p[n] = 0;
  }
  return p;
}

void dpc_arena_free(dpc_arena *a) {
  dpc_arena_block *b = a->head;
  while (b) {
    dpc_arena_block *n = b->next;
    free(b);
    b = n;
  }
  a->head = NULL;
  a->used_total = 0;
}
