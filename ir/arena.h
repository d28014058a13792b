/*
 * arena.h — memory with one lifetime: allocate freely, free everything at once.
 *
 * Used for scratch work (a pass's temporary tables, the parser's syntax trees). Blocks grow
 * with demand; there is no fixed pool that can run out while memory remains.
 */
#ifndef DPC_IR_ARENA_H
#define DPC_IR_ARENA_H

#include "ir/base.h"

typedef struct dpc_arena_block dpc_arena_block;

typedef struct dpc_arena {
  dpc_arena_block *head;
  size_t used_total; /* bytes handed out, for callers that cap their memory */
} dpc_arena;

void dpc_arena_init(dpc_arena *a);
/* Zeroed, 16-byte aligned memory, or NULL when out of memory. */
void *dpc_arena_alloc(dpc_arena *a, size_t size);
char *dpc_arena_strndup(dpc_arena *a, const char *s, size_t n);
void dpc_arena_free(dpc_arena *a);

#endif
