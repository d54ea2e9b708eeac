/* pdist C API: create an engine from a model, train it, evaluate it, checkpoint it.
 *
 * The only header a C (or Python, through ctypes) user includes. Every call returns a
 * pdist_status; on failure pdist_last_error() gives the message (per thread, valid until the
 * next call on that thread).
 *
 *   pdist_engine_config cfg;
 *   pdist_engine_config_init(&cfg);
 *   cfg.learning_rate = 1e-3;
 *   pdist_engine* engine = NULL;
 *   if (pdist_engine_create_from_file("model.pb", &cfg, &engine) != PDIST_OK)
 *     fprintf(stderr, "%s\n", pdist_last_error());
 *   pdist_dataset ds = {"data/tiny.txt", PDIST_DATA_TEXT_BYTES, 0};
 *   pdist_engine_fit(engine, &ds, 100, on_step, NULL);
 *   pdist_engine_destroy(engine);
 */
#ifndef PDIST_ENGINE_C_API_H_
#define PDIST_ENGINE_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  PDIST_OK = 0,
  PDIST_INVALID_ARGUMENT = 1,  /* bad model, bad config, bad data */
  PDIST_NOT_FOUND = 2,         /* a file that does not exist */
  PDIST_FAILED_PRECONDITION = 3,
  PDIST_UNIMPLEMENTED = 4,     /* a feature this build does not have */
  PDIST_INTERNAL = 5,
} pdist_status;

typedef enum {
  PDIST_DATA_TEXT_BYTES = 0, /* any file, read at byte level: tokens 0..255 */
  PDIST_DATA_UINT16 = 1,     /* little-endian uint16 tokens */
  PDIST_DATA_UINT32 = 2,     /* little-endian uint32 tokens */
} pdist_data_format;

typedef struct {
  const char* path;
  pdist_data_format format;
  uint64_t seed; /* order of the training windows */
} pdist_dataset;

typedef struct {
  const char* optimizer;  /* "adamw" (default), "momentum" or "sgd" */
  double learning_rate;   /* 1e-3 */
  int64_t warmup_steps;   /* 0 */
  int64_t decay_steps;    /* 0: constant after warm-up; else cosine decay to 10% */
  double weight_decay;    /* 0.01 */
  double beta1, beta2, epsilon; /* 0.9, 0.999, 1e-8 */
  uint64_t seed;          /* parameter initialisation, 1 */
  const char* strategy_json; /* NULL or a Strategy JSON document (docs/strategy.md) */
  /* "inproc": every rank of the strategy a thread of this process; "gloo": this process is one
   * rank of a job that pdist-run (or srun, mpirun) started; "nccl": the same, one rank per GPU
   * (with device "cuda"). NULL: as the launcher's environment
   * says (PDIST_BACKEND, which pdist-run sets), else "inproc". Under pdist-run the process also
   * dies with the launcher. (0.x: this struct may grow; always fill it with
   * pdist_engine_config_init.) */
  const char* backend;
  /* "cpu" (default, also for NULL), "cuda" (the rank's GPU: LOCAL_RANK under a launcher),
   * "cuda:N", or a host device "cpu:N" (the host, state kept apart as on a GPU). A device this
   * build or machine lacks fails pdist_engine_create, saying what is missing (docs/gpu.md). */
  const char* device;
  /* The GPU's kernel fusions (docs/gpu.md): "auto" (default, also for NULL: all on cuda, none on
   * cpu), "all", "none", or a comma list of "optimizer" and "gemm-epilogue". */
  const char* fusions;
  /* NULL, or a directory: every training step writes its timeline there, over the previous
   * step's — a Chrome trace per rank (rank<k>.trace.json), and pipeline.svg where the ranks are
   * threads of this process (docs/pipeline.md). Made at create; a file there is an error. */
  const char* timeline_dir;
  /* How long a collective waits for the other ranks before the call fails, in seconds (> 0; 300;
   * INFINITY: as long as the engine allows). A rank that froze fails the others after this. */
  double collective_timeout_s;
  /* How long ranks that are processes wait for the slowest one's checkpoint files in
   * pdist_engine_save, in place of the collective timeout (> 0; 3600). */
  double checkpoint_timeout_s;
} pdist_engine_config;

typedef struct pdist_engine pdist_engine;

/* Called after each training step (each evaluation batch); return non-zero to stop early. */
typedef int (*pdist_step_callback)(int64_t step, double loss, double seconds, void* user_data);

void pdist_engine_config_init(pdist_engine_config* config);

