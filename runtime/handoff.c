/*
 * handoff.c — values that cross processes (handoff.h).
 *
 * Every event of a plan carries one value (the SIGNAL and WAIT steps name it in `src`) and is
 * signalled once, by the device that makes the value. From every device's step list this side
 * works out who reads what it makes, and in which order each peer sends it the values it reads:
 * the peer's SIGNAL order. A wait then receives, from that peer, every value not yet received up
 * to the one it needs; values that come ahead of their wait land in their slots early, which
 * nothing else in this process writes.
 */
#include "runtime/handoff.h"

#include <stdlib.h>
#include <string.h>

struct dpc_handoff {
  const dpc_plan *plan;
  uint32_t self, n_devs, n_events;
  dpc_transport *t;
  uint32_t *value; /* per event: the value it carries */
  uint32_t *maker; /* per event: the device that signals it */
  bool *reads;     /* [event][device]: the device waits for it */
  uint32_t *pos;   /* per event self reads: its place in its maker's sends to self */
  uint32_t **in;   /* per device: the events it sends to self, in its order */
  uint32_t *n_in, *next;
  bool any;
};

void dpc_handoff_free(dpc_handoff *h) {
  if (!h) return;
  for (uint32_t k = 0; h->in && k < h->n_devs; k++) free(h->in[k]);
  free(h->in);
  free(h->n_in);
  free(h->next);
  free(h->value);
  free(h->maker);
  free(h->reads);
  free(h->pos);
  free(h);
}

static dpc_status bad_step(const dpc_plan *p, uint32_t dev, uint32_t j, const char *why,
                           dpc_diag *d) {
  return dpc_diag_fail(d, DPC_ERR_INVALID, "%s, step %u: %s", p->devs[dev].name, j + 1, why);
}

/* Which value each event carries and who makes and reads it. */
static dpc_status map_events(dpc_handoff *h, dpc_diag *d) {
  const dpc_plan *p = h->plan;
  for (uint32_t e = 0; e < p->n_events; e++) h->maker[e] = h->value[e] = DPC_NONE;
  for (uint32_t dv = 0; dv < p->n_devs; dv++)
    for (uint32_t j = 0; j < p->devs[dv].n_steps; j++) {
      const dpc_step *sp = &p->devs[dv].steps[j];
      if (sp->kind != DPC_STEP_SIGNAL && sp->kind != DPC_STEP_WAIT) continue;
      if (sp->event >= p->n_events || sp->src >= p->g->n_values)
        return bad_step(p, dv, j, "an event without the value it carries", d);
      uint32_t e = sp->event, maker = sp->kind == DPC_STEP_SIGNAL ? dv : sp->peer;
      if (p->slots[sp->src].device != maker || maker >= p->n_devs ||
          (h->value[e] != DPC_NONE && (h->value[e] != sp->src || h->maker[e] != maker)))
        return bad_step(p, dv, j, "an event whose value is not made where it is signalled", d);
      h->value[e] = sp->src, h->maker[e] = maker;
      if (sp->kind == DPC_STEP_WAIT) h->reads[(size_t)e * p->n_devs + dv] = true;
    }
  return DPC_OK;
}

dpc_status dpc_handoff_new(const dpc_plan *plan, uint32_t self, dpc_transport *peers,
                           dpc_handoff **out, dpc_diag *d) {
  *out = NULL;
  uint32_t n = plan->n_devs, ne = plan->n_events ? plan->n_events : 1;
  dpc_handoff *h = calloc(1, sizeof *h);
  if (!h) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  h->plan = plan, h->self = self, h->n_devs = n, h->n_events = plan->n_events, h->t = peers;
  h->value = malloc(ne * sizeof *h->value);
  h->maker = malloc(ne * sizeof *h->maker);
  h->pos = malloc(ne * sizeof *h->pos);
  h->reads = calloc((size_t)ne * n, sizeof *h->reads);
  h->in = calloc(n, sizeof *h->in);
  h->n_in = calloc(n, sizeof *h->n_in);
  h->next = calloc(n, sizeof *h->next);
  dpc_status st = DPC_OK;
  if (!h->value || !h->maker || !h->pos || !h->reads || !h->in || !h->n_in || !h->next)
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (!st) st = map_events(h, d);
  /* per peer, the values it sends self, in the order of its SIGNAL steps */
  for (uint32_t dv = 0; dv < n && !st; dv++) {
    const dpc_plan_device *pd = &plan->devs[dv];
    if (dv == self) continue;
    if (!(h->in[dv] = malloc((pd->n_steps ? pd->n_steps : 1) * sizeof **h->in)))
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    for (uint32_t j = 0; !st && j < pd->n_steps; j++) {
      const dpc_step *sp = &pd->steps[j];
      if (sp->kind != DPC_STEP_SIGNAL || !h->reads[(size_t)sp->event * n + self]) continue;
      h->pos[sp->event] = h->n_in[dv];
      h->in[dv][h->n_in[dv]++] = sp->event;
      h->any = true;
    }
  }
  for (uint32_t e = 0; e < plan->n_events && !st; e++)
    for (uint32_t q = 0; q < n && h->maker[e] == self; q++)
      h->any |= q != self && h->reads[(size_t)e * n + q];
  if (!st && h->any && (!peers->ops->send_async || !peers->ops->flush))
    st = dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                       "the %s transport cannot hand values between devices of a plan",
                       peers->ops->kind);
  if (st) {
    dpc_handoff_free(h);
    return st;
  }
  *out = h;
  return DPC_OK;
}

bool dpc_handoff_any(const dpc_handoff *h) {
  return h->any;
}

void dpc_handoff_begin(dpc_handoff *h) {
  memset(h->next, 0, h->n_devs * sizeof *h->next);
}

dpc_status dpc_handoff_signal(dpc_handoff *h, const dpc_step *sp, const dpc_tensor *tensors,
                              dpc_diag *d) {
  const dpc_tensor *x = &tensors[h->value[sp->event]];
  for (uint32_t q = 0; q < h->n_devs; q++) {
    if (q == h->self || !h->reads[(size_t)sp->event * h->n_devs + q]) continue;
    dpc_status st = h->t->ops->send_async(h->t, h->self, q, x->data, dpc_tensor_bytes(x), d);
    if (st) return st;
  }
  return DPC_OK;
}

dpc_status dpc_handoff_wait(dpc_handoff *h, const dpc_step *sp, const dpc_tensor *tensors,
                            dpc_diag *d) {
  uint32_t p = h->maker[sp->event];
  while (h->next[p] <= h->pos[sp->event]) {
    const dpc_tensor *x = &tensors[h->value[h->in[p][h->next[p]]]];
    dpc_status st = h->t->ops->recv(h->t, h->self, p, x->data, dpc_tensor_bytes(x), d);
    if (st) return st;
    h->next[p]++;
  }
  return DPC_OK;
}

dpc_status dpc_handoff_end(dpc_handoff *h, dpc_diag *d) {
  return h->any ? h->t->ops->flush(h->t, h->self, d) : DPC_OK;
}
