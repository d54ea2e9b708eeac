// The list of pipeline schedules: one line per ScheduleDef (passes/schedules/*.cc).
#include <cstdlib>

#include "passes/schedules/schedule_def.h"

namespace pdist::passes {

const std::vector<ScheduleDef>& ScheduleDefs() {
  static const std::vector<ScheduleDef>* defs = new std::vector<ScheduleDef>{
      FThenBSchedule(),
      OneFOneBSchedule(),
      InterleavedSchedule(),
      ZeroBubbleH1Schedule(),
  };
  return *defs;
}

const ScheduleDef& ScheduleDefOf(ScheduleMode mode) {
  for (const ScheduleDef& def : ScheduleDefs()) {
    if (def.mode == mode) return def;
  }
  // Every ScheduleMode value has a definition (pipeline_schedule_test checks it); reaching here
  // is a programmer error.
  std::abort();
}

}  // namespace pdist::passes
