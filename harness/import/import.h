// Implements: `aobench import` (issue 32 item 3; README, "Importing the authors' checkpoints"): an authors'
// checkpoint of AO-GPT, σ-GPT, SEDD or RADD becomes an aobench run folder that eval / sample / genppl / speed load
// like any trained run:
//   RUN/config.resolved.json                  the plugin's model section read from the checkpoint's own config
//   RUN/checkpoints/step_<N>/model.safetensors the weights under aobench's names (harness/import/mappings.h)
//                           ema.safetensors   the authors' EMA weights when the checkpoint has them (eval uses them)
//                           state.json        as `aobench train` writes it, plus "imported_from": the source file,
//                                             its sha256, the authors' config and the name table applied
//   RUN/results.json                          the run's record (parameters, steps, tokens)
// Mapping is by name only and all-or-nothing (CheckpointError listing every unmapped, missing or mis-shaped
// tensor); the folder is written beside RUN and renamed into place, so a failure leaves nothing behind.
#pragma once
#include <string>

#include "core/config.h"

namespace aobench {

inline constexpr const char* kImportUsage =
    "aobench import --model ao_gpt|sigma_gpt|sedd|radd --from FOLDER --out RUN_DIR [--config CONFIG.json] "
    "[--set data.tokenizer=gpt2 --set model.vocab_size=50257 ...] [--force]";

struct ImportTask {
  std::string model;    // the plugin = the authors' model the checkpoint holds: ao_gpt | sigma_gpt | sedd | radd
  std::string from;     // a folder converted by scripts/convert_torch_checkpoint.py, or a Hugging Face folder
  std::string config;   // SEDD / RADD: their config as JSON; "" = FROM/config.json
  std::string out;      // the run folder to write
  Overrides overrides;  // data.tokenizer, model.* keys the checkpoint does not fix (vocab_size of AO-GPT / σ-GPT),
                        // train.device / train.dtype (where and how eval runs it), eval.*, sample.*, …
  bool force = false;   // replace an existing RUN_DIR
  std::string command_line() const;
};

// Writes the run folder; prints what it read, how it mapped it and which weights eval will use.
void run_import(const ImportTask& task);

}  // namespace aobench
