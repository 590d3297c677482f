// The blocks of lib/: attention (composed, masked, fused, variants), multi-head attention, the
// masks, losses, and the saturation diagnostics and sweep.
#include "common.hpp"

#include <cmath>

namespace xgrad::python {

namespace {

// A mask argument: None, a Var (a mask leaf or a node of 1 and 0) or a fixed numpy bool array.
using MaskArg = std::optional<std::variant<PyVar, py::array>>;

AttentionImpl attention_impl(const std::string& impl) {
  if (impl == "composed") return AttentionImpl::composed;
  if (impl == "fused") return AttentionImpl::fused;
  throw error("impl \"" + impl + "\" is neither \"composed\" nor \"fused\"");
}

template <class T>
double default_scale(const Var<T>& q, const std::optional<double>& scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.shape().empty() ? 1 : q.shape().back()));
}

// Attention's nodes, for inspection: scores, weights, output, and for masked attention the mask
// and the masked scores (None otherwise).
struct PyAttentionNodes {
  PyVar scores, weights, output;
  std::optional<PyVar> mask, masked;
};

template <class T>
PyAttentionNodes wrap_nodes(const BoxPtr<T>& box, const AttentionNodes<T>& a) {
  PyAttentionNodes out{wrap(box, a.scores), wrap(box, a.weights), wrap(box, a.output), std::nullopt, std::nullopt};
  if (a.mask.valid()) out.mask = wrap(box, a.mask);
  if (a.masked.valid()) out.masked = wrap(box, a.masked);
  return out;
}

PyAttentionNodes attention_nodes_of(const PyVar& q, const PyVar& k, const PyVar& v, const MaskArg& mask,
                                    std::optional<double> scale) {
  return std::visit([&](const auto& t) {
    using T = typename std::decay_t<decltype(t)>::type;
    const Var<T>& kv = typed<T>(k).var;
    const Var<T>& vv = typed<T>(v).var;
    if (!mask) return wrap_nodes(t.box, locked(t.box, [&] { return attention_nodes(t.var, kv, vv, scale); }));
    if (const PyVar* m = std::get_if<PyVar>(&*mask)) {
      const Var<T>& mv = typed<T>(*m).var;
      return wrap_nodes(t.box, locked(t.box, [&] { return masked_attention_nodes(t.var, kv, vv, mv, scale); }));
    }
    const xt::xarray<bool> fixed = to_mask(std::get<py::array>(*mask), "attention(mask=...)");
    return wrap_nodes(t.box, locked(t.box, [&] { return masked_attention_nodes(t.var, kv, vv, fixed, scale); }));
  }, q.v);
}

template <class T>
FlashMask<T> flash_mask(bool causal, const std::optional<PyVar>& key_mask, std::size_t window) {
  FlashMask<T> mask;
  mask.causal = causal;
  mask.key_mask = typed<T>(key_mask);
  mask.window = window;
  return mask;
}

// The eight projections of an attention block, as attention_params makes them.
struct PyAttentionParams {
  PyVar w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o;
  std::optional<PyVar> q_gain, k_gain;  // the variant block's QK-norm gains (d_head)
  template <class T>
  AttentionParams<T> typed_params() const {
    return {typed<T>(w_q).var, typed<T>(b_q).var, typed<T>(w_k).var, typed<T>(b_k).var,
            typed<T>(w_v).var, typed<T>(b_v).var, typed<T>(w_o).var, typed<T>(b_o).var};
  }
  template <class T>
  VariantAttentionParams<T> typed_variant_params() const {
    VariantAttentionParams<T> p(typed_params<T>());
    p.q_gain = typed<T>(q_gain);
    p.k_gain = typed<T>(k_gain);
    return p;
  }
};

template <class T>
PyAttentionParams wrap_params(const BoxPtr<T>& box, const AttentionParams<T>& p) {
  return PyAttentionParams{wrap(box, p.w_q), wrap(box, p.b_q), wrap(box, p.w_k), wrap(box, p.b_k),
                           wrap(box, p.w_v), wrap(box, p.b_v), wrap(box, p.w_o), wrap(box, p.b_o),
                           std::nullopt, std::nullopt};
}

QkNorm qk_norm_kind(const std::string& kind) { return parse_name(qk_norm_names, kind, "qk_norm: kind"); }

// variant_attention's keyword arguments, shared by the block.
struct VariantArgs {
  std::optional<double> scale;
  double softcap = 0;
  std::optional<PyVar> bias, mask;
  bool causal = false;
  std::size_t window = 0;
  std::string weights = "softmax";
  std::optional<double> sigmoid_bias;
  std::string impl = "composed";

