// Implements: tokenizer fuzz target (spec-ao-gpt.md §data: GPT-2 byte-level BPE).
// Arbitrary bytes (valid UTF-8 or not) must encode without crashing and decode back to the same bytes,
// for both the GPT-2 and the byte tokenizer; decoding arbitrary ids either works or throws DataError.
// The GPT-2 vocab comes from $AOBENCH_GPT2_DIR or $AOBENCH_DATA_DIR/gpt2 (README.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/errors.h"
#include "datasets/tokenizer.h"

namespace {

void check_round_trip(const aobench::Tokenizer& tok, const std::string& text) {
  const std::vector<uint32_t> ids = tok.encode(text);
  for (uint32_t id : ids)
    if (id >= static_cast<uint32_t>(tok.vocab_size()) || static_cast<int32_t>(id) == tok.eos_id())
      __builtin_trap();  // encode must never emit an id outside the vocab, nor EOS for plain text
  if (tok.decode(ids) != text) __builtin_trap();
}

}  // namespace

// The GPT-2 vocab is a setup requirement, not a finding: say what is missing and stop instead of crashing.
std::unique_ptr<aobench::Tokenizer> load_gpt2() {
  try {
    return aobench::make_tokenizer("gpt2");
  } catch (const aobench::Error& e) {
    std::fprintf(stderr, "fuzz_tokenizer: %s\nHINT: %s\n", e.what(), e.hint().c_str());
    std::_Exit(2);  // not exit(): libFuzzer reports an exit() from the target as a crash
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto gpt2 = load_gpt2();
  static const auto bytes = aobench::make_tokenizer("bytes");
  const std::string text(reinterpret_cast<const char*>(data), size);
  check_round_trip(*gpt2, text);
  check_round_trip(*bytes, text);

  // The same bytes read as little-endian uint16 ids: in-range ids decode, out-of-range ones throw.
  std::vector<uint32_t> ids(size / 2);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = data[2 * i] | (uint32_t(data[2 * i + 1]) << 8);
  for (const auto* tok : {gpt2.get(), bytes.get()}) {
    bool in_range = true;
    for (uint32_t id : ids) in_range &= id < static_cast<uint32_t>(tok->vocab_size());
    try {
      tok->decode(ids);
      if (!in_range) __builtin_trap();
    } catch (const aobench::DataError&) {
      if (in_range) __builtin_trap();
    }
  }
  return 0;
}
