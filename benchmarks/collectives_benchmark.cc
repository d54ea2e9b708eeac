// Bus bandwidth of all_reduce, all_gather and reduce_scatter (nccl-tests' definition) on the
// inproc and gloo communicators, with memcpy bandwidth measured in the same run.
//
//   build/collectives_benchmark --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//
// One descriptor per collective and one shared driver, as in nccl-tests: `bytes` is the size
// nccl-tests reports (all_reduce: the buffer; all_gather: the gathered output; reduce_scatter:
// the full input), algbw = bytes / time and busbw = algbw · factor(n), with factor
// 2(n−1)/n for all_reduce and (n−1)/n for all_gather and reduce_scatter. Ranks are threads of
// this process for both backends (gloo over TCP on loopback). Every timed run is followed by a
// check of its result.
#include <benchmark/benchmark.h>

#include <barrier>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "executor/comm/inproc/inproc_communicator.h"
#ifdef PDIST_HAVE_GLOO
#include "executor/comm/gloo/gloo_communicator.h"
#endif

namespace {

using pdist::exec::Tensor;
using pdist::ir::DataType;
using namespace pdist::exec::comm;

constexpr int64_t kMiB = 1 << 20;

// What nccl-tests' per-collective descriptor holds: buffer sizes from `bytes`, the bus factor,
// the call, and the expected value of every output element when rank r's input is all r+1.
struct Collective {
  const char* name;
  int64_t in_div, in_mul;  // in elements = count · in_mul / in_div (count = bytes / 4)
  int64_t out_div, out_mul;
  double (*bus_factor)(int n);
  absl::Status (*run)(Communicator&, Tensor&, Tensor&);
  double (*expected)(int n, int64_t out_index, int64_t out_count);
};

double Sum1ToN(int n) { return n * (n + 1) / 2.0; }

const Collective kAllReduce{
    "all_reduce", 1, 1, 1, 1, [](int n) { return 2.0 * (n - 1) / n; },
    [](Communicator& c, Tensor& in, Tensor& out) { return c.AllReduce(in, out, ReduceOp::kSum); },
    [](int n, int64_t, int64_t) { return Sum1ToN(n); }};
const Collective kAllGather{
    "all_gather", 0, 1, 1, 1, [](int n) { return double(n - 1) / n; },  // in_div 0: set to n below
    [](Communicator& c, Tensor& in, Tensor& out) { return c.AllGather(in, out); },
    [](int n, int64_t i, int64_t count) { return double(i * n / count + 1); }};
const Collective kReduceScatter{
    "reduce_scatter", 1, 1, 0, 1, [](int n) { return double(n - 1) / n; },  // out_div 0: n
    [](Communicator& c, Tensor& in, Tensor& out) { return c.ReduceScatter(in, out, ReduceOp::kSum); },
    [](int n, int64_t, int64_t) { return Sum1ToN(n); }};

// n ranks on persistent threads (so thread start-up stays out of the timings).
class Job {
 public:
  using Factory = std::function<absl::StatusOr<std::shared_ptr<Communicator>>(int rank)>;

  Job(int n, Factory factory) : n_(n), start_(n + 1), done_(n + 1), comms_(n), status_(n) {
    task_ = [&](int r) -> absl::Status {
      auto comm = factory(r);
      if (!comm.ok()) return comm.status();
      comms_[r] = *comm;
      return absl::OkStatus();
    };
    for (int r = 0; r < n; ++r) {
      threads_.emplace_back([this, r] {
        for (;;) {
          start_.arrive_and_wait();
          if (stop_) return;
          status_[r] = task_(r);
          done_.arrive_and_wait();
        }
      });
    }
    init_ = RunAll(task_);
  }
  ~Job() {
    stop_ = true;
    start_.arrive_and_wait();
    for (auto& t : threads_) t.join();
  }

