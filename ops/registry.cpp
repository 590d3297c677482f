#include <xgrad/ops/registry.hpp>

#include <algorithm>

#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/dropout.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/embedding.hpp>
#include <xgrad/ops/flash_attention.hpp>
#include <xgrad/ops/gelu.hpp>
#include <xgrad/ops/layer_norm.hpp>
#include <xgrad/ops/log_softmax.hpp>
#include <xgrad/ops/matmul.hpp>
#include <xgrad/ops/pad.hpp>
#include <xgrad/ops/concat.hpp>
#include <xgrad/ops/permute.hpp>
#include <xgrad/ops/pow.hpp>
#include <xgrad/ops/reshape.hpp>
#include <xgrad/ops/rms_norm.hpp>
#include <xgrad/ops/rope.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/slice.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/softmax_vjp.hpp>
#include <xgrad/ops/split.hpp>
#include <xgrad/ops/sum.hpp>
#include <xgrad/ops/sum_to.hpp>
#include <xgrad/ops/take_label.hpp>
#include <xgrad/ops/transpose.hpp>
#include <xgrad/ops/where.hpp>

namespace xgrad {

namespace {

struct Entry {
  const char* name;
  std::shared_ptr<const Op> (*make)(const JsonCursor& attrs);
};

// Every op, by the name its name() returns. An op added to ops/ as a file pair is added here.
const Entry registry[] = {
    {"apply_mask", make_apply_mask_op},
    {"broadcast_to", make_broadcast_to_op},
    {"concat", make_concat_op},
    {"dropout", make_dropout_op},
    {"embedding", make_embedding_op},
    {"embedding_vjp", make_embedding_vjp_op},
    {"flash_attention", make_flash_attention_op},
    {"flash_attention_vjp", make_flash_attention_vjp_op},
    {"gelu", make_gelu_op},
    {"gelu_vjp", make_gelu_vjp_op},
    {"layer_norm", make_layer_norm_op},
    {"layer_norm_vjp", make_layer_norm_vjp_op},
    {"linear", make_linear_op},
    {"log_softmax", make_log_softmax_op},
    {"matmul", make_matmul_op},
    {"mean", make_mean_op},
    {"pad", make_pad_op},
    {"permute", make_permute_op},
    {"pow", make_pow_op},
    {"reshape", make_reshape_op},
    {"rms_norm", make_rms_norm_op},
    {"rms_norm_vjp", make_rms_norm_vjp_op},
    {"rope", make_rope_op},
    {"scale", make_scale_op},
    {"slice", make_slice_op},
    {"softmax", make_softmax_op},
    {"softmax_vjp", make_softmax_vjp_op},
    {"split", make_split_op},
    {"sum", make_sum_op},
    {"sum_to", make_sum_to_op},
    {"take_label", make_take_label_op},
    {"take_label_vjp", make_take_label_vjp_op},
    {"transpose", make_transpose_op},
    {"where", make_where_op},
    // and every row of ops/elementwise.def (relu, exp, add, div, ...)
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX) {#NAME, make_##NAME##_op},
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX) {#NAME, make_##NAME##_op},
#include <xgrad/ops/elementwise.def>
};

}  // namespace

std::shared_ptr<const Op> make_op(const std::string& name, const JsonCursor& attrs) {
  for (const Entry& e : registry) {
    if (name == e.name) return e.make(attrs);
  }
  return nullptr;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const Entry& e : registry) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace xgrad