/* model.pb or the textual IR, holding a forward program with a loss. */
pdist_status pdist_engine_create_from_file(const char* model_path, const pdist_engine_config* config,
                                           pdist_engine** engine);
pdist_status pdist_engine_create_from_bytes(const void* model_bytes, size_t size, const pdist_engine_config* config,
                                            pdist_engine** engine);
void pdist_engine_destroy(pdist_engine* engine);
/* Threads: an engine may be shared; its calls run one at a time (a second waits for the first),
 * and a step callback may call back into its own engine. Destroy it when no call is running. */

pdist_status pdist_engine_fit(pdist_engine* engine, const pdist_dataset* data, int64_t steps,
                              pdist_step_callback callback, void* user_data);
/* Mean loss over `steps` batches, parameters unchanged. */
pdist_status pdist_engine_evaluate(pdist_engine* engine, const pdist_dataset* data, int64_t steps, double* mean_loss);
/* The same, calling `callback` after each batch with the batch's number (1, 2, ...), its loss and
 * seconds; non-zero stops, and `mean_loss` is then the mean over the batches done. */
pdist_status pdist_engine_evaluate_with_callback(pdist_engine* engine, const pdist_dataset* data, int64_t steps,
                                                 pdist_step_callback callback, void* user_data, double* mean_loss);
/* Ranks that are processes (pdist-run) each run their own callbacks: fit and evaluate stop after
 * a step or batch when a callback on any rank asks, so that every rank stops after the same one
 * (they agree after every step or batch, whether a rank passed a callback or NULL).
 * For loops of one's own (train_step per batch), `*any` is non-zero on every rank when `value`
 * is non-zero on any: one 8-byte all-reduce over process ranks, `value` itself when the ranks
 * are threads of this process. Collective: every rank calls it, the same number of times. */
pdist_status pdist_engine_any_rank(pdist_engine* engine, int value, int* any);
pdist_status pdist_engine_save(const pdist_engine* engine, const char* path);
pdist_status pdist_engine_load(pdist_engine* engine, const char* path);
/* Steps trained so far (restored by load). */
int64_t pdist_engine_step(const pdist_engine* engine);
/* How many of the strategy's ranks this process runs: all of them with "inproc", one under a
 * launcher ("gloo"); 0 for NULL. */
int64_t pdist_engine_local_rank_count(const pdist_engine* engine);

/* One batch from host memory, for models fed by the caller (numpy arrays from Python): one
 * pdist_feed per data input of the model, the global batch (the engine splits it over ranks and
 * micro-batches). The bytes are copied; they may be freed when the call returns. */
typedef struct {
  const char* name;      /* a data input of the model: "tokens", "labels", "x" */
  const char* dtype;     /* as the model declares it: "f32", "f64", "i32", "i64", "bf16", ... */
  int ndim;
  const int64_t* shape;  /* ndim dims */
  const void* data;      /* row-major */
} pdist_feed;

/* One optimizer step on the batch; `loss` (may be NULL) receives its loss. A feed that names no
 * data input, a data input without a feed, or a shape or dtype other than the model's is
 * INVALID_ARGUMENT naming it. */
pdist_status pdist_engine_train_step(pdist_engine* engine, const pdist_feed* feeds, int num_feeds, double* loss);
/* The loss on the batch, parameters unchanged. */
pdist_status pdist_engine_eval_step(const pdist_engine* engine, const pdist_feed* feeds, int num_feeds, double* loss);

/* One of the model's outputs, whole (every rank's piece assembled). */
typedef struct {
  const char* name;      /* as the model marks it: "logits", an ONNX graph output's name */
  const char* dtype;     /* "f32", "f64", "i64", ...; bf16 and f16 outputs come as "f32" */
  int ndim;
  const int64_t* shape;  /* ndim dims */
  const void* data;      /* row-major */
} pdist_output;

/* The model's outputs on the batch (dropout off, parameters unchanged): `*outputs` points at
 * `*num_outputs` of them, owned by the engine and valid until its next predict (from any
 * thread) or destroy. Only the data inputs the outputs need are required (not the labels). A
 * model without outputs is FAILED_PRECONDITION. Under a launcher every rank calls it and gets
 * every output. */
pdist_status pdist_engine_predict(pdist_engine* engine, const pdist_feed* feeds, int num_feeds,
                                  const pdist_output** outputs, int* num_outputs);

