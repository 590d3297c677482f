"""The Python module against PyTorch (float64 within 1e-12, float32 within 1e-4) and its contracts.

Run by ctest (python_module) as `python3 -m unittest discover -s tests/python` with
PYTHONPATH=build/python; pytest runs it too.
"""

import json
import os
import tempfile
import threading
import unittest

import numpy as np
import torch

import xgrad

torch.set_default_dtype(torch.float64)


def rng(seed):
    return np.random.default_rng(seed)


def torch_attention(q, k, v, mask=None):
    """PyTorch's attention, a row with every key masked defined as xgrad defines it: zeros (torch: NaN)."""
    s = q @ k.transpose(-1, -2) / np.sqrt(q.shape[-1])
    if mask is None:
        return torch.softmax(s, dim=-1) @ v
    allowed = mask.expand_as(s)
    some = allowed.any(dim=-1, keepdim=True)
    w = torch.softmax(torch.where(allowed | ~some, s, torch.tensor(float("-inf"))), dim=-1) * some
    return w @ v


class AttentionAgainstTorch(unittest.TestCase):
    def check(self, mask=None):
        r = rng(1)
        q0, k0, v0 = r.normal(size=(2, 3, 5, 4)), r.normal(size=(2, 3, 6, 4)), r.normal(size=(2, 3, 6, 7))
        g_out = r.normal(size=(2, 3, 5, 7))
        g = xgrad.Graph("float64")
        q, k, v = g.input("q", q0), g.input("k", k0), g.input("v", v0)
        m = None if mask is None else g.mask("mask", mask)
        out = xgrad.attention(q, k, v, mask=m)
        grads = xgrad.grad(out, [q, k, v], grad_out=g_out)

        def reference(q0, k0, v0, mask):
            tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q0, k0, v0))
            y = torch_attention(tq, tk, tv, None if mask is None else torch.tensor(mask))
            y.backward(torch.tensor(g_out))
            return [y.detach().numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()]

        for ours, theirs in zip([out] + grads, reference(q0, k0, v0, mask)):
            np.testing.assert_allclose(ours.value, theirs, rtol=0, atol=1e-12)

        # The next batch: new values and a new mask, one replay; the same agreement.
        q1 = r.normal(size=q0.shape)
        g.set_value(q, q1)
        if mask is not None:
            mask = np.ascontiguousarray(mask[::-1])
            g.set_value(m, mask)
        g.replay()
        for ours, theirs in zip([out] + grads, reference(q1, k0, v0, mask)):
            np.testing.assert_allclose(ours.value, theirs, rtol=0, atol=1e-12)

    def test_without_mask(self):
        self.check()

    def test_with_mask_leaf_replayed_per_batch(self):
        mask = np.ones((2, 1, 5, 6), dtype=bool)
        mask[0, 0, :, 4:] = False  # padding of batch 0
        mask[1, 0, 2, :] = False   # a row with every key masked: zeros
        mask[1, 0, 3, 1] = False
        self.check(mask)

    def test_fused_matches_composed(self):
        r = rng(2)
        g = xgrad.Graph()
        q, k, v = (g.input(n, r.normal(size=(2, 8, 4))) for n in "qkv")
        composed = xgrad.attention(q, k, v, mask=xgrad.causal_mask(8, 8))
        fused = xgrad.attention(q, k, v, mask=xgrad.causal_mask(8, 8), impl="fused")
        np.testing.assert_allclose(fused.value, composed.value, rtol=0, atol=1e-12)
        self.assertEqual(fused.op, "flash_attention")

    def test_documented_example(self):
        g = xgrad.Graph()
        q = g.input("q", [[np.log(2)], [0]])
        k = g.input("k", [[1], [0]])
        v = g.input("v", [[3, 0], [0, 6]])
        nodes = xgrad.attention_nodes(q, k, v)
        np.testing.assert_allclose(nodes.weights.value, [[2 / 3, 1 / 3], [1 / 2, 1 / 2]], rtol=0, atol=1e-15)
        np.testing.assert_allclose(nodes.output.value, [[2, 2], [1.5, 3]], rtol=0, atol=1e-15)
        self.assertIsNone(nodes.masked)


