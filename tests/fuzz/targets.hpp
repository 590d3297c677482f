// The fuzz targets, as plain functions: libFuzzer drives them (fuzz_main.cpp), and the test
// suite replays every checked-in corpus and regression input through them (fuzz_corpus_test.cpp).
//
// Each takes one input and returns 0. Rejecting the input is fine only as xgrad::error (or, for
// the CLI, its usage errors); any other exception escapes and any broken property aborts: both
// are findings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace xgrad::fuzz {

// graph_from_json on the input as text, float32 or float64 as it says; when it imports, the
// graph must replay and export -> import -> export must give the same text.
int graph_json(const std::uint8_t* data, std::size_t size);
// parse_npy on the input; when it reads, writing and reading again must give the same bits.
int npy(const std::uint8_t* data, std::size_t size);
// parse_json_array on the input; when it reads a non-empty array, array_to_json and reading
// again must give the same bits.
int json_array(const std::uint8_t* data, std::size_t size);
// parse_checkpoint on the input as a safetensors file / an .npz archive; when it reads, writing
// the tensors (as float32 if all are, else float64) and the metadata in the same format and
// reading again must give the same names, bits and metadata.
int safetensors(const std::uint8_t* data, std::size_t size);
int npz(const std::uint8_t* data, std::size_t size);
// import_onnx_bytes on the input as a model (external data refused), in float32 if its size is
// even, else float64, at most 2^16 elements; when it imports, the graph must replay to the same
// outputs, export -> import -> export must give the same text, and it must import with its
// gradients too, which must pass the same checks.
int onnx(const std::uint8_t* data, std::size_t size);
// `xgrad attention` in process on files made from the input: byte 0 holds flags (bit 0
// --dtype float32, bit 1 --dtype float64, bits 2..5 whether q, k, v, grad-output are .npy rather
// than .json); the rest is split at cli_separator into the q, k, v files, an optional
// grad-output file and optional extra arguments (separated by NUL bytes).
int cli_attention(const std::uint8_t* data, std::size_t size);
// parse_json on the input, beside nlohmann's own parser: what it reads, nlohmann reads as the
// same document, keys in the same order; what it refuses and nlohmann reads has a key twice,
// nesting deeper than 8 levels or a NUL byte.
int json(const std::uint8_t* data, std::size_t size);
// InputFile::beneath and beneath_walk on the input as a location in a model's directory whose
// links lead out of it in every way (to a file, through a directory, "..", to /dev/zero) and
// within it: what opens is a file inside; every refusal names the model and the initializer.
int beneath(const std::uint8_t* data, std::size_t size);
inline const std::string cli_separator = "\n\x1e\n";

}  // namespace xgrad::fuzz
