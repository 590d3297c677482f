// flash_mask: the masks of the fused attention (FlashMask, ops/flash_attention.hpp) as the
// kernels, attributes, work counts and ONNX lowerings of flash_attention and flash_attention_vjp
// read them: per query row a causal limit, a window's first key and a row of the key mask,
// never a T_q x T_k array.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/flash_attention.hpp>
#include <xgrad/ops/kernels/vector_math.hpp>

namespace xgrad::detail {

// Attribute keys of both ops: the scale, the masks and the soft-cap.
inline constexpr const char* flash_key_scale = "scale";
inline constexpr const char* flash_key_causal = "causal";
inline constexpr const char* flash_key_key_mask = "key_mask";
inline constexpr const char* flash_key_window = "window";
inline constexpr const char* flash_key_softcap = "softcap";

// The masks as attributes: causal or not, whether the key mask is the op's last input, and the
// window (0: none). Each is written only when set, so an unmasked op's attrs are {"scale"}, as
// before masks existed.
struct FlashMaskAttrs {
  bool causal = false;
  bool key_mask = false;
  std::size_t window = 0;

  template <class T>
  static FlashMaskAttrs of(const FlashMask<T>& mask) {
    return {mask.causal, mask.key_mask.valid(), mask.window};
  }
  // From attrs whose keys the factory checked: each absent (false, 0) or a JSON boolean, and
  // the window a non-negative integer.
  static FlashMaskAttrs read(const JsonCursor& attrs) {
    FlashMaskAttrs m;
    if (const auto c = attrs.find(flash_key_causal)) m.causal = c->boolean();
    if (const auto c = attrs.find(flash_key_key_mask)) m.key_mask = c->boolean();
    if (const auto c = attrs.find(flash_key_window)) m.window = c->index();
    return m;
  }
  void write(Json& attrs) const {
    if (causal) attrs[flash_key_causal] = true;
    if (key_mask) attrs[flash_key_key_mask] = true;
    if (window > 0) attrs[flash_key_window] = window;
  }
  // Throws xgrad::error naming the window if it is set without causal.
  void check() const {
    if (window > 0 && !causal) {
      throw error("window = " + std::to_string(window) + " is a causal sliding window (query i sees the keys j with "
                  "i' - window < j <= i', i' = i + T_k - T_q): set causal too; a bidirectional window is not supported");
    }
  }
  friend bool operator==(const FlashMaskAttrs& a, const FlashMaskAttrs& b) {
    return a.causal == b.causal && a.key_mask == b.key_mask && a.window == b.window;
  }
};

// The rule of a key-padding mask for batch axes B... and T_k keys: (B..., 1, T_k), rank >= 2,
// each of its batch axes 1 or equal to B...'s (aligned on the right, fewer allowed).
inline bool fits_key_mask(const Shape& mask, const Shape& batch_axes, std::size_t t_k) {
  const std::size_t rank = batch_axes.size() + 2;
  bool fits = mask.size() >= 2 && mask.size() <= rank && mask[mask.size() - 2] == 1 && mask.back() == t_k;
  for (std::size_t a = 0; fits && a + 2 < mask.size(); ++a) {
    const std::size_t m = mask[a];
    fits = m == 1 || m == batch_axes[rank - mask.size() + a];
  }
  return fits;
}

// Throws xgrad::error naming both shapes unless `mask` is a key-padding mask for q and k (dims
// d), by fits_key_mask.
inline void check_key_mask(const Shape& mask, const Shape& q, const Shape& k, const AttentionDims& d) {
  if (fits_key_mask(mask, d.batch_axes, d.t_k)) return;
  Shape expected = d.batch_axes;
  expected.insert(expected.end(), {1, d.t_k});
  throw error("the key mask " + shape_str(mask) + " does not fit q " + shape_str(q) + " and k " + shape_str(k) +
              ": fused attention supports (B..., 1, T_k): a key-padding mask broadcasting to " + shape_str(expected) +
              " (each batch axis 1 or equal); other masks need the composed attention");
}

// The attributes of flash_attention and flash_attention_vjp alike: the scale, the masks and the
// soft-cap (0: none). As JSON {"scale": s} and the masks' and the soft-cap's keys when set.
struct FlashAttentionAttrs {
  double scale;
  FlashMaskAttrs mask;
  double softcap;

