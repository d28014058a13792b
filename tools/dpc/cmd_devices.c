/*
 * cmd_devices.c — `dpc devices`: the machine as dpc sees it, the devices a --devices spec makes
 * of it, and how fast each computes and copies (dpc_devices_describe, <dpc/plan.h>).
 */
#include "tools/dpc/cli.h"

#include <stdio.h>
#include <string.h>

static const cli_opt devices_opts[] = {
    {"devices", true, false, "cpu (default), cpu:N or numa"},
    {"no-calibrate", false, false, "list the devices without measuring them"},
    {"recalibrate", false, false, "measure again instead of reading the cached figures"},
    {"json", false, false, "print one JSON object instead of the table"},
};
#define NDEV (int)(sizeof devices_opts / sizeof *devices_opts)

static void print_size(const char *what, uint64_t bytes) {
  if (!bytes) return;
  if (bytes >= (1u << 20))
    printf(", %s %llu MiB", what, (unsigned long long)(bytes >> 20));
  else
    printf(", %s %llu KiB", what, (unsigned long long)(bytes >> 10));
}

static void print_json(const dpc_devices_report *r) {
  printf("{\"machine\": \"%s\", \"cpu\": \"%s\", \"devices\": [", r->machine, r->cpu_model);
  for (uint32_t i = 0; i < r->n; i++) {
    const dpc_device_info *s = &r->devices[i];
    printf("%s{\"name\": \"%s\", \"numa\": %u, \"pus\": [", i ? ", " : "", s->name, s->numa);
    for (uint32_t k = 0; k < s->n_cores; k++) printf("%s%u", k ? ", " : "", s->pus[k]);
    printf("]");
    if (r->calibrated) {
      printf(", \"gemm_gflops\": %.1f, \"copy_gbs\": [", r->gflops[i]);
      for (uint32_t j = 0; j < r->n; j++)
        printf("%s%.2f", j ? ", " : "", r->copy_gbs[(size_t)i * r->n + j]);
      printf("]");
    }
    printf("}");
  }
  printf("]");
  if (r->calibrated) printf(", \"calibrated\": \"%s\"", r->when);
  printf("}\n");
}

static void print_table(const dpc_devices_report *r) {
  bool c = r->calibrated;
  printf("machine: %s", r->machine);
  print_size("L1d", r->l1d);
  print_size("L2", r->l2);
  print_size("L3", r->l3);
  printf("%s%s\n", r->cpu_model[0] ? "; " : "", r->cpu_model);
  printf("%-8s %5s  %-12s %4s", "device", "cores", "PUs", "NUMA");
  if (c) {
    printf("  %11s  copy GB/s to:", "GEMM GF/s");
    for (uint32_t j = 0; j < r->n && j < 8; j++) printf(" %7s", r->devices[j].name);
  }
  printf("\n");
  for (uint32_t i = 0; i < r->n; i++) {
    const dpc_device_info *s = &r->devices[i];
    char pus[64] = "";
    size_t k = 0;
    for (uint32_t p = 0; p < s->n_cores && k < sizeof pus - 8; p++)
      k += (size_t)snprintf(pus + k, sizeof pus - k, "%s%u", p ? "," : "", s->pus[p]);
    if (k >= sizeof pus - 8) snprintf(pus + k, sizeof pus - k, ",...");
    printf("%-8s %5u  %-12s %4u", s->name, s->n_cores, pus, s->numa);
    if (c) {
      printf("  %11.1f  %13s", r->gflops[i], "");
      for (uint32_t j = 0; j < r->n && j < 8; j++) {
        double v = r->copy_gbs[(size_t)i * r->n + j];
        if (v > 0)
          printf(" %7.1f", v);
        else
          printf(" %7s", "-");
      }
    }
    printf("%s\n", s->shared ? "  (shares its core)" : "");
  }
  if (c)
    printf("calibrated %s%s%s\n", r->when,
           r->from_cache ? ", read from " : (r->cache_path[0] ? ", saved to " : ""), r->cache_path);
}

int dpc_cmd_devices(int argc, char **argv) {
  cli_parsed p;
  if (!cli_parse("devices", devices_opts, NDEV, argc, argv, 2, &p)) return DPC_EXIT_USAGE;
  if (p.help) {
    printf("Usage: dpc devices [--devices SPEC] [--no-calibrate] [--recalibrate] [--json]\n\n"
           "Show the machine as hwloc sees it and the devices a --devices spec makes of it:\n"
           "cpu is one device on every core, cpu:N is N devices sharing the cores out (more\n"
           "devices than cores share cores, for testing), numa is one device per NUMA node.\n"
           "Each device is measured: GFLOP/s of dpc's GEMM on its cores, and GB/s of a copy\n"
           "from each device's memory into each other's. The figures are cached per machine\n"
           "in dpc's cache folder ($DPC_CACHE_DIR, else ~/.cache/dpc); the cost model uses\n"
           "them to place work. The last line says whether a CUDA driver was found and how\n"
           "many GPUs it sees (GPUs are not yet devices dpc runs on). See docs/devices.md.\n");
    cli_print_options(devices_opts, NDEV);
    return DPC_EXIT_OK;
  }
  if (p.npos != 0) return cli_usage_error("devices", "takes no file (see dpc devices --help)");
  const char *spec = cli_get(devices_opts, NDEV, &p, "devices");
  if (!spec) spec = "cpu";
  /* the command line asked for devices that cannot be: the flag named */
  uint32_t n = 0;
  int rc = cli_devices("devices", spec, &n);
  if (rc) return rc;
  dpc_devices_opts o = {sizeof o};
  o.no_calibrate = cli_get(devices_opts, NDEV, &p, "no-calibrate") != NULL;
  o.refresh = cli_get(devices_opts, NDEV, &p, "recalibrate") != NULL;
  dpc_message *m = dpc_message_new();
  dpc_devices_report *r = NULL;
  if (dpc_devices_describe(spec, &o, &r, m))
    rc = cli_report("devices", m);
  else if (cli_get(devices_opts, NDEV, &p, "json"))
    print_json(r);
  else {
    print_table(r);
    char note[384];
    int gpus = dpc_cuda_gpus(note, sizeof note);
    printf("cuda: %s\n", note);
    for (int k = 0; k < gpus && !o.no_calibrate; k++) { /* each GPU measured, as dpc plan does */
      dpc_gpu_figures f;
      if (dpc_gpu_measure((uint32_t)k, &f, m)) {
        printf("cuda:%d: not measured: %s\n", k, dpc_message_brief(m));
        dpc_message_clear(m);
        continue;
      }
      printf("cuda:%d: %s, %.1f GiB: ", k, f.name, (double)f.memory / (1024.0 * 1024 * 1024));
      if (f.gemm_gflops > 0)
        printf("GEMM %.0f GFLOP/s (f32 on cuBLAS, %u wide)", f.gemm_gflops, f.gemm_n);
      else
        printf("GEMM not measured (%s)", f.note);
      printf(", copy %.0f GB/s", f.copy_gbs);
      if (f.peer_gbs > 0) printf(", %.0f GB/s from cuda:0", f.peer_gbs);
      printf("\n");
    }
  }
  dpc_devices_report_free(r);
  dpc_message_free(m);
  return rc;
}
