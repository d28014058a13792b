/*
 * batcher_auto.h — the batcher's `auto` delay: from what it measured (the arrival rate, the
 * service time of each batch size), the delay that serves the offered load with the shortest p99
 * latency under the target, or, when the load is past what the instances can serve, the delay
 * that serves the most within the target.
 *
 * A pure function of its inputs, so it is tested on made-up measurements (tests/unit/
 * test_runtime.c); batcher.c keeps the measurements and calls it as batches finish.
 */
#ifndef DPC_RUNTIME_BATCHER_AUTO_H
#define DPC_RUNTIME_BATCHER_AUTO_H

#include <stddef.h>
#include <stdint.h>

/* Batch sizes are measured in power-of-two buckets: bucket k holds batches of 2^k to
 * 2^(k+1) - 1 rows. */
#define DPC_AUTO_BUCKETS 32

typedef struct dpc_auto_input {
  double rate;         /* requests arriving per second */
  double rows_per_req; /* mean rows of a request */
  /* per bucket: mean rows of the batches measured and their mean service time in seconds
   * (packing, the run, unpacking); rows 0: none measured */
  double bucket_rows[DPC_AUTO_BUCKETS], bucket_s[DPC_AUTO_BUCKETS];
  unsigned instances;
  uint64_t max_batch;
  double target_s; /* the p99 latency to stay under */
} dpc_auto_input;

typedef struct dpc_auto_choice {
  uint64_t delay_us;
  double batch_rows; /* the batch size the delay is predicted to make */
  double busy;       /* the predicted fraction of time the instances run batches */
  double p99_s;      /* the predicted p99 latency */
  char why[224];     /* the reason, in numbers, for a person */
} dpc_auto_choice;

/* The service time of a batch of `rows` rows as the measurements predict it; 0 when nothing was
 * measured. */
double dpc_batcher_auto_service(const dpc_auto_input *in, double rows);

/* The delay to use now. */
void dpc_batcher_auto_choose(const dpc_auto_input *in, dpc_auto_choice *out);

#endif
