// Implements: `aobench prepare` — text datasets → packed token files: its flags into a PrepareSpec, the work
// in datasets/prepare.h.
#include <iostream>

#include "datasets/prepare.h"
#include "harness/cli.h"
#include "harness/commands.h"

namespace aobench {

namespace {

const char* kUsage =
    "aobench prepare --format F --input PATH [--input PATH...] --output OUT.bin [--tokenizer gpt2|bytes] "
    "[--packing none|simple|reference] [--window 1024] [--val-output VAL.bin --val-fraction 0.05] [--max-rows N] "
    "[--shard-tokens N]";

int cmd_prepare(const std::vector<std::string>& args) {
  PrepareSpec spec;
  po::options_description desc("prepare options");
  desc.add_options()("format", po::value(&spec.format)->required(), kPrepareFormats)(
      "input", po::value(&spec.inputs)->required()->composing(),
      "input file, directory or quoted glob pattern such as 'owt/*.jsonl.zst' (repeatable; .xz and .zst files are "
      "decompressed)")(
      "output", po::value(&spec.output)->required(),
      "output .bin (a .bin.json sidecar is written too), or with --shard-tokens the folder of a sharded dataset")(
      "tokenizer", po::value(&spec.tokenizer)->default_value("gpt2"), "gpt2 | bytes")(
      "vocab-dir", po::value(&spec.vocab_dir)->default_value(""), "GPT-2 encoder.json/vocab.bpe folder")(
      "packing", po::value(&spec.packing)->default_value("none"), "none | simple | reference")(
      "window", po::value(&spec.window)->default_value(1024), "window length for simple/reference packing")(
      "val-output", po::value(&spec.val_output)->default_value(""), "also write the last rows here")(
      "val-fraction", po::value(&spec.val_fraction)->default_value(0.05), "fraction of rows (the last ones) for val")(
      "max-rows", po::value(&spec.max_rows)->default_value(0), "use only the first N rows (0 = all)")(
      "threads", po::value(&spec.threads)->default_value(0),
      "encoding threads (0 = all cores): the rows are cut into N contiguous blocks, one per thread (ATen's "
      "at::parallel_for), so fewer than N threads run when there are fewer than 16 rows per thread")(
      "shard-tokens", po::value(&spec.shard_tokens)->default_value(0),
      "write --output (and --val-output) as sharded datasets: folders of .bin shards of at most N tokens "
      "(a whole number of windows when packed) + index.json with counts and SHA-256 checksums (0 = one file)");
  po::variables_map vm;
  if (!parse_options(kUsage, desc, args, vm)) return 0;
  std::cout << prepare_dataset(spec).line(spec) << "\n";
  return 0;
}

}  // namespace

AOBENCH_COMMAND("prepare", kUsage, "text datasets -> packed token files (.bin + .bin.json, or sharded folders)",
                cmd_prepare);

}  // namespace aobench