  // From an op's attrs: "scale" a number, the others absent or as FlashMaskAttrs::read and a
  // number; other keys refused. The values are checked by check() (an import names the node).
  static FlashAttentionAttrs read(const JsonCursor& attrs) {
    attrs.check_object({flash_key_scale}, {flash_key_causal, flash_key_key_mask, flash_key_window, flash_key_softcap});
    const auto softcap = attrs.find(flash_key_softcap);
    return {attrs[flash_key_scale].number(), FlashMaskAttrs::read(attrs), softcap ? softcap->number() : 0.0};
  }
  Json json() const {
    Json attrs = {{flash_key_scale, scale}};
    mask.write(attrs);
    if (softcap > 0) attrs[flash_key_softcap] = softcap;
    return attrs;
  }
  // Both ops' checks of their inputs x: q, k, v (x[0], x[1], x[2]) and, with a key mask, x[at]:
  // throws xgrad::error for a scale, soft-cap or mask attribute not allowed, or shapes that do
  // not fit. Returns the attention's dims.
  AttentionDims check(const std::vector<Shape>& x, std::size_t mask_at) const {
    check_attention_scale(scale);
    check_attention_softcap(softcap);
    mask.check();
    const AttentionDims d = attention_dims(x[0], x[1], x[2]);
    if (mask.key_mask) check_key_mask(x[mask_at], x[0], x[1], d);
    return d;
  }
};
// The attributes of a flash_attention op; nullopt for any other op (typed access for the VJP's
// check that out and lse come from the same attention).
std::optional<FlashAttentionAttrs> flash_attention_attrs(const Op& op);

// The keys [0, end) that the causal mask lets query rows [i0, i0 + bq) attend:
// end = i0 + bq + T_k - T_q, within [0, T_k].
inline std::size_t causal_key_end(const AttentionDims& d, std::size_t i0, std::size_t bq) {
  const long end = static_cast<long>(i0 + bq + d.t_k) - static_cast<long>(d.t_q);
  return static_cast<std::size_t>(std::clamp<long>(end, 0, static_cast<long>(d.t_k)));
}

// The first key that a causal window of `window` keys (0: none) lets query row i0 attend, and
// rows after it too: i0' + 1 - window, i0' = i0 + T_k - T_q, within [0, T_k].
inline std::size_t window_key_begin(const AttentionDims& d, std::size_t window, std::size_t i0) {
  if (window == 0) return 0;
  const std::size_t end = causal_key_end(d, i0, 1);  // i0' + 1, clamped
  return end > window ? end - window : 0;
}

// The masks of one call as the kernels read them, by batch index b and query row i.
template <class T>
class FlashMaskRows {
 public:
  // key_mask: null, or the key mask's value (its shape checked by check_key_mask); the window
  // comes with causal (FlashMaskAttrs::check).
  FlashMaskRows(const AttentionDims& d, const FlashMaskAttrs& attrs, const xt::xarray<T>* key_mask)
      : m_d(d), m_causal(attrs.causal), m_window(attrs.window) {
    if (!key_mask) return;
    m_key = key_mask->data();
    // The mask's stride along each batch axis of q: 0 where the mask has 1 or lacks the axis.
    const Shape ms = shape_of(*key_mask);
    const std::size_t rank = d.batch_axes.size(), lacking = rank + 2 - ms.size();
    std::vector<std::size_t> strides(rank, 0);
    std::size_t stride = d.t_k;  // past the last axis (T_k) and the query axis (1)
    for (std::size_t a = rank; a-- > lacking;) {
      if (ms[a - lacking] != 1) strides[a] = stride;
      stride *= ms[a - lacking];
    }
    m_key_row.resize(d.batch);
    m_key_end.resize(d.batch);
    for (std::size_t b = 0; b < d.batch; ++b) {
      std::size_t rest = b, offset = 0;
      for (std::size_t a = rank; a-- > 0;) {
        offset += rest % d.batch_axes[a] * strides[a];
        rest /= d.batch_axes[a];
      }
      std::size_t end = d.t_k;
      while (end > 0 && m_key[offset + end - 1] == T(0)) --end;
      m_key_row[b] = offset;
      m_key_end[b] = end;
    }
  }

