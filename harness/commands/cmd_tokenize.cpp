// Implements: `aobench tokenize` — stdin text → JSON array of token ids on stdout; with --decode, a JSON
// array of ids on stdin → text (spec-sedd-radd.md §4.3 step 1; no special tokens are parsed).
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/errors.h"
#include "datasets/tokenizer.h"
#include "harness/cli.h"
#include "harness/commands.h"

namespace aobench {

namespace {

int cmd_tokenize(const std::vector<std::string>& args) {
  po::options_description desc("tokenize options");
  desc.add_options()("tokenizer", po::value<std::string>()->default_value("gpt2"), "gpt2 | bytes")(
      "vocab-dir", po::value<std::string>()->default_value(""), "GPT-2 encoder.json/vocab.bpe folder")(
      "decode", po::bool_switch(), "read a JSON array of ids and print the text");
  po::variables_map vm;
  if (!parse_options("aobench tokenize [--tokenizer gpt2|bytes] [--decode]", desc, args, vm)) return 0;
  auto tok = make_tokenizer(vm["tokenizer"].as<std::string>(), vm["vocab-dir"].as<std::string>());
  std::string in((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (!vm["decode"].as<bool>()) {
    nlohmann::json out = tok->encode(in);
    std::cout << out.dump() << "\n";
    return 0;
  }
  nlohmann::json j;
  try {
    j = parse_json_limited(in, "tokenize --decode: stdin", /*ignore_comments=*/false);
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(std::string("tokenize --decode: stdin is not JSON (") + e.what() + ")",
                    "pipe a JSON array of token ids, e.g. [15496, 995]");
  }
  if (!j.is_array()) throw DataError("tokenize --decode: stdin is not a JSON array", "e.g. [15496, 995]");
  std::vector<uint32_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > UINT32_MAX)
      throw DataError("tokenize --decode: '" + brief(v) + "' is not a token id", "ids are non-negative integers");
    ids.push_back(v.get<uint32_t>());
  }
  std::cout << tok->decode(ids);
  return 0;
}

}  // namespace

AOBENCH_COMMAND("tokenize", "aobench tokenize [--tokenizer gpt2|bytes] [--decode]",
                "stdin text -> JSON token ids (or back with --decode)", cmd_tokenize);

}  // namespace aobench
