// ONNX import (lib/onnx_import.hpp): the model's inputs, initializers and outputs. Every ONNX
// value is either known at import (an OnnxTensor: constants, shapes, integer and bool tensors,
// initializers not differentiated) or a Var of the graph. Each node imports by the rule of its op
// type (lib/onnx/reader.hpp: one table, rules in family files under lib/onnx/): a node whose
// inputs are all known is computed here where its rule can, any other maps onto xgrad ops. Which
// float initializers become parameters is decided first, by a pass from the outputs back over
// the rules' data inputs (live_values).
#include <xgrad/lib/onnx_import.hpp>

#include <set>

#include <onnx/onnx_pb.h>

#include <xgrad/graph/error.hpp>
#include <xgrad/lib/files.hpp>
#include <xgrad/lib/format.hpp>
#include <xgrad/lib/grad.hpp>
#include <xgrad/lib/onnx/reader.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/sum.hpp>

namespace xgrad {

Shape OnnxTensor::shape() const { return is_float() ? shape_of(real) : shape_of(ints); }

namespace {

using namespace onnx_rules;

// The newest default-domain opset the importer knows (ONNX 1.12).
constexpr std::int64_t max_opset = 17;

// True if s is well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF):
// names become JSON strings in exports.
bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned c = p[i];
    std::size_t len = 0;
    unsigned cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (p[i + k] & 0x3F);
    }
    const unsigned min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

onnx::ModelProto parse_model_bytes(const std::string& bytes, const std::string& path) {
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes)) {
    throw error(path + ": not an ONNX model (the protobuf does not parse: truncated or malformed)");
  }
  if (!model.has_graph()) throw error(path + ": the model has no graph (truncated or not an ONNX model)");
  return model;
}

onnx::ModelProto parse_model(const std::string& path, std::size_t max_bytes) {
  return parse_model_bytes(read_text_file(path, max_bytes), path);
}

std::string model_float_type(const onnx::ModelProto& model) {
  for (const auto& in : model.graph().input()) {
    if (in.type().has_tensor_type()) {
      const int t = in.type().tensor_type().elem_type();
      if (t == TensorProto::FLOAT) return "float32";
      if (t == TensorProto::DOUBLE) return "float64";
    }
  }
  for (const auto& t : model.graph().initializer()) {
    if (t.data_type() == TensorProto::FLOAT) return "float32";
    if (t.data_type() == TensorProto::DOUBLE) return "float64";
  }
  return "float32";
}

template <class T>
class Importer : NodeReader<T> {
  using R = NodeReader<T>;
  using R::m_path, R::m_data_path, R::m_options, R::m_g, R::m_opset, R::m_model_float, R::m_values, R::m_budget;
  using R::count_elements, R::find_attr, R::run_node, R::to_t;

 public:
  Importer(const std::string& path, const OnnxImportOptions& options, Graph<T>& g, bool external_data = true)
      : R(path, external_data ? path : std::string(), options, g) {
    if (!(options.max_work >= 0 && options.max_work <= 1e300)) {
      throw error(path + ": OnnxImportOptions::max_work must be a finite number >= 0, got " + std::to_string(options.max_work));
    }
  }

