/*
 * safetensors.h — checkpoints in the safetensors format: the tensors of a model (parameters,
 * optimizer state) by name, plus string metadata, in the file layout PyTorch and the Hugging Face
 * tools use, so a dpc checkpoint loads there and theirs load here.
 *
 *   dpc_st_tensor ts[] = {{"fc1.w", w}, {"fc1.b", b}};
 *   dpc_st_meta meta[] = {{"step", "1200"}};
 *   if (dpc_safetensors_write("ckpt.safetensors", ts, 2, meta, 1, &d)) return d.status;
 *
 *   dpc_st_file *f;
 *   if (dpc_safetensors_read("ckpt.safetensors", &f, &d)) return d.status;
 *   const dpc_tensor *w2 = dpc_st_find(f, "fc1.w");        // NULL when absent
 *   const char *step = dpc_st_meta_get(f, "step");         // NULL when absent
 *   dpc_st_free(f);
 *
 * The layout: an unsigned 64-bit little-endian header length N, N bytes of JSON
 *   {"__metadata__": {"step": "1200"},
 *    "fc1.w": {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 48]}, ...}
 * then the data section: each tensor's elements, row-major and little-endian, at its
 * [begin, end) byte range, counted from the start of the data section.
 *
 * Reading follows the reference implementation's rules: the header is at most 100 MB of UTF-8
 * JSON; the tensors, sorted by offset, must tile the data section exactly, from byte 0 with no
 * gap, no overlap and no trailing bytes after the last one (the reference refuses those with
 * "MetadataIncompleteBuffer", so a file this reader accepts is one every tool accepts); the key
 * order of the JSON is free, and fields of a tensor's entry other than dtype, shape and
 * data_offsets are ignored (as serde ignores them). dpc is stricter in one place: a name given
 * twice in the header is an error (the reference's JSON reader does not check). dtypes F32 F16 BF16
 * F64 I32 I64 BOOL are read; the other safetensors dtypes (U8, I8, F8_*, ...) are refused as
 * unsupported, as is a rank above 8. Every refusal names the file and what is wrong; a corrupt file
 * never crashes the reader or makes it read out of bounds (tests/fuzz/fuzz_safetensors.c), and a
 * header cannot make it allocate tensor data the file does not hold.
 *
 * Writing puts the tensors in the order given, contiguous, with the header padded with spaces to
 * a multiple of 8 bytes so the data section starts 8-aligned (as the reference does); for the
 * same tensors in the same order the bytes are the reference's. The write is atomic: the file is
 * built as PATH.tmp.<pid>, fsync'd, renamed over PATH and the folder fsync'd, so a crash or
 * kill -9 at any moment leaves the old PATH or the new one, never a torn one. What a crash can
 * leave is the temporary file; the next successful write to PATH removes such leftovers of dead
 * processes, and dpc_safetensors_clean does so on demand (e.g. when a training run resumes).
 * Two processes writing the same PATH at once each get a whole file in place (the last rename
 * wins); one process must not write the same PATH from two threads at once.
 */
#ifndef DPC_RUNTIME_SAFETENSORS_H
#define DPC_RUNTIME_SAFETENSORS_H

#include "ir/tensor.h"

/* The reference implementation's limit on the JSON header; larger means a corrupt length. */
#define DPC_ST_MAX_HEADER 100000000u

typedef struct dpc_st_tensor {
  const char *name;
  dpc_tensor t;
} dpc_st_tensor;

typedef struct dpc_st_meta {
  const char *key, *value;
} dpc_st_meta;

/* Write n tensors (shapes concrete, data contiguous; data may be NULL when a tensor has no
 * elements) and n_meta metadata pairs to path, atomically (see above). Names and keys must be
 * distinct UTF-8 strings; "__metadata__" is not a tensor name. */
dpc_status dpc_safetensors_write(const char *path, const dpc_st_tensor *t, uint32_t n,
                                 const dpc_st_meta *meta, uint32_t n_meta, dpc_diag *d);

/* Checksums: dpc_safetensors_write_checked writes as dpc_safetensors_write does and also records
 * each tensor's CRC-32 (IEEE, of its data bytes as stored) in the metadata, under the key
 * DPC_ST_CRC_PREFIX NAME, as 8 lower-case hex digits. Both readers verify every tensor that has
 * one and refuse a file whose data no longer matches, naming the tensor (or a checksum that
 * names no tensor, or is not 8 hex digits); files without such keys (from other tools, or from
 * dpc_safetensors_write) load as before. Other tools see the keys as ordinary metadata. */
#define DPC_ST_CRC_PREFIX "dpc.crc32."
dpc_status dpc_safetensors_write_checked(const char *path, const dpc_st_tensor *t, uint32_t n,
                                         const dpc_st_meta *meta, uint32_t n_meta, dpc_diag *d);
/* The CRC-32 of n bytes (the checksum zlib and zip use), continuing from crc (0 to start). */
uint32_t dpc_st_crc32(uint32_t crc, const void *data, size_t n);

/* Remove the temporary files (PATH.tmp.<pid>) that writers to path left when they were killed:
 * those whose process is no longer running on this machine. Missing leftovers are not an error. */
dpc_status dpc_safetensors_clean(const char *path, dpc_diag *d);

/* A loaded file; owns its names, tensor data and metadata. */
typedef struct dpc_st_file dpc_st_file;

dpc_status dpc_safetensors_read(const char *path, dpc_st_file **out, dpc_diag *d);
/* Parse a whole file image in memory (the data is copied); `name` is used in messages. */
dpc_status dpc_safetensors_parse(const void *buf, size_t len, const char *name, dpc_st_file **out,
                                 dpc_diag *d);

/* Tensors in file order (by data offset). Every tensor's data is non-NULL and malloc'd. */
uint32_t dpc_st_count(const dpc_st_file *f);
const dpc_st_tensor *dpc_st_at(const dpc_st_file *f, uint32_t i);
const dpc_tensor *dpc_st_find(const dpc_st_file *f, const char *name); /* NULL if absent */
/* Metadata in header order. */
uint32_t dpc_st_meta_count(const dpc_st_file *f);
const dpc_st_meta *dpc_st_meta_at(const dpc_st_file *f, uint32_t i);
const char *dpc_st_meta_get(const dpc_st_file *f, const char *key); /* NULL if absent */
void dpc_st_free(dpc_st_file *f);                                   /* NULL is fine */

#endif
