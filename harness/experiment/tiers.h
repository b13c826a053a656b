// Implements: tiers of an experiment file — one file per paper artifact, its scale chosen with one key.
//   "tier":  "tiny"                                   the tier run when none is named (optional)
//   "tiers": {"debug": PATCH, "tiny": PATCH, ...}     what each tier changes in the file's body
// `aobench run EXP --set tier=debug` picks one. A PATCH is a JSON merge patch (RFC 7386: objects merge,
// null deletes, anything else replaces) over the body, with one exception so a tier need not repeat the
// job list: "jobs" given as an object {job name: patch} merges each patch into the body's job of that
// name (a list still replaces the jobs). A file without "tiers" is run as written.
// The convention (docs/DESIGN.md §6): debug = CPU seconds (ctest), tiny = one GPU minutes, small / medium =
// the paper's hyper-parameters (documented, not run here).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aobench {

// Removes every "tier=NAME" from `sets` (the --set list of `aobench run`) and returns NAME ("" when none).
// Two different tiers are a ConfigError.
std::string take_tier_setting(std::vector<std::string>& sets);

// The experiment at `tier` ("" = the file's "tier", or the body as written when the file names none):
// the tier's patch applied, "tiers" removed and "tier" set to the tier used. Pure. ConfigError (naming
// `origin` and the tiers there are) for an unknown tier, a tier named for a file without tiers, a patch
// that is no object, or a job patch naming no job.
nlohmann::json apply_tier(const nlohmann::json& experiment, const std::string& tier, const std::string& origin);

// The record `aobench run` leaves in <out_dir>/experiment.json for `aobench report` (reports/verdicts.h):
// file, tier, description, findings, deviations; "seeds" (harness/experiment/seeds.h: the experiment's
// "seeds", which `aobench run` sets to the one it uses) and "runs" {job: [run folders by seed]}, so the
// report can tell a missing run from one that was never asked for.
nlohmann::json experiment_record(const nlohmann::json& experiment, const std::string& origin);

// Two experiment files may share an out_dir ("base": generation_tiny.json reuses paradigms_tiny.json's
// models), so the record there keeps both: findings united in order, files and descriptions joined, the
// newer tier and deviations first, the runs of every job united and the larger seeds. A record of the same
// file replaces the old one. Pure.
nlohmann::json merge_experiment_records(const nlohmann::json& existing, const nlohmann::json& record);
// Writes <out_dir>/experiment.json (atomically), merged with a readable record already there.
void write_experiment_record(const std::string& out_dir, const nlohmann::json& record);

}  // namespace aobench
