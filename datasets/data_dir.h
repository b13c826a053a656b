// Implements: the one rule by which the binary, the tests and the scripts find the shared data folder
// (the GPT-2 vocabulary in gpt2/, the evaluation sets): $AOBENCH_DATA_DIR when set, else ../shared/data
// beside the checkout the binary was built from (scripts/test.sh and the README's layout).
#pragma once
#include <string>

namespace aobench {

// $AOBENCH_DATA_DIR when set (returned even when missing, so errors name it); else
// <checkout>/../shared/data when that is a directory; else "".
std::string shared_data_dir();
// Where the rule looked, for error hints: "$AOBENCH_DATA_DIR=/x" or "<checkout>/../shared/data".
std::string shared_data_dir_rule();

}  // namespace aobench
