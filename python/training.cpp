// grad, gradcheck, optimizers, clipping, checkpoints, seeded arrays and the BLAS settings.
#include "common.hpp"

namespace xgrad::python {

namespace {

GradcheckMode gradcheck_mode(const std::string& mode) {
  for (GradcheckMode m : {GradcheckMode::automatic, GradcheckMode::full, GradcheckMode::projection}) {
    if (mode == mode_name(m)) return m;
  }
  if (mode == "full") return GradcheckMode::full;
  if (mode == "projection") return GradcheckMode::projection;
  throw error("gradcheck: mode \"" + mode + "\" is none of \"automatic\", \"full\", \"projection\"");
}

// An optimizer of either dtype over the parameters of one graph (which it keeps alive).
template <class T>
using Optimizers = std::variant<std::unique_ptr<Sgd<T>>, std::unique_ptr<Adam<T>>, std::unique_ptr<AdamW<T>>>;

// An optimizer class template as a value (Adam, AdamW), for the function that binds both.
template <template <class> class Optimizer>
struct OptimizerTag {
  template <class T>
  using type = Optimizer<T>;
};

template <class G>
struct GroupsOf;
template <class T>
struct GroupsOf<std::vector<ParamGroup<T>>> {
  using type = T;
};

template <class T>
struct TypedOptimizer {
  BoxPtr<T> box;
  Optimizers<T> opt;
  OptimizerGroups<T>& groups() {
    return std::visit([](auto& o) -> OptimizerGroups<T>& { return *o; }, opt);
  }
};

struct PyOptimizer {
  std::variant<TypedOptimizer<float>, TypedOptimizer<double>> o;
};

// params: a list of Vars (one group) or of dicts {"params": [...], "lr": x, "weight_decay": y}
// (torch's param_groups; lr and weight_decay optional). f(box, groups) makes the optimizer.
template <class F>
PyOptimizer make_optimizer(const py::list& params, const char* who, F&& f) {
  if (params.empty()) throw error(std::string(who) + ": no parameters");
  // The first Var decides the dtype and the graph.
  const auto first_var = [&]() -> PyVar {
    py::handle h = params[0];
    if (py::isinstance<py::dict>(h)) {
      py::list ps = h.cast<py::dict>()["params"];
      if (ps.empty()) throw error(std::string(who) + ": the first group holds no parameters");
      return ps[0].cast<PyVar>();
    }
    return h.cast<PyVar>();
  }();
  return std::visit([&](const auto& t) {
    using T = typename std::decay_t<decltype(t)>::type;
    std::vector<ParamGroup<T>> groups;
    const auto vars = [&](const py::handle& list) {
      std::vector<Var<T>> out;
      for (py::handle v : list) {
        const TypedVar<T>& tv = typed<T>(v.cast<PyVar>());
        if (tv.box != t.box) throw error(std::string(who) + ": parameters of two graphs");
        out.push_back(tv.var);
      }
      return out;
    };
    if (py::isinstance<py::dict>(params[0])) {
      for (py::handle h : params) {
        const py::dict d = h.cast<py::dict>();
        for (auto item : d) {
          const std::string key = item.first.cast<std::string>();
          if (key != "params" && key != "lr" && key != "weight_decay") {
            throw error(std::string(who) + ": a parameter group's key \"" + key + "\" is none of params, lr, weight_decay");
          }
        }
        ParamGroup<T> g{vars(d["params"]), std::nullopt, std::nullopt};
        if (d.contains("lr")) g.lr = d["lr"].cast<double>();
        if (d.contains("weight_decay")) g.weight_decay = d["weight_decay"].cast<double>();
        groups.push_back(std::move(g));
      }
    } else {
      groups.push_back(ParamGroup<T>{vars(params), std::nullopt, std::nullopt});
    }
    return PyOptimizer{TypedOptimizer<T>{t.box, f(groups)}};
  }, first_var.v);
}

template <class F>
auto on_optimizer(PyOptimizer& o, F&& f) {
  return std::visit([&](auto& t) { return f(t); }, o.o);
}

py::list parameter_groups(PyOptimizer& o) {
  return on_optimizer(o, [](auto& t) {
    py::list out;
    const auto& groups = t.groups().groups();
    for (std::size_t i = 0; i < groups.size(); ++i) {
      py::dict d;
      d["params"] = wrap(t.box, groups[i].params);
      d["lr"] = t.groups().lr(i);
      if (groups[i].weight_decay) d["weight_decay"] = *groups[i].weight_decay;
      out.append(d);
    }
    return out;
  });
}

template <class T>
std::map<std::string, xt::xarray<T>> tensors_of(const py::dict& tensors) {
  std::map<std::string, xt::xarray<T>> out;
  for (auto item : tensors) {
    const std::string name = item.first.cast<std::string>();
    out.emplace(name, to_xarray<T>(item.second, "save_tensors(\"" + name + "\")"));
  }
  return out;
}

// f(T{}) for the dtype named "float32" or "float64"; an xgrad::error naming `who` otherwise.
template <class F>
auto on_dtype(const std::string& dtype, const char* who, F&& f) {
  if (dtype == "float32") return f(float{});
  if (dtype != "float64") throw error(std::string(who) + ": dtype \"" + dtype + "\" is neither \"float64\" nor \"float32\"");
  return f(double{});
}

template <class T>
py::dict tensor_dict(const TensorFile<T>& file) {
  py::dict out;
  for (const auto& [name, value] : file.tensors) out[py::str(name)] = to_numpy(value);
  return out;
}

}  // namespace

void bind_training(py::module_& m) {
  m.def("grad", [](const PyVar& y, const std::vector<PyVar>& xs, const std::optional<std::variant<PyVar, py::array>>& grad_out) {
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      const std::vector<Var<T>> x = typed<T>(xs);
      if (!grad_out) return wrap(t.box, locked(t.box, [&] { return grad(t.var, x); }));
      if (const PyVar* g = std::get_if<PyVar>(&*grad_out)) {
        const Var<T>& gv = typed<T>(*g).var;
        return wrap(t.box, locked(t.box, [&] { return grad(t.var, x, gv); }));
      }
      const xt::xarray<T> g = to_xarray<T>(std::get<py::array>(*grad_out), "grad(grad_out=...)");
      return wrap(t.box, locked(t.box, [&] { return grad(t.var, x, g); }));
    }, y.v);
  }, py::arg("y"), py::arg("xs"), py::arg("grad_out") = py::none(),
        R"(The gradients of y with respect to each of xs, as new nodes of the graph: a list of Vars.

grad_out (y's shape: an array or a Var) weighs y's elements; by default ones (the gradient of
sum(y)). Gradients are nodes: replay() recomputes them, grad() of them differentiates again.)");