  template <class T>
  VariantOptions<T> options() const {
    const AttentionWeights kind = parse_name(attention_weights_names, weights, "variant_attention: weights");
    VariantOptions<T> o;
    o.scale = scale;
    o.softcap = softcap;
    o.bias = typed<T>(bias);
    o.mask = typed<T>(mask);
    o.causal = causal;
    o.window = window;
    o.weights = kind;
    o.sigmoid_bias = sigmoid_bias;
    o.impl = attention_impl(impl);
    return o;
  }
};

Reduction reduction_of(const std::string& name) {
  if (name == "mean") return Reduction::mean;
  if (name == "sum") return Reduction::sum;
  if (name == "none") return Reduction::none;
  throw error("cross_entropy: reduction \"" + name + "\" is none of \"mean\", \"sum\", \"none\"");
}

py::object from_json(const Json& json) { return py::module_::import("json").attr("loads")(json.dump()); }

struct PySweep {
  std::vector<SweepRow> rows;
};

}  // namespace

void bind_blocks(py::module_& m) {
  py::class_<PyAttentionNodes>(m, "AttentionNodes", "The nodes attention_nodes builds, to inspect.")
      .def_readonly("scores", &PyAttentionNodes::scores, "scale * q k^T (B..., T_q, T_k)")
      .def_readonly("weights", &PyAttentionNodes::weights, "the softmax weights; rows sum to 1 (0 when every key is masked)")
      .def_readonly("output", &PyAttentionNodes::output, "weights @ v (B..., T_q, d_v)")
      .def_readonly("mask", &PyAttentionNodes::mask, "masked attention: the mask node; None otherwise")
      .def_readonly("masked", &PyAttentionNodes::masked, "masked attention: the scores with -inf where masked; None otherwise");

  m.def("attention_nodes", &attention_nodes_of, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask") = py::none(),
        py::arg("scale") = py::none(),
        "The composed attention's nodes (AttentionNodes): scores, weights, output (and mask, masked with a mask).");
  m.def("attention", [](const PyVar& q, const PyVar& k, const PyVar& v, const MaskArg& mask, std::optional<double> scale,
                        const std::string& impl) {
    if (attention_impl(impl) == AttentionImpl::composed) return attention_nodes_of(q, k, v, mask, scale).output;
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      FlashMask<T> fm;
      if (mask) {
        if (const PyVar* mv = std::get_if<PyVar>(&*mask)) {
          fm.key_mask = typed<T>(*mv).var;
        } else {
          const xt::xarray<bool> fixed = to_mask(std::get<py::array>(*mask), "attention(mask=...)");
          const Shape s = t.var.shape(), ks = typed<T>(k).var.shape();
          const std::size_t tq = s.size() >= 2 ? s[s.size() - 2] : 0, tk = ks.size() >= 2 ? ks[ks.size() - 2] : 0;
          if (fixed != causal_mask(tq, tk)) {
            throw error("attention(impl=\"fused\"): a fixed mask must be causal_mask(T_q, T_k); for another mask use "
                        "impl=\"composed\" (a key-padding mask is a Var (B..., 1, T_k))");
          }
          fm.causal = true;
        }
      }
      const Var<T>& kv = typed<T>(k).var;
      const Var<T>& vv = typed<T>(v).var;
      return wrap(t.box, locked(t.box, [&] { return fused_attention(t.var, kv, vv, scale, fm); }));
    }, q.v);
  }, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask") = py::none(), py::arg("scale") = py::none(),
        py::arg("impl") = "composed",
        R"(softmax(scale q k^T + M) v, scale 1/sqrt(d_k) unless given.

