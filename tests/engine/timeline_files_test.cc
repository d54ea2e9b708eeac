// The timeline as files: Chrome trace fields and units, SVG boxes/colours/labels/escaping,
// files on disk and reading them back.
#include "engine/timeline_files.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "tests/testing/timeline_spans.h"

namespace pdist::engine {
namespace {

using exec::Track;
using nlohmann::json;
using testing::Comm;
using testing::Job;

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ChromeTraceJsonTest, CompleteEventsInMicrosecondsWithRankAndTrack) {
  std::vector<TimelineSpan> spans = {Job("F3", "forward", 3, 0.5, 1.5),
                                     Comm("c_allreduce", 1.0, 1.25),
                                     Job("B3.1", "backward", 3, 1.5, 3.5, /*chunk=*/1)};
  json trace = json::parse(ChromeTraceJson(7, spans));
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  std::vector<json> complete;
  std::map<std::pair<std::string, int>, json> meta;  // (name, tid) -> args
  for (const json& e : trace["traceEvents"]) {
    EXPECT_EQ(e["pid"], 7);
    if (e["ph"] == "X") complete.push_back(e);
    if (e["ph"] == "M") meta[{e["name"], e["tid"]}] = e["args"];
  }
  ASSERT_EQ(complete.size(), 3u);
  const json& f3 = complete[0];
  EXPECT_EQ(f3["name"], "F3");
  EXPECT_EQ(f3["cat"], "forward");
  EXPECT_DOUBLE_EQ(f3["ts"].get<double>(), 500000);
  EXPECT_DOUBLE_EQ(f3["dur"].get<double>(), 1000000);
  EXPECT_EQ(f3["tid"], 0);
  EXPECT_EQ(f3["args"]["micro_batch"], 3);
  EXPECT_EQ(f3["args"]["chunk"], 0);
  const json& comm = complete[1];
  EXPECT_EQ(comm["tid"], 1);
  EXPECT_DOUBLE_EQ(comm["dur"].get<double>(), 250000);
  EXPECT_FALSE(comm.contains("args"));  // micro_batch and chunk are -1
  EXPECT_EQ(complete[2]["args"]["chunk"], 1);
  EXPECT_DOUBLE_EQ(complete[2]["ts"].get<double>(), 1500000);

  EXPECT_EQ(meta[std::make_pair("process_name", 0)]["name"], "rank 7");
  EXPECT_EQ(meta[std::make_pair("thread_name", 0)]["name"], "compute");
  EXPECT_EQ(meta[std::make_pair("thread_name", 1)]["name"], "comm");
}

TEST(PipelineSvgTest, OneBoxPerComputeSpanColouredByKind) {
  TimelineRows rows = {
      {2, {Job("F0", "forward", 0, 0, 1), Job("B0", "backward", 0, 1, 3),
           Job("W0", "backward_weight", 0, 3, 4), Job("O", "optimizer", -1, 4, 5),
           Comm("c_send", 1, 1.5)}},
      {0, {Job("F2.1", "forward", 2, 1, 2, /*chunk=*/1), Job("B1", "backward_input", 1, 2, 3),
           Job("x<y&z", "recompute", 1, 3, 4)}},
  };
  const std::string svg = PipelineSvg(rows, {.width_px = 800, .title = "1F1B \"demo\""});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);

  std::vector<std::string> fills;
  std::regex job_rect("<rect class=\"job\"[^>]*fill=\"(#[0-9a-f]{6})\"");
  for (std::sregex_iterator it(svg.begin(), svg.end(), job_rect), end; it != end; ++it) {
    fills.push_back((*it)[1]);
  }
  EXPECT_EQ(fills, (std::vector<std::string>{"#6fa8dc", "#93c47d", "#f6b26b", "#999999",
                                             "#6fa8dc", "#38a169", "#d9d9d9"}));
  EXPECT_EQ(Count(svg, "<rect class=\"comm\""), 1);

