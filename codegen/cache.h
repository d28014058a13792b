/*
 * cache.h — dpc's cache folder on disk, where compiled kernels (codegen/cpu/jit.c) and the
 * device calibration are kept between runs.
 *
 * Where the folder is and whether to create it is a policy of the code generator, not of the IR
 * or the runtime: a program that only loads compiled artifacts never touches the disk here.
 */
#ifndef DPC_CODEGEN_CACHE_H
#define DPC_CODEGEN_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* The cache folder, created (with its parents) if need be: `override` when given, else
 * $DPC_CACHE_DIR, else $XDG_CACHE_HOME/dpc, else ~/.cache/dpc. False when there is none: the
 * chosen value is empty or "off", no home is known, or the folder cannot be created. */
bool dpc_cache_base_dir(const char *override, char *out, size_t n);

#endif