  void run(const onnx::ModelProto& model) {
    // Every node the import builds is charged before its forward runs, every value it computes
    // itself (a fold) as it reads its inputs and writes its outputs.
    struct Limit {
      Graph<T>& g;
      ~Limit() { g.limit_work(nullptr); }
    } const limit{m_g};
    m_g.limit_work(&m_budget);
    m_opset = default_opset(model);
    m_model_float = model_float_type(model);
    const onnx::GraphProto& graph = model.graph();
    std::set<std::string> initializer_names;
    for (const TensorProto& t : graph.initializer()) initializer_names.insert(t.name());
    if (graph.sparse_initializer_size() > 0) throw error(m_path + ": sparse initializers are not supported");
    const std::set<std::string> live = live_values(graph);
    check_names(graph);

    // Graph inputs first (IR < 4 lists initializers among them: those are initializers).
    const std::set<std::string> masks = cast_to_bool_only(graph);
    for (const onnx::ValueInfoProto& in : graph.input()) {
      if (initializer_names.count(in.name())) continue;
      add_graph_input(in, masks.count(in.name()) != 0);
    }
    for (const auto& given : m_options.inputs) {
      if (!m_values.count(given.first)) {
        throw error(m_path + ": input '" + given.first + "' given, but the model has no graph input of that name" +
                    input_names(graph, initializer_names));
      }
    }
    for (const TensorProto& t : graph.initializer()) {
      const std::string what = m_path + ": initializer '" + t.name() + "'";
      if (m_values.count(t.name())) throw error(what + ": defined twice");
      OnnxTensor v = tensor_from_proto(t, m_data_path, m_options.max_elements, what);
      count_elements(v.shape(), what);
      Value<T>& slot = m_values[t.name()];
      if (v.is_float() && live.count(t.name())) {
        slot.var = m_g.parameter(t.name(), to_t(v.real));
      } else {
        slot.known = std::move(v);
      }
    }
    for (int i = 0; i < graph.node_size(); ++i) run_node(graph.node(i), static_cast<std::size_t>(i));

    std::vector<Var<T>> outs;
    for (const onnx::ValueInfoProto& out : graph.output()) {
      const auto it = m_values.find(out.name());
      if (it == m_values.end()) {
        throw error(m_path + ": graph output '" + out.name() + "' is produced by no node (truncated model?)");
      }
      Var<T> v = it->second.var;
      if (it->second.is_bool) {
        throw error(m_path + ": graph output '" + out.name() + "' is bool: an xgrad graph computes float values only");
      }
      if (!v.valid()) {
        const OnnxTensor& k = *it->second.known;
        if (!k.is_float() || it->second.from_int_input) {
          throw error(m_path + ": graph output '" + out.name() + "' is " + k.dtype +
                      (k.is_float() ? " computed from an integer graph input" : "") +
                      ": an xgrad graph computes float values only");
        }
        v = m_g.constant(out.name(), to_t(k.real));
      }
      m_g.set_output(out.name(), v);
      outs.push_back(v);
    }
    if (m_options.gradients) add_gradients(outs);
  }

 private:
  // ---- Model-level ----

  std::int64_t default_opset(const onnx::ModelProto& model) const {
    std::optional<std::int64_t> opset;
    for (const auto& o : model.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
    }
    if (!opset) throw error(m_path + ": the model imports no opset of the default domain (ai.onnx)");
    if (*opset < 1 || *opset > max_opset) {
      throw error(m_path + ": opset " + std::to_string(*opset) + " of the default domain is not supported (1 to " +
                  std::to_string(max_opset) + ")");
    }
    return *opset;
  }

  // Every name that can become a node's name, an output's or a gradient's must be UTF-8.
  void check_names(const onnx::GraphProto& graph) const {
    const auto check = [&](const std::string& name, const std::string& what) {
      if (!valid_utf8(name)) throw error(m_path + ": " + what + " has a name that is not valid UTF-8");
    };
    for (const auto& v : graph.input()) check(v.name(), "a graph input");
    for (const auto& v : graph.output()) check(v.name(), "a graph output");
    for (const auto& t : graph.initializer()) check(t.name(), "an initializer");
    for (int i = 0; i < graph.node_size(); ++i) {
      const onnx::NodeProto& n = graph.node(i);
      const std::string what = "node " + std::to_string(i);
      check(n.name(), what);
      for (const std::string& s : n.input()) check(s, what + "'s input");
      for (const std::string& s : n.output()) check(s, what + "'s output");
    }
  }

  std::string input_names(const onnx::GraphProto& graph, const std::set<std::string>& initializers) const {
    std::string names;
    for (const auto& in : graph.input()) {
      if (!initializers.count(in.name())) names += (names.empty() ? "" : ", ") + in.name();
    }
    return names.empty() ? " (it has none)" : " (it has " + names + ")";
  }

  // The values the outputs depend on through the data inputs of ops (every input but those their
  // rule reads at import) that are neither computed at import only (no build) nor comparisons
  // (makes_bool: no gradient flows through them, so an initializer read by one stays a value). An op without a rule
  // stops the import at its node; until then its inputs count as data.
  std::set<std::string> live_values(const onnx::GraphProto& graph) const {
    std::set<std::string> live;
    for (const auto& out : graph.output()) live.insert(out.name());
    for (int i = graph.node_size(); i-- > 0;) {
      const onnx::NodeProto& n = graph.node(i);
      if (!(n.domain().empty() || n.domain() == "ai.onnx")) continue;
      const ImportRule<T>* rule = find_rule<T>(n.op_type());
      if (rule && (!rule->build || (rule->flags & makes_bool))) continue;  // no gradient flows back
      if (n.op_type() == "Cast") {
        const auto* to = find_attr(n, "to");
        if (!to || (to->i() != TensorProto::FLOAT && to->i() != TensorProto::DOUBLE)) continue;  // not a float out
      }
      bool any = false;
      for (const std::string& o : n.output()) any = any || live.count(o);
      if (!any) continue;
      for (int k = 0; k < n.input_size(); ++k) {
        const bool data = !rule || !rule->read_at_import.count(static_cast<std::size_t>(k));
        if (data && !n.input(k).empty()) live.insert(n.input(k));
      }
    }
    return live;
  }