  // Micro-batch ids (with the chunk when > 0), the name when there is no micro-batch.
  EXPECT_NE(svg.find(">0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">2.1</text>"), std::string::npos);
  EXPECT_NE(svg.find(">O</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>B0 (backward) 2000.000 ms</title>"), std::string::npos);

  // Names and title are escaped.
  EXPECT_NE(svg.find("x&lt;y&amp;z"), std::string::npos);
  EXPECT_EQ(svg.find("x<y"), std::string::npos);
  EXPECT_NE(svg.find("1F1B &quot;demo&quot;"), std::string::npos);

  // Rows in the given order, not sorted by rank.
  size_t rank2 = svg.find(">rank 2</text>"), rank0 = svg.find(">rank 0</text>");
  ASSERT_NE(rank2, std::string::npos);
  ASSERT_NE(rank0, std::string::npos);
  EXPECT_LT(rank2, rank0);
  // The legend names what was drawn, and only that.
  EXPECT_NE(svg.find(">backward_input</text>"), std::string::npos);
  EXPECT_NE(svg.find(">other</text>"), std::string::npos);
  EXPECT_NE(svg.find(">comm</text>"), std::string::npos);
}

TEST(PipelineSvgTest, NoLabelInABoxTooNarrowForIt) {
  TimelineRows rows = {{0, {Job("F0", "forward", 0, 0, 10), Job("F7", "forward", 7, 10, 10.001)}}};
  const std::string svg = PipelineSvg(rows, {});
  EXPECT_EQ(Count(svg, "<rect class=\"job\""), 2);
  EXPECT_NE(svg.find(">0</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">7</text>"), std::string::npos);
}

TEST(WriteTimelinesTest, WritesOneTracePerRankAndTheSvg) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "timeline_test_out" / "nested";
  std::filesystem::remove_all(dir);
  TimelineRows rows = {{0, {Job("F0", "forward", 0, 0, 1)}},
                       {3, {Job("F0", "forward", 0, 1, 2), Comm("c_recv", 0, 1)}}};
  absl::Status status = WriteTimelines(dir.string(), rows, {});
  ASSERT_TRUE(status.ok()) << status;
  json rank3 = json::parse(ReadAll(dir / "rank3.trace.json"));
  EXPECT_EQ(rank3["traceEvents"].size(), 3u + 2u);  // 3 metadata events + 2 spans
  EXPECT_TRUE(std::filesystem::exists(dir / "rank0.trace.json"));
  EXPECT_EQ(ReadAll(dir / "pipeline.svg").rfind("<svg", 0), 0u);
}

TEST(WriteTimelinesTest, ErrorsNameThePath) {
  const std::string file =
      (std::filesystem::path(::testing::TempDir()) / "timeline_not_a_dir").string();
  std::ofstream(file) << "x";
  absl::Status status = WriteTimelines(file, {{0, {}}}, {});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(file), std::string::npos) << status;

  absl::Status twice = WriteTimelines(file + "_dir", {{1, {}}, {1, {}}}, {});
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument) << twice;
  EXPECT_NE(twice.message().find("rank 1"), std::string::npos) << twice;
}

// What ranks in separate processes wrote comes back as the spans they recorded, and a file
// that is not such a trace is named.
TEST(ReadChromeTracesTest, ReadsBackWhatWasWrittenAndNamesABadFile) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "timeline_read_back";
  std::filesystem::remove_all(dir);
  TimelineRows rows = {{1, {Job("B2", "backward", 2, 0.5, 1.25), Comm("c_send", 1.0, 1.5)}},
                       {0, {Job("F0", "forward", 0, 0, 0.5)}}};
  ASSERT_TRUE(WriteTimelines(dir.string(), rows, {}).ok());
  absl::StatusOr<TimelineRows> back = ReadChromeTraces(dir.string());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].first, 0);  // by rank
  const std::vector<TimelineSpan>& rank1 = (*back)[1].second;
  ASSERT_EQ(rank1.size(), 2u);
  EXPECT_EQ(rank1[0].name, "B2");
  EXPECT_EQ(rank1[0].category, "backward");
  EXPECT_EQ(rank1[0].micro_batch, 2);
  EXPECT_NEAR(rank1[0].start_s, 0.5, 1e-9);
  EXPECT_NEAR(rank1[0].end_s, 1.25, 1e-9);
  EXPECT_EQ(rank1[1].track, Track::kComm);
  ASSERT_TRUE(DrawPipelineFromTraces(dir.string(), {}).ok());

  std::ofstream(dir / "rank7.trace.json") << "{\"traceEvents\": 3}";
  absl::StatusOr<TimelineRows> bad = ReadChromeTraces(dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rank7.trace.json"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace pdist::engine