class MlpFloat32AgainstTorch(unittest.TestCase):
    def test_layer_norm_gelu_mlp(self):
        r = rng(3)
        x0 = r.normal(size=(4, 6, 8)).astype(np.float32)
        w1, b1 = r.normal(size=(8, 16)).astype(np.float32) * 0.3, r.normal(size=16).astype(np.float32)
        w2, b2 = r.normal(size=(16, 8)).astype(np.float32) * 0.3, r.normal(size=8).astype(np.float32)
        gamma, beta = 1 + 0.1 * r.normal(size=8).astype(np.float32), 0.1 * r.normal(size=8).astype(np.float32)
        g = xgrad.Graph("float32")
        x = g.input("x", x0)
        p = [g.parameter(n, a) for n, a in zip(["w1", "b1", "w2", "b2", "gamma", "beta"], [w1, b1, w2, b2, gamma, beta])]
        h = xgrad.layer_norm(x, p[4], p[5])
        y = xgrad.linear(xgrad.gelu(xgrad.linear(h, p[0], p[1])), p[2], p[3])
        loss = xgrad.mean(y * y)
        grads = xgrad.grad(loss, p)
        self.assertEqual(loss.value.dtype, np.float32)

        t = [torch.tensor(a, requires_grad=True) for a in [w1, b1, w2, b2, gamma, beta]]
        th = torch.nn.functional.layer_norm(torch.tensor(x0), (8,), t[4], t[5])
        ty = torch.nn.functional.gelu(th @ t[0] + t[1]) @ t[2] + t[3]
        tl = (ty * ty).mean()
        tl.backward()
        self.assertAlmostEqual(float(loss.value), tl.item(), delta=1e-4)
        for ours, theirs in zip(grads, t):
            np.testing.assert_allclose(ours.value, theirs.grad.numpy(), rtol=1e-4, atol=1e-4)


class Arrays(unittest.TestCase):
    def test_views_are_read_as_numpy_sees_them(self):
        a = np.arange(24.0).reshape(4, 6)
        g = xgrad.Graph()
        for view in (a[:, ::2], a[::-1], a.T, a[1:3, ::-2], np.asfortranarray(a)):
            np.testing.assert_array_equal(g.input("x", view).value, view)
        self.assertEqual(g.input("s", 3).shape, ())
        self.assertEqual(g.input("i", np.arange(3, dtype=np.int32)).value.dtype, np.float64)

    def test_value_is_a_copy(self):
        g = xgrad.Graph()
        x = g.input("x", np.ones(3))
        x.value[0] = 7
        self.assertEqual(x.value[0], 1)

    def test_indices_and_masks(self):
        g = xgrad.Graph("float32")
        table = g.parameter("table", np.arange(12.0).reshape(4, 3))
        ids = g.indices("ids", np.array([[3, 0]], dtype=np.int32))
        e = xgrad.embedding(table, ids)
        np.testing.assert_array_equal(e.value, [[[9, 10, 11], [0, 1, 2]]])
        self.assertEqual(ids.value.dtype, np.int64)
        g.set_value(ids, np.array([[1, 1]]))
        g.replay()
        np.testing.assert_array_equal(e.value, [[[3, 4, 5], [3, 4, 5]]])
        m = g.mask("m", np.array([True, False]))
        self.assertEqual(m.value.dtype, np.bool_)
        self.assertEqual(m.op, "mask")

    def test_operators(self):
        g = xgrad.Graph()
        a = g.input("a", np.array([1.0, 2.0]))
        b = g.input("b", np.array([4.0, 8.0]))
        np.testing.assert_array_equal((a + b).value, [5, 10])
        np.testing.assert_array_equal((a - 1).value, [0, 1])
        np.testing.assert_array_equal((1 - a).value, [0, -1])
        np.testing.assert_array_equal((a * 3).value, [3, 6])
        np.testing.assert_array_equal((3 * a).value, [3, 6])
        np.testing.assert_array_equal((b / a).value, [4, 4])
        np.testing.assert_array_equal((2 / a).value, [2, 1])
        np.testing.assert_array_equal((-a).value, [-1, -2])
        np.testing.assert_array_equal((np.float64(2) * a).value, [2, 4])
        self.assertEqual((a * 3).op, "scale")
        m = g.input("m", np.eye(2))
        np.testing.assert_array_equal((m @ m).value, np.eye(2))
        with self.assertRaises(TypeError):
            np.ones(2) * a  # numpy does not swallow a Var (__array_ufunc__ = None)


