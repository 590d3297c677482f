#include <xgrad/lib/gradcheck.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>

#include <xtensor/xbuilder.hpp>

#include <xgrad/lib/format.hpp>
#include <xgrad/lib/grad.hpp>
#include <xgrad/lib/random.hpp>
#include <xgrad/ops/kernels/common.hpp>

namespace xgrad {

std::ostream& operator<<(std::ostream& out, GradcheckMode mode) { return out << mode_name(mode); }

const GradcheckTolerance& default_tolerance(const std::string& dtype) {
  return dtype == "float32" ? gradcheck_float32_tolerance : gradcheck_float64_tolerance;
}
double default_atol(const std::string& dtype) { return default_tolerance(dtype).atol; }
double default_rtol(const std::string& dtype) { return default_tolerance(dtype).rtol; }

namespace {

// How far past its tolerance an entry is: <= 1 passes; NaN counts as infinitely bad.
double badness(const GradcheckEntry& e, double atol, double rtol) {
  const double r = e.abs_error / (atol + rtol * std::abs(e.analytic));
  return std::isnan(r) ? std::numeric_limits<double>::infinity() : r;
}

class Comparer {
 public:
  Comparer(GradcheckReport& report, std::size_t inputs) : m_report(report), m_worst(inputs, -1.0) {}

  void compare(GradcheckEntry e) {
    e.abs_error = std::abs(e.numeric - e.analytic);
    e.rel_error = e.abs_error == 0 ? 0 : e.abs_error / std::abs(e.analytic);
    e.passed = e.abs_error <= m_report.atol + m_report.rtol * std::abs(e.analytic);
    m_report.passed = m_report.passed && e.passed;
    ++m_report.compared;
    const double b = badness(e, m_report.atol, m_report.rtol);
    GradcheckEntry& worst = m_report.inputs[e.input];
    e.compared = worst.compared + 1;
    if (b > m_worst[e.input]) {
      m_worst[e.input] = b;
      worst = std::move(e);
    } else {
      worst.compared = e.compared;
    }
  }

 private:
  GradcheckReport& m_report;
  std::vector<double> m_worst;
};

template <class T>
void check_inputs(const Var<T>& y, const std::vector<Var<T>>& xs, const GradcheckOptions& options) {
  if (!y.valid()) throw error("gradcheck: y is an empty Var");
  if (xs.empty()) throw error("gradcheck: no inputs to check (xs is empty)");
  if (!(options.eps > 0) || !std::isfinite(options.eps)) throw error("gradcheck: eps must be a positive number");
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::string what = "gradcheck: x[" + std::to_string(i) + "]";
    if (!xs[i].valid()) throw error(what + " is an empty Var");
    if (&xs[i].graph() != &y.graph()) throw error(what + " belongs to another graph than y");
    if (!xs[i].node().is_leaf()) {
      throw error(what + " (node " + std::to_string(xs[i].id()) + ") is a " + xs[i].node().op_name() +
                  " node; gradcheck perturbs leaves (inputs, parameters, constants) only");
    }
  }
}

}  // namespace

const GradcheckEntry& GradcheckReport::worst() const {
  if (inputs.empty()) throw error("gradcheck report: no inputs were checked");
  return *std::max_element(inputs.begin(), inputs.end(), [&](const auto& a, const auto& b) {
    return badness(a, atol, rtol) < badness(b, atol, rtol);
  });
}

std::string GradcheckReport::str() const {
  char buf[512];
  std::snprintf(buf, sizeof buf, "gradcheck %s, %s, %zu %s, eps %g, atol %g, rtol %g: %s\n",
                dtype.c_str(), mode_name(mode),
                compared, mode == GradcheckMode::full ? "entries" : "projections", eps, atol, rtol,
                passed ? "PASS" : "FAIL");
  std::string s = buf;
  for (const auto& e : inputs) {
    if (e.compared == 0) {
      s += "  " + e.name + ": nothing to compare (an empty array)\n";
      continue;
    }
    const std::string where = mode == GradcheckMode::full
                                  ? "d y" + index_str(e.output_index) + " / d " + e.name + index_str(e.index)
                                  : e.name + " projection " + std::to_string(e.index.at(0));
    std::snprintf(buf, sizeof buf,
                  "  %-6s worst %s: analytic %.9g, numeric %.9g, abs err %.3g, rel err %.3g%s\n",
                  e.name.c_str(), where.c_str(), e.analytic, e.numeric, e.abs_error, e.rel_error,
                  e.passed ? "" : "  <- FAIL");
    s += buf;
  }
  return s;
}