  // The float graph inputs that only Cast nodes to bool read: each is a mask given at run time,
  // imported as a mask leaf (true where the input is not 0).
  static std::set<std::string> cast_to_bool_only(const onnx::GraphProto& graph) {
    std::map<std::string, bool> only;  // input name -> every reader so far is a Cast to bool
    for (const auto& in : graph.input()) only[in.name()] = false;
    std::set<std::string> read;
    for (const auto& n : graph.node()) {
      const auto* to = n.op_type() == "Cast" && n.domain().empty() ? find_attr(n, "to") : nullptr;
      const bool to_bool = to && to->i() == TensorProto::BOOL;
      for (const std::string& x : n.input()) {
        const auto it = only.find(x);
        if (it == only.end()) continue;
        it->second = read.insert(x).second ? to_bool : it->second && to_bool;
      }
    }
    for (const auto& out : graph.output()) only.erase(out.name());  // an output stays a float
    std::set<std::string> names;
    for (const auto& [name, to_bool] : only) {
      if (to_bool) names.insert(name);
    }
    return names;
  }

  void add_graph_input(const onnx::ValueInfoProto& in, bool as_mask) {
    const std::string what = m_path + ": graph input '" + in.name() + "'";
    if (m_values.count(in.name())) throw error(what + ": defined twice");
    if (!in.type().has_tensor_type()) throw error(what + ": not a tensor (sequences, maps and optionals are not supported)");
    const auto& tt = in.type().tensor_type();
    const std::string dtype = elem_type_name(tt.elem_type());
    const bool is_bool = dtype == "bool";
    const bool is_int = find_elem_type(tt.elem_type()) && !is_float_name(dtype) && !is_bool;
    if (!is_float_name(dtype) && !is_int && !is_bool) throw error(what + ": element type " + dtype + " is not supported");
    // The declared shape, where its dimensions are fixed.
    std::vector<std::optional<std::size_t>> declared;
    bool has_shape = tt.has_shape();
    if (has_shape) {
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value() && d.dim_value() >= 0) declared.emplace_back(static_cast<std::size_t>(d.dim_value()));
        else declared.emplace_back(std::nullopt);
      }
    }
    const auto given = m_options.inputs.find(in.name());
    OnnxTensor value;
    if (given != m_options.inputs.end()) {
      value = given->second;
      const Shape s = value.shape();
      bool fits = !has_shape || s.size() == declared.size();
      for (std::size_t k = 0; fits && has_shape && k < s.size(); ++k) fits = !declared[k] || *declared[k] == s[k];
      if (!fits) {
        std::string want = "(";
        for (std::size_t k = 0; k < declared.size(); ++k) {
          want += (k ? ", " : "") + (declared[k] ? std::to_string(*declared[k]) : std::string("?"));
        }
        throw error(what + ": the value given has shape " + shape_str(s) + ", the model declares " + want +
                    (declared.size() == 1 ? ",)" : ")"));
      }
      if ((is_int || is_bool) && value.is_float()) {
        throw error(what + ": the model declares " + dtype + ", the value given is " + value.dtype);
      }
      if (!is_int && !is_bool && !value.is_float()) {
        throw error(what + ": the model declares " + dtype + ", the value given is " + value.dtype);
      }
    } else {
      if (!has_shape) throw error(what + ": the model gives no shape; give its value (xgrad import --input " + in.name() + "=FILE)");
      Shape s;
      for (std::size_t k = 0; k < declared.size(); ++k) {
        if (!declared[k]) {
          const auto& d = tt.shape().dim(static_cast<int>(k));
          throw error(what + ": dimension " + std::to_string(k) +
                      (d.has_dim_param() ? " '" + d.dim_param() + "'" : std::string()) +
                      " is not fixed; give its value (xgrad import --input " + in.name() + "=FILE)");
        }
        s.push_back(*declared[k]);
      }
      value.dtype = dtype;
      count_elements(s, what);
      if (is_int || is_bool) value.ints = xt::zeros<std::int64_t>(s);
      else value.real = xt::zeros<double>(s);
    }
    if (given != m_options.inputs.end()) count_elements(value.shape(), what);
    Value<T>& slot = m_values[in.name()];
    if (is_int) {
      value.dtype = dtype;
      slot.known = std::move(value);
      slot.from_int_input = true;
      slot.index_input = in.name();
    } else if (is_bool) {
      // A mask given at run time (a key padding mask): a mask leaf, whose 1 and 0 Where and the
      // shape ops take as a condition; never differentiated.
      slot.var = m_g.mask(in.name(), xt::not_equal(value.ints, std::int64_t(0)));
      slot.dynamic = true;
      slot.is_bool = true;
    } else if (as_mask) {
      slot.var = m_g.mask(in.name(), xt::not_equal(value.real, 0.0));
      slot.dynamic = true;
      slot.is_bool = true;
    } else {
      slot.var = m_g.input(in.name(), to_t(value.real));
      slot.dynamic = true;
    }
  }

  void add_gradients(const std::vector<Var<T>>& outs) {
    if (outs.empty()) return;
    Var<T> loss;
    for (const Var<T>& y : outs) loss = loss.valid() ? add(loss, sum(y)) : sum(y);
    std::vector<Var<T>> xs;
    std::vector<std::string> names;
    for (std::size_t id = 0; id < m_g.size(); ++id) {
      const Node<T>& n = m_g.node(id);
      if (n.is_leaf() && !n.has_no_gradient() && (n.role == Role::input || n.role == Role::parameter)) {
        xs.push_back(m_g.var(id));
        names.push_back(n.name);
      }
    }
    if (xs.empty()) return;
    const std::vector<Var<T>> gs = grad(loss, xs);
    for (std::size_t i = 0; i < xs.size(); ++i) m_g.set_grad(names[i], gs[i]);
  }


};

}  // namespace

