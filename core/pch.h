// Precompiled header: the heavy third-party headers every translation unit includes.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>
