/*
 * cli_strategy.c — a strategy's failure (dpc_strategy_parse) told in the command line's words:
 * the library says which setting and what is wrong, this names the flag that sets it; and
 * --strategy auto's choice, said the same way by every command that takes it.
 */
#include "tools/dpc/cli.h"

#include <stdio.h>
#include <string.h>

/* The flag that sets each field. */
static const char *flag(dpc_strategy_field f) {
  switch (f) {
  case DPC_STRATEGY_FIELD_KIND: return "--strategy";
  case DPC_STRATEGY_FIELD_MP: return "--mp";
  case DPC_STRATEGY_FIELD_STAGES: return "--stages";
  case DPC_STRATEGY_FIELD_MICROBATCHES: return "--microbatches";
  case DPC_STRATEGY_FIELD_DP: return "--dp";
  case DPC_STRATEGY_FIELD_ACCUMULATE: return "--accumulate";
  case DPC_STRATEGY_FIELD_SCHEDULE: return "--pipeline-schedule";
  case DPC_STRATEGY_FIELD_PLACEMENT: return "--placement";
  case DPC_STRATEGY_FIELD_STALENESS: return "--staleness";
  case DPC_STRATEGY_FIELD_PERIOD: return "--local-sgd";
  case DPC_STRATEGY_FIELD_ASYNC: return "--sync async";
  case DPC_STRATEGY_FIELD_DEVICES: return "--devices";
  case DPC_STRATEGY_FIELD_BATCH: return "--batch";
  case DPC_STRATEGY_FIELD_TEXT: break;
  }
  return "--strategy";
}

/* "--strategy pipeline", or the flag that makes the kind */
static void kind_flag(dpc_strategy_kind k, char *buf, size_t n) {
  if (k == DPC_STRATEGY_ASYNC)
    snprintf(buf, n, "--sync async");
  else if (k == DPC_STRATEGY_LOCAL_SGD)
    snprintf(buf, n, "--local-sgd");
  else
    snprintf(buf, n, "--strategy %s", dpc_strategy_kind_name(k));
}

