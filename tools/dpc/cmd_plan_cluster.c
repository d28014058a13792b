/*
 * cmd_plan_cluster.c — `dpc plan MODEL --cluster FILE`: a plan for a cluster described in a file
 * (dpc_net_plan_cluster, <dpc/cluster.h>): the flags that go with it in, the report out — the
 * strategies tried (with --explain), one replica's devices, the all-reduce across replicas, each
 * device's memory against its limit, and the planning time.
 */
#include "tools/dpc/plan_cluster.h"

#include <dpc/cluster.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double mib(double b) {
  return b / (1024.0 * 1024.0);
}

/* src into dst of n bytes, cut to fit. */
static void set_text(char *dst, size_t n, const char *src) {
  size_t k = strlen(src);
  if (k >= n) k = n - 1;
  memcpy(dst, src, k);
  dst[k] = 0;
}

static void print_table(const dpc_cluster_report *r) {
  printf("%-4s %-48s %10s %11s %13s %11s  %s\n", "rank", "strategy", "step ms", "replica ms",
         "all-reduce ms", "memory MiB", "why");
  for (uint32_t i = 0; i < r->n_candidates; i++) {
    const dpc_cluster_candidate *c = &r->candidates[i];
    char rank[16] = "-";
    if (c->planned && c->fits) snprintf(rank, sizeof rank, "%u", i + 1);
    if (c->planned)
      printf("%-4s %-48s %10.3f %11.3f %13.3f %11.1f  %s\n", rank, c->strategy, c->step_ms,
             c->replica_ms, c->allreduce_ms, mib((double)c->max_memory_bytes), c->reason);
    else
      printf("%-4s %-48s %10s %11s %13s %11s  %s\n", "-", c->strategy, "-", "-", "-", "-",
             c->reason);
  }
}

static void print_plan(const dpc_cluster_report *r, const char *model) {
  const dpc_cluster *c = &r->cluster;
  const dpc_cluster_candidate *b = &r->candidates[r->best];
  printf("%s, training step, batch %u, %s on %s: %u host%s x %u %s (%s, %.0f GFLOP/s, %.0f "
         "GB/s, %.1f GiB)%s\n",
         model, r->batch, b->strategy, c->name, c->hosts, c->hosts == 1 ? "" : "s",
         c->devices_per_host, c->device_kind, c->device_name[0] ? c->device_name : "unnamed",
         c->gflops, c->mem_gbs, (double)c->memory / (1024.0 * 1024 * 1024),
         r->with_host ? " and the host's CPU" : "");
  printf("%u replica%s of %u device%s, %u samples each%s\n", r->replicas,
         r->replicas == 1 ? "" : "s", r->mp, r->mp == 1 ? "" : "s", r->replica_batch,
         r->microbatches > 1 ? " in micro-batches" : "");
  printf("%-14s %8s %12s %12s %10s %11s %11s\n", "device", "kernels", "collectives", "compute ms",
         "comm ms", "memory MiB", "limit MiB");
  for (uint32_t i = 0; i < r->n_replica_devices; i++) {
    const dpc_plan_report_device *v = &r->replica_devices[i];
    uint64_t lim = r->with_host && i == 0 ? c->host_memory : r->memory_limit;
    printf("%-14s %8u %12u %12.3f %10.3f %11.1f %11.1f\n", v->name, v->kernels, v->collectives,
           v->compute_ms, v->comm_ms, mib((double)v->memory_bytes), mib((double)lim));
  }
  if (r->with_host && r->n_replica_devices) { /* what crosses to the CPU and the GPUs */
    double gpus = 0;
    for (uint32_t i = 1; i < r->n_replica_devices; i++) gpus += r->replica_devices[i].comm_bytes;
    printf("the CPU receives %.2f MB a step over %.4g GB/s, the GPUs %.2f MB (from the CPU and "
           "from each other)\n",
           r->replica_devices[0].comm_bytes / 1e6, c->host_link.gbs, gpus / 1e6);
  }
  if (r->replicas > 1 && r->allreduces)
    printf("all-reduce across %u replicas (%u per host over %.0f GB/s, %u host%s%s): %u "
           "collectives, %.2f MB of gradients and %.2f MB sent per device, %.3f ms a step\n",
           r->replicas, r->peers_per_host, c->within_host.gbs, r->hosts_spanned,
           r->hosts_spanned == 1 ? "" : "s",
           r->hosts_spanned > 1 ? " over the between-hosts link" : "", r->allreduces,
           r->allreduce_bytes / 1e6, r->allreduce_sent / 1e6, b->allreduce_ms);
  printf("predicted step %.3f ms (%.0f samples/s): one replica's step %.3f ms + all-reduce %.3f "
         "ms\n",
         b->step_ms, b->samples_per_s, b->replica_ms, b->allreduce_ms);
  if (r->with_host)
    printf("memory: at most %.1f MiB on a device, each within its limit\n",
           mib((double)b->max_memory_bytes));
  else
    printf("memory: at most %.1f MiB on a device, within its %.1f MiB\n",
           mib((double)b->max_memory_bytes), mib((double)r->memory_limit));
}

