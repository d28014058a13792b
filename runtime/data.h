/*
 * data.h — datasets as the runtime sees them, and the order their samples are visited in.
 *
 * A dataset is opened once (every file read whole into memory), then `dpc train` asks it to copy
 * batches of samples into its input tensors. Three forms, given as the --data text:
 *   "fashion-mnist"          the Debian package dataset-fashion-mnist (gzip'd IDX files in
 *                            /usr/share/datasets/fashion-mnist)
 *   a folder                 IDX files in the MNIST naming (train-images-idx3-ubyte[.gz], ...)
 *   "INPUTS.npy,LABELS.npy"  float or uint8 inputs [n, ...] and integer labels [n]
 * uint8 pixels stay uint8 in memory and are scaled to [0, 1] while filling.
 *
 *   dpc_dataset *ds;
 *   if (dpc_dataset_open("fashion-mnist", DPC_SPLIT_TRAIN, &ds, &d)) return d.status;
 *   dpc_order o;
 *   if (dpc_order_init(&o, dpc_dataset_size(ds), seed, true, &d)) ...
 *   for (uint64_t e = 0; e < epochs; e++) {
 *     dpc_order_epoch(&o, e);
 *     for (uint64_t b = 0; b < dpc_order_batches(&o, 64); b++) {
 *       uint32_t n;
 *       const uint64_t *idx = dpc_order_batch(&o, 64, b, &n);  // n < 64 for a partial last batch
 *       x.shape = (dpc_shape){2, {n, 784}};  y.shape = (dpc_shape){1, {n}};
 *       if (dpc_dataset_fill(ds, idx, n, &x, &y, &d)) ...
 *     }
 *   }
 *   dpc_order_free(&o);
 *   dpc_dataset_close(ds);
 *
 * Nothing here prints, exits or keeps global state; a bad file is an error naming the file and
 * what is wrong with it, never a crash (the IDX reader is fuzzed: tests/fuzz/fuzz_idx.c).
 */
#ifndef DPC_RUNTIME_DATA_H
#define DPC_RUNTIME_DATA_H

#include "ir/tensor.h"

/* Where the Debian package dataset-fashion-mnist puts its files (a build may point elsewhere). */
#ifndef DPC_FASHION_MNIST_DIR
#define DPC_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#endif

typedef enum dpc_split { DPC_SPLIT_TRAIN, DPC_SPLIT_TEST } dpc_split;

/* ---- datasets ----------------------------------------------------------------------------- */

typedef struct dpc_dataset dpc_dataset;

/* Open `spec` (one of the three forms above). For "fashion-mnist" and a folder, `split` picks
 * the train-* or t10k-* files; an npy pair is whatever it holds and ignores the split. */
dpc_status dpc_dataset_open(const char *spec, dpc_split split, dpc_dataset **out, dpc_diag *d);
void dpc_dataset_close(dpc_dataset *ds);

uint64_t dpc_dataset_size(const dpc_dataset *ds); /* number of samples */
/* One sample's shape: [28, 28] for IDX images, [784] for npy inputs of [n, 784]. */
const dpc_shape *dpc_dataset_sample_shape(const dpc_dataset *ds);
int64_t dpc_dataset_classes(const dpc_dataset *ds);  /* 1 + the largest label */
const char *dpc_dataset_name(const dpc_dataset *ds); /* for messages and logs */

/* Copy samples idx[0..n) into x and their labels into y. x is f32, f64, f16 or bf16 with shape
 * [n, ...] holding as many elements per sample as the sample shape ([n, 784] takes 28x28
 * images); y is i32 or i64 with shape [n]. Either may be NULL to skip it. uint8 pixels are
 * divided by 255. Nothing is written unless every check passes. */
dpc_status dpc_dataset_fill(const dpc_dataset *ds, const uint64_t *idx, uint32_t n, dpc_tensor *x,
                            dpc_tensor *y, dpc_diag *d);

/* A dataset whose samples come from a caller (libdpc's dpc_data_source, include/dpc/train.h):
 * `fill` copies samples idx[0..n) as float rows of the sample shape's element count into x and
 * their labels into y; non-zero fails the batch, with the message written into err. Labels are
 * checked to lie in [0, classes). The trainer fills batches through dpc_dataset_fill whatever the
 * dataset's form, converting to the input and label tensors' dtypes. */
typedef struct dpc_dataset_source {
  const char *name; /* NULL: "the data source" */
  uint64_t samples;
  dpc_shape sample;
  int64_t classes;
  int (*fill)(void *user, const uint64_t *idx, uint32_t n, float *x, int64_t *y, char *err,
              size_t err_len);
  void *user;
} dpc_dataset_source;

/* Wrap a source (copied; its user data must outlive the dataset), named "data source 'NAME'" in
 * messages. An error says which of its counts is wrong. */
dpc_status dpc_dataset_from_source(const dpc_dataset_source *src, dpc_dataset **out, dpc_diag *d);

/* ---- visiting order ----------------------------------------------------------------------- */

/* The order samples are visited in. With shuffle on, epoch e's order is a Fisher-Yates shuffle
 * driven by the counter-based generator of rng.h keyed by (seed, e) alone, so a resumed run
 * recomputes any epoch's order without replaying the ones before it. With shuffle off it is
 * 0..n-1. Batches are consecutive runs of the order; the last one may be partial. */
typedef struct dpc_order {
  uint64_t n, seed, epoch;
  bool shuffle;
  uint64_t *perm; /* the current epoch's order, n entries */
} dpc_order;

/* Allocates the permutation and computes epoch 0. */
dpc_status dpc_order_init(dpc_order *o, uint64_t n, uint64_t seed, bool shuffle, dpc_diag *d);
void dpc_order_free(dpc_order *o);
void dpc_order_epoch(dpc_order *o, uint64_t epoch); /* compute epoch's permutation */
/* ceil(n / batch); 0 when batch is 0. */
uint64_t dpc_order_batches(const dpc_order *o, uint32_t batch);
/* The sample indices of batch b of the current epoch (a pointer into the permutation, valid
 * until the next dpc_order_epoch) and how many there are; NULL and 0 past the last batch. */
const uint64_t *dpc_order_batch(const dpc_order *o, uint32_t batch, uint64_t b, uint32_t *count);

/* ---- files (idx.c; exposed for the fuzzer and tests) -------------------------------------- */

/* Read a whole file into malloc'd memory, inflating it when it is gzip data (starts with 1f 8b;
 * a name ending in .gz that is not gzip data is an error). Caller frees *buf. */
dpc_status dpc_data_read_file(const char *path, void **buf, size_t *len, dpc_diag *d);
/* Inflate gzip data (concatenated members included) into malloc'd memory; `name` is used in
 * messages. Truncated or corrupt data is an error saying which. */
dpc_status dpc_data_gunzip(const void *gz, size_t len, const char *name, void **out,
                           size_t *out_len, dpc_diag *d);

/* An IDX file of unsigned bytes: magic 0x000008NN (NN dimensions, at most DPC_MAX_RANK), then NN
 * big-endian u32 counts, then the bytes. 0x00000803 is a stack of images, 0x00000801 labels. */
typedef struct dpc_idx {
  dpc_shape shape;
  const uint8_t *data; /* points into the parsed buffer, dpc_shape_numel(&shape) bytes */
} dpc_idx;

dpc_status dpc_idx_parse(const void *buf, size_t len, const char *name, dpc_idx *out, dpc_diag *d);

#endif
