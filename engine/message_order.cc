// CheckMessageOrder: every rank's messages in job order, matched per channel, until all end or
// none can go on.
#include "engine/message_order.h"

#include <deque>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "executor/comm/comm_groups.h"
#include "executor/job_plan.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pdist::engine {
namespace {

using exec::comm::ChannelKey;

struct Message {
  bool send = false;
  ChannelKey channel;
  int64_t tag = 0;
  int64_t micro_batch = -1;  // -1: the optimizer job's
  std::string job;
  size_t op = 0;

  std::string Describe() const {
    return absl::StrCat("tag ", tag, micro_batch >= 0 ? absl::StrCat(" (micro-batch ", micro_batch, ", job ") : " (job ",
                        job, ", op #", op, ")");
  }
};

std::vector<Message> MessagesOf(const RankStep& step) {
  const exec::JobPlan plan = exec::PlanJobs(*step.program, {});
  const auto& ops = step.program->block().ops();
  std::vector<Message> messages;
  auto add = [&](const std::vector<size_t>& indices, int64_t micro_batch, const std::string& job) {
    for (size_t i : indices) {
      const std::optional<ChannelKey> channel = exec::comm::ChannelOf(*ops[i], step.rank);
      if (!channel) continue;
      const ir::OpDef* def = ir::OpRegistry::Global().Find(ops[i]->type());
      messages.push_back({.send = def->point_to_point == ir::PointToPoint::kSend,
                          .channel = *channel,
                          .tag = ir::GetInt(ops[i]->attrs(), "tag").value_or(0),
                          .micro_batch = micro_batch,
                          .job = job,
                          .op = i});
    }
  };
  add(plan.prologue, -1, "prologue");  // before every job (executor/pipeline_run.cc)
  for (const ir::PipelineJob& job : step.jobs) {
    add(plan.OpsOf(job), job.kind == ir::JobKind::kOptimizer ? -1 : job.micro_batch, job.ToString());
  }
  return messages;
}

}  // namespace

absl::Status CheckMessageOrder(const std::vector<RankStep>& ranks) {
  std::vector<std::vector<Message>> messages;
  for (const RankStep& step : ranks) messages.push_back(MessagesOf(step));
  std::vector<size_t> next(ranks.size(), 0);
  std::map<ChannelKey, std::deque<const Message*>> in_flight;  // sent, not yet received
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < ranks.size(); ++r) {
      for (; next[r] < messages[r].size(); ++next[r], moved = true) {
        const Message& m = messages[r][next[r]];
        std::deque<const Message*>& queue = in_flight[m.channel];
        if (m.send) {
          queue.push_back(&m);
          continue;
        }
        if (queue.empty()) break;  // waits for its send
        const Message& sent = *queue.front();
        if (sent.tag != m.tag || sent.micro_batch != m.micro_batch) {
          return absl::FailedPreconditionError(absl::StrCat(
              "point-to-point messages out of order on channel ", exec::comm::ToString(m.channel), ": rank ",
              ranks[r].rank, "'s receive of ", m.Describe(), " would get rank ", m.channel.src, "'s send of ",
              sent.Describe(), " (NCCL pairs a channel's messages in issue order: the step would hang)"));
        }
        queue.pop_front();
      }
    }
  }
  std::vector<std::string> waiting;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (next[r] == messages[r].size()) continue;
    const Message& m = messages[r][next[r]];
    waiting.push_back(absl::StrCat("rank ", ranks[r].rank, " waits for ", m.Describe(), " from rank ", m.channel.src,
                                   m.channel.lane > 0 ? absl::StrCat(" on lane ", m.channel.lane) : ""));
  }
  if (!waiting.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("point-to-point messages deadlock: ", absl::StrJoin(waiting, "; ")));
  }
  for (const auto& [channel, queue] : in_flight) {
    if (!queue.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("rank ", channel.src, "'s send of ", queue.front()->Describe(),
                                                        " on channel ", exec::comm::ToString(channel),
                                                        " is never received"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckMessageOrderAround(const std::vector<int64_t>& ranks,
                                     const std::function<absl::StatusOr<RankStep>(int64_t rank)>& step_of) {
  std::vector<RankStep> steps;
  std::set<int64_t> seen(ranks.begin(), ranks.end());
  std::deque<int64_t> pending(seen.begin(), seen.end());
  while (!pending.empty()) {
    PDIST_ASSIGN_OR_RETURN(RankStep step, step_of(pending.front()));
    pending.pop_front();
    for (const ChannelKey& channel : exec::comm::ChannelsOf(*step.program, step.rank)) {
      for (int64_t peer : {channel.src, channel.dst}) {
        if (seen.insert(peer).second) pending.push_back(peer);
      }
    }
    steps.push_back(std::move(step));
  }
  return CheckMessageOrder(steps);
}

}  // namespace pdist::engine