q (B..., T_q, d_k), k (B..., T_k, d_k), v (B..., T_k, d_v) -> (B..., T_q, d_v). mask: None, a Var
(a mask leaf g.mask(...) replaced per batch, or a node of 1 and 0) or a fixed numpy bool array
(true = may attend), broadcasting to the scores (B..., T_q, T_k); M is -inf where the mask is
false. impl "composed" (five inspectable nodes) or "fused" (one flash_attention node; its masks:
causal_mask as a fixed mask, or a key-padding Var (B..., 1, T_k)).)");
  m.def("masked_attention", [](const PyVar& q, const PyVar& k, const PyVar& v, const std::variant<PyVar, py::array>& mask) {
    return attention_nodes_of(q, k, v, mask, std::nullopt).output;
  }, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask"), "attention(q, k, v, mask).");
  m.def("flash_attention", [](const PyVar& q, const PyVar& k, const PyVar& v, std::optional<double> scale, bool causal,
                              const std::optional<PyVar>& key_mask, std::size_t window, double softcap) {
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      const FlashMask<T> mask = flash_mask<T>(causal, key_mask, window);
      const Var<T>& kv = typed<T>(k).var;
      const Var<T>& vv = typed<T>(v).var;
      const auto r = locked(t.box, [&] { return flash_attention(t.var, kv, vv, default_scale(t.var, scale), mask, softcap); });
      return py::make_tuple(wrap(t.box, r.out), wrap(t.box, r.lse));
    }, q.v);
  }, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("scale") = py::none(), py::arg("causal") = false,
        py::arg("key_mask") = py::none(), py::arg("window") = 0, py::arg("softcap") = 0.0,
        "The fused attention node: (out, lse), memory O((T_q + T_k) d); causal, a sliding window (with causal), "
        "a key-padding mask Var (B..., 1, T_k), a tanh soft-cap.");

  m.def("causal_mask", [](std::size_t t_q, std::size_t t_k) { return to_numpy(causal_mask(t_q, t_k)); }, py::arg("t_q"),
        py::arg("t_k"), "(T_q, T_k) bool: query i sees keys j <= i + T_k - T_q.");
  m.def("sliding_window_mask", [](std::size_t t_q, std::size_t t_k, std::size_t window) {
    return to_numpy(sliding_window_mask(t_q, t_k, window));
  }, py::arg("t_q"), py::arg("t_k"), py::arg("window"), "The causal mask limited to the last `window` keys.");
  m.def("padding_mask", [](const std::vector<std::size_t>& lengths, std::size_t t_q, std::size_t t_k, bool head_axis) {
    return to_numpy(padding_mask(lengths, t_q, t_k, head_axis));
  }, py::arg("lengths"), py::arg("t_q"), py::arg("t_k"), py::arg("head_axis") = false,
        "(B, T_q, T_k) bool, or (B, 1, T_q, T_k) with head_axis: sequence b has lengths[b] real keys.");
  m.def("key_padding_mask", [](const std::vector<std::size_t>& lengths, std::size_t t_k) {
    return to_numpy(key_padding_mask(lengths, t_k));
  }, py::arg("lengths"), py::arg("t_k"), "(B, 1, 1, T_k) bool: broadcasts over heads and queries.");

  py::class_<PyAttentionParams>(m, "AttentionParams", "The projections of an attention block: w_q, b_q, ..., w_o, b_o.")
      .def(py::init<PyVar, PyVar, PyVar, PyVar, PyVar, PyVar, PyVar, PyVar, std::optional<PyVar>, std::optional<PyVar>>(),
           py::arg("w_q"), py::arg("b_q"), py::arg("w_k"), py::arg("b_k"), py::arg("w_v"), py::arg("b_v"), py::arg("w_o"),
           py::arg("b_o"), py::arg("q_gain") = py::none(), py::arg("k_gain") = py::none(),
           "Weights (d_model, d_model) applied as x W, biases (d_model), e.g. parameter leaves of your own; "
           "for variant_multi_head_attention w_k, w_v (d_model, d_kv) and, with QK-norm, gains (d_head).")
      .def_readonly("w_q", &PyAttentionParams::w_q).def_readonly("b_q", &PyAttentionParams::b_q)
      .def_readonly("w_k", &PyAttentionParams::w_k).def_readonly("b_k", &PyAttentionParams::b_k)
      .def_readonly("w_v", &PyAttentionParams::w_v).def_readonly("b_v", &PyAttentionParams::b_v)
      .def_readonly("w_o", &PyAttentionParams::w_o).def_readonly("b_o", &PyAttentionParams::b_o)
      .def_readonly("q_gain", &PyAttentionParams::q_gain).def_readonly("k_gain", &PyAttentionParams::k_gain);
  m.def("attention_params", [](const PyGraph& g, std::size_t d_model, std::uint64_t seed, const std::string& prefix) {
    return std::visit([&](const auto& box) {
      const auto p = locked(box, [&] { return attention_params(*box->graph, d_model, seed, prefix); });
      return wrap_params(box, p);
    }, g.g);
  }, py::arg("graph"), py::arg("d_model"), py::arg("seed"), py::arg("prefix") = "attn",
        "Parameter leaves \"<prefix>.w_q\", ...: Glorot-uniform (d_model, d_model) weights from seed, seed + 1, ..., zero biases.");
  m.def("multi_head_attention", [](const PyVar& x_q, const PyVar& x_kv, const PyAttentionParams& params, std::size_t heads,
                                   const MaskArg& mask, const std::string& impl) {
    const AttentionImpl how = attention_impl(impl);
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      const AttentionParams<T> p = params.typed_params<T>();
      const Var<T>& kv = typed<T>(x_kv).var;
      if (mask) {
        if (const PyVar* mv = std::get_if<PyVar>(&*mask)) {
          const Var<T>& mask_var = typed<T>(*mv).var;
          return wrap(t.box, locked(t.box, [&] { return multi_head_attention(t.var, kv, p, heads, mask_var, how); }));
        }
        const xt::xarray<bool> fixed = to_mask(std::get<py::array>(*mask), "multi_head_attention(mask=...)");
        return wrap(t.box, locked(t.box, [&] { return multi_head_attention(t.var, kv, p, heads, fixed, how); }));
      }
      return wrap(t.box, locked(t.box, [&] { return multi_head_attention(t.var, kv, p, heads, std::nullopt, how); }));
    }, x_q.v);
  }, py::arg("x_q"), py::arg("x_kv"), py::arg("params"), py::arg("heads"), py::arg("mask") = py::none(),
        py::arg("impl") = "composed",
        "Multi-head attention of x_q (B, T_q, d) over x_kv (B, T_k, d): projections (x W + b), heads split, "
        "attention per head (mask broadcasting to (B, H, T_q, T_k)), heads merged, output projection.");

  // The attention variants (docs/attention-variants.md).
  m.def("rope_positions", [](const PyGraph& g, std::size_t t) {
    return std::visit([&](const auto& box) { return wrap(box, locked(box, [&] { return rope_positions(*box->graph, t); })); }, g.g);
  }, py::arg("graph"), py::arg("t"), "The positions 0..T-1 as a constant (T), for rope.");
  m.def("repeat_kv", [](const PyVar& x, std::size_t groups) { return call([&](const auto& v) { return repeat_kv(v, groups); }, x); },
        py::arg("x"), py::arg("groups"), "Each key/value head (third axis from last) repeated for `groups` query heads (GQA).");
  m.def("alibi_slopes", &alibi_slopes, py::arg("heads"), "ALiBi's slope per head.");
  m.def("alibi_bias", [](const PyGraph& g, std::size_t heads, std::size_t t_q, std::size_t t_k) {
    return std::visit([&](const auto& box) {
      return wrap(box, locked(box, [&] { return alibi_bias(*box->graph, heads, t_q, t_k); }));
    }, g.g);
  }, py::arg("graph"), py::arg("heads"), py::arg("t_q"), py::arg("t_k"), "ALiBi's bias (heads, T_q, T_k) as a constant.");
  m.def("softcap", [](const PyVar& x, double cap) { return call([&](const auto& v) { return softcap(v, cap); }, x); },
        py::arg("x"), py::arg("cap"), "cap * tanh(x / cap).");
  m.def("qk_norm", [](const PyVar& x, const PyVar& gain, const std::string& kind, double eps) {
    const QkNorm k = qk_norm_kind(kind);
    return call([&](const auto& xv, const auto& gv) { return qk_norm(xv, gv, k, eps); }, x, gain);
  }, py::arg("x"), py::arg("gain"), py::arg("kind") = "rms", py::arg("eps") = 1e-5, "q or k normalised per head, times gain.");
  m.def("variant_attention", [](const PyVar& q, const PyVar& k, const PyVar& v, std::optional<double> scale, double cap,
                                const std::optional<PyVar>& bias, const std::optional<PyVar>& mask, bool causal,
                                std::size_t window, const std::string& weights, std::optional<double> sigmoid_bias,
                                const std::string& impl) {
    const VariantArgs args{scale, cap, bias, mask, causal, window, weights, sigmoid_bias, impl};
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      const VariantOptions<T> o = args.options<T>();
      const Var<T>& kv = typed<T>(k).var;
      const Var<T>& vv = typed<T>(v).var;
      return wrap(t.box, locked(t.box, [&] { return variant_attention(t.var, kv, vv, o); }));
    }, q.v);
  }, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("scale") = py::none(), py::arg("softcap") = 0.0,
        py::arg("bias") = py::none(), py::arg("mask") = py::none(), py::arg("causal") = false, py::arg("window") = 0,
        py::arg("weights") = "softmax", py::arg("sigmoid_bias") = py::none(), py::arg("impl") = "composed",
        "Attention with the variants: Hq query heads over Hkv key/value heads (GQA), soft-cap, an additive bias "
        "(ALiBi), a mask Var, causal and a sliding window, softmax or sigmoid weights (docs/attention-variants.md).");
  m.def("variant_attention_params", [](const PyGraph& g, std::size_t d_model, std::size_t heads, std::size_t kv_heads,
                                       bool qk_norm, std::uint64_t seed, const std::string& prefix) {
    return std::visit([&](const auto& box) {
      const auto p = locked(box, [&] { return variant_attention_params(*box->graph, d_model, heads, kv_heads, qk_norm, seed, prefix); });
      PyAttentionParams out = wrap_params(box, p);
      if (p.q_gain.valid()) out.q_gain = wrap(box, p.q_gain);
      if (p.k_gain.valid()) out.k_gain = wrap(box, p.k_gain);
      return out;
    }, g.g);
  }, py::arg("graph"), py::arg("d_model"), py::arg("heads"), py::arg("kv_heads"), py::arg("qk_norm") = false,
        py::arg("seed") = 0, py::arg("prefix") = "attn",
        "A variant block's parameters: w_q (d, d), w_k, w_v (d, d kv_heads / heads), w_o, biases, and with "
        "qk_norm the gains q_gain, k_gain (d_head).");
  m.def("variant_multi_head_attention", [](const PyVar& x, const PyAttentionParams& params, std::size_t heads,
                                           std::optional<std::size_t> kv_heads, bool rope, double rope_base,
                                           const std::string& qk_norm, double qk_norm_eps, bool alibi,
                                           std::optional<double> scale, double cap, const std::optional<PyVar>& bias,
                                           const std::optional<PyVar>& mask, bool causal, std::size_t window,
                                           const std::string& weights, std::optional<double> sigmoid_bias,
                                           const std::string& impl) {
    const VariantArgs args{scale, cap, bias, mask, causal, window, weights, sigmoid_bias, impl};
    const QkNorm norm = qk_norm_kind(qk_norm);
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      VariantBlockOptions<T> o;
      o.rope = rope;
      o.rope_base = rope_base;
      o.qk_norm = norm;
      o.qk_norm_eps = qk_norm_eps;
      o.alibi = alibi;
      o.attention = args.options<T>();
      const VariantAttentionParams<T> p = params.typed_variant_params<T>();
      return wrap(t.box, locked(t.box, [&] { return variant_multi_head_attention(t.var, p, heads, kv_heads.value_or(heads), o); }));
    }, x.v);
  }, py::arg("x"), py::arg("params"), py::arg("heads"), py::arg("kv_heads") = py::none(), py::arg("rope") = false,
        py::arg("rope_base") = 10000.0, py::arg("qk_norm") = "none", py::arg("qk_norm_eps") = 1e-5, py::arg("alibi") = false,
        py::arg("scale") = py::none(), py::arg("softcap") = 0.0, py::arg("bias") = py::none(), py::arg("mask") = py::none(),
        py::arg("causal") = false, py::arg("window") = 0, py::arg("weights") = "softmax",
        py::arg("sigmoid_bias") = py::none(), py::arg("impl") = "composed",
        "Self-attention block of x (B, T, d_model) with the variants: GQA (kv_heads), RoPE, QK-norm (\"rms\", "
        "\"layer\"), ALiBi, and variant_attention's options (docs/attention-variants.md).");

  // Losses.
  m.def("cross_entropy", [](const PyVar& logits, const PyVar& targets, long axis, std::optional<std::int64_t> ignore_index,
                            const std::optional<py::array>& weights, double label_smoothing, const std::string& reduction) {
    const Reduction r = reduction_of(reduction);
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      const Var<T>& y = typed<T>(targets).var;
      if (!y.node().index_leaf) {
        if (ignore_index || weights || label_smoothing != 0 || r != Reduction::mean) {
          throw error("cross_entropy: ignore_index, weights, label_smoothing and reduction take labels (an index leaf, "
                      "g.indices), not target probabilities");
        }
        return wrap(t.box, locked(t.box, [&] { return cross_entropy(t.var, y, axis); }));
      }
      if (axis != -1) throw error("cross_entropy: with labels the class axis is the last one (axis -1)");
      CrossEntropyOptions<T> o;
      o.ignore_index = ignore_index;
      if (weights) o.weights = to_xarray<T>(*weights, "cross_entropy(weights=...)");
      o.label_smoothing = label_smoothing;
      o.reduction = r;
      return wrap(t.box, locked(t.box, [&] { return cross_entropy(t.var, y, o); }));
    }, logits.v);
  }, py::arg("logits"), py::arg("targets"), py::arg("axis") = -1, py::arg("ignore_index") = py::none(),
        py::arg("weights") = py::none(), py::arg("label_smoothing") = 0.0, py::arg("reduction") = "mean",
        R"(Cross-entropy under softmax(logits).

