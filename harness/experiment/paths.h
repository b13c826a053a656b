// Implements: where the paths of an experiment file point, whatever the working directory. In the data paths
// (prepare inputs and outputs, vocab-dir, data.train / data.val of common and jobs, eval.datasets, a
// generation judge given as a path, base):
//   {data}/…     the shared data folder (datasets/data_dir.h: $AOBENCH_DATA_DIR, else ../shared/data beside
//                the checkout)
//   {out_dir}/…  the experiment's out_dir (after its tier), e.g. {out_dir}/data/val.bin
//   {here}/…     the folder of the experiment file
//   {NAME}/…     a path the file names in "paths": {"NAME": "PATH"} (e.g. {"openwebtext": "{data}/openwebtext"},
//                itself resolved as here); `--set paths.NAME=PATH` on the command line moves it
// and any other relative path is relative to the experiment file's folder; "" stays "" (e.g. data.val: none).
// out_dir itself is relative to the working directory (where runs/ goes) unless it starts with {here}. Paths
// are written lexically normal ("runs/a/../b" → "runs/b"), so two files naming one prepared dataset name it
// alike. A base file's paths resolve from the base's folder, its {out_dir} from the experiment's out_dir.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aobench {

// `experiment` with every data path resolved as above; `origin` is the file's path (its folder is {here}).
// `keep_out_dir`: leave {out_dir}/… paths as they are (a base file's, resolved once merged). ConfigError naming
// the key for an unknown {placeholder} or a path of the wrong type. Without a shared data folder a {data}/… path
// stays as written: `aobench run` refuses it only where it must read it (a prepare entry whose output is missing).
nlohmann::json resolve_experiment_paths(nlohmann::json experiment, const std::string& origin,
                                        bool keep_out_dir = false);

// One path of the experiment file `origin` resolved as above (`out_dir` as already resolved; nullptr: keep
// {out_dir}/… as it is); `key` names it in errors.
// `named`: the file's "paths" (NAME → resolved path; nullptr: none).
std::string resolve_experiment_path(const std::string& path, const std::string* out_dir, const std::string& origin,
                                    const std::string& key, const std::map<std::string, std::string>* named = nullptr);

// Takes every `paths.NAME=PATH` out of `sets` into experiment["paths"]; ConfigError naming it when the file
// declares no path NAME (a typo would otherwise read the default silently) or PATH is empty.
void apply_path_settings(nlohmann::json& experiment, std::vector<std::string>& sets, const std::string& origin);

// Where a {data}/… path left unresolved (no shared data folder) must be read: ConfigError naming `where` and the
// rule by which the folder is found; nothing for any other path.
void require_data_folder(const std::string& path, const std::string& where);

}  // namespace aobench