/* The host's CPU beside simulated GPUs: the file's "host", else this machine's CPU as dpc
 * devices measures it; the file's link to the GPUs, else PCIe 4.0 x16. Into *cl, and the line
 * that says which went in. */
dpc_status cli_host_cpu(dpc_cluster *cl, char *said, size_t cap, dpc_message *m) {
  bool measured = !(cl->host_gflops > 0);
  if (measured) {
    dpc_devices_report *dr = NULL;
    dpc_status st = dpc_devices_describe("cpu", NULL, &dr, m);
    if (st) return st;
    set_text(cl->host_name, sizeof cl->host_name, dr->cpu_model[0] ? dr->cpu_model : "cpu");
    cl->host_gflops = dr->calibrated ? dr->gflops[0] : 50;
    cl->host_mem_gbs = dr->calibrated && dr->copy_gbs[0] > 0 ? dr->copy_gbs[0] : 10;
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    cl->host_memory = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : (uint64_t)1 << 30;
    dpc_devices_report_free(dr);
  }
  bool assumed = !(cl->host_link.gbs > 0);
  if (assumed) cl->host_link = (dpc_cluster_link){25, 10}; /* PCIe 4.0 x16, each way */
  snprintf(said, cap,
           "with the host's CPU: %s (%.0f GFLOP/s, %.0f GB/s, %.1f GiB; %s), %.4g GB/s and %.4g us "
           "to each GPU%s",
           cl->host_name[0] ? cl->host_name : "unnamed", cl->host_gflops, cl->host_mem_gbs,
           (double)cl->host_memory / (1024.0 * 1024 * 1024),
           measured ? "this machine's, measured" : "as described", cl->host_link.gbs,
           cl->host_link.latency_us, assumed ? " (assumed: PCIe 4.0 x16)" : "");
  return DPC_OK;
}

/* The plan of the model of p for cluster `given`, or the one in `file` when it is NULL. */
static int plan_for(const cli_opt *opts, int nopts, const cli_parsed *p, const char *file,
                    const dpc_cluster *given, uint32_t gpus, const cli_plan_sizes *sizes) {
  static const char *const local[] = {"devices", "dot",     "dot-full",  "json",
                                      "profile", "measure", "placement", "html"};
  for (size_t k = gpus || given ? 1 : 0; k < sizeof local / sizeof *local; k++)
    if (cli_get(opts, nopts, p, local[k]))
      return cli_usage_error("plan",
                             "--%s is for this machine's devices; --cluster FILE plans for the "
                             "described cluster instead",
                             local[k]);
  if (cli_get(opts, nopts, p, "schedule"))
    return cli_usage_error("plan", "--schedule: with --cluster, say --pipeline-schedule");
  if (cli_get(opts, nopts, p, "dp"))
    return cli_usage_error("plan", "--dp: with --cluster, the replicas are the devices over the "
                                   "devices of one (--mp or --stages)");
  const char *strategy = cli_get(opts, nopts, p, "strategy");
  bool autos = !strategy || !strcmp(strategy, "auto");
  /* the strategy's settings by flag, as text */
  char text[96];
  snprintf(text, sizeof text, "%s", strategy ? strategy : "auto");
  static const char *const keys[] = {"mp", "stages", "microbatches", "accumulate",
                                     "pipeline-schedule"};
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
    const char *v = cli_get(opts, nopts, p, keys[k]);
    if (!v) continue;
    if (autos) return cli_usage_error("plan", "--%s: --strategy auto chooses it itself", keys[k]);
    size_t n = strlen(text);
    snprintf(text + n, sizeof text - n, "%s%s=%s", strchr(text, ':') ? "," : ":",
             strcmp(keys[k], "pipeline-schedule") ? keys[k] : "schedule", v);
  }
  if (cli_get(opts, nopts, p, "explain") && !autos)
    return cli_usage_error("plan", "--explain shows how --strategy auto chose; give it too");
  dpc_message *m = dpc_message_new();
  dpc_cluster cl;
  dpc_net *net = NULL;
  dpc_cluster_report *r = NULL;
  dpc_status st = DPC_OK;
  if (given)
    cl = *given;
  else
    st = dpc_cluster_load(file, &cl, m);
  if (!st && gpus && strcmp(cl.device_kind, "gpu")) {
    fprintf(stderr,
            "dpc plan: error: %s: --simulate-devices stands a described GPU in for the cuda "
            "devices, and this file describes a %s\n",
            file, cl.device_kind);
    dpc_message_free(m);
    return DPC_EXIT_ERROR;
  }
  if (!st && gpus && !given) { /* the GPUs named, on one host of the described ones */
    cl.hosts = 1, cl.devices_per_host = gpus;
    cl.between_hosts = (dpc_cluster_link){0, 0};
    char name[sizeof cl.name];
    snprintf(name, sizeof name, "%u simulated %s (cuda:*)", gpus, cl.device_name);
    memcpy(cl.name, name, sizeof name);
  }
  char host_said[320] = "";
  bool with_host = gpus && sizes->host_cpu;
  if (!st && with_host) st = cli_host_cpu(&cl, host_said, sizeof host_said, m);
  if (!st && with_host) printf("%s\n", host_said);
  if (!st) st = cli_load_batched("plan", p->pos[0], cli_get(opts, nopts, p, "loss"), &net, m);
  dpc_cluster_opts o = {sizeof o,
                        .batch = sizes->batch,
                        .strategy = text,
                        .memory_limit = sizes->limit,
                        .replicated = cli_get(opts, nopts, p, "replicated") != NULL,
                        .with_host = with_host};
  if (!st) st = dpc_net_plan_cluster(net, &cl, &o, &r, m);
  if (r && autos && r->best < r->n_candidates)
    printf("strategy auto: %s, predicted %.3f ms a step (%.0f samples/s), the fastest of %u "
           "strategies tried\n",
           r->candidates[r->best].strategy, r->candidates[r->best].step_ms,
           r->candidates[r->best].samples_per_s, r->n_candidates);
  if (r && (cli_get(opts, nopts, p, "explain") || (st && autos))) print_table(r);
  if (r && r->best < r->n_candidates && r->n_replica_devices) print_plan(r, dpc_net_name(net));
  if (r) printf("planned for %u devices in %.2f s\n", r->devices, r->seconds);
  int rc = st ? cli_report("plan", m) : DPC_EXIT_OK;
  dpc_cluster_report_free(r);
  dpc_net_free(net);
  dpc_message_free(m);
  return rc;
}