  py::class_<GradcheckReport>(m, "GradcheckReport", "gradcheck's verdict: .passed, str() the report, .inputs the worst entries.")
      .def_readonly("passed", &GradcheckReport::passed)
      .def_property_readonly("mode", [](const GradcheckReport& r) { return std::string(mode_name(r.mode)); })
      .def_readonly("dtype", &GradcheckReport::dtype)
      .def_readonly("eps", &GradcheckReport::eps)
      .def_readonly("atol", &GradcheckReport::atol)
      .def_readonly("rtol", &GradcheckReport::rtol)
      .def_readonly("compared", &GradcheckReport::compared)
      .def_property_readonly("inputs", [](const GradcheckReport& r) {
        py::list out;
        for (const GradcheckEntry& e : r.inputs) {
          py::dict d;
          d["input"] = e.input;
          d["name"] = e.name;
          d["index"] = e.index;
          d["output_index"] = e.output_index;
          d["analytic"] = e.analytic;
          d["numeric"] = e.numeric;
          d["abs_error"] = e.abs_error;
          d["rel_error"] = e.rel_error;
          d["passed"] = e.passed;
          d["compared"] = e.compared;
          out.append(d);
        }
        return out;
      }, "One dict per x: its worst entry (index, analytic, numeric, abs_error, rel_error, passed, compared).")
      .def("__bool__", [](const GradcheckReport& r) { return r.passed; })
      .def("__str__", &GradcheckReport::str)
      .def("__repr__", [](const GradcheckReport& r) { return std::string("<xgrad.GradcheckReport ") + (r.passed ? "PASS" : "FAIL") + ">"; });
  m.def("gradcheck", [](const PyVar& y, const std::vector<PyVar>& xs, double eps, std::optional<double> atol,
                        std::optional<double> rtol, const std::string& mode, std::uint64_t seed) {
    GradcheckOptions o;
    o.mode = gradcheck_mode(mode);
    o.eps = eps;
    o.atol = atol;
    o.rtol = rtol;
    o.seed = seed;
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      const std::vector<Var<T>> x = typed<T>(xs);
      return locked(t.box, [&] { return gradcheck(t.var, x, o); });
    }, y.v);
  }, py::arg("y"), py::arg("xs"), py::arg("eps") = 1e-6, py::arg("atol") = py::none(), py::arg("rtol") = py::none(),
        py::arg("mode") = "automatic", py::arg("seed") = 0,
        "Compares grad() with central differences on a float64 replay of a copy (xs: leaves). Returns a "
        "GradcheckReport; atol, rtol default by dtype (float64 1e-7, 1e-5; float32 1e-4, 1e-3).");

  py::class_<PyOptimizer>(m, "Optimizer", "An optimizer (SGD, Adam, AdamW): step(grads) updates the parameters in place.")
      .def("step", [](PyOptimizer& o, const std::vector<PyVar>& grads) {
        on_optimizer(o, [&](auto& t) {
          using T = typename std::decay_t<decltype(*t.box->graph)>::value_type;
          const std::vector<Var<T>> g = typed<T>(grads);
          locked(t.box, [&] { std::visit([&](auto& opt) { opt->step(g); }, t.opt); });
        });
      }, py::arg("grads"), "One update from the gradients' values, in parameters()' order. Then replay() the graph.")
      .def("parameters", [](PyOptimizer& o) {
        return on_optimizer(o, [](auto& t) { return wrap(t.box, t.groups().params()); });
      }, "Every group's parameters in order: the order of step()'s gradients (grad(loss, opt.parameters())).")
      .def_property("lr", [](PyOptimizer& o) { return on_optimizer(o, [](auto& t) { return t.groups().lr(); }); },
                    [](PyOptimizer& o, double lr) { on_optimizer(o, [&](auto& t) { t.groups().set_lr(lr); }); },
                    "The learning rate of every group (an error to read if the groups' differ).")
      .def("set_lr", [](PyOptimizer& o, double lr, std::optional<std::size_t> group) {
        on_optimizer(o, [&](auto& t) { group ? t.groups().set_lr(*group, lr) : t.groups().set_lr(lr); });
      }, py::arg("lr"), py::arg("group") = py::none(), "Sets the learning rate of one group, or of all.")
      .def_property_readonly("param_groups", &parameter_groups, "The groups: dicts of params, lr, weight_decay.");

  m.def("SGD", [](const py::list& params, double lr, double momentum, double weight_decay) {
    return make_optimizer(params, "SGD", [&](auto& groups) {
      using T = typename GroupsOf<std::decay_t<decltype(groups)>>::type;
      return std::make_unique<Sgd<T>>(groups, lr, momentum, weight_decay);
    });
  }, py::arg("params"), py::arg("lr"), py::arg("momentum") = 0.0, py::arg("weight_decay") = 0.0,
        "torch.optim.SGD's arithmetic over parameter leaves (a list of Vars, or of group dicts).");
  // Adam and AdamW: the same arguments, torch's defaults (weight_decay 0 and 0.01).
  const auto def_adam = [&](const char* name, auto tag, double weight_decay, const char* doc) {
    m.def(name, [name](const py::list& params, double lr, std::pair<double, double> betas, double eps, double decay) {
      return make_optimizer(params, name, [&](auto& groups) {
        using T = typename GroupsOf<std::decay_t<decltype(groups)>>::type;
        using Opt = typename decltype(tag)::template type<T>;
        return std::make_unique<Opt>(groups, lr, betas.first, betas.second, eps, decay);
      });
    }, py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999), py::arg("eps") = 1e-8,
          py::arg("weight_decay") = weight_decay, doc);
  };
  def_adam("Adam", OptimizerTag<Adam>{}, 0.0, "torch.optim.Adam's arithmetic (L2 weight decay added to the gradient).");
  def_adam("AdamW", OptimizerTag<AdamW>{}, 0.01, "torch.optim.AdamW's arithmetic (decoupled weight decay).");
  m.def("decay_groups", [](const std::vector<PyVar>& params, double weight_decay) {
    py::list out;
    if (params.empty()) return out;
    std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      for (const auto& g : decay_groups(typed<T>(params), weight_decay)) {
        py::dict d;
        d["params"] = wrap(t.box, g.params);
        d["weight_decay"] = *g.weight_decay;
        out.append(d);
      }
    }, params.front().v);
    return out;
  }, py::arg("params"), py::arg("weight_decay"),
        "nanoGPT's groups: parameters of rank >= 2 with weight_decay, the rest (biases, gains) with 0.");
  m.def("clip_grad_norm", [](const std::vector<PyVar>& grads, double max_norm) {
    if (grads.empty()) return 0.0;
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      const std::vector<Var<T>> g = typed<T>(grads);
      return locked(t.box, [&] { return clip_grad_norm(g, max_norm); });
    }, grads.front().v);
  }, py::arg("grads"), py::arg("max_norm"),
        "torch.nn.utils.clip_grad_norm_: returns the total 2-norm and scales the gradients' values in place when above.");

  // Checkpoints (.safetensors or .npz by the name).
  m.def("save_parameters", [](const PyGraph& g, const std::string& path, const std::map<std::string, std::string>& metadata) {
    std::visit([&](const auto& box) { locked(box, [&] { save_parameters(*box->graph, path, metadata); }); }, g.g);
  }, py::arg("graph"), py::arg("path"), py::arg("metadata") = std::map<std::string, std::string>{},
        "Every parameter leaf, by name, to a .safetensors or .npz file.");
  m.def("load_parameters", [](const PyGraph& g, const std::string& path) {
    return std::visit([&](const auto& box) { return locked(box, [&] { return load_parameters(*box->graph, path); }); }, g.g);
  }, py::arg("graph"), py::arg("path"), "Sets every parameter leaf from the file (names and shapes must match); returns its metadata.");
  m.def("save_tensors", [](const std::string& path, const py::dict& tensors, const std::string& dtype,
                           const std::map<std::string, std::string>& metadata) {
    on_dtype(dtype, "save_tensors", [&](auto zero) {
      const auto t = tensors_of<decltype(zero)>(tensors);
      py::gil_scoped_release release;
      save_tensors(path, t, metadata);
    });
  }, py::arg("path"), py::arg("tensors"), py::arg("dtype") = "float64",
        py::arg("metadata") = std::map<std::string, std::string>{}, "A dict of arrays to a .safetensors or .npz file.");
  m.def("load_tensors", [](const std::string& path, const std::string& dtype) {
    return on_dtype(dtype, "load_tensors", [&](auto zero) { return tensor_dict(load_tensors<decltype(zero)>(path)); });
  }, py::arg("path"), py::arg("dtype") = "float64", "A .safetensors or .npz file's tensors, a dict of arrays of dtype.");

  m.def("random_array", [](const Shape& shape, std::uint64_t seed, double stddev, const std::string& dtype) {
    if (!bounded_size(shape)) throw error("random_array: the shape " + shape_str(shape) + " holds more than 2^28 elements");
    return on_dtype(dtype, "random_array",
                    [&](auto zero) { return to_numpy(random_array<decltype(zero)>(shape, seed, stddev)); });
  }, py::arg("shape"), py::arg("seed"), py::arg("stddev") = 1.0, py::arg("dtype") = "float64",
        "N(0, stddev^2) entries from std::mt19937_64(seed), as the C++ random_array (the same numbers).");
  m.def("glorot_uniform", [](const Shape& shape, std::uint64_t seed) { return to_numpy(glorot_uniform<double>(shape, seed)); },
        py::arg("shape"), py::arg("seed"), "Glorot-uniform weights (fans from the last two axes), float64.");
  m.def("he_normal", [](const Shape& shape, std::uint64_t seed) { return to_numpy(he_normal<double>(shape, seed)); },
        py::arg("shape"), py::arg("seed"), "He-normal weights, float64.");

  m.def("set_flush_denormal", &set_flush_denormal, py::arg("on"),
        "Flush-to-zero, as torch.set_flush_denormal; False where the CPU has no such mode.");
  m.def("flush_denormal", &flush_denormal, "The last set_flush_denormal setting.");
}

}  // namespace xgrad::python
