// Version 1 of the graph format, for the tests of its import: a version 2 export of a graph
// whose nodes have one output each, written as version 1 wrote it (checked against the golden
// version 1 file, tests/data/documented_example_v1.json, in graph_io/version_1_files_import).
#pragma once

#include <xgrad/graph/json.hpp>

namespace xgrad::test {

inline Json as_version_1(const Json& v2) {
  Json v1 = Json::object();
  v1["format"] = v2["format"];
  v1["version"] = 1;
  v1["dtype"] = v2["dtype"];
  Json nodes = Json::array();
  for (const auto& n : v2["nodes"]) {
    const Json& out = n["outputs"][0];
    Json m;
    for (const char* key : {"id", "op", "name", "role"}) m[key] = n[key];
    m["inputs"] = Json::array();
    for (const auto& in : n["inputs"]) m["inputs"].push_back(in[0]);
    m["attrs"] = n["attrs"];
    m["shape"] = out["shape"];
    if (out.contains("grad_of")) m["grad_of"] = out["grad_of"][0];
    if (out.contains("data")) m["value"] = Json{{"shape", out["shape"]}, {"data", out["data"]}};
    nodes.push_back(std::move(m));
  }
  v1["nodes"] = std::move(nodes);
  for (const char* names : {"outputs", "grads"}) {
    v1[names] = Json::object();
    for (const auto& item : v2[names].items()) v1[names][item.key()] = item.value()[0];
  }
  if (v2.contains("diagnostics")) v1["diagnostics"] = v2["diagnostics"];
  return v1;
}

}  // namespace xgrad::test