int cli_plan_cluster(const cli_opt *opts, int nopts, const cli_parsed *p, const char *file,
                     uint32_t gpus, const cli_plan_sizes *sizes) {
  return plan_for(opts, nopts, p, file, NULL, gpus, sizes);
}

int cli_measured_gpus(const char *cmd, const uint32_t *gpu, uint32_t n, FILE *say,
                      dpc_cluster *cl) {
  memset(cl, 0, sizeof *cl);
  char note[384];
  int seen = dpc_cuda_gpus(note, sizeof note);
  for (uint32_t k = 0; k < n; k++)
    if ((int)gpu[k] >= seen) {
      fprintf(stderr,
              "dpc %s: error: --devices: cuda:%u: not on this machine (%s); to plan for GPUs "
              "it does not have, describe them with --simulate-devices FILE\n",
              cmd, gpu[k], note);
      return DPC_EXIT_ERROR;
    }
  dpc_message *m = dpc_message_new();
  for (uint32_t k = 0; k < n; k++) {
    dpc_gpu_figures f;
    if (dpc_gpu_measure(gpu[k], &f, m)) {
      int rc = cli_report(cmd, m);
      dpc_message_free(m);
      return rc;
    }
    if (say) {
      fprintf(say,
              "cuda:%u: %s, %.1f GiB, measured: GEMM %.0f GFLOP/s (f32, %u wide), copy %.0f GB/s",
              gpu[k], f.name, (double)f.memory / (1024.0 * 1024 * 1024), f.gemm_gflops, f.gemm_n,
              f.copy_gbs);
      if (f.peer_gbs > 0) fprintf(say, ", %.0f GB/s from cuda:0", f.peer_gbs);
      fprintf(say, "\n");
    }
    if (!(f.gemm_gflops > 0)) {
      fprintf(stderr,
              "dpc %s: error: cuda:%u: its GEMM rate is not measured (%s); describe the GPUs "
              "with --simulate-devices FILE instead\n",
              cmd, gpu[k], f.note);
      dpc_message_free(m);
      return DPC_EXIT_ERROR;
    }
    if (!k || f.gemm_gflops < cl->gflops) cl->gflops = f.gemm_gflops;
    if (!k || 2 * f.copy_gbs < cl->mem_gbs) cl->mem_gbs = 2 * f.copy_gbs; /* read and write */
    if (!k || f.memory < cl->memory) cl->memory = f.memory;
    if (f.peer_gbs > 0 && (!cl->within_host.gbs || f.peer_gbs < cl->within_host.gbs))
      cl->within_host.gbs = f.peer_gbs;
    if (!k) set_text(cl->device_name, sizeof cl->device_name, f.name);
  }
  dpc_message_free(m);
  cl->within_host.latency_us = 10; /* not measured: a peer copy's launch, roughly */
  if (!(cl->within_host.gbs > 0)) cl->within_host.gbs = cl->mem_gbs / 2;
  char name[96];
  snprintf(name, sizeof name, "%u GPU%s of this machine (cuda:*), measured", n, n == 1 ? "" : "s");
  set_text(cl->name, sizeof cl->name, name);
  set_text(cl->device_kind, sizeof cl->device_kind, "gpu");
  cl->hosts = 1, cl->devices_per_host = n;
  return DPC_EXIT_OK;
}

