// Implements: layered, strictly checked JSON configs (see config.h).
#include "core/config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>

#include "core/errors.h"
#include "core/json_checks.h"

extern "C" const char* aobench_base_config_json();

namespace aobench {
namespace {

std::string join_path(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

const char* type_name(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();
}

// May `value` replace `current`? Integers fill floats; integral floats fill integers.
bool compatible(const json& current, const json& value) {
  if (current.is_null()) return true;
  if (current.is_number_float()) return value.is_number();
  if (current.is_number_integer()) {
    if (value.is_number_integer()) return true;
    if (value.is_number_float()) {
      double d = value.get<double>();
      return std::isfinite(d) && std::floor(d) == d;
    }
    return false;
  }
  return current.type() == value.type();
}

// Integers beyond int64 parse as uint64 or double; they are refused by name, never wrapped to −9.2e18.
bool fits_int64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return d >= -9223372036854775808.0 && d < 9223372036854775808.0;
  }
  return true;
}

std::vector<std::string> keys_of(const json& obj) {
  std::vector<std::string> keys;
  for (auto it = obj.begin(); it != obj.end(); ++it) keys.push_back(it.key());
  return keys;
}

}  // namespace

std::string closest_name(const std::string& name, const std::vector<std::string>& candidates) {
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::string best;
  size_t best_d = std::max<size_t>(2, name.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = distance(name, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

std::string join_names(const std::vector<std::string>& names) {
  std::ostringstream out;
  for (size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << names[i];
  return out.str();
}

json parse_json_limited(const std::string& text, const std::string& origin, bool ignore_comments) {
  try {
    return json::parse(text, json_checks(kMaxJsonDepth), true, ignore_comments);
  } catch (const JsonCheckFailure& f) {
    if (f.kind == JsonCheckFailure::kDuplicateKey)
      throw ConfigError(origin + ": duplicate key '" + f.path + "'",
                        "each key may appear once per object (JSON readers silently keep only one of the values); "
                        "remove or merge the repeated entry");
    throw ConfigError(origin + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                      "configs, experiments and results are a few levels deep; is this the right file?");
  }
}

std::string brief(const json& value, size_t max_chars) {
  std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "…";
  return s;
}

std::string special_file_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

json load_json_file(const std::string& path) {
  // Checked before opening: opening a FIFO for reading waits for a writer, forever if none comes.
  if (const std::string kind = special_file_kind(path); !kind.empty())
    throw ConfigError("'" + path + "' is " + kind + ", not a regular file",
                      "give the path of a JSON file (configs live in configs/); aobench reads a config whole, and "
                      "a FIFO or device would block or never end");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot open config file '" + path + "'", "check the path; configs live in configs/");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return parse_json_limited(text.str(), "'" + path + "'");
  } catch (const json::parse_error& e) {
    throw ConfigError("invalid JSON in '" + path + "': " + e.what(),
                      "fix the syntax at the byte offset given (trailing commas are not JSON)");
  } catch (const json::exception& e) {  // out_of_range 406: a number such as 1e999 overflows a double
    throw ConfigError("invalid value in '" + path + "': " + e.what(), "use a number a double can hold");
  }
}

const json& base_config() {
  static const json base = json::parse(aobench_base_config_json(), nullptr, true, true);
  return base;
}

void merge_strict(json& target, const json& patch, const std::string& origin, const std::string& path) {
  if (!patch.is_object())
    throw ConfigError(origin + ": '" + (path.empty() ? "<root>" : path) + "' must be an object, got " +
                      type_name(patch));
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string key_path = join_path(path, it.key());
    if (path.empty() && (it.key() == "description" || it.key() == "expected")) {
      if (!it.value().is_string()) throw ConfigError(origin + ": '" + key_path + "' must be a string");
      target[it.key()] = it.value();
      continue;
    }
    if (!target.contains(it.key())) {
      const std::string near = closest_name(it.key(), keys_of(target));
      throw ConfigError(origin + ": unknown key '" + key_path + "'",
                        near.empty() ? "remove it; valid keys here: " + join_names(keys_of(target))
                                     : "did you mean '" + join_path(path, near) + "'?");
    }
    json& cur = target[it.key()];
    if (cur.is_object() && it.value().is_object() && !cur.empty()) {
      merge_strict(cur, it.value(), origin, key_path);
    } else if (cur.is_object() && cur.empty()) {
      if (!it.value().is_object())  // open section (filled by a plugin later): still an object
        throw ConfigError(origin + ": '" + key_path + "' must be an object, got " + type_name(it.value()));
      cur = it.value();
    } else {
      if (cur.is_number_integer() && it.value().is_number() && !fits_int64(it.value()))
        throw ConfigError(origin + ": '" + key_path + "' = " + brief(it.value()) + " does not fit a 64-bit integer",
                          "use a whole number below 9223372036854775808; default value is " + brief(cur));
      if (!compatible(cur, it.value()))
        throw ConfigError(origin + ": '" + key_path + "' must be " + type_name(cur) + ", got " + type_name(it.value()) +
                              " (" + brief(it.value()) + ")",
                          "default value is " + brief(cur));
      cur = (cur.is_number_integer() && it.value().is_number_float())
                ? json(static_cast<int64_t>(it.value().get<double>()))
                : it.value();
    }
  }
}

static json parse_set_value(const std::string& text, const std::string& origin) {
  try {
    return parse_json_limited(text, origin, /*ignore_comments=*/false);
  } catch (const json::out_of_range&) {  // "1e999": a number, but not a double
    throw ConfigError("--set value '" + text + "' is out of range for a number", "use a number a double can hold");
  } catch (const json::parse_error&) {
    return json(text);
  }
}

static json set_to_patch(const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set '" + assignment + "' is not of the form key.path=value",
                      "example: --set train.learning_rate=3e-4");
  const std::string path = assignment.substr(0, eq);
  const std::string origin = "--set " + brief(json(path), 60);
  if (std::count(path.begin(), path.end(), '.') >= kMaxJsonDepth)
    throw ConfigError(origin + ": key path deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                      "config keys are a few levels deep, e.g. train.order.kind");
  json patch = parse_set_value(assignment.substr(eq + 1), origin);
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) patch = json{{*it, patch}};
  return patch;
}

// argv is raw bytes but JSON strings are UTF-8: refuse other bytes here, or a later dump() of the value
// (an error message, the config table) throws nlohmann's type_error 316 far from the cause.
static void check_set_text(const std::string& assignment) {
  try {
    (void)json(assignment).dump();
  } catch (const json::type_error&) {
    throw ConfigError(
        "--set " + json(assignment).dump(-1, ' ', true, json::error_handler_t::replace) + " is not valid UTF-8",
        "pass the key and value as UTF-8 text");
  }
}

static std::string set_origin(const std::string& assignment) {
  return "--set " + (assignment.size() > 200 ? assignment.substr(0, 200) + "…" : assignment);
}

void apply_set(json& config, const std::string& assignment) {
  check_set_text(assignment);
  merge_strict(config, set_to_patch(assignment), set_origin(assignment));
}

Overrides Overrides::from_sets(const std::vector<std::string>& assignments) {
  Overrides o;
  for (const auto& a : assignments) {
    check_set_text(a);
    o.parts_.push_back({set_to_patch(a), set_origin(a), a});
  }
  return o;
}

Overrides& Overrides::add(const json& patch, const std::string& origin) {
  if (!patch.is_object()) throw ConfigError(origin + " must be an object of config keys, got " + brief(patch));
  parts_.push_back({patch, origin, ""});
  return *this;
}

void Overrides::apply_to(json& config) const {
  for (const auto& p : parts_) merge_strict(config, p.patch, p.origin);
}

void Overrides::require_within(const std::vector<std::string>& allowed, const std::string& what,
                               const std::string& hint) const {
  for (const auto& p : parts_) {
    std::vector<std::pair<std::string, json>> leaves;
    flatten_config(p.patch, "", leaves);
    for (const auto& leaf : leaves) {
      const std::string& path = leaf.first;  // not a structured binding: clang (the fuzz build) cannot capture one
      const bool ok = std::any_of(allowed.begin(), allowed.end(),
                                  [&](const std::string& a) { return path == a || path.rfind(a + ".", 0) == 0; });
      if (!ok) throw ConfigError(p.origin + ": " + what, hint);
    }
  }
}

const json* Overrides::find(const std::string& dotted_path) const {
  const json* found = nullptr;
  for (const auto& p : parts_) {
    const json* cur = &p.patch;
    std::stringstream ss(dotted_path);
    for (std::string part; cur && std::getline(ss, part, '.');)
      cur = cur->is_object() && cur->contains(part) ? &(*cur)[part] : nullptr;
    if (cur) found = cur;
  }
  return found;
}

std::string Overrides::command_line() const {
  std::string line;
  for (const auto& p : parts_) {
    if (!p.set.empty()) {
      line += " --set " + p.set;
      continue;
    }
    for (auto it = p.patch.begin(); it != p.patch.end(); ++it) {
      if (!it.value().is_object() || it.value().empty()) {
        line += " --set " + it.key() + "=" + it.value().dump();
        continue;
      }
      for (auto k = it.value().begin(); k != it.value().end(); ++k)
        line += " --set " + it.key() + "." + k.key() + "=" + k.value().dump();
    }
  }
  return line;
}

const json& at_path(const json& config, const std::string& dotted_path) {
  const json* cur = &config;
  std::stringstream ss(dotted_path);
  for (std::string part; std::getline(ss, part, '.');) {
    if (!cur->is_object() || !cur->contains(part))
      throw ConfigError("missing config key '" + dotted_path + "'", "add it to the config or --set it");
    cur = &(*cur)[part];
  }
  return *cur;
}

double get_number(const json& config, const std::string& path) {
  const json& v = at_path(config, path);
  if (!v.is_number()) throw ConfigError("config '" + path + "' must be a number, got " + brief(v));
  return v.get<double>();
}

int64_t get_int(const json& config, const std::string& path) {
  const json& v = at_path(config, path);
  if (!v.is_number_integer()) throw ConfigError("config '" + path + "' must be an integer, got " + brief(v));
  return v.get<int64_t>();
}

std::string get_string(const json& config, const std::string& path) {
  const json& v = at_path(config, path);
  if (!v.is_string()) throw ConfigError("config '" + path + "' must be a string, got " + brief(v));
  return v.get<std::string>();
}

bool get_bool(const json& config, const std::string& path) {
  const json& v = at_path(config, path);
  if (!v.is_boolean()) throw ConfigError("config '" + path + "' must be true or false, got " + brief(v));
  return v.get<bool>();
}

double get_number_in(const json& config, const std::string& path, double lo, double hi) {
  const double v = get_number(config, path);
  if (!std::isfinite(v) || v < lo || v > hi) {
    std::ostringstream msg;
    msg << "config '" << path << "' = " << v << " is out of range [" << lo << ", " << hi << "]";
    throw ConfigError(msg.str(), "NaN, infinite and negative hyper-parameters are rejected");
  }
  return v;
}

void flatten_config(const json& j, const std::string& prefix, std::vector<std::pair<std::string, json>>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten_config(it.value(), join_path(prefix, it.key()), out);
  } else {
    out.emplace_back(prefix, j);
  }
}

std::vector<std::string> config_differences(const json& a, const json& b, const std::vector<std::string>& ignore,
                                            const std::string& a_name, const std::string& b_name) {
  std::vector<std::pair<std::string, json>> la, lb;
  flatten_config(a, "", la);
  flatten_config(b, "", lb);
  std::map<std::string, std::pair<std::string, std::string>> leaves;  // path → (a, b) shortened; "" = absent
  for (const auto& [k, v] : la) leaves[k].first = brief(v);
  for (const auto& [k, v] : lb) leaves[k].second = brief(v);
  auto ignored = [&](const std::string& path) {
    for (const auto& i : ignore)
      if (path == i || path.rfind(i + ".", 0) == 0) return true;
    return false;
  };
  auto shown = [](const std::string& v) {
    return v.empty() ? std::string("absent") : v.size() > 60 ? v.substr(0, 60) + "…" : v;
  };
  std::vector<std::string> out;
  for (const auto& [path, v] : leaves)
    if (v.first != v.second && !ignored(path))
      out.push_back(path + ": " + shown(v.first) + " (" + a_name + ") vs " + shown(v.second) + " (" + b_name + ")");
  return out;
}

}  // namespace aobench
