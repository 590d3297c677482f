// xgrad.Graph, xgrad.Var and their files: leaves, set_value, replay, run state, JSON, DOT, ONNX.
#include "common.hpp"

#include <sstream>

#include <xgrad/lib/onnx_export.hpp>

namespace xgrad::python {

namespace {

bool real_numbers(const py::array& a) {
  const char kind = a.dtype().kind();
  return kind == 'f' || kind == 'i' || kind == 'u' || kind == 'b';
}

std::string dtype_str(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

// obj as a numpy array (numpy's conversion of a sequence), or an xgrad::error naming `what`.
py::array as_array(const py::handle& obj, const std::string& what) {
  py::array a = py::array::ensure(obj);
  if (!a) {
    throw error(what + ": not an array: numpy could not convert a " +
                py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  }
  return a;
}

// raw's elements as an xt::xarray<V>, read through numpy (any layout, converted to V), after its
// shape is checked against max_array_elements: before numpy copies anything.
template <class V>
xt::xarray<V> copy_of(const py::array& raw, const std::string& what) {
  const Shape shape(raw.shape(), raw.shape() + raw.ndim());
  if (!bounded_size(shape)) {
    throw error(what + ": the array " + shape_str(shape) + " holds more than max_array_elements = 2^28 elements");
  }
  const auto a = py::array_t<V, py::array::c_style | py::array::forcecast>::ensure(raw);
  if (!a) throw error(what + ": numpy could not convert the " + dtype_str(raw) + " array");
  xt::xarray<V> x = xt::xarray<V>::from_shape(shape);
  if (x.size()) std::copy(a.data(), a.data() + x.size(), x.data());
  return x;
}

}  // namespace

template <class T>
xt::xarray<T> to_xarray(const py::handle& obj, const std::string& what) {
  const py::array raw = as_array(obj, what);
  if (!real_numbers(raw)) {
    throw error(what + ": an array of dtype " + dtype_str(raw) + ", not of real numbers (the graph holds " +
                dtype_name<T>() + ")");
  }
  return copy_of<T>(raw, what);
}
template xt::xarray<float> to_xarray<float>(const py::handle&, const std::string&);
template xt::xarray<double> to_xarray<double>(const py::handle&, const std::string&);

xt::xarray<std::int64_t> to_indices(const py::handle& obj, const std::string& what) {
  const py::array raw = as_array(obj, what);
  const char kind = raw.dtype().kind();
  if (kind != 'i' && kind != 'u') {
    throw error(what + ": indices must be integers, not an array of dtype " + dtype_str(raw));
  }
  if (kind == 'u' && raw.itemsize() == 8) {  // the one integer type whose values int64 may not hold
    const xt::xarray<std::uint64_t> u = copy_of<std::uint64_t>(raw, what);
    for (const std::uint64_t value : u) {
      if (value > static_cast<std::uint64_t>(INT64_MAX)) throw error(what + ": index " + std::to_string(value) + " does not fit int64");
    }
  }
  return copy_of<std::int64_t>(raw, what);
}

xt::xarray<bool> to_mask(const py::handle& obj, const std::string& what) {
  const py::array raw = as_array(obj, what);
  if (raw.dtype().kind() != 'b') {
    throw error(what + ": a mask is an array of bool (true = keep), not of dtype " + dtype_str(raw));
  }
  return copy_of<bool>(raw, what);
}

std::string dtype_of(const PyVar& v) {
  return std::visit([](const auto& t) { return std::string(dtype_name<typename std::decay_t<decltype(t)>::type>()); },
                    v.v);
}

namespace {

template <class T>
PyGraph new_graph() {
  return PyGraph{std::make_shared<Box<T>>(std::make_unique<Graph<T>>())};
}

PyGraph make_graph(const std::string& dtype) {
  if (dtype == "float64" || dtype == "double") return new_graph<double>();
  if (dtype == "float32" || dtype == "float") return new_graph<float>();
  throw error("Graph: dtype \"" + dtype + "\" is neither \"float64\" nor \"float32\"");
}

// f(box) for the graph's dtype.
template <class F>
auto on_graph(const PyGraph& g, F&& f) {
  return std::visit([&](const auto& box) { return f(box); }, g.g);
}
// f(TypedVar) for the Var's dtype.
template <class F>
auto on_var(const PyVar& v, F&& f) {
  return std::visit([&](const auto& t) { return f(t); }, v.v);
}

// The leaf Var `v` of graph g (the same graph, or an xgrad::error).
template <class T>
const TypedVar<T>& of_graph(const BoxPtr<T>& box, const PyVar& v, const char* what) {
  const TypedVar<T>& t = typed<T>(v);
  if (t.box != box) throw error(std::string(what) + ": the Var belongs to another graph");
  return t;
}

PyVar leaf(const PyGraph& g, const std::string& kind, std::string name, const py::handle& value) {
  return on_graph(g, [&](const auto& box) {
    using T = typename std::decay_t<decltype(*box->graph)>::value_type;
    const std::string what = "Graph." + kind + "(\"" + name + "\")";
    if (kind == "indices") {
      auto x = to_indices(value, what);
      return wrap(box, locked(box, [&] { return box->graph->indices(std::move(name), std::move(x)); }));
    }
    if (kind == "mask") {
      auto x = to_mask(value, what);
      return wrap(box, locked(box, [&] { return box->graph->mask(std::move(name), std::move(x)); }));
    }
    auto x = to_xarray<T>(value, what);
    return wrap(box, locked(box, [&] {
                  Graph<T>& graph = *box->graph;
                  return kind == "input" ? graph.input(std::move(name), std::move(x))
                         : kind == "parameter" ? graph.parameter(std::move(name), std::move(x))
                                               : graph.constant(std::move(name), std::move(x));
                }));
  });
}

void set_value(const PyGraph& g, const PyVar& leaf_var, const py::handle& value) {
  on_graph(g, [&](const auto& box) {
    using T = typename std::decay_t<decltype(*box->graph)>::value_type;
    const Var<T> v = of_graph(box, leaf_var, "Graph.set_value").var;
    const Node<T>& n = v.node();
    const std::string what = "Graph.set_value(node " + std::to_string(v.id()) + ")";
    if (n.index_leaf) {
      auto x = to_indices(value, what);
      locked(box, [&] { box->graph->set_value(v, std::move(x)); });
    } else if (n.mask_leaf) {
      auto x = to_mask(value, what);
      locked(box, [&] { box->graph->set_value(v, std::move(x)); });
    } else {
      auto x = to_xarray<T>(value, what);
      locked(box, [&] { box->graph->set_value(v, std::move(x)); });
    }
  });
}

// A Var's value as numpy: the graph's dtype, int64 for an index leaf, bool for a mask leaf.
py::array value_of(const PyVar& v) {
  return on_var(v, [](const auto& t) -> py::array {
    std::lock_guard<std::mutex> guard(t.box->lock);
    const auto& n = t.var.node();
    if (n.index_leaf) return to_numpy(t.var.indices());
    if (n.mask_leaf) return to_numpy(t.var.mask());
    return to_numpy(t.var.value());
  });
}

py::tuple shape_of_var(const PyVar& v) {
  const Shape s = on_var(v, [](const auto& t) { return t.var.shape(); });
  py::tuple out(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) out[i] = s[i];
  return out;
}

std::string repr(const PyVar& v) {
  return on_var(v, [](const auto& t) {
    const auto& n = t.var.node();
    std::string s = "xgrad.Var(node " + std::to_string(t.var.id());
    if (t.var.output()) s += ", output " + std::to_string(t.var.output());
    s += ", " + n.op_name();
    if (!n.name.empty()) s += " \"" + n.name + "\"";
    return s + ", " + shape_str(t.var.shape()) + ", " + dtype_name<typename std::decay_t<decltype(t)>::type>() + ")";
  });
}

ExportValues export_values(const std::string& values) { return parse_name(export_values_names, values, "values"); }

template <class T>
std::map<std::string, PyVar> named(const BoxPtr<T>& box, const std::map<std::string, Slot>& slots) {
  std::map<std::string, PyVar> out;
  for (const auto& [name, slot] : slots) out.emplace(name, wrap(box, box->graph->var(slot)));
  return out;
}

// Leaves of role input with a name: what a caller feeds (index and mask leaves included).
template <class T>
std::map<std::string, PyVar> named_inputs(const BoxPtr<T>& box) {
  std::map<std::string, PyVar> out;
  const Graph<T>& graph = *box->graph;
  for (std::size_t id = 0; id < graph.size(); ++id) {
    const Node<T>& n = graph.node(id);
    if (n.is_leaf() && n.role == Role::input && !n.name.empty()) out.emplace(n.name, wrap(box, box->graph->var(id)));
  }
  return out;
}

template <class T>
PyGraph graph_from_text(const std::string& text) {
  std::unique_ptr<Graph<T>> g = graph_from_parsed_json<T>(parse_graph_json(text));
  return PyGraph{std::make_shared<Box<T>>(std::move(g))};
}

PyGraph load_json(const std::string& path) {
  std::string text = read_text_file(path);
  py::gil_scoped_release release;
  const Json json = parse_graph_json(text);
  const std::string dtype = graph_json_dtype(json);
  if (dtype == "float32") return PyGraph{std::make_shared<Box<float>>(graph_from_parsed_json<float>(json))};
  return PyGraph{std::make_shared<Box<double>>(graph_from_parsed_json<double>(json))};
}

// Graph.scope(name) as a context manager: `with g.scope("enc"): ...`.
struct PyScope {
  PyGraph graph;
  std::string name;
  std::optional<std::variant<Graph<float>::Scope, Graph<double>::Scope>> active;
};

}  // namespace

void bind_graph(py::module_& m) {
  py::class_<PyVar>(m, "Var", R"(A handle to one output of one node of a Graph.

A Var keeps its graph alive. Arithmetic builds nodes: + - * / with Vars or Python numbers (numpy
broadcasting), @ (matmul), unary -. `value` is a new numpy array (a copy) each time it is read.)")
      .def_property_readonly("value", &value_of,
                             "The output's value: a new numpy array (a copy) of the graph's dtype (int64 for an "
                             "index leaf, bool for a mask leaf). Raises xgrad.Error for a value a lean replay released.")
      .def_property_readonly("shape", &shape_of_var, "The value's shape, a tuple.")
      .def_property_readonly("dtype", &dtype_of, "\"float32\" or \"float64\": the graph's dtype.")
      .def_property_readonly("name", [](const PyVar& v) { return on_var(v, [](const auto& t) { return t.var.node().name; }); },
                             "The node's name (a leaf's name; often empty for other nodes).")
      .def_property_readonly("op", [](const PyVar& v) { return on_var(v, [](const auto& t) { return t.var.node().op_name(); }); },
                             "The node's op: \"matmul\", ..., or \"input\", \"parameter\", \"constant\", \"indices\", "
                             "\"mask\" for leaves.")
      .def_property_readonly("id", [](const PyVar& v) { return on_var(v, [](const auto& t) { return t.var.id(); }); },
                             "The node's id: its position in the graph.")
      .def_property_readonly("output", [](const PyVar& v) { return on_var(v, [](const auto& t) { return t.var.output(); }); },
                             "Which output of the node (0 for most ops).")
      .def_property_readonly("graph", [](const PyVar& v) {
        return on_var(v, [](const auto& t) { return PyGraph{t.box}; });
      }, "The Graph this Var belongs to.")
      .def("__repr__", &repr)
      .def("__array__", [](const PyVar&, py::args, py::kwargs) -> py::object {
        throw error("a Var is not an array: read its value (v.value)");
      })
      .def_property_readonly_static("__array_ufunc__", [](py::object) { return py::none(); });

  py::class_<PyScope>(m, "Scope", "A named scope: `with g.scope(\"enc\"):` gives every node made inside it that scope.")
      .def("__enter__", [](PyScope& s) {
        std::visit([&](const auto& box) {
          std::lock_guard<std::mutex> guard(box->lock);
          s.active.emplace(box->graph->scope(s.name));
        }, s.graph.g);
        return s.graph;
      })
      .def("__exit__", [](PyScope& s, py::args) {
        std::visit([&](const auto& box) {
          std::lock_guard<std::mutex> guard(box->lock);
          s.active.reset();
        }, s.graph.g);
      });

  py::class_<PyGraph>(m, "Graph", R"(An expression graph of float32 or float64 values.

Graph("float64") (the default) or Graph("float32"). Creating a node runs its forward at once;
replay() runs every node again after set_value. Leaves: input, parameter, constant (float
arrays, converted to the graph's dtype), indices (int64 ids, labels), mask (bool, true = keep).)")
      .def(py::init(&make_graph), py::arg("dtype") = "float64")
      .def_property_readonly("dtype", [](const PyGraph& g) {
        return on_graph(g, [](const auto& box) {
          return std::string(dtype_name<typename std::decay_t<decltype(*box->graph)>::value_type>());
        });
      })
      .def("input", [](const PyGraph& g, std::string name, py::handle a) { return leaf(g, "input", std::move(name), a); },
           py::arg("name"), py::arg("value"), "An input leaf: any numpy array (or sequence), converted to the graph's dtype.")
      .def("parameter", [](const PyGraph& g, std::string name, py::handle a) { return leaf(g, "parameter", std::move(name), a); },
           py::arg("name"), py::arg("value"), "A parameter leaf (what optimizers update and checkpoints save).")
      .def("constant", [](const PyGraph& g, std::string name, py::handle a) { return leaf(g, "constant", std::move(name), a); },
           py::arg("name"), py::arg("value"), "A constant leaf (no set_value reaches it).")
      .def("indices", [](const PyGraph& g, std::string name, py::handle a) { return leaf(g, "indices", std::move(name), a); },
           py::arg("name"), py::arg("value"), "An index leaf: an integer array (ids, labels) read as int64; never differentiated.")
      .def("mask", [](const PyGraph& g, std::string name, py::handle a) { return leaf(g, "mask", std::move(name), a); },
           py::arg("name"), py::arg("value"), "A mask leaf: a bool array, true where attention keeps an entry; set_value per batch.")
      .def("set_value", &set_value, py::arg("leaf"), py::arg("value"),
           "Replaces a leaf's value (the leaf's shape; int64 for an index leaf, bool for a mask leaf). Then replay().")
      .def("replay", [](const PyGraph& g) { on_graph(g, [](const auto& box) { locked(box, [&] { box->graph->replay(); }); }); },
           "Runs every node's forward again, in order (after set_value, set_step, an optimizer step).")
      .def("set_training", [](const PyGraph& g, bool on) { on_graph(g, [&](const auto& box) { box->graph->set_training(on); }); },
           py::arg("training"), "Training (True, the default) or evaluation mode (dropout copies its input). Then replay().")
      .def("set_step", [](const PyGraph& g, std::uint64_t n) { on_graph(g, [&](const auto& box) { box->graph->set_step(n); }); },
           py::arg("step"), "The step every forward reads (dropout's masks). Then replay().")
      .def_property_readonly("training", [](const PyGraph& g) { return on_graph(g, [](const auto& box) { return box->graph->training(); }); })
      .def_property_readonly("step", [](const PyGraph& g) { return on_graph(g, [](const auto& box) { return box->graph->step(); }); })
      .def("__len__", [](const PyGraph& g) { return on_graph(g, [](const auto& box) { return box->graph->size(); }); },
           "The number of nodes.")
      .def("var", [](const PyGraph& g, std::size_t id, std::size_t output) {
        return on_graph(g, [&](const auto& box) { return wrap(box, box->graph->var(id, output)); });
      }, py::arg("id"), py::arg("output") = 0, "The Var of output `output` of node `id`.")
      .def("parameters", [](const PyGraph& g) {
        return on_graph(g, [](const auto& box) { return wrap(box, box->graph->parameters()); });
      }, "Every parameter leaf, in creation order.")
      .def_property_readonly("inputs", [](const PyGraph& g) { return on_graph(g, [](const auto& box) { return named_inputs(box); }); },
                             "The named input leaves (indices and masks too), a dict name -> Var.")
      .def_property_readonly("outputs", [](const PyGraph& g) {
        return on_graph(g, [](const auto& box) { return named(box, box->graph->outputs()); });
      }, "The named outputs (set_output; an imported graph's \"outputs\"), a dict name -> Var.")
      .def_property_readonly("grads", [](const PyGraph& g) {
        return on_graph(g, [](const auto& box) { return named(box, box->graph->grads()); });
      }, "The named gradients (set_grad; an imported graph's \"grads\"), a dict name -> Var.")
      .def("set_output", [](const PyGraph& g, std::string name, const PyVar& v) {
        on_graph(g, [&](const auto& box) { box->graph->set_output(std::move(name), of_graph(box, v, "Graph.set_output").var); });
      }, py::arg("name"), py::arg("var"), "Names an output for exports (JSON \"outputs\").")
      .def("set_grad", [](const PyGraph& g, std::string name, const PyVar& v) {
        on_graph(g, [&](const auto& box) { box->graph->set_grad(std::move(name), of_graph(box, v, "Graph.set_grad").var); });
      }, py::arg("name"), py::arg("var"), "Names a gradient for exports (JSON \"grads\").")
      .def("keep_only", [](const PyGraph& g, const std::vector<PyVar>& keep) {
        on_graph(g, [&](const auto& box) {
          using T = typename std::decay_t<decltype(*box->graph)>::value_type;
          std::vector<Var<T>> vars;
          for (const PyVar& v : keep) vars.push_back(of_graph(box, v, "Graph.keep_only").var);
          locked(box, [&] { box->graph->keep_only(vars); });
        });
      }, py::arg("keep"), "Lean replays: releases every other non-leaf value; replay() then computes only what these need.")
      .def("keep_all", [](const PyGraph& g) { on_graph(g, [](const auto& box) { box->graph->keep_all(); }); },
           "Ends lean replays: the next replay() computes every value.")
      .def("scope", [](const PyGraph& g, std::string name) { return PyScope{g, std::move(name), std::nullopt}; },
           py::arg("name"), "A named scope for the nodes made inside `with g.scope(name):`.")
      .def("to_json", [](const PyGraph& g, const std::string& values) {
        const ExportValues v = export_values(values);
        return on_graph(g, [&](const auto& box) {
          return locked(box, [&] {
            std::ostringstream text;
            write_json(text, *box->graph, v);
            return std::move(text).str();
          });
        });
      }, py::arg("values") = "inputs", "The graph as JSON text (docs/graph-format.md): values \"none\", \"inputs\" or \"all\".")
      .def("save_json", [](const PyGraph& g, const std::string& path, const std::string& values) {
        const ExportValues v = export_values(values);
        on_graph(g, [&](const auto& box) {
          locked(box, [&] { save_json(path, *box->graph, v); });
        });
      }, py::arg("path"), py::arg("values") = "inputs",
         "Writes to_json(values) and a newline to path (atomically, streamed a node at a time); xgrad.load_json reads it.")
      .def("to_dot", [](const PyGraph& g, bool forward_only) {
        DotOptions options;
        options.forward_only = forward_only;
        return on_graph(g, [&](const auto& box) { return locked(box, [&] { return to_dot(*box->graph, options); }); });
      }, py::arg("forward_only") = false, "Graphviz DOT text of the graph (render with `dot -Tsvg`).")
      .def("to_onnx", [](const PyGraph& g, const std::string& path, bool parameters_as_inputs) {
        OnnxExportOptions options;
        options.parameters_as_inputs = parameters_as_inputs;
        on_graph(g, [&](const auto& box) { locked(box, [&] { to_onnx(*box->graph, path, options); }); });
      }, py::arg("path"), py::arg("parameters_as_inputs") = false, "Writes the graph as an ONNX model (opset 17).")
      .def("__repr__", [](const PyGraph& g) {
        return on_graph(g, [](const auto& box) {
          return "xgrad.Graph(\"" + std::string(dtype_name<typename std::decay_t<decltype(*box->graph)>::value_type>()) +
                 "\", " + std::to_string(box->graph->size()) + " nodes)";
        });
      });

  m.def("load_json", &load_json, py::arg("path"),
        "Reads a graph exported as JSON (Graph.save_json, `xgrad export`): a Graph of the file's dtype, its nodes "
        "recomputed from the stored leaves; its named inputs, outputs and grads in .inputs, .outputs, .grads.");
}

}  // namespace xgrad::python