int cli_plan_gpus(const cli_opt *opts, int nopts, const cli_parsed *p, const uint32_t *gpu,
                  uint32_t n, const cli_plan_sizes *sizes) {
  dpc_cluster cl;
  int rc = cli_measured_gpus("plan", gpu, n, stdout, &cl);
  return rc ? rc : plan_for(opts, nopts, p, NULL, &cl, n, sizes);
}

int cli_plan_mpi(const cli_opt *opts, int nopts, const cli_parsed *p, const char *spec,
                 const cli_plan_sizes *sizes) {
  unsigned local = 1, hosts = 0, per = 0;
  char tail;
  if (strcmp(spec, "mpi") && strcmp(spec, "mpi:cpu") &&
      (sscanf(spec, "mpi:cpu:%u%c", &local, &tail) != 1 || local < 1 || local > 64))
    return cli_usage_error("plan",
                           "--devices %s: each rank's devices are 'cpu' or 'cpu:N', as "
                           "in mpi:cpu:2",
                           spec);
  const char *h = cli_get(opts, nopts, p, "hosts");
  if (!h)
    return cli_usage_error("plan",
                           "--devices %s plans for described hosts: say how many with "
                           "--hosts H (H hosts of one rank's devices) or HxN (N devices "
                           "each); to plan for this machine, give cpu devices",
                           spec);
  int got = sscanf(h, "%u%c%u%c", &hosts, &tail, &per, &tail);
  if (got == 1)
    per = local;
  else if (got != 3 || (tail != 'x' && tail != 'X'))
    got = 0;
  if (!got || hosts < 1 || hosts > 4096 || per < 1 || per > 64)
    return cli_usage_error("plan",
                           "--hosts expects H or HxN (hosts, and devices a host up to 64), "
                           "as in 4x2; got '%s'",
                           h);
  double gbs = 1.25, us = 50; /* 10 Gb/s Ethernet */
  const char *link = cli_get(opts, nopts, p, "link");
  if (link && (sscanf(link, "%lf,%lf%c", &gbs, &us, &tail) != 2 || !(gbs > 0) || !(us >= 0)))
    return cli_usage_error("plan",
                           "--link expects GBS,US (GB/s and microseconds a message "
                           "between hosts), as in 12.5,5; got '%s'",
                           link);
  char devs[32];
  snprintf(devs, sizeof devs, "cpu:%u", per);
  dpc_message *m = dpc_message_new();
  dpc_devices_report *dr = NULL;
  dpc_status st = dpc_devices_describe(devs, NULL, &dr, m);
  if (st) {
    int rc = cli_report("plan", m);
    dpc_devices_report_free(dr);
    dpc_message_free(m);
    return rc;
  }
  dpc_cluster cl = {0};
  uint32_t n = dr->n;
  char text[256];
  snprintf(text, sizeof text,
           "%u hosts of %u devices like this machine's %s, %.4g GB/s and %.4g us between%s", hosts,
           per, devs, gbs, us, link ? "" : " (assumed: --link)");
  set_text(cl.name, sizeof cl.name, text);
  cl.hosts = hosts, cl.devices_per_host = per;
  set_text(cl.device_kind, sizeof cl.device_kind, "cpu");
  set_text(cl.device_name, sizeof cl.device_name, dr->cpu_model[0] ? dr->cpu_model : "cpu");
  cl.gflops = dr->gflops[0];
  cl.mem_gbs = dr->copy_gbs[0] > 0 ? dr->copy_gbs[0] : 10;
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  cl.memory = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / per : (uint64_t)1 << 30;
  /* between this machine's devices: a copy through shared memory */
  double within = n > 1 && dr->copy_gbs[1] > 0 ? dr->copy_gbs[1] : cl.mem_gbs;
  cl.within_host = (dpc_cluster_link){within, 1};
  cl.between_hosts = hosts > 1 ? (dpc_cluster_link){gbs, us} : (dpc_cluster_link){0, 0};
  dpc_devices_report_free(dr);
  dpc_message_free(m);
  return plan_for(opts, nopts, p, NULL, &cl, 0, sizes);
}
