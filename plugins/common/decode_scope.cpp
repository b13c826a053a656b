// Implements: plugins/common/decode_scope.h.
#include "plugins/common/decode_scope.h"

#include "core/device.h"
#include "plugins/common/kernel_util.h"

namespace aobench::common {

namespace {
EnvSwitch decode_pdl_switch("AOBENCH_DECODE_PDL");

thread_local int weights_scopes = 0;  // DecodeWeightsScope objects alive on this thread
}  // namespace

DecodeWeightsScope::DecodeWeightsScope() { ++weights_scopes; }
DecodeWeightsScope::~DecodeWeightsScope() { --weights_scopes; }
bool DecodeWeightsScope::active() { return weights_scopes > 0; }

bool decode_pdl_enabled() { return kernel_switch_on(decode_pdl_switch); }
void set_decode_pdl_enabled(bool on) { decode_pdl_switch.set(on); }

bool decode_pdl() { return DecodeWeightsScope::active() && decode_pdl_enabled(); }

}  // namespace aobench::common