OnnxTensor read_onnx_tensor(const std::string& path) {
  const std::string bytes = read_text_file(path, std::size_t(1) << 30);
  TensorProto p;
  if (!p.ParseFromString(bytes)) throw error(path + ": not an ONNX TensorProto (truncated or malformed)");
  return tensor_from_proto(p, "", max_array_elements, path);
}

template <class T>
std::unique_ptr<Graph<T>> import_onnx(const std::string& path, const OnnxImportOptions& options) {
  const onnx::ModelProto model = parse_model(path, options.max_file_bytes);
  auto g = std::make_unique<Graph<T>>();
  Importer<T>(path, options, *g).run(model);
  return g;
}

std::vector<std::string> onnx_graph_inputs(const std::string& path) {
  const onnx::ModelProto model = parse_model(path, std::size_t(1) << 30);
  std::set<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> names;
  for (const auto& in : model.graph().input()) {
    if (!initializers.count(in.name())) names.push_back(in.name());
  }
  return names;
}

std::vector<std::string> onnx_graph_outputs(const std::string& path) {
  const onnx::ModelProto model = parse_model(path, std::size_t(1) << 30);
  std::vector<std::string> names;
  for (const auto& out : model.graph().output()) names.push_back(out.name());
  return names;
}

std::string onnx_model_float_type(const std::string& path) {
  return model_float_type(parse_model(path, std::size_t(1) << 30));
}

template <class T>
std::unique_ptr<Graph<T>> import_onnx_bytes(const std::string& bytes, const std::string& what,
                                            const OnnxImportOptions& options) {
  if (bytes.size() > options.max_file_bytes) throw error(what + ": larger than an ONNX model may be here");
  const onnx::ModelProto model = parse_model_bytes(bytes, what);
  auto g = std::make_unique<Graph<T>>();
  Importer<T>(what, options, *g, /*external_data=*/false).run(model);
  return g;
}

template std::unique_ptr<Graph<float>> import_onnx<float>(const std::string&, const OnnxImportOptions&);
template std::unique_ptr<Graph<float>> import_onnx_bytes<float>(const std::string&, const std::string&,
                                                               const OnnxImportOptions&);
template std::unique_ptr<Graph<double>> import_onnx_bytes<double>(const std::string&, const std::string&,
                                                                 const OnnxImportOptions&);
template std::unique_ptr<Graph<double>> import_onnx<double>(const std::string&, const OnnxImportOptions&);

}  // namespace xgrad
