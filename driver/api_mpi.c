/*
 * api_mpi.c — MPI for dpc train --devices mpi (dpc/train.h): the process's MPI started and ended
 * here for the dpc command and applications that have no MPI code of their own. Nothing here
 * keeps state: MPI's own is the process's.
 */
#include "driver/api_internal.h"

#include <dpc/train.h>

#include "driver/driver.h"

DPC_COMPILER_API dpc_status dpc_mpi_check_devices(const char *spec, dpc_message *m) {
  uint32_t local;
  if (!dpc_driver_is_mpi(spec))
    return dpc_diag_fail(m, DPC_ERR_INVALID, "%s: MPI devices are 'mpi', 'mpi:cpu' or 'mpi:cpu:N'",
                         spec ? spec : "(none)");
  return dpc_driver_mpi_local(spec, &local, m);
}

#ifdef DPC_HAVE_MPI
#include <mpi.h>

DPC_COMPILER_API dpc_status dpc_mpi_init(int *argc, char ***argv, dpc_message *m) {
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (inited) return DPC_OK;
  /* the transport may run on a collective thread of its own, one call at a time; several
   * devices a rank (mpi:cpu:2) make calls from each device's thread at once */
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    return dpc_diag_fail(m, DPC_ERR_RUNTIME, "MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return dpc_diag_fail(m, DPC_ERR_UNSUPPORTED,
                         "this MPI gives thread level %d; dpc needs MPI_THREAD_SERIALIZED",
                         provided);
  }
  return DPC_OK;
}

DPC_COMPILER_API int dpc_mpi_rank(void) {
  int inited = 0, fin = 0, rank = -1;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  if (inited && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

DPC_COMPILER_API int dpc_mpi_size(void) {
  int inited = 0, fin = 0, size = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  if (inited && !fin) MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

DPC_COMPILER_API void dpc_mpi_finalize(bool failed) {
  int inited = 0, fin = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  if (!inited || fin) return;
  if (failed) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Finalize();
}

#else

DPC_COMPILER_API dpc_status dpc_mpi_init(int *argc, char ***argv, dpc_message *m) {
  (void)argc, (void)argv;
  return dpc_diag_fail(m, DPC_ERR_UNSUPPORTED,
                       "this dpc was built without MPI (install OpenMPI, libopenmpi-dev, and "
                       "build again)");
}

DPC_COMPILER_API int dpc_mpi_rank(void) {
  return -1;
}

DPC_COMPILER_API int dpc_mpi_size(void) {
  return 0;
}

DPC_COMPILER_API void dpc_mpi_finalize(bool failed) {
  (void)failed;
}

#endif
