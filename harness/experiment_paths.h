// Implements: where the paths of an experiment file point, whatever the working directory. In the data paths
// (prepare inputs and outputs, vocab-dir, data.train / data.val of common and jobs, eval.datasets, base):
//   {data}/…     the shared data folder (datasets/data_dir.h: $AOBENCH_DATA_DIR, else ../shared/data beside
//                the checkout)
//   {out_dir}/…  the experiment's out_dir (after its tier), e.g. {out_dir}/data/val.bin
//   {here}/…     the folder of the experiment file
// and any other relative path is relative to the experiment file's folder. out_dir itself is relative to the
// working directory (where runs/ goes) unless it starts with {here}. Paths are written lexically normal
// ("runs/a/../b" → "runs/b"), so two files naming one prepared dataset name it alike.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace aobench {

// `experiment` with every data path resolved as above; `origin` is the file's path (its folder is {here}).
// ConfigError naming the key for an unknown {placeholder}, a path of the wrong type, or {data} without a shared
// data folder.
nlohmann::json resolve_experiment_paths(nlohmann::json experiment, const std::string& origin);

// One path of the experiment file `origin` resolved as above (`out_dir` as already resolved); `key` names it in
// errors.
std::string resolve_experiment_path(const std::string& path, const std::string& out_dir, const std::string& origin,
                                    const std::string& key);

}  // namespace aobench
