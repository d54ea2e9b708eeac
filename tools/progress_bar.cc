// ProgressBar drawing.
#include "tools/progress_bar.h"

#include <unistd.h>

#include <cmath>

#include "absl/strings/str_format.h"

namespace pdist::tools {

ProgressBar::ProgressBar(int64_t total, FILE* out, int64_t plain_every, std::string label)
    : total_(total), out_(out), tty_(isatty(fileno(out)) != 0), plain_every_(plain_every), label_(std::move(label)),
      start_(std::chrono::steady_clock::now()) {}

void ProgressBar::Update(int64_t done, const std::string& fields) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double fraction = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_ - done) : 0.0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<size_t>(kWidth), ' ');
  for (int i = 0; i < filled; ++i) bar[static_cast<size_t>(i)] = '=';
  if (filled < kWidth) bar[static_cast<size_t>(filled)] = '>';
  const std::string line = absl::StrFormat("%s %*d/%d [%s] %3d%%  %s  ETA %s", label_,
                                           static_cast<int>(std::to_string(total_).size()), done, total_, bar, static_cast<int>(fraction * 100), fields, FormatDuration(eta));
  if (tty_) {
    std::fprintf(out_, "\r%s\x1b[K", line.c_str());
  } else if (done == total_ || done % plain_every_ == 0 || done == 1) {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void ProgressBar::Finish() {
  if (tty_) std::fprintf(out_, "\n");
  std::fflush(out_);
}

std::string HumanCount(double value) {
  if (value >= 1e9) return absl::StrFormat("%.2fG", value / 1e9);
  if (value >= 1e6) return absl::StrFormat("%.2fM", value / 1e6);
  if (value >= 1e3) return absl::StrFormat("%.1fk", value / 1e3);
  return absl::StrFormat("%.0f", value);
}

std::string FormatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  return absl::StrFormat("%02d:%02d", s / 60, s % 60);
}

}  // namespace pdist::tools