  // Runs fn on every rank; returns the first error.
  absl::Status RunAll(std::function<absl::Status(int)> fn) {
    task_ = std::move(fn);
    start_.arrive_and_wait();
    done_.arrive_and_wait();
    for (const auto& s : status_) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // Whether every rank got its communicator.
  const absl::Status& init() const { return init_; }
  Communicator& comm(int r) { return *comms_[r]; }
  int size() const { return n_; }

 private:
  int n_;
  std::barrier<> start_, done_;
  std::vector<std::shared_ptr<Communicator>> comms_;
  std::vector<absl::Status> status_;
  std::function<absl::Status(int)> task_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
  absl::Status init_;
};

std::unique_ptr<Job> MakeJob(const std::string& backend, int n, std::string* dir) {
  if (backend == "inproc") {
    auto world = std::make_shared<InprocWorld>(n);
    return std::make_unique<Job>(n, [world](int r) { return CreateInprocCommunicator(world, r); });
  }
#ifdef PDIST_HAVE_GLOO
  char tmpl[] = "/tmp/pdist-collectives-bench-XXXXXX";
  *dir = mkdtemp(tmpl);
  GlooRendezvous rendezvous;
  rendezvous.file_store_dir = *dir;
  return std::make_unique<Job>(n, [rendezvous, n](int r) { return CreateGlooCommunicator(rendezvous, r, n); });
#else
  return nullptr;
#endif
}

// The shared driver: args = (bytes, ranks); backend and collective are bound at registration.
void BM_Collective(benchmark::State& state, std::string backend, const Collective* coll) {
  const int64_t bytes = state.range(0);
  const int n = static_cast<int>(state.range(1));
  std::string dir;
  struct RemoveDir {
    std::string* dir;
    ~RemoveDir() { if (!dir->empty()) std::filesystem::remove_all(*dir); }
  } remove_dir{&dir};  // on every return path, after `job` (declared later) is gone
  auto job = MakeJob(backend, n, &dir);
  if (job == nullptr) {
    state.SkipWithError("gloo backend not built");
    return;
  }
  const int64_t count = bytes / 4;  // float32 elements of the nccl-tests "size"
  auto elems = [&](int64_t div, int64_t mul) { return count * mul / (div == 0 ? n : div); };
  std::vector<Tensor> in(n), out(n);
  absl::Status setup = job->RunAll([&](int r) {  // each rank first-touches its own buffers
    in[r] = Tensor::Empty({{elems(coll->in_div, coll->in_mul)}, DataType::kFloat32});
    out[r] = Tensor::Zeros({{elems(coll->out_div, coll->out_mul)}, DataType::kFloat32});
    std::fill_n(in[r].data<float>(), in[r].num_elements(), float(r + 1));
    return absl::OkStatus();
  });
  auto run = [&](int r) { return coll->run(job->comm(r), in[r], out[r]); };
  // One untimed run first: connections, page faults.
  absl::Status status = !job->init().ok() ? job->init() : !setup.ok() ? setup : job->RunAll(run);
  double seconds = 0;
  for (auto _ : state) {
    if (!status.ok()) break;
    const auto t0 = std::chrono::steady_clock::now();
    status = job->RunAll(run);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(dt);
    seconds += dt;
  }
  if (!status.ok()) {
    state.SkipWithError(std::string(status.message()).c_str());
    return;
  }
  // Check the last result on every rank (first, middle and last element).
  const int64_t oc = out[0].num_elements();
  for (int r = 0; r < n; ++r) {
    for (int64_t i : {int64_t{0}, oc / 2, oc - 1}) {
      if (out[r].data<float>()[i] != coll->expected(n, i, oc)) {
        state.SkipWithError(absl::StrCat(coll->name, ": wrong result on rank ", r, " at ", i).c_str());
        return;
      }
    }
  }
  const double algbw = bytes / (seconds / state.iterations()) / 1e9;
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = algbw * coll->bus_factor(n);
  state.SetLabel(absl::StrCat(backend, " n=", n));
}

// memcpy of `bytes` (read + write), one thread: the yardstick for the inproc numbers.
void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(dt);
    seconds += dt;
  }
  state.counters["algbw_GBps"] = bytes / (seconds / state.iterations()) / 1e9;
}
BENCHMARK(BM_Memcpy)->RangeMultiplier(4)->Range(kMiB, 256 * kMiB)->UseManualTime()->MinTime(0.05);

void RegisterAll() {
  std::vector<std::string> backends = {"inproc"};
#ifdef PDIST_HAVE_GLOO
  backends.push_back("gloo");
#endif
  for (const std::string& backend : backends) {
    for (const Collective* coll : {&kAllReduce, &kAllGather, &kReduceScatter}) {
      benchmark::RegisterBenchmark(absl::StrCat("BM_", coll->name, "/", backend).c_str(), BM_Collective, backend, coll)
          ->ArgsProduct({benchmark::CreateRange(kMiB, 256 * kMiB, 4), {2, 4}})
          ->ArgNames({"bytes", "ranks"})
          ->UseManualTime()
          ->MinTime(0.05)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
