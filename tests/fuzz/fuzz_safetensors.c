/*
 * fuzz_safetensors.c — libFuzzer target for the safetensors reader: a corrupt header or data
 * section must be refused with a message, never read out of bounds. An accepted file must also
 * keep the reader's promises: every tensor holds exactly its shape's bytes, every name is found
 * again by dpc_st_find, every metadata key by dpc_st_meta_get.
 *
 * An input that starts with '{' is also read as header text and data without the 8-byte length:
 * the last byte says how many of the bytes before it are data, and the target puts the right
 * length in front. Otherwise nearly every mutation of the JSON would also break the length and
 * stop at the first check (jansson is not instrumented, so coverage cannot guide it there).
 */
#include "runtime/safetensors.h"
#include "tests/fuzz/fuzz.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void check(const unsigned char *data, size_t size) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_st_file *f;
  if (dpc_safetensors_parse(data, size, "fuzz.safetensors", &f, &d) == DPC_OK) {
    /* The tensors tile the data section, so their bytes add up to at most the input's size. */
    size_t total = 0;
    for (uint32_t i = 0; i < dpc_st_count(f); i++) {
      const dpc_st_tensor *t = dpc_st_at(f, i);
      if (!t->t.data || dpc_st_find(f, t->name) != &t->t) abort();
      fuzz_touch(&t->t);
      total += dpc_tensor_bytes(&t->t);
    }
    if (total > size) abort();
    for (uint32_t i = 0; i < dpc_st_meta_count(f); i++) {
      const dpc_st_meta *m = dpc_st_meta_at(f, i);
      if (dpc_st_meta_get(f, m->key) != m->value) abort();
    }
    dpc_st_free(f);
  } else if (!d.msg || f) {
    abort();
  }
  dpc_diag_free(&d);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  check(data, size);
  if (size < 2 || data[0] != '{') return 0;
  size_t body = size - 1, dlen = data[size - 1] < body ? data[size - 1] : body;
  size_t hlen = body - dlen;
  unsigned char *buf = malloc(8 + body);
  if (!buf) return 0;
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
  memcpy(buf + 8, data, body);
  check(buf, 8 + body);
  free(buf);
  return 0;
}