int cli_strategy_error(const char *cmd, const dpc_strategy_error *e, uint32_t kinds,
                       const char *devices, dpc_message *d) {
  const char *f = flag(e->field);
  unsigned long long v = e->value;
  char kf[64];
  kind_flag(e->kind, kf, sizeof kf);
  bool plan = !strcmp(cmd, "plan");
  switch (e->problem) {
  case DPC_STRATEGY_UNKNOWN:
    if (e->field == DPC_STRATEGY_FIELD_KIND) {
      char list[128] = "";
      int at = 0, n = 0, count = 0;
      for (int k = 0; k < DPC_STRATEGY_KINDS; k++) count += (kinds >> k) & 1;
      /* the command's own order: the usual kinds first, one device last */
      static const dpc_strategy_kind order[] = {
          DPC_STRATEGY_DATA,  DPC_STRATEGY_MODEL,     DPC_STRATEGY_HYBRID, DPC_STRATEGY_PIPELINE,
          DPC_STRATEGY_ASYNC, DPC_STRATEGY_LOCAL_SGD, DPC_STRATEGY_SINGLE};
      for (size_t i = 0; i < sizeof order / sizeof *order; i++)
        if (kinds & (1u << order[i]))
          at += snprintf(list + at, sizeof list - (size_t)at, "%s%s",
                         !n++         ? ""
                         : n == count ? " or "
                                      : ", ",
                         dpc_strategy_kind_name(order[i]));
      return cli_usage_error(cmd, "--strategy is %s, not '%s'", list, e->text);
    }
    if (e->field == DPC_STRATEGY_FIELD_PLACEMENT && e->text)
      return cli_usage_error(cmd, "--placement is metis, contiguous or roundrobin, not '%s'",
                             e->text);
    break;
  case DPC_STRATEGY_RANGE:
    if (e->hi == UINT32_MAX) break; /* a word where a number goes, in the text form */
    if (e->field == DPC_STRATEGY_FIELD_DP && e->hi < DPC_MAX_DEVICES)
      return cli_usage_error(cmd,
                             "--dp %llu pipelines of --stages take more than dpc handles: at most "
                             "%u devices (--dp up to %llu with these stages)",
                             v, DPC_MAX_DEVICES, (unsigned long long)e->hi);
    return cli_usage_error(cmd, "%s expects a number from %llu to %llu, got '%llu'", f,
                           (unsigned long long)e->lo, (unsigned long long)e->hi, v);
  case DPC_STRATEGY_ALONE:
    return cli_usage_error(cmd, "%s goes with %s%s", f, kf,
                           e->field == DPC_STRATEGY_FIELD_MP
                               ? " (a pipeline's devices per replica are its --stages)"
                               : "");
  case DPC_STRATEGY_MISSING:
    if (e->field == DPC_STRATEGY_FIELD_STAGES)
      return cli_usage_error(cmd, "--strategy pipeline needs --stages S, from 2 to %u",
                             DPC_MAX_DEVICES);
    if (e->field == DPC_STRATEGY_FIELD_MP)
      /* the text form, which every command takes (dpc bench has no --mp) */
      return cli_usage_error(cmd,
                             "--strategy hybrid needs its devices per replica, at least 2 and at "
                             "most %u: --strategy hybrid:mp=M",
                             DPC_MAX_DEVICES);
    return cli_usage_error(cmd, "%s needs %s K, the steps between averagings", kf, f);
  case DPC_STRATEGY_EXCLUDES:
    if (e->field == DPC_STRATEGY_FIELD_ACCUMULATE && e->kind == DPC_STRATEGY_PIPELINE)
      return cli_usage_error(cmd, "--strategy pipeline splits a batch by --microbatches M; "
                                  "--accumulate does not go with it");
    if (e->field == DPC_STRATEGY_FIELD_PERIOD && e->kind != DPC_STRATEGY_ASYNC)
      return cli_usage_error(cmd,
                             "--local-sgd averages data-parallel replicas: it takes --strategy "
                             "data, not %s",
                             dpc_strategy_kind_name(e->kind));
    return cli_usage_error(cmd, "--sync async trains data-parallel workers (--devices cpu:N, N >= "
                                "2) without --strategy, --local-sgd or --accumulate");
  case DPC_STRATEGY_FEW_DEVICES:
    if (e->field == DPC_STRATEGY_FIELD_KIND)
      return cli_usage_error(cmd,
                             "--strategy %s spreads the model over several devices: give "
                             "--devices cpu:N with N >= 2",
                             dpc_strategy_kind_name(e->kind));
    return cli_usage_error(cmd,
                           "%s trains data-parallel replicas on several devices: give --devices "
                           "cpu:N with N >= 2",
                           f);
  case DPC_STRATEGY_MANY_DEVICES:
    return cli_usage_error(cmd, "--strategy single takes one device, not the %u of --devices %s",
                           e->devices, devices);
  case DPC_STRATEGY_DEVICES_SPLIT:
    if (e->field == DPC_STRATEGY_FIELD_MP)
      return cli_usage_error(
          cmd, "--mp %llu does not divide the %u devices into 2 or more replicas", v, e->devices);
    if (plan)
      return cli_usage_error(cmd,
                             "--stages %llu%s does not fit the %u devices of --devices %s: each "
                             "pipeline replica takes %llu",
                             e->field == DPC_STRATEGY_FIELD_DP ? (unsigned long long)e->lo : v,
                             e->field == DPC_STRATEGY_FIELD_DP ? " with --dp" : "", e->devices,
                             devices,
                             e->field == DPC_STRATEGY_FIELD_DP ? (unsigned long long)e->lo : v);
    if (e->field == DPC_STRATEGY_FIELD_DP)
      return cli_usage_error(cmd,
                             "--dp %llu pipelines of --stages %llu take %llu devices, but "
                             "--devices %s makes %u",
                             v, (unsigned long long)e->lo, v * e->lo, devices, e->devices);
    return cli_usage_error(cmd,
                           "--stages %llu does not divide the %u devices of --devices %s (each "
                           "pipeline replica takes %llu)",
                           v, e->devices, devices, v);
  case DPC_STRATEGY_BATCH_SPLIT:
    if (plan)
      return cli_usage_error(
          cmd, "--batch %llu does not split evenly over %u data-parallel replicas", v, e->replicas);
    return cli_usage_error(cmd,
                           "--batch %llu does not split evenly over %u data-parallel replicas: "
                           "give a multiple of %u (or --shares)",
                           v, e->replicas, e->replicas);
  case DPC_STRATEGY_MICRO_SPLIT: {
    char whose[64];
    if (e->replicas > 1)
      snprintf(whose, sizeof whose, "each replica's %llu samples of the batch",
               (unsigned long long)e->lo);
    else
      snprintf(whose, sizeof whose, "the batch of %llu", (unsigned long long)e->lo);
    return cli_usage_error(cmd, "%s %llu does not divide %s into equal micro-batches", f, v, whose);
  }
  case DPC_STRATEGY_OK: break;
  }
  /* the text form: the library's words, after the flag that carried the text */
  return cli_usage_error(cmd, "--strategy: %s",
                         dpc_message_status(d) ? dpc_message_brief(d) : "invalid");
}

int cli_strategy_auto(const char *cmd, const dpc_net *net, const dpc_auto_opts *o, bool quiet,
                      char *chosen, size_t n) {
  dpc_message *m = dpc_message_new();
  dpc_auto_report *r = NULL;
  int rc = dpc_net_plan_auto(net, o, &r, m) ? cli_report(cmd, m) : DPC_EXIT_OK;
  if (!rc) {
    const dpc_auto_candidate *b = &r->candidates[r->best];
    snprintf(chosen, n, "%s", b->strategy);
    if (!quiet)
      fprintf(stderr,
              "dpc %s: --strategy auto: %s, predicted %.3f ms a step, the fastest of %u (dpc "
              "plan --strategy auto --explain shows them)\n",
              cmd, b->strategy, b->step_ms, r->n_candidates);
  }
  dpc_auto_report_free(r);
  dpc_message_free(m);
  return rc;
}