/* ---- Programs: load, annotate, save, print ----------------------------------------------
 *
 * The annotation half of semi-automatic parallelism (docs/c-api.md): mark a few tensors with
 * placements on a process mesh, as Paddle's shard_tensor does; completion infers the rest.
 *
 *   pdist_program* prog = NULL;
 *   pdist_program_load("model.pb", &prog);
 *   int64_t mesh[2] = {2, 2};
 *   const char* names[2] = {"dp", "mp"};
 *   pdist_program_shard_tensor(prog, "gpt.h.0.attn.qkv.weight", mesh, 2, names, "Replicate(),Shard(1)");
 *   puts(pdist_program_print(prog));     ... f32[64,192] dist! {mesh: [2,2] [dp,mp], dims_mapping: [-1,1]}
 *   pdist_program_save(prog, "model.annotated.pb");
 *   pdist_program_destroy(prog);
 */
typedef struct pdist_program pdist_program;

/* model.pb or the textual IR (told apart by content); the program is verified. */
pdist_status pdist_program_load(const char* path, pdist_program** program);
/* A built-in model's forward program: `model` "gpt", "llama" or "mlp"; `options` NULL or
 * comma-separated key=value pairs named as pdist-export's flags ("layers=4,hidden=128,heads=4,
 * vocab=256,seq=64,batch=16,tied=true,dropout=0.1,dtype=bf16"); unknown keys are errors. */
pdist_status pdist_program_build(const char* model, const char* options, pdist_program** program);
/* An ONNX model (opset >= 13) as a program, as pdist-import makes it (docs/onnx.md). `options`
 * (JSON, or NULL): {"loss": "cross_entropy" | "mse" (none: the forward program), "logits": NAME,
 * "labels": NAME, "frozen": ["blocks.*.mask"], "input_shapes": {"tokens": [8, 128]}}. */
pdist_status pdist_program_import_onnx(const char* path, const char* options, pdist_program** program);
/* Sets the DistAttr of one tensor and marks it annotated. `tensor_name` is a block argument's
 * name ("wte") or a value as printed ("%12"). The mesh has `mesh_ndim` dims of `mesh_shape`,
 * process ids 0..n-1, and names `dim_names` (NULL: d0, d1, ...). `placements` has one entry per
 * mesh dim, comma-separated: "Replicate(),Shard(1)", "S(0),P(sum)". On error the program is
 * unchanged. */
pdist_status pdist_program_shard_tensor(pdist_program* program, const char* tensor_name, const int64_t* mesh_shape,
                                        int mesh_ndim, const char* const* dim_names, const char* placements);
/* Writes model.pb (the DistAttrs and annotation marks included). */
pdist_status pdist_program_save(const pdist_program* program, const char* path);
/* The textual IR; the string is owned by the handle and valid until the next print or destroy.
 * NULL (with pdist_last_error set) when `program` is NULL. */
const char* pdist_program_print(pdist_program* program);
void pdist_program_destroy(pdist_program* program);

/* ---- Planning ------------------------------------------------------------------------------
 *
 * The strategy pdist-plan would pick for `program` (a forward program with a loss; its batch is
 * the global batch), on a cluster: one JSON object, pdist-plan --json's document ("strategy",
 * "step_time_s", "tokens_per_s", "tflops_per_device", "mfu", "peak_memory_bytes", "time_s",
 * "memory_bytes", "top", ...) plus "model" (the segments the planner found), "report" (the text
 * pdist-plan prints) and "explanation" (--explain's text). `options` is NULL or a JSON object:
 *
 *   {"cluster": "dgx-a100",      a preset (dgx-a100, dgx-a100-40gb, dgx-h100, hgx-h200) or a cluster JSON file
 *    "gpus": 16,                 devices (presets need it; a file has its own)
 *    "strategy": {...},          Strategy keys kept fixed (all set: the strategy priced as it is)
 *    "memory_margin": 0.1, "max_micro_batch": 64, "mp_across_nodes": false, "top": 5}
 *
 * "max_micro_batch" (sequences) defaults to 64, or to as many as make 131,072 tokens where that is more.
 *
 * Placements set by pdist_program_shard_tensor are not priced: the planner places tensors by the
 * degrees it searches, and "model" says how many annotations it set aside.
 * Unknown keys and wrong types are errors naming them; no plan that fits is FAILED_PRECONDITION
 * naming the leanest and what it needs. The string is owned by the handle and valid until the
 * next plan or destroy.
 */
pdist_status pdist_program_plan(pdist_program* program, const char* options, const char** plan_json);

const char* pdist_last_error(void);
const char* pdist_version(void);

#ifdef __cplusplus
}
#endif

#endif /* PDIST_ENGINE_C_API_H_ */
