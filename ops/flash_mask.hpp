// flash_mask: the masks of the fused attention (FlashMask, ops/flash_attention.hpp) as the
// kernels, attributes, work counts and ONNX lowerings of flash_attention and flash_attention_vjp
// read them: per query row a causal limit and a row of the key mask, never a T_q x T_k array.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <xgrad/ops/flash_attention.hpp>

namespace xgrad::detail {

// Attribute keys of the masks, beside "scale", in the attrs of both ops.
inline constexpr const char* flash_key_causal = "causal";
inline constexpr const char* flash_key_key_mask = "key_mask";

// The masks as attributes: causal or not, and whether the key mask is the op's last input. Each
// is written only when true, so an unmasked op's attrs are {"scale"}, as before masks existed.
struct FlashMaskAttrs {
  bool causal = false;
  bool key_mask = false;

  template <class T>
  static FlashMaskAttrs of(const FlashMask<T>& mask) {
    return {mask.causal, mask.key_mask.valid()};
  }
  // From attrs whose keys the factory checked: each absent (false) or a JSON boolean.
  static FlashMaskAttrs read(const JsonCursor& attrs) {
    FlashMaskAttrs m;
    if (const auto c = attrs.find(flash_key_causal)) m.causal = c->boolean();
    if (const auto c = attrs.find(flash_key_key_mask)) m.key_mask = c->boolean();
    return m;
  }
  void write(Json& attrs) const {
    if (causal) attrs[flash_key_causal] = true;
    if (key_mask) attrs[flash_key_key_mask] = true;
  }
  friend bool operator==(const FlashMaskAttrs& a, const FlashMaskAttrs& b) {
    return a.causal == b.causal && a.key_mask == b.key_mask;
  }
};

// The attributes of a flash_attention op; nullopt for any other op (typed access for the VJP's
// check that out and lse come from the same attention).
struct FlashAttentionAttrs {
  double scale;
  FlashMaskAttrs mask;
};
std::optional<FlashAttentionAttrs> flash_attention_attrs(const Op& op);

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

// The keys [0, end) that the causal mask lets query rows [i0, i0 + bq) attend:
// end = i0 + bq + T_k - T_q, within [0, T_k].
inline std::size_t causal_key_end(const AttentionDims& d, std::size_t i0, std::size_t bq) {
  const long end = static_cast<long>(i0 + bq + d.t_k) - static_cast<long>(d.t_q);
  return static_cast<std::size_t>(std::clamp<long>(end, 0, static_cast<long>(d.t_k)));
}

// The masks of one call as the kernels read them, by batch index b and query row i.
template <class T>
class FlashMaskRows {
 public:
  // key_mask: null, or the key mask's value (its shape checked by check_key_mask).
  FlashMaskRows(const AttentionDims& d, bool causal, const xt::xarray<T>* key_mask) : m_d(d), m_causal(causal) {
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
  }

 private:
  AttentionDims m_d;
  bool m_causal;
  const T* m_key = nullptr;
  std::vector<std::size_t> m_key_row;  // per batch index: where its row of T_k starts in the mask
  std::vector<std::size_t> m_key_end;  // per batch index: 1 + its last allowed key (0 if none)
};

// 1 where the causal mask allows (j <= i + T_k - T_q), 0 elsewhere: (T_q, T_k). For the
// second-order rule alone, which composes apply_mask nodes.
template <class T>
xt::xarray<T> causal_values(const AttentionDims& d) {
  xt::xarray<T> m = xt::zeros<T>({d.t_q, d.t_k});
  for (std::size_t i = 0; i < d.t_q; ++i) std::fill(m.data() + i * d.t_k, m.data() + i * d.t_k + causal_key_end(d, i, 1), T(1));
  return m;
}

// The work (Op::work) of the (B..., T_q, T_k) weights that the forward or the VJP computes
// tile by tile, beyond the elements of its inputs and outputs; q, k, v first in x, valid
// shapes. The tiles the causal mask skips are not counted; those a key mask lets the kernels
// skip depend on its values, and are.
enum class FlashPass { forward, vjp };
double flash_weights_work(const std::vector<Shape>& x, FlashPass pass, const FlashMaskAttrs& mask);

// ONNX: the scores s (B..., T_q, T_k) with -inf where the masks forbid, as the kernels: Where on
// the key mask (input `key_input`: a mask leaf's bool value, else Cast to bool, true where not
// 0), then Where on the causal condition j <= i + T_k - T_q, a LessOrEqual of two int64 ranges
// (T_k and T_q numbers, broadcast), never a T_q x T_k initializer.
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
    const std::string allowed = e.op("LessOrEqual", {e.int64s(keys, Shape{keys.size()}),
                                                     e.int64s(limits, Shape{limits.size(), 1})});
    s = e.op("Where", {allowed, s, minus_inf});
  }
  return s;
}

}  // namespace xgrad::detail