  // The keys [0, end) that any of query rows [i0, i0 + bq) of batch index b may attend: the
  // kernels skip the keys from there on (whole tiles, and the tail of the last).
  std::size_t key_end(std::size_t b, std::size_t i0, std::size_t bq) const {
    const std::size_t end = m_causal ? causal_key_end(m_d, i0, bq) : m_d.t_k;
    return m_key ? std::min(end, m_key_end[b]) : end;
  }
  // The keys [0, begin) that none of query rows [i0, ...) may attend, by the window (0 without
  // one): the kernels start there.
  std::size_t key_begin(std::size_t i0) const { return window_key_begin(m_d, m_window, i0); }

  // -inf over the scores s[0, n) of query row i of batch index b against keys [j0, j0 + n)
  // where a mask forbids them; a key mask entry that is not 0 (NaN too) allows, as apply_mask.
  void fill(T* s, std::size_t b, std::size_t i, std::size_t j0, std::size_t n) const {
    constexpr T minus_inf = -std::numeric_limits<T>::infinity();
    if (m_key) {
      const T* allowed = m_key + m_key_row[b] + j0;
      for (std::size_t j = 0; j < n; ++j) s[j] = allowed[j] != T(0) ? s[j] : minus_inf;
    }
    if (m_causal) {
      const std::size_t end = causal_key_end(m_d, i, 1);
      if (end < j0 + n) std::fill(s + (std::max(end, j0) - j0), s + n, minus_inf);
    }
    const std::size_t begin = window_key_begin(m_d, m_window, i);
    if (begin > j0) std::fill(s, s + (std::min(begin, j0 + n) - j0), minus_inf);
  }

