// Implements: tests of packing.h (spec-sedd-radd.md §4.3): EOS after every row, simple flooring and the
// reference rule (8 contiguous shards → 1000-row groups → whole windows, remainders dropped).
#include "datasets/packing.h"
#include "harness/errors.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

std::vector<std::vector<uint32_t>> make_rows(int n, int len) {
  std::vector<std::vector<uint32_t>> rows(n);
  for (int i = 0; i < n; ++i) rows[i].assign(len, static_cast<uint32_t>(i % 1000));
  return rows;
}

TEST(Packing, NoneConcatenatesWithEos) {
  std::vector<std::vector<uint32_t>> rows = {{1, 2}, {}, {3}};
  auto r = pack_rows(rows, 9, {});
  EXPECT_EQ(r.tokens, (std::vector<uint32_t>{1, 2, 9, 9, 3, 9}));
  EXPECT_EQ(r.windows, 0);
  EXPECT_EQ(r.dropped, 0);
}

TEST(Packing, SimpleFloorsGlobally) {
  PackOptions o;
  o.mode = "simple";
  o.window = 4;
  auto r = pack_rows({{1, 2}, {3, 4, 5}, {6}}, 0, o);  // 3 + 4 + 2 = 9 tokens
  EXPECT_EQ(r.tokens, (std::vector<uint32_t>{1, 2, 0, 3, 4, 5, 0, 6}));
  EXPECT_EQ(r.windows, 2);
  EXPECT_EQ(r.dropped, 1);
}

TEST(Packing, ContiguousShardsMatchHfDatasets) {
  // HF: div = n // k, mod = n % k; shard i = [div*i + min(i, mod), … + div + (i < mod)).
  int64_t b, e;
  contiguous_shard(10, 8, 0, &b, &e);
  EXPECT_EQ(b, 0);
  EXPECT_EQ(e, 2);
  contiguous_shard(10, 8, 1, &b, &e);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(e, 4);
  contiguous_shard(10, 8, 2, &b, &e);
  EXPECT_EQ(b, 4);
  EXPECT_EQ(e, 5);
  contiguous_shard(10, 8, 7, &b, &e);
  EXPECT_EQ(b, 9);
  EXPECT_EQ(e, 10);
}

TEST(Packing, ReferenceDropsEachGroupsRemainder) {
  // 8000 rows of 9 tokens (+EOS = 10): 8 shards of 1000 rows = 8 groups of 10000 tokens.
  // window 1024 → 9 blocks per group (9216 tokens), 784 dropped per group.
  PackOptions o;
  o.mode = "reference";
  o.window = 1024;
  auto r = pack_rows(make_rows(8000, 9), 50256, o);
  EXPECT_EQ(r.windows, 72);
  EXPECT_EQ(r.tokens.size(), 72u * 1024u);
  EXPECT_EQ(r.dropped, 8 * 784);
  // simple packing keeps more: 80000 / 1024 = 78 blocks
  o.mode = "simple";
  EXPECT_EQ(pack_rows(make_rows(8000, 9), 50256, o).windows, 78);
  // block 9 (the first of group 2) starts with the first row of shard 1 (row 1000 → value 0 of row 1000)
  o.mode = "reference";
  auto rows = make_rows(8000, 9);
  for (int i = 0; i < 8000; ++i) rows[i].assign(9, static_cast<uint32_t>(i));
  r = pack_rows(rows, 999999, o);
  EXPECT_EQ(r.tokens[9 * 1024], 1000u);
  EXPECT_EQ(r.tokens[0], 0u);
}

TEST(Packing, ReferenceUnevenShardsAndGroups) {
  // 8010 rows: shards 0..1 get 1002 rows, the rest 1001 → each shard is a 1000-row group + a tail group.
  PackOptions o;
  o.mode = "reference";
  o.window = 8;
  auto rows = make_rows(8010, 3);  // 4 tokens per row with EOS
  auto r = pack_rows(rows, 7, o);
  // group of 1000 rows = 4000 tokens = 500 windows; tail groups: 2 rows (8 tok → 1 window) or 1 row (0).
  EXPECT_EQ(r.windows, 8 * 500 + 2 * 1);
  EXPECT_EQ(r.dropped, 6 * 4);
  EXPECT_EQ(static_cast<int64_t>(r.tokens.size()), r.windows * 8);
}

TEST(Packing, BadOptions) {
  PackOptions o;
  o.mode = "weird";
  EXPECT_THROW(pack_rows({{1}}, 0, o), ConfigError);
  o.mode = "simple";
  o.window = 0;
  EXPECT_THROW(pack_rows({{1}}, 0, o), ConfigError);
}

}  // namespace
}  // namespace aobench
