/*
 * seal.h — a checksum over a whole file, kept in 16 bytes at its end: how a compiled artifact
 * (.dpx) shows it arrived whole before the runtime maps its machine code. The sum is CRC-64/XZ
 * (ECMA-182 polynomial, reflected; the one xz uses), which finds every burst of damage up to 64
 * bits and any other with odds of 2^-64 against. It guards against damage (a copy cut short, a
 * flipped bit), not against someone who means harm: anyone can write a matching trailer.
 *
 *   file:    BYTES | crc64(BYTES), 8 bytes little-endian | "DPCSEAL1"
 *
 *   dpc_seal_append("model.dpx", &d);        (writer: after linking, before the rename)
 *   dpc_seal_check_file("model.dpx", &d);    (reader: before dlopen)
 */
#ifndef DPC_IR_SEAL_H
#define DPC_IR_SEAL_H

#include "ir/base.h"

#define DPC_SEAL_BYTES 16

/* CRC-64/XZ of n bytes, continuing from crc (0 to start). */
uint64_t dpc_seal_crc64(uint64_t crc, const void *p, size_t n);

/* Append the trailer for the file's present contents, and flush it to the disk. */
dpc_status dpc_seal_append(const char *path, dpc_diag *d);

/* Whether the n bytes of a file named `name` end in a trailer that matches the rest; the error
 * names the file and says whether it was cut short (or older than checksums) or damaged. */
dpc_status dpc_seal_check(const unsigned char *b, size_t n, const char *name, dpc_diag *d);
/* The same for a file on disk. */
dpc_status dpc_seal_check_file(const char *path, dpc_diag *d);
/* The same, keeping the file's bytes (trailer included; malloc'd) for a reader that needs them:
 * *bytes NULL on failure. */
dpc_status dpc_seal_read_file(const char *path, unsigned char **bytes, size_t *len, dpc_diag *d);

#endif
