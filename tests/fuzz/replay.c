/*
 * replay.c — runs a fuzz target over files and folders without libFuzzer, so every build (gcc
 * included) checks the committed corpus, and a crash file can be replayed under a debugger.
 *   fuzz_replay_graph tests/fuzz/corpus/graph crash-123
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
  size_t got = buf ? fread(buf, 1, (size_t)(n > 0 ? n : 0), f) : 0;
  fclose(f);
  if (!buf) return 1;
  LLVMFuzzerTestOneInput(buf, got);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st)) {
      fprintf(stderr, "cannot find %s\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      bad += run_file(argv[i]);
      files++;
      continue;
    }
    DIR *dp = opendir(argv[i]);
    struct dirent *e;
    while (dp && (e = readdir(dp))) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      bad += run_file(path);
      files++;
    }
    if (dp) closedir(dp);
  }
  printf("replayed %d inputs\n", files);
  return bad ? 1 : (files ? 0 : 1);
}
