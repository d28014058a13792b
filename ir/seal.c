/*
 * seal.c — the whole-file checksum trailer of seal.h. Uses libc only; the file is read whole,
 * since a damaged artifact must be refused before any of it is mapped.
 */
#include "ir/seal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char magic[8] = {'D', 'P', 'C', 'S', 'E', 'A', 'L', '1'};

uint64_t dpc_seal_crc64(uint64_t crc, const void *p, size_t n) {
  /* The table costs 2048 shifts, far less than reading any artifact: no global state for it. */
  uint64_t table[256];
  for (uint32_t i = 0; i < 256; i++) {
    uint64_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0xC96C5795D7870F42ull : c >> 1;
    table[i] = c;
  }
  const unsigned char *b = p;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

static bool write_all(int fd, const unsigned char *b, size_t n) {
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= (size_t)w;
  }
  return true;
}

/* The whole file into *out (malloc'd), its size into *n. */
static dpc_status read_whole(const char *path, unsigned char **out, size_t *n, dpc_diag *d) {
  *out = NULL;
  *n = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat s;
  if (fd < 0 || fstat(fd, &s)) {
    dpc_status st = dpc_diag_fail(d, DPC_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return st;
  }
  size_t len = (size_t)s.st_size, got = 0;
  unsigned char *b = malloc(len ? len : 1);
  if (!b) {
    close(fd);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory reading '%s'", path);
  }
  while (got < len) {
    ssize_t r = read(fd, b + got, len - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  int e = errno;
  close(fd);
  if (got < len) {
    free(b);
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot read '%s': %s", path,
                         e ? strerror(e) : "it shrank while being read");
  }
  *out = b;
  *n = len;
  return DPC_OK;
}

dpc_status dpc_seal_append(const char *path, dpc_diag *d) {
  unsigned char *b;
  size_t n;
  dpc_status st = read_whole(path, &b, &n, d);
  if (st) return st;
  uint64_t crc = dpc_seal_crc64(0, b, n);
  free(b);
  unsigned char t[DPC_SEAL_BYTES];
  for (int i = 0; i < 8; i++) t[i] = (unsigned char)(crc >> (8 * i));
  memcpy(t + 8, magic, 8);
  int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  bool ok = fd >= 0 && write_all(fd, t, sizeof t) && fsync(fd) == 0;
  int e = errno;
  if (fd >= 0 && close(fd)) ok = false, e = errno;
  if (!ok) return dpc_diag_fail(d, DPC_ERR_IO, "cannot write '%s': %s", path, strerror(e));
  return DPC_OK;
}

dpc_status dpc_seal_check(const unsigned char *b, size_t n, const char *name, dpc_diag *d) {
  if (n < DPC_SEAL_BYTES || memcmp(b + n - 8, magic, 8))
    return dpc_diag_fail(d, DPC_ERR_SYNTAX,
                         "%s is not a whole dpc artifact: it does not end in dpc's checksum (it "
                         "was cut short, or made by a dpc from before checksums: compile it again "
                         "with dpc compile)",
                         name);
  size_t body = n - DPC_SEAL_BYTES;
  uint64_t want = 0;
  for (int i = 0; i < 8; i++) want |= (uint64_t)b[body + i] << (8 * i);
  uint64_t have = dpc_seal_crc64(0, b, body);
  if (have != want)
    return dpc_diag_fail(d, DPC_ERR_SYNTAX,
                         "%s is damaged: its contents do not match its checksum (CRC-64 %016llx, "
                         "recorded %016llx); copy it again or compile it again",
                         name, (unsigned long long)have, (unsigned long long)want);
  return DPC_OK;
}

dpc_status dpc_seal_read_file(const char *path, unsigned char **bytes, size_t *len, dpc_diag *d) {
  *bytes = NULL;
  unsigned char *b;
  size_t n;
  dpc_status st = read_whole(path, &b, &n, d);
  if (!st) st = dpc_seal_check(b, n, path, d);
  if (st) {
    free(b);
    return st;
  }
  *bytes = b, *len = n;
  return DPC_OK;
}

dpc_status dpc_seal_check_file(const char *path, dpc_diag *d) {
  unsigned char *b;
  size_t n;
  dpc_status st = dpc_seal_read_file(path, &b, &n, d);
  free(b);
  return st;
}
