// Implements: torchrun environment parsing (see distributed.h; DESIGN.md §6).
// Why no c10d backend yet: the pip LibTorch ships ProcessGroupGloo.hpp but not the gloo/ headers it
// includes, so a Gloo CPU group cannot be compiled here; NCCL needs a GPU host to build and test.
#include "harness/distributed.h"

#include <cstdlib>

#include "harness/errors.h"

namespace aobench {

static int env_int(const char* name, int fallback, int lo) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > 1 << 20)
    throw ConfigError(std::string("environment variable ") + name + "='" + v + "' is not a valid integer ≥ " +
                          std::to_string(lo),
                      "launch with torchrun, which sets RANK, WORLD_SIZE and LOCAL_RANK");
  return int(x);
}

DistEnv dist_env_from_environment() {
  DistEnv env;
  env.world = env_int("WORLD_SIZE", 1, 1);
  env.rank = env_int("RANK", 0, 0);
  env.local_rank = env_int("LOCAL_RANK", env.rank, 0);
  if (env.rank >= env.world)
    throw ConfigError("RANK=" + std::to_string(env.rank) + " is not below WORLD_SIZE=" + std::to_string(env.world),
                      "launch with torchrun, which sets both consistently");
  if (const char* a = std::getenv("MASTER_ADDR")) env.master_addr = a;
  env.master_port = env_int("MASTER_PORT", 0, 0);
  return env;
}

void require_single_process(const DistEnv& env) {
  if (env.world > 1)
    throw ConfigError("WORLD_SIZE=" + std::to_string(env.world) +
                          ": multi-process training (c10d all-reduce) is not implemented in this build",
                      "run a single process (unset WORLD_SIZE); data-parallel training is a known gap");
}

}  // namespace aobench
