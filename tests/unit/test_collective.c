/*
 * test_collective.c — the all-reduce's alpha-beta cost (partitioner/collective.h) against the
 * ring's steps worked by hand: a flat ring within one host, a hierarchical one over hosts, one
 * device per host, and the bytes each device sends.
 */
#include "tests/unit/unit.h"

#include "partitioner/collective.h"

static const dpc_link_speed nvlink = {450, 3e-6}, ib = {50, 5e-6};

/* One peer reduces nothing; one host is a flat ring of 2 (L - 1) steps of bytes / L. */
static void flat_ring(void) {
  dpc_link_speed l = {10, 1e-5};
  CHECK(dpc_allreduce_seconds(1e9, 1, 1, &l, NULL) == 0);
  /* 4 peers, 4 GB each: 6 steps of 1 GB at 10 GB/s and 10 us */
  CHECK_NEAR(dpc_allreduce_seconds(4e9, 4, 1, &l, NULL), 6 * (1e-5 + 0.1), 1e-12);
  CHECK_NEAR(dpc_allreduce_bytes(4e9, 4, 1), 6e9, 1);
}

/* 8 hosts of 8: reduce-scatter and all-gather within (7 steps each of bytes / 8), then a ring
 * over the 8 hosts of each peer's eighth (14 steps of bytes / 64). */
static void hierarchical(void) {
  double b = 64e6, share = b / 8;
  double within = 14 * (3e-6 + share / 450e9), between = 14 * (5e-6 + share / 8 / 50e9);
  CHECK_NEAR(dpc_allreduce_seconds(b, 8, 8, &nvlink, &ib), within + between, 1e-12);
  CHECK_NEAR(dpc_allreduce_bytes(b, 8, 8), 14 * share + 14 * share / 8, 1e-3);
  /* one peer a host: the ring over hosts alone, 2 (H - 1) steps of bytes / H */
  CHECK_NEAR(dpc_allreduce_seconds(b, 1, 64, &nvlink, &ib), 126 * (5e-6 + b / 64 / 50e9), 1e-12);
  /* a faster link between hosts is never slower, and more hosts never faster */
  dpc_link_speed fast = {400, 5e-6};
  CHECK(dpc_allreduce_seconds(b, 8, 8, &nvlink, &fast) <
        dpc_allreduce_seconds(b, 8, 8, &nvlink, &ib));
  CHECK(dpc_allreduce_seconds(b, 8, 64, &nvlink, &ib) >
        dpc_allreduce_seconds(b, 8, 8, &nvlink, &ib));
}

const unit_test unit_tests[] = {
    {"flat_ring", flat_ring},
    {"hierarchical", hierarchical},
    {NULL, NULL},
};