 private:
  AttentionDims m_d;
  bool m_causal;
  std::size_t m_window;
  const T* m_key = nullptr;
  std::vector<std::size_t> m_key_row;  // per batch index: where its row of T_k starts in the mask
  std::vector<std::size_t> m_key_end;  // per batch index: 1 + its last allowed key (0 if none)
};

// The soft-cap c(s) = cap tanh(s / cap) in place over n scores (inv_cap: 1 / cap rounded to T,
// as the composed scale(tanh(scale(s, 1 / cap)), cap) rounds it; tanh by vector_tanh (ops/kernels/vector_math), within a
// few ulp of std::tanh); with `derivative` (n numbers), c'(s) = 1 - tanh^2(s / cap) there too
// (the VJP's).
template <class T>
void soft_cap(T* s, std::size_t n, T cap, T inv_cap, T* derivative = nullptr) {
  T* t = derivative ? derivative : s;
  for (std::size_t j = 0; j < n; ++j) t[j] = s[j] * inv_cap;
  vector_tanh(t, t, n);
  for (std::size_t j = 0; j < n; ++j) s[j] = t[j] * cap;
  if (derivative) {
    for (std::size_t j = 0; j < n; ++j) derivative[j] = T(1) - t[j] * t[j];
  }
}

// 1 where the causal mask with a window of `window` keys (0: none) allows
// (i' - window < j <= i', i' = i + T_k - T_q), 0 elsewhere: (T_q, T_k). For the second-order rule
// alone, which composes apply_mask nodes.
template <class T>
xt::xarray<T> causal_values(const AttentionDims& d, std::size_t window) {
  xt::xarray<T> m = xt::zeros<T>({d.t_q, d.t_k});
  for (std::size_t i = 0; i < d.t_q; ++i) {
    T* row = m.data() + i * d.t_k;
    std::fill(row + window_key_begin(d, window, i), row + causal_key_end(d, i, 1), T(1));
  }
  return m;
}

// The work (Op::work) of the (B..., T_q, T_k) weights that the forward or the VJP computes
// tile by tile, beyond the elements of its inputs and outputs; q, k, v first in x, valid
// shapes. The tiles the causal mask and the window skip are not counted; those a key mask lets
// the kernels skip depend on its values, and are. A soft-cap costs a tanh per weight computed
// (12 visits, as the tanh row of ops/elementwise.def) and, in the VJP, its derivative written
// to a tile and read back (2 more).
enum class FlashPass { forward, vjp };
double flash_weights_work(const std::vector<Shape>& x, FlashPass pass, const FlashMaskAttrs& mask, bool softcap);

// ONNX: the scores s (B..., T_q, T_k) with -inf where the masks forbid, as the kernels: Where on
// the key mask (input `key_input`: a mask leaf's bool value, else Cast to bool, true where not
// 0), then Where on the causal condition j <= i' = i + T_k - T_q, a LessOrEqual of two int64
// ranges (T_k and T_q numbers, broadcast), never a T_q x T_k initializer; with a window W < T_k,
// And i' - W < j, a Less of two such ranges (W >= T_k forbids nothing more than causal).
inline std::string onnx_flash_mask(OnnxEmitter& e, const OnnxNode& n, std::size_t key_input, const FlashMaskAttrs& mask,
                                   std::string s) {
  const std::string minus_inf = e.scalar(-std::numeric_limits<double>::infinity());
  if (mask.key_mask) {
    const std::string allowed = !n.bool_input(key_input).empty()
                                    ? n.bool_input(key_input)
                                    : e.op("Cast", {n.inputs[key_input]}, {{"to", std::int64_t{9}}});  // 9: BOOL
    s = e.op("Where", {allowed, s, minus_inf});
  }
  if (mask.causal) {
    const Shape& q = n.input_shapes[0];
    const Shape& k = n.input_shapes[1];
    const auto t_q = static_cast<std::int64_t>(q[q.size() - 2]), t_k = static_cast<std::int64_t>(k[k.size() - 2]);
    std::vector<std::int64_t> keys, limits;  // j, and i + T_k - T_q
    for (std::int64_t j = 0; j < t_k; ++j) keys.push_back(j);
    for (std::int64_t i = 0; i < t_q; ++i) limits.push_back(i + t_k - t_q);
    const std::string key_range = e.int64s(keys, Shape{keys.size()});
    std::string allowed = e.op("LessOrEqual", {key_range, e.int64s(limits, Shape{limits.size(), 1})});
    if (mask.window > 0 && mask.window < static_cast<std::size_t>(t_k)) {
      std::vector<std::int64_t> lows;  // i' - W
      for (const std::int64_t limit : limits) lows.push_back(limit - static_cast<std::int64_t>(mask.window));
      allowed = e.op("And", {allowed, e.op("Less", {e.int64s(lows, Shape{lows.size(), 1}), key_range})});
    }
    s = e.op("Where", {allowed, s, minus_inf});
  }
  return s;
}

// ONNX: the soft-cap over the scores `raw` of `shape`, s = C Tanh(raw / C), and with
// `derivative` 1 - Tanh(raw / C)^2 (the VJP's); raw itself and "" without a cap (C = 0). Each
// factor by OnnxEmitter::factor, as the scale of the scores.
struct OnnxSoftCap {
  std::string s, derivative;
};
inline OnnxSoftCap onnx_soft_cap(OnnxEmitter& e, const std::string& raw, const Shape& shape, double softcap,
                                 bool derivative = false) {
  if (softcap == 0) return {raw, ""};
  const std::string t = e.op("Tanh", {e.op("Mul", {raw, e.factor(1.0 / softcap, shape)})});
  OnnxSoftCap c{e.op("Mul", {t, e.factor(softcap, shape)}), ""};
  if (derivative) c.derivative = e.op("Sub", {e.scalar(1.0), e.op("Mul", {t, t})});
  return c;
}

}  // namespace xgrad::detail
