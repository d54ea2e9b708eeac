/* Trains a model through the pdist C API and prints the loss of every step.
 *
 *   train_gpt MODEL DATA [STEPS]
 *
 * MODEL is a model.pb (pdist-export gpt ... -o model.pb); DATA is any text file, read at byte
 * level. Exit status 0 on success, 1 with the library's message on failure. */
#include <stdio.h>
#include <stdlib.h>

#include <pdist/c_api.h>

static int print_step(int64_t step, double loss, double seconds, void* user_data) {
  (void)user_data;
  printf("step %lld loss %.6f (%.3f s)\n", (long long)step, loss, seconds);
  return 0; /* keep going */
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL DATA [STEPS]\n", argv[0]);
    return 2;
  }
  const int64_t steps = argc > 3 ? atoll(argv[3]) : 20;

  pdist_engine_config config;
  pdist_engine_config_init(&config);
  config.learning_rate = 3e-3;

  pdist_engine* engine = NULL;
  if (pdist_engine_create_from_file(argv[1], &config, &engine) != PDIST_OK) {
    fprintf(stderr, "error: %s\n", pdist_last_error());
    return 1;
  }
  pdist_dataset data = {argv[2], PDIST_DATA_TEXT_BYTES, 1};
  if (pdist_engine_fit(engine, &data, steps, print_step, NULL) != PDIST_OK) {
    fprintf(stderr, "error: %s\n", pdist_last_error());
    pdist_engine_destroy(engine);
    return 1;
  }
  double eval_loss = 0;
  if (pdist_engine_evaluate(engine, &data, 2, &eval_loss) != PDIST_OK) {
    fprintf(stderr, "error: %s\n", pdist_last_error());
    pdist_engine_destroy(engine);
    return 1;
  }
  printf("eval loss %.6f after %lld steps\n", eval_loss, (long long)pdist_engine_step(engine));
  pdist_engine_destroy(engine);
  return 0;
}
