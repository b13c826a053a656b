// Small helpers of the fused ops (cross_entropy.h, layer_norm.h, rms_norm.h, rotary.h …): whether a call records
// a gradient, an autograd Function's optional input, the output dtype of a residual + norm step, whether an
// inference path may call a CUDA kernel directly, a kernel's switch, and whether a tensor's data is aligned for
// vector loads.
#pragma once

#include <initializer_list>
#include <optional>

#include <torch/types.h>

namespace aobench {
class EnvSwitch;  // core/device.h
}  // namespace aobench

namespace aobench::common {

// True when grad mode is on and one of the defined tensors requires a gradient: the kernels without a
// backward (and the autograd Functions' no-grad shortcut) check it.
bool records_grad(std::initializer_list<torch::Tensor> ts);
// An autograd Function's optional tensor input: nullopt for an undefined tensor.
std::optional<torch::Tensor> optional_tensor(const torch::Tensor& t);

// Output dtype of a fused residual + norm step: y's dtype, or without y the autocast dtype under autocast,
// else x's (add_layer_norm, rms_step of rms_norm.h).
torch::ScalarType norm_out_dtype(const torch::Tensor& x, const torch::Tensor& y);

// True when x is on a GPU, the CUDA kernels are built and no gradient is being recorded: the inference paths
// that call the kernels directly (DDiT) check this; add_layer_norm and row_logsumexp check it themselves.
bool fused_inference(const torch::Tensor& x);

// A kernel's speed switch (decode_attention_enabled, decode_linear_enabled, decode_pdl_enabled): s.on() when the
// CUDA kernels are built, false in a build without them.
bool kernel_switch_on(EnvSwitch& s);

// True when t is undefined or its data starts at a multiple of `bytes` (the kernels' vector loads).
bool aligned(const torch::Tensor& t, int64_t bytes);

}  // namespace aobench::common
