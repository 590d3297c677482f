// gradcheck(): VJPs against central finite differences in float64.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/names.hpp>

namespace xgrad {

enum class GradcheckMode {
  automatic,   // full when y.size() * (sum of x sizes) <= full_limit, projection otherwise
  full,        // every Jacobian entry dy[o]/dx[j]
  projection,  // v^T J u for random Gaussian v (like y) and u (like x), `projections` times per x
};

// "automatic", "full Jacobian", "random projections"
inline constexpr EnumName<GradcheckMode> gradcheck_mode_names[] = {{GradcheckMode::automatic, "automatic"},
                                                                 {GradcheckMode::full, "full Jacobian"},
                                                                 {GradcheckMode::projection, "random projections"}};
inline const char* mode_name(GradcheckMode mode) { return name_in(gradcheck_mode_names, mode); }
std::ostream& operator<<(std::ostream& out, GradcheckMode mode);

// A tolerance: an entry passes when |numeric - analytic| <= atol + rtol * |analytic|.
struct GradcheckTolerance {
  double atol, rtol;
};

// The default tolerances, by the dtype of the graph checked: the one definition of them (the
// tool's --help prints these).
// float64: central differences with the default eps are good to ~1e-9 here.
inline constexpr GradcheckTolerance gradcheck_float64_tolerance = {1e-7, 1e-5};
// float32: the analytic side is float32 arithmetic, ~1e-7 per op.
inline constexpr GradcheckTolerance gradcheck_float32_tolerance = {1e-4, 1e-3};

// Every default is defined here, once: the tool's --help prints GradcheckOptions{} and the two
// tolerances above.
struct GradcheckOptions {
  GradcheckMode mode = GradcheckMode::automatic;
  double eps = 1e-6;             // the finite-difference step, taken in float64
  std::optional<double> atol;    // default: by dtype, above
  std::optional<double> rtol;    // default: by dtype, above
  std::size_t full_limit = 10000;
  std::size_t projections = 8;
  std::uint64_t seed = 0;        // for the projection vectors
};

// gradcheck_float32_tolerance for "float32", else gradcheck_float64_tolerance, and its two parts.
const GradcheckTolerance& default_tolerance(const std::string& dtype);
double default_atol(const std::string& dtype);
double default_rtol(const std::string& dtype);

// One compared value: a Jacobian entry (full) or one projection (projection mode).
struct GradcheckEntry {
  std::size_t input = 0;                  // position of x in xs
  std::string name;                       // x's node name, or "x[i]" if it has none
  std::vector<std::size_t> index;         // full: the element of x; projection: {projection number}
  std::vector<std::size_t> output_index;  // full: the element of y; projection: empty
  double analytic = 0, numeric = 0, abs_error = 0, rel_error = 0;
  bool passed = true;
  std::size_t compared = 0;               // how many values of this input were compared
};

struct GradcheckReport {
  bool passed = true;
  GradcheckMode mode = GradcheckMode::full;  // the mode that ran, never automatic
  std::string dtype;                         // of the graph checked: "float32" or "float64"
  double eps = 0, atol = 0, rtol = 0;
  std::size_t compared = 0;                  // entries or projections compared
  std::vector<GradcheckEntry> inputs;        // the worst entry of each x, in the order of xs
  // The worst entry over all inputs: the largest abs_error / (atol + rtol * |analytic|).
  const GradcheckEntry& worst() const;
  // One line of verdict, then one line per input with its worst entry.
  std::string str() const;
};

// Checks the VJPs of y w.r.t. the leaves xs. The analytic side runs grad() in the graph's dtype
// on a copy of the graph; the numeric side replays a float64 copy with each x perturbed by
// +-eps (a float32 graph is replayed in float64). The caller's graph is left unchanged.
// Throws xgrad::error if y or an x is empty or of another graph, or an x is not a leaf; in full
// mode, naming the shape, if a Jacobian (y.size(), x.size()) would hold more than
// max_array_elements = 2^28 elements.
template <class T>
GradcheckReport gradcheck(const Var<T>& y, const std::vector<Var<T>>& xs,
                          const GradcheckOptions& options = {});

}  // namespace xgrad
