#!/usr/bin/env bash
# Regenerates the seed corpora of tests/fuzz/corpus from real exports and files:
#   tests/fuzz/make_seeds.sh [path/to/xgrad]     (default build/xgrad; needs python3)
set -euo pipefail
cd "$(dirname "$0")/../.."
xgrad=${1:-build/xgrad}
corpus=tests/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '[[0.6931471805599453], [0]]' > "$tmp/q.json"
printf '[[1], [0]]' > "$tmp/k.json"
printf '[[3, 0], [0, 6]]' > "$tmp/v.json"
printf '[[1, -2], [0.5, 0]]' > "$tmp/g.json"

# Graph exports: both dtypes, with and without backward nodes, every values mode, composed and fused.
"$xgrad" export --q "$tmp/q.json" --k "$tmp/k.json" --v "$tmp/v.json" --dtype float32 -o $corpus/graph_json/documented_example.json
"$xgrad" export --shape 2,3,2,2 --seed 1 --values inputs -o $corpus/graph_json/float64_inputs.json
"$xgrad" export --shape 3,2,1,2 --seed 2 --values none -o $corpus/graph_json/float64_none.json
"$xgrad" export --shape 2,2,3,1 --seed 3 --dtype float32 --no-backward -o $corpus/graph_json/float32_forward.json
"$xgrad" export --shape 1,1,1,1 --seed 4 -o $corpus/graph_json/float64_all_1x1.json
"$xgrad" export --shape 3,2,2,3 --seed 5 --impl fused -o $corpus/graph_json/float64_fused.json

# .npy files written by numpy (tests/data/make_npy_fixtures.py).
cp tests/data/npy/*.npy $corpus/npy/

# Checkpoints: numpy's .npz files and a hand-written safetensors file
# (tests/data/make_checkpoint_fixtures.py), and what xgrad's writer makes (suite checkpoint
# writes them to the build's tests/output).
mkdir -p $corpus/npz $corpus/safetensors
cp tests/data/checkpoint/*.npz $corpus/npz/
cp tests/data/checkpoint/*.safetensors $corpus/safetensors/
"$(dirname "$xgrad")/tests/xgrad_tests" --run_test=checkpoint/writes_npz_files_for_numpy >/dev/null
for f in "$(dirname "$xgrad")"/tests/output/xgrad_*.npz; do cp "$f" "$corpus/npz/$(basename "$f")"; done
for f in "$(dirname "$xgrad")"/tests/output/xgrad_*.safetensors; do cp "$f" "$corpus/safetensors/$(basename "$f")"; done

# ONNX models: ONNX's backend node tests (libonnx-testdata) that tests/onnx/node_tests.manifest
# says import (those that take shapes or axes as graph inputs get zeros here, which their op
# refuses), a few it skips (ops not supported, a bool input or output, a float output of an
# integer input, a run-time exponent), and the float32 fixtures of tests/data/onnx.
mkdir -p $corpus/onnx
onnx_node=/usr/share/libonnx-testdata/data/node
for t in test_softmax_axis_1 test_softmax_axis_1_expanded test_logsoftmax_axis_2_expanded \
         test_layer_normalization_3d_axis1_epsilon test_layer_normalization_3d_axis1_epsilon_expanded \
         test_mvn_expanded test_gather_2d_indices test_slice test_slice_default_axes \
         test_concat_3d_axis_negative_2 test_gemm_all_attributes test_gemm_transposeB test_matmul_4d \
         test_reduce_sum_keepdims_random test_reduce_mean_do_not_keepdims_example \
         test_reduce_log_sum_exp_negative_axes_keepdims_random test_reduce_max_default_axes_keepdim_example \
         test_reduce_l2_keep_dims_example test_reshape_zero_and_negative_dim test_reshape_allowzero_reordered \
         test_transpose_all_permutations_3 test_split_equal_parts_2d test_split_zero_size_splits \
         test_unsqueeze_unsorted_axes test_squeeze_negative_axes test_clip_splitbounds test_expand_dim_changed \
         test_flatten_negative_axis2 test_dropout_default_ratio test_cast_FLOAT_to_DOUBLE test_constant \
         test_hardswish_expanded test_celu_expanded test_prelu_broadcast test_erf test_thresholdedrelu \
         test_where_example test_pow test_cumsum_1d test_equal test_constantofshape_float_ones \
         test_range_float_type_positive_delta_expanded; do
  cp "$onnx_node/$t/model.onnx" "$corpus/onnx/$t.onnx"
done
cp tests/data/onnx/*_float32.onnx $corpus/onnx/

# JSON arrays.
printf '[[1, 2.5, "nan"], [-0.0, "inf", "-inf"]]' > $corpus/json_array/matrix.json
printf '7' > $corpus/json_array/scalar.json
printf '[[], []]' > $corpus/json_array/empty_rows.json
printf '[[[1e-320, 2], [3, 4]], [[5, 6], [7, 8]]]' > $corpus/json_array/rank3.json
printf '[0.1, -1e300, 5e-324]' > $corpus/json_array/vector.json

# CLI inputs: a flags byte, then the files joined by "\n\x1e\n" (see targets.hpp).
"$xgrad" attention --q "$tmp/q.json" --k "$tmp/k.json" --v "$tmp/v.json" --out "$tmp/npy"
python3 - "$tmp" "$corpus/cli_attention" <<'PY'
import sys
tmp, out = sys.argv[1], sys.argv[2]
read = lambda p: open(f"{tmp}/{p}", "rb").read()
sep = b"\n\x1e\n"
def seed(name, flags, parts):
    open(f"{out}/{name}", "wb").write(bytes([flags]) + sep.join(parts))
seed("json_qkv", 0, [read("q.json"), read("k.json"), read("v.json")])
seed("json_qkv_grad_float32", 1, [read("q.json"), read("k.json"), read("v.json"), read("g.json")])
# grad_q (2, 1), grad_k (2, 1), output (2, 2) as q, k, v: valid .npy inputs.
seed("npy_qkv", 0b11100, [read("npy/grad_q.npy"), read("npy/grad_k.npy"), read("npy/output.npy")])
seed("mixed_extra_args", 2 | 0b100, [read("npy/grad_q.npy"), read("k.json"), read("v.json"), read("g.json"),
                                     b"--dtype\x00float32"])
PY
echo "seeds written under $corpus"
