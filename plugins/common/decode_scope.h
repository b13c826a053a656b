// How the kernels of a decode step launch. Inside a sampler (a DecodeWeightsScope) no kernel still running
// writes the weights, and the step's kernels (decode_linear, add_layer_norm, rms_step, decode_attention) launch
// as programmatic dependents (PDL, sm_90): the blocks of each start while the kernel before it finishes and wait
// (griddepcontrol.wait) before they read its writes or write anything. Before the wait each reads only what no
// kernel of the step writes: decode_linear its weights, rms_step its norm weight, adaLN table rows and row index,
// decode_attention the slot counter and the keys and values cached before the step. So the launch and the first
// memory round trips of each kernel hide behind the one before. The rule that keeps this safe: such data is
// written before the kernel right before the reader started. A kernel's writes are certain to be visible only
// after a wait on it, and a dependent may start as soon as the blocks of the kernel before it have exited (or let
// it); but a kernel launched in stream order starts only once everything before it has completed. So AO-GPT
// computes its row index before the embedding kernel, never right before the first rms_step, and rms_step
// launches in stream order when it had to copy the index itself. AOBENCH_DECODE_PDL=0 (perf.decode_pdl) launches
// them in plain stream order.
#pragma once

namespace aobench::common {

// While one lives on this thread (a sampler's scope, from before its first step), the weights given to the
// decode kernels are written by no kernel still running on the stream. Nests.
class DecodeWeightsScope {
 public:
  DecodeWeightsScope();
  ~DecodeWeightsScope();
  DecodeWeightsScope(const DecodeWeightsScope&) = delete;
  DecodeWeightsScope& operator=(const DecodeWeightsScope&) = delete;
  static bool active();  // whether one lives on this thread
};

// Whether the decode kernels launched now on this thread are programmatic dependents: inside a
// DecodeWeightsScope, with the switch on and the CUDA kernels built.
bool decode_pdl();
// The switch (AOBENCH_DECODE_PDL, perf.decode_pdl); tests flip it.
bool decode_pdl_enabled();
void set_decode_pdl_enabled(bool on);

}  // namespace aobench::common