class Files(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_json_round_trip(self):
        r = rng(4)
        g = xgrad.Graph()
        q, k, v = (g.input(n, r.normal(size=(3, 2))) for n in "qkv")
        out = xgrad.attention(q, k, v)
        (gq,) = xgrad.grad(out, [q])
        g.set_output("out", out)
        g.set_grad("q", gq)
        g.save_json(self.path("g.json"))
        h = xgrad.load_json(self.path("g.json"))
        self.assertEqual(h.dtype, "float64")
        self.assertEqual(len(h), len(g))
        self.assertEqual(sorted(h.inputs), ["k", "q", "v"])
        np.testing.assert_array_equal(h.outputs["out"].value, out.value)
        np.testing.assert_array_equal(h.grads["q"].value, gq.value)
        q2 = r.normal(size=(3, 2))
        h.set_value(h.inputs["q"], q2)
        h.replay()
        g.set_value(q, q2)
        g.replay()
        np.testing.assert_array_equal(h.outputs["out"].value, out.value)
        self.assertEqual(json.loads(g.to_json("none"))["format"], "xgrad-graph")
        self.assertIn("digraph", g.to_dot())

    def test_onnx_and_checkpoints(self):
        g = xgrad.Graph("float32")
        w = g.parameter("w", np.ones((2, 2)))
        x = g.input("x", np.ones((1, 2)))
        y = x @ w
        g.set_output("y", y)
        g.to_onnx(self.path("m.onnx"))
        self.assertGreater(os.path.getsize(self.path("m.onnx")), 0)
        xgrad.save_parameters(g, self.path("p.npz"))
        g.set_value(w, np.zeros((2, 2)))
        xgrad.load_parameters(g, self.path("p.npz"))
        np.testing.assert_array_equal(w.value, np.ones((2, 2)))
        self.assertEqual(list(np.load(self.path("p.npz")).keys()), ["w"])
        xgrad.save_tensors(self.path("t.safetensors"), {"a": np.arange(3.0)})
        np.testing.assert_array_equal(xgrad.load_tensors(self.path("t.safetensors"))["a"], [0, 1, 2])


class Training(unittest.TestCase):
    def test_adamw_matches_torch(self):
        r = rng(5)
        w0, x0 = r.normal(size=(3, 2)), r.normal(size=(4, 3))
        g = xgrad.Graph()
        w = g.parameter("w", w0)
        loss = xgrad.mean(xgrad.tanh(g.input("x", x0) @ w))
        opt = xgrad.AdamW(g.parameters(), lr=0.1, weight_decay=0.05)
        (gw,) = xgrad.grad(loss, opt.parameters())
        tw = torch.tensor(w0, requires_grad=True)
        topt = torch.optim.AdamW([tw], lr=0.1, weight_decay=0.05)
        for _ in range(3):
            opt.step([gw])
            g.replay()
            topt.zero_grad()
            torch.tanh(torch.tensor(x0) @ tw).mean().backward()
            topt.step()
        np.testing.assert_allclose(w.value, tw.detach().numpy(), rtol=0, atol=1e-12)
        self.assertEqual(opt.lr, 0.1)

    def test_gradcheck_and_diagnostics(self):
        g = xgrad.Graph()
        r = rng(6)
        q, k, v = (g.input(n, r.normal(size=(2, 3, 2))) for n in "qkv")
        out = xgrad.attention(q, k, v)
        report = xgrad.gradcheck(xgrad.sum(out * out), [q, k, v])
        self.assertTrue(report.passed)
        self.assertIn("PASS", str(report))
        self.assertEqual(len(report.inputs), 3)
        xgrad.grad(out, [q])
        d = xgrad.softmax_diagnostics(g)
        self.assertEqual(len([n for n in d if not n.get("in_backward")]), 1)
        self.assertIn("saturated_fraction", d[0])

    def test_graphs_in_two_threads(self):
        graphs = []
        for seed in (7, 8):
            g = xgrad.Graph()
            x = g.input("x", rng(seed).normal(size=(64, 64)))
            y = xgrad.softmax(x @ x)
            graphs.append((g, y, y.value))
        errors = []

        def run(g, y, expected):
            try:
                for _ in range(20):
                    g.replay()
                np.testing.assert_array_equal(y.value, expected)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=item) for item in graphs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])


