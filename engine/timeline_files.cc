// The timeline of a step as files: a Chrome trace per rank (written, and read back by
// pdist-run), and the SVG picture of the whole pipeline.
#include "engine/timeline_files.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/input_file.h"
#include "ir/json_reader.h"
#include "ir/output_file.h"
#include "ir/status.h"

namespace pdist::engine {
namespace {

namespace fs = std::filesystem;
using exec::TimelineRows;
using exec::TimelineSpan;
using exec::Track;

// Job kinds in the order of a step, with the colours the header promises.
constexpr std::pair<const char*, const char*> kJobColors[] = {
    {"prologue", "#c27ba0"},        {"forward", "#6fa8dc"},   {"backward", "#93c47d"},
    {"backward_input", "#38a169"},  {"backward_weight", "#f6b26b"}, {"optimizer", "#999999"},
};
constexpr const char* kOtherColor = "#d9d9d9";
constexpr const char* kCommColor = "#8e7cc3";

const char* FillFor(const std::string& category) {
  for (const auto& [kind, color] : kJobColors) {
    if (category == kind) return color;
  }
  return kOtherColor;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

// "3", "3.1" (chunk 1), or the name for spans tied to no micro-batch ("O").
std::string BoxLabel(const TimelineSpan& s) {
  if (s.micro_batch < 0) return s.name;
  if (s.chunk > 0) return absl::StrCat(s.micro_batch, ".", s.chunk);
  return absl::StrCat(s.micro_batch);
}

// A tick spacing of 1, 2 or 5 times a power of ten giving at most ~8 ticks over `span`.
double TickStep(double span) {
  double raw = span / 8;
  double magnitude = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

absl::Status PathError(absl::string_view action, const fs::path& path, int err) {
  absl::StatusCode code = err != 0 ? absl::ErrnoToStatusCode(err) : absl::StatusCode::kUnknown;
  return absl::Status(code, absl::StrCat("cannot ", action, " ", path.string(), ": ",
                                         err != 0 ? std::strerror(err) : "I/O error"));
}



}  // namespace

std::string ChromeTraceJson(int64_t rank, const std::vector<TimelineSpan>& spans) {
  using nlohmann::json;
  json events = json::array();
  auto meta = [&](const char* name, int tid, json args) {
    events.push_back({{"name", name}, {"ph", "M"}, {"pid", rank}, {"tid", tid}, {"args", args}});
  };
  meta("process_name", 0, {{"name", absl::StrCat("rank ", rank)}});
  meta("thread_name", 0, {{"name", "compute"}});
  meta("thread_name", 1, {{"name", "comm"}});
  // A row per communication stream: tid 1 the collectives', the point-to-point channels after it.
  std::map<std::string, int> tids = {{"comm", 1}};
  auto tid_of = [&](const TimelineSpan& s) {
    if (s.track == Track::kCompute) return 0;
    const std::string lane = s.lane.empty() ? "comm" : s.lane;
    auto [it, added] = tids.emplace(lane, static_cast<int>(tids.size()) + 1);
    if (added) meta("thread_name", it->second, {{"name", lane}});
    return it->second;
  };
  for (const TimelineSpan& s : spans) {
    json event = {{"name", s.name},
                  {"cat", s.category},
                  {"ph", "X"},
                  {"ts", s.start_s * 1e6},
                  {"dur", std::max(0.0, s.end_s - s.start_s) * 1e6},
                  {"pid", rank},
                  {"tid", tid_of(s)}};
    json args = json::object();
    if (s.micro_batch >= 0) args["micro_batch"] = s.micro_batch;
    if (s.chunk >= 0) args["chunk"] = s.chunk;
    if (s.queued_s >= 0) args["queued_us"] = s.queued_s * 1e6;
    if (!args.empty()) event["args"] = std::move(args);
    events.push_back(std::move(event));
  }
  return json({{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}).dump();
}

std::string PipelineSvg(const TimelineRows& rows, const PipelineSvgOptions& options) {
  const double left = 64, right = 12, gap = 6;
  const double row_h = options.row_height_px;
  const double comm_h = std::max(3.0, row_h * 0.18);
  const double pitch = row_h + 1 + comm_h + gap;
  const double top = options.title.empty() ? 10 : 34;
  const double plot_w = std::max(1.0, options.width_px - left - right);
  const double font = std::clamp(row_h * 0.45, 6.0, 12.0);
  auto [t0, t1] = exec::SpanTimeRange(rows);
  const double range = t1 > t0 ? t1 - t0 : 1;
  auto x_of = [&](double t) { return left + (t - t0) / range * plot_w; };

  std::string body;
  std::set<std::string> drawn;  // categories for the legend; "comm" for the strips
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [rank, spans] = rows[i];
    const double y = top + static_cast<double>(i) * pitch;
    absl::StrAppendFormat(&body,
                          "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" font-size=\"%.1f\">"
                          "rank %d</text>\n",
                          left - 8, y + row_h / 2 + font / 3, font, rank);
    for (const TimelineSpan& s : spans) {
      const double x = x_of(s.start_s);
      const double w = std::max(0.5, x_of(s.end_s) - x);
      const std::string tip =
          absl::StrFormat("%s (%s) %.3f ms", s.name, s.category, (s.end_s - s.start_s) * 1e3);
      if (s.track == Track::kComm) {
        drawn.insert("comm");
        absl::StrAppendFormat(&body,
                              "<g><title>%s</title><rect class=\"comm\" x=\"%.2f\" y=\"%.2f\" "
                              "width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/></g>\n",
                              XmlEscape(tip), x, y + row_h + 1, w, comm_h, kCommColor);
        continue;
      }
      drawn.insert(s.category);
      absl::StrAppendFormat(&body,
                            "<g><title>%s</title><rect class=\"job\" x=\"%.2f\" y=\"%.2f\" "
                            "width=\"%.2f\" height=\"%.2f\" fill=\"%s\" stroke=\"#ffffff\" "
                            "stroke-width=\"0.5\"/>",
                            XmlEscape(tip), x, y, w, row_h, FillFor(s.category));
      const std::string label = BoxLabel(s);
      if (static_cast<double>(label.size()) * font * 0.6 + 4 <= w) {
        absl::StrAppendFormat(&body,
                              "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" "
                              "font-size=\"%.1f\">%s</text>",
                              x + w / 2, y + row_h / 2 + font / 3, font, XmlEscape(label));
      }
      body += "</g>\n";
    }
  }

  // Time axis, in ms since the earliest start.
  const double axis_y = top + static_cast<double>(rows.size()) * pitch + 2;
  absl::StrAppendFormat(
      &body, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#000000\"/>\n", left,
      axis_y, left + plot_w, axis_y);
  const double range_ms = range * 1e3, step = TickStep(range_ms);
  for (int k = 0; k * step <= range_ms * (1 + 1e-9); ++k) {
    const double t = k * step, x = left + t / range_ms * plot_w;
    absl::StrAppendFormat(&body,
                          "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
                          "stroke=\"#000000\"/><text x=\"%.2f\" y=\"%.2f\" "
                          "text-anchor=\"middle\" font-size=\"10\">%g ms</text>\n",
                          x, axis_y, x, axis_y + 4, x, axis_y + 15, t);
  }

  // Legend: the job kinds drawn, in step order, then "other" and "comm".
  std::vector<std::pair<std::string, const char*>> legend;
  bool other = false;
  for (const auto& [kind, color] : kJobColors) {
    if (drawn.count(kind)) legend.emplace_back(kind, color);
  }
  for (const std::string& c : drawn) other |= c != "comm" && FillFor(c) == kOtherColor;
  if (other) legend.emplace_back("other", kOtherColor);
  if (drawn.count("comm")) legend.emplace_back("comm", kCommColor);
  const double legend_y = axis_y + 26;
  double lx = left;
  for (const auto& [label, color] : legend) {
    absl::StrAppendFormat(&body,
                          "<rect class=\"legend\" x=\"%.2f\" y=\"%.2f\" width=\"12\" "
                          "height=\"12\" fill=\"%s\"/><text x=\"%.2f\" y=\"%.2f\" "
                          "font-size=\"11\">%s</text>\n",
                          lx, legend_y, color, lx + 16, legend_y + 10, label);
    lx += 16 + static_cast<double>(label.size()) * 6.6 + 14;
  }

  const double height = legend_y + 22;
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
      "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
      options.width_px, height, options.width_px, height);
  if (!options.title.empty()) {
    absl::StrAppendFormat(&svg, "<text x=\"%.2f\" y=\"22\" font-size=\"14\">%s</text>\n", left,
                          XmlEscape(options.title));
  }
  return absl::StrCat(svg, body, "</svg>\n");
}

absl::Status WriteTimelines(const std::string& dir, const TimelineRows& rows,
                            const PipelineSvgOptions& options) {
  std::set<int64_t> ranks;
  for (const auto& row : rows) {
    if (!ranks.insert(row.first).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("timeline of rank ", row.first, " given twice for ", dir));
    }
  }
  for (const auto& [rank, spans] : rows) PDIST_RETURN_IF_ERROR(WriteChromeTrace(dir, rank, spans));
  return ir::WriteFileAtomically(fs::path(dir) / "pipeline.svg", PipelineSvg(rows, options));
}

absl::Status MakeTimelineDirectory(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("timeline directory '", dir, "' is a file, not a directory"));
  }
  fs::create_directories(dir, ec);
  if (ec) return PathError("create directory", dir, ec.value());
  return absl::OkStatus();
}

