/*
 * dpc.h — the public C API of dpc, the dataflow graph compiler and scheduler.
 *
 * This header is what applications embed. It has no dependencies beyond the C standard library
 * and holds only what must be stable: version numbers and the status codes every dpc function
 * returns. Every module of dpc may include it; it includes nothing of dpc's.
 *
 *   #include <dpc/dpc.h>
 *   if (dpc_version_major() != DPC_VERSION_MAJOR) { ... }
 *   printf("%s\n", dpc_status_name(DPC_ERR_SHAPE));   // "shape error"
 *
 * The embedding API (load an artifact, create a session, bind buffers, run) grows here as the
 * runtime library gains it; see docs/architecture.md.
 */
#ifndef DPC_DPC_H
#define DPC_DPC_H

#ifdef __cplusplus
extern "C" {
#endif

#define DPC_VERSION_MAJOR  0
#define DPC_VERSION_MINOR  1
#define DPC_VERSION_PATCH  0
#define DPC_VERSION_STRING "0.1.0"

/* Every dpc function that can fail returns one of these. DPC_OK is zero so `if (st)` reads as
 * "if it failed". The message that goes with a failure is in the caller's dpc_diag. */
typedef enum dpc_status {
  DPC_OK = 0,
  DPC_ERR_SYNTAX,      /* malformed text input (.graph, .npy header) */
  DPC_ERR_SHAPE,       /* shapes or dtypes that do not fit an op */
  DPC_ERR_INVALID,     /* a bad argument, name or graph */
  DPC_ERR_IO,          /* a file could not be read or written */
  DPC_ERR_NOMEM,       /* an allocation failed */
  DPC_ERR_UNSUPPORTED, /* valid, but not something dpc does (yet) */
  DPC_ERR_RUNTIME,     /* a failure while running a plan */
  DPC_ERR_INTERNAL,    /* a broken invariant inside dpc: a bug, please report it */
  DPC_STATUS_COUNT
} dpc_status;

/* A short lower-case name for a status ("syntax error", "shape error", ...). Never NULL. */
const char *dpc_status_name(dpc_status st);

/* The library's own version, which may differ from the header's if linked against another. */
int dpc_version_major(void);
int dpc_version_minor(void);
int dpc_version_patch(void);

#ifdef __cplusplus
}
#endif
#endif