template <class T>
GradcheckReport gradcheck(const Var<T>& y, const std::vector<Var<T>>& xs, const GradcheckOptions& options) {
  check_inputs(y, xs, options);
  GradcheckReport report;
  std::size_t inputs_size = 0;
  for (const auto& x : xs) inputs_size += x.value().size();
  const std::size_t m = y.value().size();
  // m * inputs_size <= full_limit, without overflow.
  const bool small = inputs_size == 0 || m <= options.full_limit / inputs_size;
  report.mode = options.mode != GradcheckMode::automatic ? options.mode
                : small                                  ? GradcheckMode::full
                                                         : GradcheckMode::projection;
  if (report.mode == GradcheckMode::projection && options.projections == 0) {
    throw error("gradcheck: projection mode with projections = 0 would compare nothing");
  }
  if (report.mode == GradcheckMode::full) {  // the Jacobians it holds, before anything is copied
    for (std::size_t i = 0; i < xs.size(); ++i) {
      detail::check_elements({m, xs[i].value().size()},
                             "gradcheck: the full Jacobian " + shape_str(Shape{m, xs[i].value().size()}) + " of x[" +
                                 std::to_string(i) + "]");
    }
  }
  report.dtype = dtype_name<T>();
  report.eps = options.eps;
  report.atol = options.atol.value_or(default_atol(report.dtype));
  report.rtol = options.rtol.value_or(default_rtol(report.dtype));
  report.inputs.resize(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    report.inputs[i].input = i;
    report.inputs[i].name = xs[i].node().name.empty() ? "x[" + std::to_string(i) + "]" : xs[i].node().name;
  }

  // Copies: `ga` computes the VJPs in T for a grad_out it can set, `gn` replays in float64.
  std::size_t count = y.id() + 1;
  for (const auto& x : xs) count = std::max(count, x.id() + 1);
  Graph<T> ga;
  ga.copy_from(y.graph(), count);
  const auto& y_shape = y.value().shape();
  const Var<T> seed = ga.input("grad_out", xt::zeros<T>(y_shape));
  std::vector<Var<T>> xa;
  for (const auto& x : xs) xa.emplace_back(ga, x.id(), x.output());
  const std::vector<Var<T>> grads = grad(Var<T>(ga, y.id(), y.output()), xa, seed);
  const auto vjp = [&](const xt::xarray<double>& v) {
    ga.set_value(seed, xt::cast<T>(v));
    ga.replay();
  };

  Graph<double> gn;
  gn.copy_from(y.graph(), count);
  const Var<double> yn(gn, y.id(), y.output());
  // (y(x_i + eps d) - y(x_i - eps d)) / (2 eps), in float64.
  const auto directional = [&](std::size_t i, const xt::xarray<double>& d) {
    const Var<double> xn(gn, xs[i].id(), xs[i].output());
    const xt::xarray<double> x0 = xn.value();
    gn.set_value(xn, x0 + options.eps * d);
    gn.replay();
    const xt::xarray<double> plus = yn.value();
    gn.set_value(xn, x0 - options.eps * d);
    gn.replay();
    xt::xarray<double> slope = (plus - yn.value()) / (2 * options.eps);
    gn.set_value(xn, x0);
    return slope;
  };

  Comparer comparer(report, xs.size());

  if (report.mode == GradcheckMode::full) {
    // Row o of each analytic Jacobian is the VJP with grad_out = e_o.
    std::vector<xt::xarray<double>> jacobians;
    for (const auto& x : xs) jacobians.push_back(xt::zeros<double>({m, x.value().size()}));
    for (std::size_t o = 0; o < m; ++o) {
      xt::xarray<double> e = xt::zeros<double>(y_shape);
      e.data()[o] = 1;
      vjp(e);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const auto& g = grads[i].value();
        std::copy(g.begin(), g.end(), jacobians[i].data() + o * g.size());
      }
    }
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const auto& x_shape = xs[i].value().shape();
      const std::size_t n = xs[i].value().size();
      for (std::size_t j = 0; j < n; ++j) {
        xt::xarray<double> d = xt::zeros<double>(x_shape);
        d.data()[j] = 1;
        const xt::xarray<double> column = directional(i, d);
        for (std::size_t o = 0; o < m; ++o) {
          GradcheckEntry e = report.inputs[i];
          e.index = unravel_index(j, x_shape);
          e.output_index = unravel_index(o, y_shape);
          e.analytic = jacobians[i](o, j);
          e.numeric = column.data()[o];
          comparer.compare(std::move(e));
        }
      }
    }
  } else {
    NormalStream normal(options.seed);
    for (std::size_t p = 0; p < options.projections; ++p) {
      const xt::xarray<double> v = normal.array<double>(shape_of(y));
      vjp(v);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const xt::xarray<double> u = normal.array<double>(shape_of(xs[i]));
        const xt::xarray<double> slope = directional(i, u);
        GradcheckEntry e = report.inputs[i];
        e.index = {p};
        e.output_index.clear();
        e.analytic = 0;
        e.numeric = 0;
        const auto& g = grads[i].value();
        for (std::size_t j = 0; j < u.size(); ++j) e.analytic += static_cast<double>(g.data()[j]) * u.data()[j];
        for (std::size_t o = 0; o < m; ++o) e.numeric += v.data()[o] * slope.data()[o];
        comparer.compare(std::move(e));
      }
    }
  }
  return report;
}

template GradcheckReport gradcheck(const Var<float>&, const std::vector<Var<float>>&, const GradcheckOptions&);
template GradcheckReport gradcheck(const Var<double>&, const std::vector<Var<double>>&, const GradcheckOptions&);

}  // namespace xgrad
