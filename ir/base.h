/*
 * base.h — what every module of dpc stands on: status codes (from the public header), the
 * diagnostic that carries an error message to whoever must show it, growable arrays, and the
 * assert for dpc's own invariants.
 *
 * Two error channels (STYLE.md): anything a user can cause returns a dpc_status and fills a
 * dpc_diag; DPC_ASSERT is only for invariants that hold unless dpc itself is broken.
 * Nothing here prints or exits except DPC_ASSERT's last words.
 */
#ifndef DPC_IR_BASE_H
#define DPC_IR_BASE_H

#include <dpc/compiler.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DPC_NONE UINT32_MAX

/* DPC_MAX_DEVICES, the most devices one plan spans, is public: dpc/compiler.h. */

#if defined(__GNUC__) || defined(__clang__)
#define DPC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define DPC_NORETURN     __attribute__((noreturn))
#else
#define DPC_PRINTF(f, a)
#define DPC_NORETURN
#endif

/* Invariant broken inside dpc: report where and abort. Never used for bad user input. */
DPC_NORETURN void dpc_assert_fail(const char *expr, const char *file, int line);
#define DPC_ASSERT(e) ((e) ? (void)0 : dpc_assert_fail(#e, __FILE__, __LINE__))

/* ---- source text and positions ---------------------------------------------------------- */

/* A position in a source text, 1-based. line == 0 means "no position". */
typedef struct dpc_loc {
  uint32_t line, col;
} dpc_loc;

/* A named text that positions refer to. The text is not owned here. */
typedef struct dpc_source {
  const char *name; /* file name as the user gave it */
  const char *text;
  size_t len;
} dpc_source;

/* ---- diagnostics ------------------------------------------------------------------------- */

/* One error, ready to render as `FILE:LINE:COL: error: MESSAGE`, the source line and a caret.
 * Owned by the caller; every function that can fail takes one (or NULL to discard). */
typedef struct dpc_diag {
  dpc_status status;
  char *msg;      /* NULL when status == DPC_OK */
  char *file;     /* NULL when the error has no file */
  dpc_loc loc;    /* line 0 when unknown */
  char *excerpt;  /* the source line, cut to a window around the column; may be NULL */
  uint32_t caret; /* byte offset of the caret within excerpt */
  char *rendered; /* dpc_message_text's copy of dpc_diag_render, kept until the next change */
} dpc_diag;

void dpc_diag_init(dpc_diag *d);
void dpc_diag_free(dpc_diag *d);
/* Forget a previous error, keeping the diag usable. */
void dpc_diag_clear(dpc_diag *d);
/* Seconds on the monotonic clock: for timing, never for dates. */
double dpc_now_s(void);

/* Record an error and return `st`, so callers can write `return dpc_diag_fail(...)`. */
dpc_status dpc_diag_fail(dpc_diag *d, dpc_status st, const char *fmt, ...) DPC_PRINTF(3, 4);
dpc_status dpc_diag_vfail(dpc_diag *d, dpc_status st, const char *fmt, va_list ap);
/* Same, pointing at a place in a source text (src may be NULL or loc.line 0: no position). */
dpc_status dpc_diag_fail_at(dpc_diag *d, dpc_status st, const dpc_source *src, dpc_loc loc,
                            const char *fmt, ...) DPC_PRINTF(5, 6);
dpc_status dpc_diag_vfail_at(dpc_diag *d, dpc_status st, const dpc_source *src, dpc_loc loc,
                             const char *fmt, va_list ap);
/* Put context in front of the existing message: "while running 'h1': <old message>". */
void dpc_diag_prefix(dpc_diag *d, const char *fmt, ...) DPC_PRINTF(2, 3);
/* The whole error as text for a person: first line `FILE:LINE:COL: error: MSG` (parts that are
 * unknown are left out), then the excerpt and a caret line when there is one. Caller frees. */
char *dpc_diag_render(const dpc_diag *d);

/* ---- growable arrays ---------------------------------------------------------------------- */

/* Make room for `need` elements in a realloc'd array; on failure the array is left as it was.
 * Returns 0 or -1. Use through DPC_VEC_RESERVE so the element size is right. */
int dpc_vec_grow_(void *arrp, uint32_t *cap, size_t need, size_t elem);
#define DPC_VEC_RESERVE(arr, cap, need)                                                            \
  ((size_t)(need) <= (size_t)(cap) ? 0                                                             \
                                   : dpc_vec_grow_(&(arr), &(cap), (size_t)(need), sizeof *(arr)))

/* ---- small string helpers ------------------------------------------------------------------ */

/* A growable string for building messages and text output. */
typedef struct dpc_buf {
  char *data; /* always NUL-terminated once anything was appended */
  size_t len, cap;
  bool oom; /* set once an append failed; later appends are no-ops */
} dpc_buf;

void dpc_buf_free(dpc_buf *b);
void dpc_buf_puts(dpc_buf *b, const char *s);
void dpc_buf_putn(dpc_buf *b, const char *s, size_t n);
void dpc_buf_printf(dpc_buf *b, const char *fmt, ...) DPC_PRINTF(2, 3);
/* Hand the text over to the caller (NULL if an append failed); the buffer is left empty. */
char *dpc_buf_take(dpc_buf *b);

/* The shortest decimal text that reads back as exactly `v` (like Python's repr). */
void dpc_format_double(char out[32], double v);

/* strdup that returns NULL on failure without relying on POSIX. */
char *dpc_strdup(const char *s);

/* Edit distance, for "did you mean" suggestions. Inputs are short names. */
uint32_t dpc_edit_distance(const char *a, const char *b);

#endif
