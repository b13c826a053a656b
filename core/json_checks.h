// Implements: parse-time checks that nlohmann's json::parse leaves out, as a parser callback:
//   - nesting deeper than a limit (nlohmann's dump() recurses: a 60,000-deep value overflows the stack
//     when an error message or a resolved config is written);
//   - a key repeated within one object. nlohmann keeps the last value silently (RFC 8259 §4 leaves it
//     open), so {"train": {"max_iters": 1, "max_iters": 2}} would train 2 steps whatever was meant.
// Header-only: the safetensors fuzzer compiles core/safetensors.cpp alone (tests/fuzz/CMakeLists.txt).
#pragma once
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

namespace aobench {

// Thrown from inside json::parse by json_checks(); the caller turns it into its own typed error that
// names the file.
struct JsonCheckFailure {
  enum Kind { kTooDeep, kDuplicateKey } kind;
  std::string path;  // kDuplicateKey: the repeated key with its path, "train.max_iters", "jobs[2].name"
};

// A parser callback for json::parse that throws JsonCheckFailure for an object or array opened at
// `max_depth` levels or deeper, or for a key seen twice in one object. Keeps everything it parses.
// `Json` = nlohmann::ordered_json for a document whose key order carries meaning (harness/import/).
template <class Json = nlohmann::json>
typename Json::parser_callback_t json_checks(int max_depth) {
  using Event = typename Json::parse_event_t;
  struct Frame {
    bool object;
    std::string path;                      // of this object or array; "" for the root
    std::unordered_set<std::string> keys;  // objects: keys seen so far
    std::string key;                       // objects: the key whose value is being parsed
    size_t index = 0;                      // arrays: the element being parsed
  };
  // The callback is copied around by nlohmann: the open containers live behind a shared pointer.
  auto stack = std::make_shared<std::vector<Frame>>();
  return [stack, max_depth](int depth, Event event, Json& parsed) {
    auto member = [](const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; };
    switch (event) {
      case Event::object_start:
      case Event::array_start: {
        if (depth >= max_depth) throw JsonCheckFailure{JsonCheckFailure::kTooDeep, ""};
        std::string path;
        if (!stack->empty()) {
          const Frame& parent = stack->back();
          path =
              parent.object ? member(parent.path, parent.key) : parent.path + "[" + std::to_string(parent.index) + "]";
        }
        stack->push_back(Frame{event == Event::object_start, std::move(path), {}, {}, 0});
        break;
      }
      case Event::key: {
        Frame& f = stack->back();
        f.key = parsed.template get<std::string>();
        if (!f.keys.insert(f.key).second)
          throw JsonCheckFailure{JsonCheckFailure::kDuplicateKey, member(f.path, f.key)};
        break;
      }
      case Event::object_end:
      case Event::array_end:
        stack->pop_back();
        if (!stack->empty() && !stack->back().object) ++stack->back().index;
        break;
      case Event::value:  // a number, string, bool or null: one more array element done
        if (!stack->empty() && !stack->back().object) ++stack->back().index;
        break;
    }
    return true;
  };
}

}  // namespace aobench
