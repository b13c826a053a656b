// Implements: tokenizers behind one interface: GPT-2 byte-level BPE (PCRE2 pre-tokenizer, byte-exact
// with tiktoken's "gpt2" encoding on any UTF-8 input) and a byte tokenizer (256 bytes + EOS) for the
// CPU quickstart.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace aobench {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;                                     // "gpt2" | "bytes"
  virtual int32_t vocab_size() const = 0;                                   // gpt2: 50257, bytes: 257
  virtual int32_t eos_id() const = 0;                                       // gpt2: 50256, bytes: 256
  virtual std::vector<uint32_t> encode(const std::string& text) const = 0;  // no special tokens parsed
  virtual std::string decode(const std::vector<uint32_t>& ids) const = 0;   // EOS → "<|endoftext|>"
};

// "gpt2" looks for encoder.json + vocab.bpe in `vocab_dir`, else $AOBENCH_GPT2_DIR, else gpt2/ of the
// shared data folder (data_dir.h: $AOBENCH_DATA_DIR, else ../shared/data beside the checkout). "bytes"
// needs nothing. Unknown names → ConfigError with the choices.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& vocab_dir = "");

}  // namespace aobench
