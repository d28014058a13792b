/*
 * train_app — an application that trains a model through libdpc, dpc's compiler library
 * (dpc/train.h): data parallel over two CPU devices with a checkpoint, then a second run that
 * resumes from the checkpoint, printing every step's loss.
 *
 *   train_app MODEL.graph STEPS MORE CHECKPOINT.safetensors
 *
 * The first run trains STEPS steps of Fashion-MNIST (batch 64, seed 0, the model's optimizer)
 * over cpu:2 and writes the checkpoint; the second resumes from it and trains MORE steps. Each
 * step prints one line, `step N: loss L`, with L as "%.9g" (the digits `dpc train --log`
 * writes: a float's exact bits), so the losses are those of
 *
 *   dpc train MODEL.graph --devices cpu:2 --steps STEPS --checkpoint CK --log first.jsonl
 *   dpc train MODEL.graph --devices cpu:2 --steps STEPS+MORE --resume CK --log second.jsonl
 *
 * bit for bit (tests/embed/train_app_test.sh checks it). Build it against an installed dpc
 * (prefix P), with CMake:
 *
 *   cmake -S examples/train_app -B build-app -DCMAKE_PREFIX_PATH=P && cmake --build build-app
 *
 * or with pkg-config:
 *
 *   PKG_CONFIG_PATH=P/lib/pkgconfig cc -std=c11 main.c $(pkg-config --cflags --libs dpc-compiler)
 *
 * Exit status: 0 on success, 1 on any error (the library's message on stderr).
 */
#include <dpc/train.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Every step's loss, on stdout. */
static void on_step(void *user, const dpc_train_step *s) {
  (void)user;
  printf("step %llu: loss %.9g\n", (unsigned long long)s->step, s->loss);
  fflush(stdout);
}

/* What the trainer does and what a resumed run keeps: for a person, on stderr. */
static void on_text(void *user, const char *what) {
  fprintf(stderr, "train_app: %s: %s\n", (const char *)user, what);
}

/* STEPS steps in all, from the checkpoint `resume` when it is set, into `checkpoint` when that
 * is set. */
static int train(const dpc_net *net, unsigned long long steps, const char *checkpoint,
                 const char *resume, dpc_message *msg) {
  dpc_trainer_opts o;
  dpc_trainer_defaults(&o); /* fashion-mnist, batch 64, seed 0, the llvm backend */
  o.devices = "cpu:2";      /* data parallel: each batch split over two devices */
  o.steps = steps;
  o.checkpoint_path = checkpoint;
  o.resume_path = resume;
  o.on_step = on_step;
  o.on_start = on_text;
  o.on_note = on_text;
  o.user = resume ? "resumed run" : "first run";
  if (dpc_trainer_run(net, &o, msg)) {
    fprintf(stderr, "train_app: %s\n", dpc_message_text(msg));
    return 1;
  }
  return 0;
}

static int count(const char *text, unsigned long long *out) {
  char *end;
  errno = 0;
  *out = strtoull(text, &end, 10);
  return !errno && end != text && !*end && *out > 0 && text[0] != '-';
}

int main(int argc, char **argv) {
  unsigned long long steps, more;
  if (argc != 5 || !count(argv[2], &steps) || !count(argv[3], &more)) {
    fprintf(stderr, "usage: train_app MODEL.graph STEPS MORE CHECKPOINT.safetensors\n");
    return 1;
  }
  dpc_message *msg = dpc_message_new();
  dpc_net *net = NULL;
  int rc = 1;
  if (!msg) return 1;
  if (dpc_net_load(argv[1], NULL, &net, msg)) {
    fprintf(stderr, "train_app: %s\n", dpc_message_text(msg));
  } else if (!train(net, steps, argv[4], NULL, msg) &&
             !train(net, steps + more, NULL, argv[4], msg)) {
    rc = 0;
  }
  dpc_net_free(net);
  dpc_message_free(msg);
  return rc;
}
