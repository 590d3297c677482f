// Named scopes (Graph::scope): what nodes carry, how they nest and end, and where they show: the
// JSON format, errors, DOT clusters and filters, ONNX node names, the builders and the tool.
#include "../check.hpp"
#include "../tools/sandbox.hpp"

#include <xgrad/lib/onnx_export.hpp>

#include <onnx/onnx_pb.h>

namespace {

// A 2-layer stack of attention blocks, each layer's nodes in "enc.l<i>" (the blocks' own nodes
// in "enc.l<i>.attn" by their parameters' prefix), a loss outside every scope, and its backward.
struct Stack {
  Graph<double> g;
  Var<double> x, loss;
  std::vector<Var<double>> params;
  Stack() {
    x = g.input("x", random_array<double>({2, 3, 4}, 1));
    Var<double> h = x;
    {
      const auto enc = g.scope("enc");
      for (int l = 0; l < 2; ++l) {
        const std::string name = "l" + std::to_string(l);
        const auto layer = g.scope(name);
        const auto p = attention_params(g, 4, 10 + static_cast<std::uint64_t>(l), "enc." + name + ".attn");
        params.push_back(p.w_q);
        h = add(h, multi_head_attention(h, h, p, 2));
      }
    }
    loss = sum(mul(h, h));
    g.set_output("loss", loss);
    const auto grads = grad(loss, params);
    for (std::size_t i = 0; i < grads.size(); ++i) g.set_grad("w_q" + std::to_string(i), grads[i]);
  }
};

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(scopes)

BOOST_AUTO_TEST_CASE(nodes_carry_the_scope_they_are_made_in_and_scopes_nest_and_end) {
  Graph<double> g;
  const auto a = g.input("a", {{1.0, 2.0}});
  BOOST_TEST(g.current_scope() == "");
  Var<double> b, c, d;
  {
    const auto outer = g.scope("enc");
    b = g.parameter("b", {{3.0, 4.0}});
    {
      const auto inner = g.scope("l1.attn");
      BOOST_TEST(g.current_scope() == "enc.l1.attn");
      c = add(a, b);
    }
    BOOST_TEST(g.current_scope() == "enc");
    d = mul(c, b);
  }
  const auto e = neg(d);
  BOOST_TEST(g.current_scope() == "");
  BOOST_TEST(a.node().scope == "");
  BOOST_TEST(b.node().scope == "enc");
  BOOST_TEST(c.node().scope == "enc.l1.attn");
  BOOST_TEST(d.node().scope == "enc");
  BOOST_TEST(e.node().scope == "");
  // A copy keeps them.
  Graph<double> copy;
  copy.copy_from(g, g.size());
  BOOST_TEST(copy.node(c.id()).scope == "enc.l1.attn");
}

BOOST_AUTO_TEST_CASE(backward_nodes_take_the_scope_of_the_node_they_differentiate) {
  Graph<double> g;
  Var<double> x;
  {
    const auto s = g.scope("weights");
    x = g.parameter("x", {{1.0, 2.0}, {3.0, 4.0}});
  }
  Var<double> y;
  {
    const auto s = g.scope("block");
    y = softmax(matmul(x, x));
  }
  const std::size_t first = g.size();
  const auto gx = grad(sum(mul(y, y)), {x})[0];
  bool block_vjp = false;
  for (std::size_t i = first; i < g.size(); ++i) {
    const auto& n = g.node(i);
    if (n.op_name() == "softmax_vjp" || n.op_name() == "matmul") {
      BOOST_TEST(n.scope == "block", "node " << i << " " << n.op_name());
      block_vjp = true;
    }
  }
  BOOST_TEST(block_vjp);
  // x feeds the matmul twice: its two contributions are summed in the scope of x, the node whose gradient they are.
  BOOST_TEST(gx.node().op_name() == "add");
  BOOST_TEST(gx.node().scope == "weights");
}

BOOST_AUTO_TEST_CASE(bad_names_are_refused_and_errors_name_the_scope) {
  Graph<double> g;
  check_error([&] { (void)g.scope(""); }, {"scope: a scope's name is empty"});
  check_error([&] { (void)g.scope("a\nb"); }, {"scope: a scope's name holds no control character or quote"});
  check_error([&] { (void)g.scope("say \"hi\""); }, {"no control character or quote"});
  BOOST_TEST(g.current_scope() == "");
  const auto a = g.input("a", xt::xarray<double>::from_shape({2, 3}));
  const auto b = g.input("b", xt::xarray<double>::from_shape({4, 5}));
  const auto s = g.scope("enc.l1.attn");
  check_error([&] { matmul(a, b); }, {"matmul (node 2, scope enc.l1.attn): inner sizes differ", "(2, 3)", "(4, 5)"});
  BOOST_TEST(g.size() == 2u);
  const auto c = g.input("c", {{1.0}});
  check_error([&] { c.indices(); }, {"node 2 ('c', scope enc.l1.attn)"});
}

BOOST_AUTO_TEST_CASE(json_writes_the_scope_reads_it_back_and_older_files_import) {
  Stack s;
  const std::string text = to_json(s.g, ExportValues::all).dump();
  const Json j = Json::parse(text);
  std::size_t scoped = 0;
  for (const auto& n : j["nodes"]) {
    if (n.contains("scope")) {
      ++scoped;
      BOOST_TEST(!n["scope"].get<std::string>().empty());
    }
  }
  BOOST_TEST(scoped > 20u);
  BOOST_TEST(j["nodes"][0].contains("scope") == false);  // x: omitted when empty
  const auto back = graph_from_json<double>(text);
  for (std::size_t i = 0; i < s.g.size(); ++i) BOOST_TEST(back->node(i).scope == s.g.node(i).scope, "node " << i);
  BOOST_TEST(to_json(*back, ExportValues::all).dump() == text);
  // Without the key (a file of before scopes): no scopes.
  Json old = j;
  for (auto& n : old["nodes"]) n.erase("scope");
  const auto unscoped = graph_from_json<double>(old.dump());
  for (std::size_t i = 0; i < unscoped->size(); ++i) BOOST_TEST(unscoped->node(i).scope.empty());
  // Bad scopes name their path.
  for (const Json& bad : {Json(""), Json("a\tb"), Json(3)}) {
    Json b = j;
    b["nodes"][1]["scope"] = bad;
    check_error([&] { graph_from_json<double>(b.dump()); }, {"nodes[1].scope"});
  }
}

BOOST_AUTO_TEST_CASE(builders_scope_their_nodes_by_their_parameters_prefix) {
  Stack s;
  std::set<std::string> scopes;
  for (std::size_t i = 0; i < s.g.size(); ++i) scopes.insert(s.g.node(i).scope);
  BOOST_TEST(scopes.count("enc.l0.attn"));
  BOOST_TEST(scopes.count("enc.l1.attn"));
  BOOST_TEST(!scopes.count("enc.l0.enc.l0.attn"));
  // Every softmax is in its layer's attention.
  std::size_t softmaxes = 0;
  for (std::size_t i = 0; i < s.g.size(); ++i) {
    if (s.g.node(i).op_name() != "softmax") continue;
    ++softmaxes;
    BOOST_TEST((s.g.node(i).scope == "enc.l0.attn" || s.g.node(i).scope == "enc.l1.attn"));
  }
  BOOST_TEST(softmaxes == 2u);
  // Outside every scope, attention_params' default prefix "attn" is the block's scope.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({1, 2, 4}, 1));
  const auto y = multi_head_attention(x, x, attention_params(g, 4, 1), 2);
  BOOST_TEST(y.node().scope == "attn");
  BOOST_TEST(x.node().scope == "");
}

BOOST_AUTO_TEST_CASE(dot_draws_a_cluster_per_scope_and_filters) {
  Stack s;
  const std::string all = to_dot(s.g);
  BOOST_TEST(count_of(all, "label=\"enc.l0.attn\"") == 2u);  // in the forward and the backward cluster
  BOOST_TEST(count_of(all, "label=\"enc\"") == 2u);
  BOOST_TEST(all.find("cluster_backward") != std::string::npos);
  DotOptions forward;
  forward.forward_only = true;
  const std::string f = to_dot(s.g, forward);
  BOOST_TEST(f.find("cluster_backward") == std::string::npos);
  BOOST_TEST(f.find("softmax_vjp") == std::string::npos);
  // One scope: its nodes, and its inputs from outside as stubs.
  DotOptions one;
  one.scope = "enc.l1";
  const std::string l1 = to_dot(s.g, one);
  BOOST_TEST(l1.find("label=\"enc.l1.attn\"") != std::string::npos);
  BOOST_TEST(l1.find(": add\\nenc.l0\"") != std::string::npos);  // a stub: layer 0's output names its scope
  BOOST_TEST(l1.find("label=\"enc.l0.attn\"") == std::string::npos);
  BOOST_TEST(count_of(l1, "style=\"rounded,dashed\", color=\"#999999\"") >= 1u);
  one.scope = "enc.l";  // a prefix by whole parts only
  check_error([&] { to_dot(s.g, one); }, {"to_dot: no node is in scope 'enc.l'", "its scopes: enc.l0, enc.l0.attn, enc.l1"});
  // Around a node: it and its neighbours within the depth.
  DotOptions around;
  around.around = s.loss.id();
  around.depth = 1;
  const std::string near = to_dot(s.g, around);
  BOOST_TEST(count_of(near, " [label=\"") <= 8u);
  BOOST_TEST(near.find("n" + std::to_string(s.loss.id()) + " [label=\"sum") != std::string::npos);
  around.around = s.g.size();
  check_error([&] { to_dot(s.g, around); }, {"to_dot: no node " + std::to_string(s.g.size()), "the graph has"});
}

BOOST_AUTO_TEST_CASE(dot_collapses_scopes_above_its_node_bound_unless_told_not_to) {
  Stack s;
  DotOptions o;
  BOOST_TEST(!dot_collapses_scopes(s.g, o));  // fewer than 150 nodes
  o.collapse_above = 20;
  BOOST_TEST(dot_collapses_scopes(s.g, o));
  const std::string c = to_dot(s.g, o);
  BOOST_TEST(c.find("enc.l0.attn\\n") != std::string::npos);
  BOOST_TEST(c.find("enc.l1.attn (backward)\\n") != std::string::npos);
  BOOST_TEST(c.find("(worst softmax)") != std::string::npos);
  BOOST_TEST(c.find("softmax_vjp") == std::string::npos);  // inside a box
  BOOST_TEST(count_of(c, "shape=box3d") >= 4u);            // the layers' scopes and their attention's, both passes
  // Names on one box are one label: two gradients of enc.l0.attn's backward box.
  s.g.set_grad("w_q0_again", s.g.var(s.g.grads().at("w_q0")));
  const std::string named = to_dot(s.g, o);
  BOOST_TEST(named.find("\"grad w_q0\\nw_q0_again\" [shape=plaintext") != std::string::npos, named);
  BOOST_TEST(count_of(named, "-> \"grad w_q0") == 1u);
  o.scope = "enc.l0";                                       // a filter: drawn in full
  BOOST_TEST(!dot_collapses_scopes(s.g, o));
  o.scope.clear();
  o.collapse = DotOptions::Collapse::never;
  BOOST_TEST(!dot_collapses_scopes(s.g, o));
}

BOOST_AUTO_TEST_CASE(onnx_node_names_start_with_the_scope) {
  Stack s;
  onnx::ModelProto model;
  BOOST_TEST_REQUIRE(model.ParseFromString(to_onnx_bytes(s.g)));
  std::size_t scoped = 0;
  for (const auto& n : model.graph().node()) {
    if (n.name().rfind("enc.l1.attn/n", 0) == 0) {
      ++scoped;
      BOOST_TEST(n.doc_string().find("scope enc.l1.attn") != std::string::npos);
    }
  }
  BOOST_TEST(scoped > 10u);
}

BOOST_AUTO_TEST_CASE(the_tool_draws_a_scope_a_neighbourhood_or_the_forward_pass) {
  Stack s;
  test::Sandbox box;
  test::write_text(box.dir / "g.json", to_json(s.g, ExportValues::all).dump());
  auto r = box.xgrad("export --graph g.json --format dot --scope enc.l0");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(r.out.find("label=\"enc.l0.attn\"") != std::string::npos);
  BOOST_TEST(r.out.find("label=\"enc.l1.attn\"") == std::string::npos);
  r = box.xgrad("export --graph g.json --format dot --forward-only");
  BOOST_TEST(r.rc == 0);
  BOOST_TEST(r.out.find("cluster_backward") == std::string::npos);
  r = box.xgrad("export --graph g.json --format dot --around 3 --depth 1");
  BOOST_TEST(r.rc == 0);
  BOOST_TEST(r.err.empty());
  r = box.xgrad("export --graph g.json --format dot --scope nowhere");
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("no node is in scope 'nowhere'") != std::string::npos, r.err);
  r = box.xgrad("export --graph g.json --format json --forward-only");
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("--forward-only applies to --format dot only") != std::string::npos, r.err);
  r = box.xgrad("export --graph g.json --format dot --depth 3");
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("--depth applies with --around NODE only") != std::string::npos, r.err);
  r = box.xgrad("export --graph g.json --format dot --around x");
  BOOST_TEST(r.rc == 2);
  r = box.xgrad("export --graph g.json --format dot --no-backward");
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("--forward-only draws its forward pass") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_SUITE_END()