targets a Var of probabilities (one_hot(labels)): the mean over every position but `axis`. Or
labels, an index leaf (N...) with logits (N..., C): torch.nn.functional.cross_entropy with
ignore_index, class weights (C), label_smoothing, reduction "mean", "sum" or "none".)");
  m.def("mse_loss", [](const PyVar& p, const PyVar& t) { return call([](const auto& a, const auto& b) { return mse_loss(a, b); }, p, t); },
        py::arg("prediction"), py::arg("target"), "mean((prediction - target)^2).");
  m.def("one_hot", [](const std::vector<std::size_t>& labels, std::size_t classes) {
    xt::xarray<std::size_t> l = xt::xarray<std::size_t>::from_shape({labels.size()});
    std::copy(labels.begin(), labels.end(), l.begin());
    return to_numpy(one_hot<double>(l, classes));
  }, py::arg("labels"), py::arg("classes"), "(N, classes) float64 rows of 0 with a 1 at each label.");

  // Saturation diagnostics (docs/saturation.md), as the JSON the exports carry, in Python objects.
  m.def("softmax_diagnostics", [](const PyGraph& g, double threshold, bool rows, std::optional<std::size_t> group_axis) {
    const Json json = std::visit([&](const auto& box) {
      return locked(box, [&] { return diagnostics_to_json(softmax_diagnostics(*box->graph, threshold, rows, group_axis), rows); });
    }, g.g);
    return from_json(json);
  }, py::arg("graph"), py::arg("threshold") = 0.99, py::arg("rows") = false, py::arg("group_axis") = py::none(),
        "Per softmax node: saturated fraction, entropies, gradient gains (after grad()), as a list of dicts; "
        "rows=True adds per-row arrays, group_axis=1 one group per head of (B, H, T_q, T_k) weights.");
  m.def("attention_weights_diagnostics", [](const PyVar& weights, const PyVar& logits, double threshold, bool rows) {
    const Json json = std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      const Var<T>& l = typed<T>(logits).var;
      return locked(t.box, [&] { return diagnostics_to_json({attention_weights_diagnostics(t.var, l, threshold, rows)}, rows); });
    }, weights.v);
    return from_json(json)[py::int_(0)];
  }, py::arg("weights"), py::arg("logits"), py::arg("threshold") = 0.99, py::arg("rows") = false,
        "The same statistics for any attention weights node (sigmoid attention), rows normalised first.");

  py::class_<PySweep>(m, "Sweep", "The scale sweep's rows: str() a table, .rows dicts, .csv(), .svg().")
      .def_property_readonly("rows", [](const PySweep& s) { return from_json(sweep_to_json(s.rows))["rows"]; })
      .def("csv", [](const PySweep& s) { return sweep_to_csv(s.rows); })
      .def("svg", [](const PySweep& s) { return sweep_to_svg(s.rows); })
      .def("__str__", [](const PySweep& s) { return sweep_to_table(s.rows); });
  m.def("saturation_sweep", [](const std::vector<std::size_t>& d_k, std::size_t t_q, std::size_t t_k, std::size_t d_v,
                               std::size_t trials, std::uint64_t seed, double threshold) {
    SweepOptions o;
    o.d_k = d_k;
    o.t_q = t_q;
    o.t_k = t_k;
    o.d_v = d_v;
    o.trials = trials;
    o.seed = seed;
    o.threshold = threshold;
    py::gil_scoped_release release;
    return PySweep{saturation_sweep(o)};
  }, py::arg("d_k") = std::vector<std::size_t>{1, 4, 16, 64, 256, 1024}, py::arg("t_q") = 16, py::arg("t_k") = 16,
        py::arg("d_v") = 16, py::arg("trials") = 20, py::arg("seed") = 0, py::arg("threshold") = 0.99,
        "Scaled against unscaled attention over key widths d_k on random inputs: max weight, entropy, "
        "gradient gain, ... (lib/saturation.hpp).");
}

}  // namespace xgrad::python
