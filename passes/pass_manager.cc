// PassManager: the run loop with verification, IR dumps and timing.
#include "passes/pass_manager.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/printer.h"
#include "ir/status.h"
#include "ir/verifier.h"

namespace pdist::passes {

namespace {
std::string SpecText(const Pass& pass) { return PrintPipeline({{std::string(pass.name()), pass.options()}}); }

void Dump(std::ostream* os, std::string_view when, const std::string& pass, const ir::Program& program) {
  if (os == nullptr) return;
  *os << "// -----// IR " << when << " " << pass << " //----- //\n";
  ir::PrintProgram(program, *os);
  os->flush();
}
}  // namespace

absl::Status PassManager::AddPipeline(std::string_view pipeline, const PassRegistry& registry) {
  PDIST_ASSIGN_OR_RETURN(std::vector<PassSpec> specs, ParsePipeline(pipeline));
  for (const PassSpec& spec : specs) {
    PDIST_ASSIGN_OR_RETURN(std::unique_ptr<Pass> pass, registry.Create(spec));
    AddPass(std::move(pass));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> PassManager::Run(ir::Program& program, PassContext& context) {
  timings_.clear();
  if (options_.verify_each) {
    PDIST_RETURN_IF_ERROR(WithContext(ir::VerifyProgram(program), "invalid input to the pass pipeline"));
  }
  bool changed = false;
  for (const auto& pass : passes_) {
    const std::string text = SpecText(*pass);
    Dump(options_.print_before_all, "before", text, program);
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<bool> result = pass->Run(program, context);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result.ok()) return WithContext(result.status(), absl::StrCat("pass '", text, "'"));
    if (options_.time_passes) timings_.push_back({text, seconds, *result});
    changed = changed || *result;
    // Dump before verifying: the broken IR is what one wants to see when verification fails.
    Dump(options_.print_after_all, "after", text, program);
    if (options_.verify_each) {
      PDIST_RETURN_IF_ERROR(WithContext(ir::VerifyProgram(program), absl::StrCat("IR invalid after pass '", text, "'")));
    }
  }
  return changed;
}

std::string PassManager::Pipeline() const {
  std::vector<PassSpec> specs;
  for (const auto& pass : passes_) specs.push_back({std::string(pass->name()), pass->options()});
  return PrintPipeline(specs);
}

std::string PassManager::TimingReport() const {
  if (timings_.empty()) return "";
  std::string report = "// pass timing (wall clock)\n";
  double total = 0;
  for (const PassTiming& t : timings_) {
    absl::StrAppend(&report, absl::StrFormat("  %9.6f s  %s%s\n", t.seconds, t.pass, t.changed ? "" : "  (no change)"));
    total += t.seconds;
  }
  absl::StrAppend(&report, absl::StrFormat("  %9.6f s  total\n", total));
  return report;
}

}  // namespace pdist::passes