absl::Status WriteChromeTrace(const std::string& dir, int64_t rank, const std::vector<TimelineSpan>& spans) {
  PDIST_RETURN_IF_ERROR(MakeTimelineDirectory(dir));
  return ir::WriteFileAtomically(fs::path(dir) / absl::StrCat("rank", rank, ".trace.json"),
                                 ChromeTraceJson(rank, spans));
}

absl::StatusOr<TimelineRows> ReadChromeTraces(const std::string& dir) {
  std::map<int64_t, std::vector<TimelineSpan>> by_rank;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return PathError("read directory", dir, ec.value());
  for (const fs::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank", 0) != 0 || !absl::EndsWith(name, ".trace.json")) continue;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(entry.path().string(), ": not a pdist trace (", why, ")"));
    };
    PDIST_ASSIGN_OR_RETURN(std::string text, ir::ReadFileToString(entry.path().string()));
    absl::StatusOr<nlohmann::json> parsed =
        ir::ParseJson(text, entry.path().string(), {.max_bytes = int64_t{1} << 30, .max_values = int64_t{1} << 28});
    if (!parsed.ok()) return bad(std::string(parsed.status().message()));
    const nlohmann::json& j = *parsed;
    if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array()) return bad("no traceEvents array");
    for (const nlohmann::json& e : j["traceEvents"]) {
      if (!e.is_object() || e.value("ph", "") != "X") continue;
      if (!e.contains("pid") || !e["pid"].is_number_integer() || !e.contains("ts") || !e["ts"].is_number() ||
          !e.contains("dur") || !e["dur"].is_number() || !e.contains("name") || !e["name"].is_string()) {
        return bad("an event lacks pid, ts, dur or name");
      }
      TimelineSpan span;
      span.name = e["name"].get<std::string>();
      span.category = e.value("cat", "");
      span.track = e.value("tid", 0) >= 1 ? Track::kComm : Track::kCompute;
      span.start_s = e["ts"].get<double>() * 1e-6;
      span.end_s = span.start_s + e["dur"].get<double>() * 1e-6;
      if (e.contains("args") && e["args"].is_object()) {
        span.micro_batch = e["args"].value("micro_batch", int64_t{-1});
        span.chunk = e["args"].value("chunk", int64_t{-1});
        if (e["args"].contains("queued_us") && e["args"]["queued_us"].is_number()) {
          span.queued_s = e["args"]["queued_us"].get<double>() * 1e-6;
        }
      }
      by_rank[e["pid"].get<int64_t>()].push_back(std::move(span));
    }
  }
  return TimelineRows(by_rank.begin(), by_rank.end());
}

absl::Status DrawPipelineFromTraces(const std::string& dir, const PipelineSvgOptions& options) {
  PDIST_ASSIGN_OR_RETURN(TimelineRows rows, ReadChromeTraces(dir));
  if (rows.empty()) return absl::NotFoundError(absl::StrCat("no rank<k>.trace.json in ", dir));
  return ir::WriteFileAtomically(fs::path(dir) / "pipeline.svg", PipelineSvg(rows, options));
}

}  // namespace pdist::engine