class VariantsAndMethods(unittest.TestCase):
    def test_variant_block_gradcheck(self):
        g = xgrad.Graph()
        p = xgrad.variant_attention_params(g, 8, 4, 2, qk_norm=True, seed=1)
        x = g.input("x", rng(9).normal(size=(2, 5, 8)))
        y = xgrad.variant_multi_head_attention(x, p, 4, 2, rope=True, qk_norm="rms", causal=True)
        self.assertEqual(y.shape, (2, 5, 8))
        self.assertEqual(p.q_gain.shape, (2,))
        self.assertTrue(xgrad.gradcheck(xgrad.sum(y * y), [x, p.w_q, p.q_gain]).passed)

    def test_methods_and_help(self):
        g = xgrad.Graph()
        x = g.input("x", np.arange(6.0).reshape(2, 3))
        self.assertEqual(x.sum().item(), 15.0)
        self.assertEqual(x.T.shape, (3, 2))
        np.testing.assert_allclose(x.softmax(-1).value.sum(axis=-1), [1, 1], rtol=0, atol=1e-15)
        with self.assertRaisesRegex(xgrad.Error, "holds 6 elements"):
            x.item()
        self.assertIsNone(xgrad.Var.__array_ufunc__)
        self.assertIn("softmax(scale q k^T + M) v", xgrad.attention.__doc__)


class Errors(unittest.TestCase):
    def test_library_errors_are_xgrad_errors(self):
        g = xgrad.Graph()
        a, b = g.input("a", np.ones((2, 3))), g.input("b", np.ones((4, 5)))
        with self.assertRaisesRegex(xgrad.Error, r"matmul \(node 2\): inner sizes differ: a is \(2, 3\), b is \(4, 5\)"):
            a @ b
        self.assertTrue(issubclass(xgrad.Error, ValueError))
        self.assertEqual(len(g), 2)  # a rejected call adds no node
        with self.assertRaisesRegex(xgrad.Error, r"is \(2, 3\), the new value is \(3,\)"):
            g.set_value(a, np.ones(3))
        with self.assertRaisesRegex(xgrad.Error, "not of real numbers"):
            g.input("s", np.array(["x"]))
        with self.assertRaisesRegex(xgrad.Error, "indices must be integers"):
            g.indices("i", np.ones(2))
        with self.assertRaisesRegex(xgrad.Error, "a mask is an array of bool"):
            g.mask("m", np.ones(2))
        with self.assertRaisesRegex(xgrad.Error, "neither"):
            xgrad.Graph("int8")
        with self.assertRaisesRegex(xgrad.Error, 'random_array: dtype "int8" is neither'):
            xgrad.random_array((2,), 1, dtype="int8")
        # Names read from the library's tables of enum names (graph/names.hpp).
        with self.assertRaisesRegex(xgrad.Error, 'values "some" is none of "none", "inputs", "all"'):
            g.to_json(values="some")
        with self.assertRaisesRegex(xgrad.Error, 'qk_norm: kind "l2" is none of "none", "layer", "rms"'):
            xgrad.qk_norm(a, g.input("gain", np.ones(3)), kind="l2")
        with self.assertRaisesRegex(xgrad.Error, 'variant_attention: weights "relu" is neither "softmax" nor "sigmoid"'):
            xgrad.variant_attention(a, a, a, weights="relu")
        with self.assertRaisesRegex(xgrad.Error, "index 9223372036854775808 does not fit int64"):
            g.indices("u", np.array([2**63], dtype=np.uint64))
        with self.assertRaisesRegex(xgrad.Error, r"\(32768, 16384\) holds more than max_array_elements"):
            g.input("huge", np.broadcast_to(np.zeros(1), (2**15, 2**14)))  # a view of one element
        h = xgrad.Graph("float32")
        with self.assertRaisesRegex(xgrad.Error, "float32 Var among float64"):
            a + h.input("c", np.ones((2, 3)))
        with self.assertRaisesRegex(xgrad.Error, "another graph"):
            xgrad.Graph().set_value(a, np.ones((2, 3)))
        with self.assertRaises(xgrad.Error):
            xgrad.load_json("/nonexistent/graph.json")
        with self.assertRaises(TypeError):
            xgrad.softmax(np.ones(3))

    def test_released_value(self):
        g = xgrad.Graph()
        x = g.input("x", np.ones(3))
        y = xgrad.exp(x)
        z = xgrad.sum(y)
        g.keep_only([z])
        g.replay()
        self.assertEqual(float(z.value), 3 * np.e)
        with self.assertRaisesRegex(xgrad.Error, "released"):
            y.value


if __name__ == "__main__":
    unittest.main()
