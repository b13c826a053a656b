// Implements: the context block stamped on every results file (google/benchmark
// "context", lm-eval git_hash/pretty_env_info): git commit, dirty flag, host, device, torch/CUDA
// versions, dtype, date (UTC, ISO 8601), the aobench version and the AOBENCH_* environment.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace aobench {

// `device` is "cpu" / "cuda" / "cuda:1"; `dtype` the training/eval dtype in words ("bfloat16 autocast").
// The git fields come from `git -C AOBENCH_SOURCE_DIR`; "unknown" when git or the checkout is absent.
nlohmann::json env_info(const std::string& device = "cpu", const std::string& dtype = "float32");

// Every AOBENCH_* variable of the environment as "NAME=value" words, sorted; "none" when none is set. The speed
// switches among them (AOBENCH_FUSED_*, AOBENCH_CUDA_GRAPHS, AOBENCH_DRAW_SPLIT: core/device.h) change code paths,
// so each result's context says which path produced its numbers ("aobench_env").
std::string aobench_environment();

// UTC now as "2026-01-31T12:00:00Z".
std::string utc_timestamp();

}  // namespace aobench
