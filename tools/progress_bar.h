// A one-line progress bar for long loops, redrawn in place on a terminal (plain lines when the
// stream is not a terminal, every `plain_every` updates).
//
//   step  120/500 [=========>           ] 24%  loss 2.3412  41.2k tok/s  ETA 01:32
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pdist::tools {

class ProgressBar {
 public:
  // `label` names what is counted ("step", "factorisation").
  ProgressBar(int64_t total, FILE* out = stderr, int64_t plain_every = 10, std::string label = "step");
  // `done` items finished; `fields` is appended after the bar (e.g. "loss 2.34  41k tok/s").
  void Update(int64_t done, const std::string& fields);
  // Ends the line.
  void Finish();

 private:
  int64_t total_;
  FILE* out_;
  bool tty_;
  int64_t plain_every_;
  std::string label_;
  std::chrono::steady_clock::time_point start_;
};

// "41.2k", "1.30M": a count with a metric suffix.
std::string HumanCount(double value);
// "01:32" or "1:02:03".
std::string FormatDuration(double seconds);

}  // namespace pdist::tools
