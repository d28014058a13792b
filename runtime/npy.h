/*
 * npy.h — NumPy .npy files: how inputs reach `dpc run` and outputs leave it.
 *
 * Reads format versions 1 to 3, little-endian or byte-sized data, C order, dtypes f32 f64 f16
 * i32 i64 bool (and u8, read as i32 for pixel data). Anything else is refused with a message
 * naming the file and what it holds; a malformed header never crashes the reader.
 */
#ifndef DPC_RUNTIME_NPY_H
#define DPC_RUNTIME_NPY_H

#include "ir/tensor.h"

/* Parse an .npy image in memory; `name` is used in messages. out->data is malloc'd. */
dpc_status dpc_npy_parse(const void *buf, size_t len, const char *name, dpc_tensor *out,
                         dpc_diag *d);
dpc_status dpc_npy_read(const char *path, dpc_tensor *out, dpc_diag *d);
/* Write t as version 1.0. bf16 has no NumPy dtype and is written as f32. */
dpc_status dpc_npy_write(const char *path, const dpc_tensor *t, dpc_diag *d);

#endif
