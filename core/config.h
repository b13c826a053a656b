// Implements: layered JSON configs:
//   configs/base.json (embedded) → plugin flavour defaults (model.*) → experiment file → --set a.b=c.
// A key absent from the defaults or a value of another JSON type is a ConfigError naming the path.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aobench {

using json = nlohmann::json;

// Deepest nesting accepted in a config, experiment or results file (and in a --set key path or value):
// real configs are 4 levels deep, and nlohmann's dump() recurses, so a 60,000-deep file would overflow
// the stack while an error message or config.resolved.json is written.
inline constexpr int kMaxJsonDepth = 64;

// Parses JSON text with at most kMaxJsonDepth levels of nesting and no key twice in one object; `origin`
// (a file or flag) is named in the ConfigError for deeper text or a duplicate key, with the key's path
// ("train.max_iters"). Syntax errors are nlohmann's json::parse_error, for the caller to name.
json parse_json_limited(const std::string& text, const std::string& origin, bool ignore_comments = true);

// What `path` is when it exists but is not a regular file ("a FIFO (named pipe)", "a character device",
// "a directory", …; symbolic links followed), else "" (a regular file, or nothing: opening it says so).
// Readers that take a whole file refuse those by name before opening: a FIFO blocks, a device never ends.
std::string special_file_kind(const std::string& path);

// Parses a JSON file (// and /* */ comments allowed). Errors name the file, line and column; a FIFO,
// device or directory is a ConfigError naming the path, raised before the file is opened.
json load_json_file(const std::string& path);

// A value for an error message: compact JSON cut to `max_chars` ("…" marks the cut); never throws.
std::string brief(const json& value, size_t max_chars = 80);

// Levenshtein-closest candidate within distance max(2, |name|/3), or "" (for "did you mean").
std::string closest_name(const std::string& name, const std::vector<std::string>& candidates);
// "a, b, c"
std::string join_names(const std::vector<std::string>& names);

// The harness defaults (configs/base.json, compiled into the binary).
const json& base_config();

// Merges `patch` into `target` in place. Every key of `patch` must exist in `target` with a compatible
// type (an integer may fill a float; objects merge recursively). Keys listed in `free_keys` at the top
// level (e.g. "description") are accepted as strings. `origin` names the file or flag in errors.
void merge_strict(json& target, const json& patch, const std::string& origin, const std::string& path = "");

// Applies one "--set a.b.c=value" override. value is parsed as JSON when it parses, else taken as a
// string ("lr=3e-4" → 0.0003, "model.flavour=tiny" → "tiny").
void apply_set(json& config, const std::string& assignment);

// Config overrides in the order given, each a merge patch with the origin its errors name: "--set a.b=v"
// from a command line, "<file>: eval.modes[2]" from an experiment file. A command parses its --set
// strings once (from_sets); `aobench run` adds the file's JSON as it is, so nothing travels as text.
class Overrides {
 public:
  // Each "a.b.c=value" parsed as apply_set does (ConfigError for the form, the depth or invalid UTF-8).
  static Overrides from_sets(const std::vector<std::string>& assignments);
  // `patch` (a JSON object, e.g. {"eval": {"mode": "random"}}) after the overrides so far.
  Overrides& add(const json& patch, const std::string& origin);
  // merge_strict of every override, in order, each naming its origin.
  void apply_to(json& config) const;
  // ConfigError "<origin>: <what>" (hint `hint`) for an override of a path outside `allowed`: a section
  // ("eval") covers its keys, a dotted path ("train.device") itself and below.
  void require_within(const std::vector<std::string>& allowed, const std::string& what, const std::string& hint) const;
  // The last value given for a dotted path ("model.plugin"), or nullptr.
  const json* find(const std::string& dotted_path) const;
  bool empty() const { return parts_.empty(); }
  // " --set a.b=v" for each override, as a user would type it (a patch's keys two levels deep): for logs.
  std::string command_line() const;

 private:
  struct Part {
    json patch;          // an object
    std::string origin;  // for errors
    std::string set;     // the assignment as typed, for --set overrides; "" for patches
  };
  std::vector<Part> parts_;
};

// Typed getters with errors that name the path: get<double>(cfg, "train.learning_rate").
const json& at_path(const json& config, const std::string& dotted_path);
double get_number(const json& config, const std::string& path);
int64_t get_int(const json& config, const std::string& path);
std::string get_string(const json& config, const std::string& path);
bool get_bool(const json& config, const std::string& path);
// Finite and ≥ lo (and ≤ hi): guards NaN, negative or absurd hyper-parameters.
double get_number_in(const json& config, const std::string& path, double lo, double hi);

// Every leaf of a config as ("a.b.c", value), in the config's order (an empty object is a leaf).
void flatten_config(const json& j, const std::string& prefix, std::vector<std::pair<std::string, json>>& out);

// Leaves that differ between two configs, as "path: A (<a_name>) vs B (<b_name>)" in path order; a path
// listed in `ignore`, or under one ("eval" covers eval.mode), is skipped. Values are shortened (brief).
std::vector<std::string> config_differences(const json& a, const json& b, const std::vector<std::string>& ignore,
                                            const std::string& a_name, const std::string& b_name);

}  // namespace aobench
