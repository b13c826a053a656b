// Precompiled header: the heavy third-party headers every translation unit includes.
#pragma once
#include <torch/torch.h>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
