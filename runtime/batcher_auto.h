/*
 * batcher_auto.h — the batcher's `auto` delay: from what it measured (the arrival rate, the
 * service time of each batch size, whether the queue is falling behind), the delay that serves
 * the offered load with the shortest p99 latency under the target, or, when the load is past what
 * the instances can serve, the delay that serves the most within the target.
 *
 * A pure function of its inputs, so it is tested on made-up measurements (tests/unit/
 * test_runtime.c); batcher.c keeps the measurements and calls it as batches finish. It must not
 * read clocks or the batcher: what it needs of the past (the delay in force, how long ago the
 * queue last fell behind) comes in the input.
 */
#ifndef DPC_RUNTIME_BATCHER_AUTO_H
#define DPC_RUNTIME_BATCHER_AUTO_H

#include <stddef.h>
#include <stdint.h>

/* Batch sizes are measured per plan the batch ran on (bucket k: the k-th smallest plan, of
 * plan_rows[k] rows), or without plans in power-of-two buckets (bucket k: batches of 2^k to
 * 2^(k+1) - 1 rows). */
#define DPC_AUTO_BUCKETS 32

typedef struct dpc_auto_input {
  double rate;         /* requests arriving per second */
  double rows_per_req; /* mean rows of a request */
  /* per bucket: mean rows of the batches measured and their typical service time in seconds
   * (packing, the run, unpacking; see dpc_batcher_auto_measure); rows 0: none measured */
  double bucket_rows[DPC_AUTO_BUCKETS], bucket_s[DPC_AUTO_BUCKETS];
  unsigned instances;
  uint64_t max_batch;
  /* the rows of each plan a batch may run on, ascending (n_plans of them): a batch of b rows
   * runs on the smallest that holds b and takes that plan's time, padding and all. 0 plans: a
   * batch's time follows its rows (the buckets are powers of two) */
  double plan_rows[DPC_AUTO_BUCKETS];
  unsigned n_plans;
  /* how far a batch has lately run past its size's typical time (the process preempted, the CPU
   * shared), a decaying maximum kept by dpc_batcher_auto_measure: what a request that comes
   * during such a stall waits on top, until the queue it left drains */
  double stall_s;
  double target_s;   /* the p99 latency to stay under */
  uint64_t delay_us; /* the delay in force, which a new choice must beat by a margin to replace */
  /* seconds since a batch was last cut with more than a full batch still queued behind it (the
   * instances falling behind the arrivals); negative: never */
  double behind_s;
  /* the share of the machine's cores the whole process used lately (0: not known): near 1, the
   * instances' cores are also taken by the process's other threads (an HTTP server reading
   * requests), which the instances' own busy time does not show, and larger batches give them
   * time back */
  double cpu_busy;
} dpc_auto_input;

typedef struct dpc_auto_choice {
  uint64_t delay_us;
  double batch_rows; /* the batch size the delay is predicted to make */
  double busy;       /* the predicted fraction of time the instances run batches */
  double p99_s;      /* the predicted p99 latency */
  char why[224];     /* the reason, in numbers, for a person */
} dpc_auto_choice;

/* A batch's service time `s` into bucket k's typical time: a decaying average that follows a
 * faster batch quickly and a slower one slowly, a single slow batch (the process preempted, a
 * plan's first run) counted as at most twice the typical time, so what it settles on is the time
 * a batch takes when nothing else gets in the way. */
void dpc_batcher_auto_measure(dpc_auto_input *in, unsigned k, double rows, double s);

/* The service time of a batch of `rows` rows as the measurements predict it; 0 when nothing was
 * measured. With plans: the time of the plan it runs on, measured, or else read off the line
 * through the measured plans at that plan's rows. */
double dpc_batcher_auto_service(const dpc_auto_input *in, double rows);
/* The plan (bucket) a batch of `rows` rows runs on: the smallest that holds it (the largest when
 * none does); 0 without plans. */
unsigned dpc_batcher_auto_plan(const dpc_auto_input *in, double rows);
/* How many of `rows` rows waiting to be cut make the batch: all of them, or a smaller plan's
 * rows when that plan serves more rows a second by the measured times, by 10% at least so that
 * noise does not decide (all of them without plans). It catches padding (plans of 16 and 32 rows
 * taking 0.8 and 1.7 ms: 24 rows would pad to 32 and serve 14 rows a ms, 16 of them 20 a ms)
 * and a large plan that runs slower per row than a smaller one (its activations out of cache). */
double dpc_batcher_auto_cut(const dpc_auto_input *in, double rows);

/* The delay to use now. */
void dpc_batcher_auto_choose(const dpc_auto_input *in, dpc_auto_choice *out);

#endif
