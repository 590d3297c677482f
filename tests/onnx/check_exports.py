#!/usr/bin/python3
"""ONNX's own checks of each model xgrad's onnx_export suite wrote (DIR/<case>/model.onnx).

    /usr/bin/python3 tests/onnx/check_exports.py DIR

For each model: onnx.checker.check_model with full_check (which runs shape inference too), then
strict shape inference with type checks, whose shapes of the graph outputs must be the ones xgrad
declares; the model must use only the default domain at opset 17, IR version 8. Exit 0 when
every model passes, 1 otherwise, 77 (ctest's skip) without python3-onnx.
"""
import os
import sys

try:
    import onnx
    from onnx import shape_inference
except ImportError as e:
    print(f"SKIPPED: python3-onnx is not installed (tools/setup test installs it): {e}")
    sys.exit(77)


def dims(value_info):
    return [d.dim_value if d.HasField("dim_value") else d.dim_param
            for d in value_info.type.tensor_type.shape.dim]


def check(path):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    if model.ir_version != 8:
        raise ValueError(f"IR version {model.ir_version}, not 8")
    opsets = {o.domain: o.version for o in model.opset_import}
    if opsets != {"": 17}:
        raise ValueError(f"opsets {opsets}, not the default domain at 17 only")
    domains = {n.domain for n in model.graph.node} - {"", "ai.onnx"}
    if domains:
        raise ValueError(f"nodes of other domains: {sorted(domains)}")
    inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    declared = {o.name: dims(o) for o in model.graph.output}
    for o in inferred.graph.output:
        if dims(o) != declared[o.name]:
            raise ValueError(f"output {o.name}: inferred {dims(o)}, declared {declared[o.name]}")
    return len(model.graph.node)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    cases = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "model.onnx")))
    if not cases:
        print(f"{root}: no models (run the onnx_export suite first)", file=sys.stderr)
        return 1
    failed = 0
    for case in cases:
        try:
            nodes = check(os.path.join(root, case, "model.onnx"))
            print(f"ok   {case}: {nodes} nodes")
        except Exception as e:  # the checker's own exception types vary by version
            print(f"FAIL {case}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            failed += 1
    print(f"{len(cases) - failed} of {len(cases)} models pass onnx {onnx.__version__}'s checker and shape inference")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
