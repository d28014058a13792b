/*
 * test_mpi_comm.c — an application that runs MPI itself hands dpc a communicator of its own
 * (dpc_trainer_opts.mpi_comm): the world's ranks split into two halves, each half training the
 * model data parallel over its own ranks, at the same time, and logging where the arguments say.
 *
 *   mpirun -np 4 test_mpi_comm MODEL.graph STEPS LOG_A.jsonl LOG_B.jsonl
 *
 * Ranks 0 and 1 train into LOG_A, ranks 2 and 3 into LOG_B (rank 0 of each half writes it); each
 * log must equal `dpc train MODEL --devices cpu:2 --steps STEPS --log ...` (tests/mpi/comm_test.sh
 * compares them). Exit status 0 when both halves trained.
 */
#include <dpc/train.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int provided = 0, me = 0, size = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 5 || size != 4) {
    if (!me) fprintf(stderr, "usage: mpirun -np 4 test_mpi_comm MODEL STEPS LOG_A LOG_B\n");
    MPI_Finalize();
    return 2;
  }
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, me / 2, me, &half);
  dpc_message *msg = dpc_message_new();
  dpc_net *net = NULL;
  int rc = 0;
  if (dpc_net_load(argv[1], NULL, &net, msg)) {
    rc = 1;
  } else {
    dpc_trainer_opts o;
    dpc_trainer_defaults(&o);
    o.devices = "mpi";
    o.mpi_comm = &half;
    o.steps = strtoull(argv[2], NULL, 10);
    o.threads = 1;
    o.log_path = argv[3 + me / 2];
    rc = dpc_trainer_run(net, &o, msg) != DPC_OK;
  }
  if (rc) fprintf(stderr, "rank %d: %s\n", me, dpc_message_text(msg));
  dpc_net_free(net);
  dpc_message_free(msg);
  MPI_Comm_free(&half);
  int all = 0;
  MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  if (!me) printf(all ? "COMM-FAILED\n" : "COMM-OK\n");
  return all;
}
