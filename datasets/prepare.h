// Implements: the work of `aobench prepare` — text datasets → packed token files (spec-sedd-radd.md §4.2
// detokenizers, §4.3 tokenisation and packing). The inputs are streamed: rows are read per format a chunk at a time
// (PrepareSpec::chunk_bytes of text), detokenized, encoded on all cores (datasets/encode_rows.h: at::parallel_for),
// packed with EOS after every row and appended to the output, so memory does not grow with the input. The output
// is an llm.c-style .bin plus a .bin.json sidecar, or with shard_tokens a sharded dataset (datasets/token_file.h).
// The command parses its flags into a PrepareSpec; `aobench run` reads one from each "prepare" entry of an
// experiment file (the same names: "vocab-dir" or "vocab_dir").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aobench {

inline constexpr const char* kPrepareFormats = "text, lines, jsonl, wikitext, ptb, lm1b, lambada, fortune";

struct PrepareSpec {
  std::string format;               // text, lines, jsonl, wikitext, ptb, lm1b, lambada, fortune
  std::vector<std::string> inputs;  // files, folders or glob patterns (*, ?, [..]); .xz and .zst are decompressed
  std::string output;               // the .bin (a .bin.json sidecar beside it), or the folder of a sharded dataset
  std::string tokenizer = "gpt2";   // gpt2 | bytes
  std::string vocab_dir;            // GPT-2 encoder.json / vocab.bpe folder ("" = the shared data folder's)
  std::string packing = "none";     // none | simple | reference
  int64_t window = 1024;            // window length for simple / reference packing
  std::string val_output;           // also write the last rows here ("" = no validation split)
  double val_fraction = 0.05;       // the fraction of rows (the last ones) for val_output
  int64_t max_rows = 0;             // only the first N rows (0 = all)
  int threads = 0;                  // encoding threads (0 = all cores)
  int64_t shard_tokens = 0;         // > 0: output and val_output are sharded datasets, shards of ≤ N tokens
  // Not a flag: text read per chunk before it is encoded (tests make it tiny to exercise many chunks). Memory
  // is about 2 chunks of text plus their ids, whatever the input size (and at least the longest row).
  int64_t chunk_bytes = int64_t(32) << 20;

  // One "prepare" entry of an experiment file: every key but "name" is a field above, spelt as the
  // command's flag ("val-output" or "val_output"); "input" a path or a list. ConfigError naming `where`
  // and the key for an unknown key or a value of the wrong type.
  static PrepareSpec from_json(const nlohmann::json& entry, const std::string& where);
  // ConfigError naming the flag for a format, packing, window, fraction, row count or thread count out of range.
  void check() const;
  // The `aobench prepare` arguments that do the same (for logs).
  std::string command_line() const;
};

// What one prepare wrote.
struct PrepareSummary {
  std::string tokenizer;  // its name
  int64_t rows = 0, bytes = 0, tokens = 0, windows = 0, shards = 0;
  int64_t val_rows = 0, val_tokens = 0, val_windows = 0, val_shards = 0;
  int threads = 0;
  double encode_mb_s = 0, seconds = 0;
  // "prepare: text/gpt2/none 123 rows, 1.20 MB -> 456 tokens (0 windows) in OUT; … total 0.52 s"
  std::string line(const PrepareSpec& spec) const;
};

// Checks `spec` (ConfigError naming the flag), reads, encodes and writes it. A single-file output is written over
// whatever file is there, a sharded one only over a sharded dataset or an empty folder; never over an input (a
// symbolic or hard link included). The validation split and reference packing need the row count first: the
// inputs are then read twice (a counting pass without encoding). The token files are byte-identical to those of
// the whole-file reader this replaced.
PrepareSummary prepare_dataset(const PrepareSpec& spec);

}  // namespace aobench
