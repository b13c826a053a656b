// Implements: OrderSpec draws (see order.h).
#include "core/order.h"

#include <sstream>

#include "core/errors.h"

namespace aobench {

static torch::Tensor identity(int64_t B, int64_t T) {
  return torch::arange(T, torch::kLong).unsqueeze(0).expand({B, T}).contiguous();
}

static torch::Tensor fixed_permutation(int64_t n, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randperm(n, gen, torch::kLong);
}

torch::Tensor OrderSpec::draw(int64_t B, int64_t T, at::Generator& gen, torch::Device device) const {
  torch::Tensor orders;
  switch (kind) {
    case Kind::kL2R:
      orders = identity(B, T);
      break;
    case Kind::kRandom:  // argsort of i.i.d. uniforms: a uniform permutation per row
      orders = torch::rand({B, T}, gen, torch::kFloat64).argsort(/*dim=*/int64_t{1}, /*descending=*/false);
      break;
    case Kind::kFixedRandom:
      orders = fixed_permutation(T, seed).unsqueeze(0).expand({B, T}).contiguous();
      break;
    case Kind::kBlockwise: {
      if (block <= 0 || T % block != 0)
        throw ConfigError("order block size " + std::to_string(block) + " does not divide T=" + std::to_string(T),
                          "set train.order.block to a divisor of model.block_size");
      // Blocks left to right; inside each block the same fixed permutation.
      auto inner = fixed_permutation(block, seed);                          // (b)
      auto starts = torch::arange(0, T, block, torch::kLong).unsqueeze(1);  // (T/b, 1)
      orders = (starts + inner.unsqueeze(0)).reshape({1, T}).expand({B, T}).contiguous();
      break;
    }
    case Kind::kMixture: {
      orders = torch::rand({B, T}, gen, torch::kFloat64).argsort(/*dim=*/int64_t{1}, /*descending=*/false);
      auto l2r_rows = torch::rand({B}, gen, torch::kFloat64).lt(p_l2r);  // (B) bool
      orders = torch::where(l2r_rows.unsqueeze(1), identity(B, T), orders);
      break;
    }
  }
  return orders.to(device);
}

OrderSpec OrderSpec::from_json(const nlohmann::json& j, const std::string& path) {
  OrderSpec s;
  if (j.is_string()) {
    nlohmann::json o = {{"kind", j}};
    return from_json(o, path);
  }
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string())
    throw ConfigError("'" + path + "' must be an object with a string 'kind'",
                      "kinds: l2r, random, fixed_random, blockwise, mixture");
  const std::string kind = j["kind"];
  if (kind == "l2r")
    s.kind = Kind::kL2R;
  else if (kind == "random")
    s.kind = Kind::kRandom;
  else if (kind == "fixed_random")
    s.kind = Kind::kFixedRandom;
  else if (kind == "blockwise")
    s.kind = Kind::kBlockwise;
  else if (kind == "mixture")
    s.kind = Kind::kMixture;
  else
    throw ConfigError("'" + path + ".kind' = '" + kind + "' is not an order distribution",
                      "kinds: l2r, random, fixed_random, blockwise, mixture");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "kind" && it.key() != "seed" && it.key() != "block" && it.key() != "p_l2r")
      throw ConfigError("unknown key '" + path + "." + it.key() + "'", "order keys: kind, seed, block, p_l2r");
  try {
    if (j.contains("seed")) s.seed = j["seed"].get<uint64_t>();
    if (j.contains("block")) s.block = j["block"].get<int64_t>();
    if (j.contains("p_l2r")) s.p_l2r = j["p_l2r"].get<double>();
  } catch (const nlohmann::json::exception&) {
    throw ConfigError("'" + path + "' has a value of the wrong type: " + j.dump(),
                      "seed: non-negative integer, block: integer, p_l2r: number");
  }
  if (s.kind == Kind::kMixture && !(s.p_l2r >= 0.0 && s.p_l2r <= 1.0))
    throw ConfigError("'" + path + ".p_l2r' must lie in [0, 1]", "AO-GPT uses 0.1");
  if (s.kind == Kind::kBlockwise && s.block <= 0) throw ConfigError("'" + path + ".block' must be positive");
  return s;
}

nlohmann::json OrderSpec::to_json() const {
  static const char* names[] = {"l2r", "random", "fixed_random", "blockwise", "mixture"};
  return {{"kind", names[static_cast<int>(kind)]}, {"seed", seed}, {"block", block}, {"p_l2r", p_l2r}};
}

std::string OrderSpec::describe() const {
  std::ostringstream out;
  switch (kind) {
    case Kind::kL2R:
      out << "l2r";
      break;
    case Kind::kRandom:
      out << "random";
      break;
    case Kind::kFixedRandom:
      out << "fixed_random(seed=" << seed << ")";
      break;
    case Kind::kBlockwise:
      out << "blockwise(block=" << block << ", seed=" << seed << ")";
      break;
    case Kind::kMixture:
      out << "mixture(p_l2r=" << p_l2r << ")";
      break;
  }
  return out.str();
}

}  // namespace aobench
