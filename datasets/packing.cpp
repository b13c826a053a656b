// Implements: packing.h (spec-sedd-radd.md §4.3 steps 2–4).
#include "datasets/packing.h"

#include <algorithm>

#include "core/errors.h"

namespace aobench {

void contiguous_shard(int64_t n, int64_t num_shards, int64_t index, int64_t* begin, int64_t* end) {
  const int64_t div = n / num_shards, mod = n % num_shards;
  *begin = div * index + std::min(index, mod);
  *end = *begin + div + (index < mod ? 1 : 0);
}

PackResult pack_rows(const std::vector<std::vector<uint32_t>>& rows, uint32_t eos, const PackOptions& opt) {
  if (opt.mode != "none" && opt.mode != "simple" && opt.mode != "reference")
    throw ConfigError("unknown packing mode '" + opt.mode + "'", "choose one of: none, simple, reference");
  if (opt.mode != "none" && opt.window <= 0)
    throw ConfigError("packing window " + std::to_string(opt.window) + " must be > 0", "e.g. --window 1024");
  if (opt.num_shards <= 0 || opt.group_rows <= 0)
    throw ConfigError("packing: num_shards and group_rows must be > 0", "use the defaults 8 and 1000");
  PackResult res;
  size_t total = 0;
  for (const auto& r : rows) total += r.size() + 1;
  res.tokens.reserve(total);
  auto append_rows = [&](int64_t b, int64_t e, std::vector<uint32_t>& out) {
    for (int64_t i = b; i < e; ++i) {
      out.insert(out.end(), rows[i].begin(), rows[i].end());
      out.push_back(eos);
    }
  };
  const int64_t n = static_cast<int64_t>(rows.size());
  if (opt.mode == "none" || opt.mode == "simple") {
    append_rows(0, n, res.tokens);
    if (opt.mode == "simple") {
      const int64_t keep = static_cast<int64_t>(res.tokens.size()) / opt.window * opt.window;
      res.dropped = static_cast<int64_t>(res.tokens.size()) - keep;
      res.tokens.resize(keep);
      res.windows = keep / opt.window;
    }
    return res;
  }
  // reference: blocks never straddle a 1000-row group, groups never straddle a shard.
  std::vector<uint32_t> group;
  for (int64_t s = 0; s < opt.num_shards; ++s) {
    int64_t sb, se;
    contiguous_shard(n, opt.num_shards, s, &sb, &se);
    for (int64_t gb = sb; gb < se; gb += opt.group_rows) {
      group.clear();
      append_rows(gb, std::min(se, gb + opt.group_rows), group);
      const int64_t keep = static_cast<int64_t>(group.size()) / opt.window * opt.window;
      res.tokens.insert(res.tokens.end(), group.begin(), group.begin() + keep);
      res.dropped += static_cast<int64_t>(group.size()) - keep;
      res.windows += keep / opt.window;
    }
  }
  return res;
}

}  // namespace aobench
