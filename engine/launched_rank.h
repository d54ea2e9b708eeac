// A rank program's side of being launched (pdist-train, or Python through the C API, under
// pdist-run, srun or mpirun): which communication backend the launcher's environment implies,
// and dying with the launcher.
//
//   if (absl::Status s = FollowLauncher(); !s.ok()) return Fail(s);   // first thing in main
//   options.backend = BackendFromEnvironment();                        // before parsing flags
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace pdist::engine {

// PDIST_BACKEND when the launcher set it (pdist-run does); "gloo" when a launcher that starts one
// process per rank is recognised (SLURM_NTASKS or OMPI_COMM_WORLD_SIZE > 1); else "inproc".
std::string BackendFromEnvironment();

// How many processes the launcher started (WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE or
// PMI_SIZE, the first set together with its rank variable); 1 when none is, or it is not a
// positive number (the backend that reads it names the bad value).
int64_t LaunchedProcesses();

// When PDIST_LAUNCHER_PID is set (pdist-run sets it for its ranks), asks the kernel to send
// SIGTERM when this process's parent dies (Linux PR_SET_PDEATHSIG) — the launcher, or a wrapper
// script between them — so no rank outlives a killed launcher, and fails if the launcher is
// already gone. Does nothing otherwise.
absl::Status FollowLauncher();

}  // namespace pdist::engine
