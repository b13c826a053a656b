// Implements: the torchrun environment contract (DESIGN.md §6): RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT. A single process (no WORLD_SIZE, or 1) is rank 0 of 1. Multi-process training over c10d
// is not wired into the trainer yet: WORLD_SIZE > 1 is refused with a clear error (see distributed.cpp).
#pragma once
#include <string>

namespace aobench {

struct DistEnv {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string master_addr;
  int master_port = 0;
  bool is_main() const { return rank == 0; }
};

// Parses and validates the torchrun variables; ConfigError naming the variable on bad values.
DistEnv dist_env_from_environment();

// Throws ConfigError when world > 1: this build has no multi-process gradient all-reduce.
void require_single_process(const DistEnv& env);

}  // namespace aobench
