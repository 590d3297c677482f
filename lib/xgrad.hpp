// xgrad: reverse-mode autodiff over an expression graph of xtensor arrays.
// The one header users include: <xgrad/xgrad.hpp>.
#pragma once

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/graph.hpp>
#include <xgrad/lib/array_io.hpp>
#include <xgrad/lib/attention.hpp>
#include <xgrad/lib/diagnostics.hpp>
#include <xgrad/lib/format.hpp>
#include <xgrad/lib/grad.hpp>
#include <xgrad/lib/gradcheck.hpp>
#include <xgrad/lib/graph_io.hpp>
#include <xgrad/lib/loss.hpp>
#include <xgrad/lib/multi_head.hpp>
#include <xgrad/lib/optim.hpp>
#include <xgrad/lib/saturation.hpp>
#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/flash_attention.hpp>
#include <xgrad/ops/log_softmax.hpp>
#include <xgrad/ops/matmul.hpp>
#include <xgrad/ops/mean.hpp>
#include <xgrad/ops/pad.hpp>
#include <xgrad/ops/permute.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/reshape.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/slice.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/softmax_vjp.hpp>
#include <xgrad/ops/sum.hpp>
#include <xgrad/ops/sum_to.hpp>
#include <xgrad/ops/transpose.hpp>
