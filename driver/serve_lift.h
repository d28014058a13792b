/*
 * serve_lift.h — the number arrays of an inference request's "data" read straight from its text.
 *
 * A general JSON reader makes an object per number: for a request of a few thousand numbers that
 * is most of the server's time (strtod, an allocation and a free each). So before the request
 * is read as JSON, each value of a "data" key that is a flat array of JSON numbers is noted (its
 * span of text) and replaced, in a copy, by a short marker string the request reader recognises
 * (dpc_serve_lift_index); the reader then takes the numbers from the span, by the input's type.
 * Anything else (nested arrays, booleans, a malformed number, short arrays) is left to the JSON
 * reader, so what is accepted and refused does not change, with one exception: an integer too
 * large for 64 bits, which the JSON reader refuses though JSON allows it, is read as the real
 * number it is for a float input.
 */
#ifndef DPC_DRIVER_SERVE_LIFT_H
#define DPC_DRIVER_SERVE_LIFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dpc_serve_lifts {
  const char *text;  /* the request's own text; spans index into it */
  size_t (*span)[2]; /* per array lifted: [start, end) of its contents, inside the brackets */
  size_t n, cap;
} dpc_serve_lifts;

/* Lift the "data" number arrays of json[0, len). Returns a malloc'd copy with markers in their
 * place, or NULL when none was lifted (or memory ran out: the JSON reader then reads them). */
char *dpc_serve_lift(const char *json, size_t len, dpc_serve_lifts *l);

/* The lifted array a string value stands for, or -1 when it is not a marker. */
long dpc_serve_lift_index(const dpc_serve_lifts *l, const char *s);

/* The next number of a lifted span: from *at (advanced past it and its comma) to end; false at
 * the end. */
bool dpc_serve_lift_next(const char **at, const char *end, const char **tok, size_t *len);

/* A JSON number token as the nearest double (strtod's answer); false if it is not one. */
bool dpc_serve_parse_real(const char *tok, size_t len, double *out);
/* A JSON integer token (no fraction or exponent, in range); false if it is not one. */
bool dpc_serve_parse_int(const char *tok, size_t len, int64_t *out);

void dpc_serve_lifts_free(dpc_serve_lifts *l);

#endif
