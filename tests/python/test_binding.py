"""The binding itself, standalone (no daemon): methods, types, shapes, dtypes,
non-contiguous input, the seed's semantics and the error mapping."""

import pickle

import numpy as np
import pytest
import torch

import zring

METHODS = ["none", "fp16", "bf16", "topk:3", "topk:1%", "randomk:5", "randomk:10%",
           "threshold:0.5", "quant:8", "quant:1", "sign", "ef:topk:1%", "ef:sign"]


def values(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


@pytest.mark.parametrize("text", METHODS)
def test_method_text_round_trips(text):
    method = zring.CompressionMethod.parse(text)
    assert str(method) == text == method.to_string()
    assert zring.CompressionMethod.parse(str(method)) == method
    assert zring.CompressionMethod(text) == method
    assert repr(method) == f"CompressionMethod('{text}')"
    assert pickle.loads(pickle.dumps(method)) == method
    assert hash(method) == hash(zring.CompressionMethod(text))


def test_method_factories_and_properties():
    m = zring.CompressionMethod.error_feedback(zring.CompressionMethod.topk_ratio(0.01))
    assert str(m) == "ef:topk:1%"
    assert m.has_error_feedback and m.kind == zring.CompressionKind.topk and m.is_ratio
    assert m.base == zring.CompressionMethod.parse("topk:1%")
    assert m.kept_for(1000) == 10
    assert zring.CompressionMethod.quantization(4).bits == 4
    assert zring.CompressionMethod() == zring.CompressionMethod.none()
    assert zring.CompressionMethod.parse("fp16") != zring.CompressionMethod.parse("bf16")


@pytest.mark.parametrize("text", ["", "bogus", "quant:0", "quant:17", "topk:0", "ef:ef:sign", "topk:200%"])
def test_bad_method_text_is_invalid_argument(text):
    with pytest.raises(zring.Error) as caught:
        zring.CompressionMethod.parse(text)
    assert caught.value.kind == "invalid_argument"
    assert caught.value.code == zring.ErrorCode.invalid_argument
    assert isinstance(caught.value, RuntimeError)
    assert str(caught.value).startswith("invalid_argument: ")


@pytest.mark.parametrize("shape", [(), (0,), (1,), (7,), (3, 4), (2, 3, 5), (4, 0, 2)])
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_shapes_and_kinds_come_back(shape, kind):
    ar = zring.CompressedAllReduce("none", 1)
    x = values(int(np.prod(shape)), 1).reshape(shape)
    given = torch.from_numpy(x.copy()) if kind == "torch" else x.copy()
    out = ar.all_reduce({"x": given})
    assert list(out) == ["x"]
    result = out["x"]
    if kind == "torch":
        assert isinstance(result, torch.Tensor) and result.dtype == torch.float32
        assert tuple(result.shape) == shape
        result = result.numpy()
    else:
        assert isinstance(result, np.ndarray) and result.dtype == np.float32
        assert result.shape == shape
    assert np.array_equal(result, x)  # none at world size 1: the values themselves
    assert result is not given


def test_result_keeps_the_input_order_and_mixes_kinds():
    ar = zring.CompressedAllReduce("fp16", 1)
    given = {"z": values(5), "a": torch.ones(2, 2), "m": values(3)}
    out = ar.all_reduce(given)
    assert list(out) == ["z", "a", "m"]
    assert isinstance(out["a"], torch.Tensor) and isinstance(out["z"], np.ndarray)


def test_results_own_their_memory_and_inputs_are_untouched():
    ar = zring.CompressedAllReduce("quant:4", 1)
    x = values(1000)
    before = x.copy()
    out = ar.all_reduce({"x": x})["x"]
    assert np.array_equal(x, before)
    assert out.flags.owndata or out.base is not None
    assert not np.shares_memory(out, x)
    out[:] = 0  # writable
    t = torch.from_numpy(values(10))
    r = ar.all_reduce({"t": t})["t"]
    r += 1  # a normal, writable tensor


@pytest.mark.parametrize("method", ["none", "fp16", "quant:8", "topk:10%", "sign"])
def test_non_contiguous_inputs_equal_their_contiguous_copies(method):
    base = values(24 * 10, 2).reshape(24, 10)
    views = {
        "transposed": base.T,
        "stepped": base[::3, ::2],
        "reversed": base[::-1],
        "column": base[:, 4],
        "broadcast": np.broadcast_to(base[0], (3, 10)),
    }
    for name, view in views.items():
        a = zring.CompressedAllReduce(method, 1).all_reduce({name: view})[name]
        b = zring.CompressedAllReduce(method, 1).all_reduce({name: np.ascontiguousarray(view)})[name]
        assert a.shape == view.shape and np.array_equal(a, b), name
    t = torch.from_numpy(base).t()[2:, ::2]
    assert not t.is_contiguous()
    a = zring.CompressedAllReduce(method, 1).all_reduce({"t": t})["t"]
    b = zring.CompressedAllReduce(method, 1).all_reduce({"t": t.contiguous()})["t"]
    assert a.shape == t.shape and torch.equal(a, b)


def test_torch_tensors_that_require_grad_are_read_not_tracked():
    w = torch.nn.Parameter(torch.ones(3, 3))
    out = zring.CompressedAllReduce("none", 1).all_reduce({"w": w})["w"]
    assert not out.requires_grad and torch.equal(out, torch.ones(3, 3))


@pytest.mark.parametrize("bad,needle", [
    (np.zeros(3, np.float64), "dtype float64"),
    (np.zeros(3, np.int32), "dtype int32"),
    (torch.zeros(3, dtype=torch.float64), "torch.float64"),
    (torch.zeros(3, dtype=torch.float16), "torch.float16"),
    ([1.0, 2.0], "list"),
    (np.float32(1.0), "numpy.float32"),
    (torch.zeros(3).to_sparse(), "sparse"),
    (torch.zeros(3, device="meta"), "is on meta"),
    (torch._neg_view(torch.ones(3)), "negative bit"),
])
def test_wrong_values_are_invalid_argument_naming_the_tensor(bad, needle):
    with pytest.raises(zring.Error) as caught:
        zring.CompressedAllReduce("none", 1).all_reduce({"w": bad})
    assert caught.value.kind == "invalid_argument"
    assert "'w'" in caught.value.message and needle in caught.value.message


def test_names_must_be_strings():
    with pytest.raises(zring.Error, match="names must be str"):
        zring.CompressedAllReduce("none", 1).all_reduce({3: values(2)})
    with pytest.raises(TypeError):
        zring.CompressedAllReduce("none", 1).all_reduce([values(2)])


def test_world_size_1_shows_the_compression_error():
    x = values(4096, 3)
    out = zring.CompressedAllReduce("quant:4", 1).all_reduce({"x": x})["x"]
    assert not np.array_equal(out, x)
    assert np.max(np.abs(out - x)) <= (x.max() - x.min()) / 15 + 1e-6
    top = zring.CompressedAllReduce("topk:10", 1).all_reduce({"x": x})["x"]
    kept = np.argsort(-np.abs(x))[:10]
    assert np.count_nonzero(top) == 10 and np.array_equal(top[kept], x[kept])


def test_world_size_above_1_without_a_daemon_is_no_communicator():
    ar = zring.CompressedAllReduce("none", 3)
    assert ar.world_size == 3 and ar.rank == 0 and not ar.connected
    with pytest.raises(zring.Error) as caught:
        ar.all_reduce({"x": values(4)})
    assert caught.value.kind == "no_communicator" and "all_reduce_with_peers" in caught.value.message


def test_zero_world_size_is_invalid_argument():
    with pytest.raises(zring.Error) as caught:
        zring.CompressedAllReduce("none", 0)
    assert caught.value.kind == "invalid_argument"


def test_compress_for_transmission_and_compressed_gradient():
    ar = zring.CompressedAllReduce("topk:5", 1)
    x = values(200, 4).reshape(10, 20)
    c = ar.compress_for_transmission({"x": x})["x"]
    assert isinstance(c, zring.CompressedGradient)
    assert c.original_size == 200 and c.shape == (10, 20) and c.method == zring.CompressionMethod("topk:5")
    assert c.indices.dtype == np.uint32 and c.values.dtype == np.float32 and len(c.indices) == 5
    assert not c.values.flags.writeable
    dense = c.to_dense()
    assert dense.shape == (10, 20) and np.count_nonzero(dense) == 5
    assert np.array_equal(dense.reshape(-1)[c.indices], x.reshape(-1)[c.indices])
    assert c.payload_bytes() == len(c.payload) and 0 < c.payload_bytes() < c.dense_bytes() == 800
    assert c.compression_ratio == pytest.approx(c.payload_bytes() / 800)
    copy = pickle.loads(pickle.dumps(c))
    assert np.array_equal(copy.to_dense(), dense) and copy.payload == c.payload


@pytest.mark.parametrize("method", ["none", "fp16", "topk:10%", "quant:8", "sign"])
def test_all_reduce_with_peers_is_the_average_of_what_each_rank_compressed(method):
    world = 3
    grads = [{"w": values(300, r).reshape(20, 15), "b": values(7, 10 + r)} for r in range(world)]
    peers = [zring.CompressedAllReduce(method, world).compress_for_transmission(g) for g in grads[1:]]
    own = zring.CompressedAllReduce(method, world).compress_for_transmission(grads[0])
    out = zring.CompressedAllReduce(method, world).all_reduce_with_peers(grads[0], peers)
    for name in ("w", "b"):
        parts = [own[name].to_dense()] + [p[name].to_dense() for p in peers]
        expected = (parts[0] + parts[1] + parts[2]) / np.float32(world)
        assert out[name].shape == grads[0][name].shape
        np.testing.assert_allclose(out[name], expected, rtol=1e-6, atol=1e-7)


def test_all_reduce_with_peers_errors():
    ar = zring.CompressedAllReduce("none", 2)
    g = {"w": values(10)}
    peer = zring.CompressedAllReduce("none", 2).compress_for_transmission(g)
    cases = [
        ([], "count_mismatch"),
        ([peer, peer], "count_mismatch"),
        ([zring.CompressedAllReduce("none", 2).compress_for_transmission({"w": values(11)})],
         "size_mismatch"),
        ([zring.CompressedAllReduce("none", 2).compress_for_transmission({"v": values(10)})],
         "missing_tensor"),
    ]
    for peers, kind in cases:
        with pytest.raises(zring.Error) as caught:
            ar.all_reduce_with_peers(g, peers)
        assert caught.value.kind == kind, caught.value
    with pytest.raises(zring.Error, match="invalid_argument"):
        ar.all_reduce_with_peers(g, [{"w": 1.0}])


def test_error_feedback_state_persists_per_name():
    x = values(1000, 5)
    ar = zring.CompressedAllReduce("ef:topk:1%", 1)
    first = ar.all_reduce({"x": x})["x"]
    second = ar.all_reduce({"x": x})["x"]
    assert not np.array_equal(first, second)  # the residual of step 1 is added in step 2
    fresh = zring.CompressedAllReduce("ef:topk:1%", 1).all_reduce({"x": x})["x"]
    assert np.array_equal(first, fresh)


def test_traffic_close_and_context_manager():
    with zring.CompressedAllReduce("fp16", 1) as ar:
        ar.all_reduce({"x": values(100)})
        t = ar.traffic
        assert t.ops == 1 and t.dense_bytes == 400 and 0 < t.wire_bytes < 400
        assert "standalone" in repr(ar)
    assert ar.closed and "closed" in repr(ar)
    with pytest.raises(zring.Error, match="closed"):
        ar.all_reduce({"x": values(3)})


def test_error_is_picklable_and_constructible():
    e = zring.Error("timeout", "all_reduce: no answer")
    assert e.code == zring.ErrorCode.timeout and str(e) == "timeout: all_reduce: no answer"
    again = pickle.loads(pickle.dumps(e))
    assert again.kind == "timeout" and again.message == "all_reduce: no answer"
    assert zring.Error.__module__ == "zring"


def test_every_error_code_has_its_fixed_number():
    # The numbers travel between processes: they never change (docs/errors.md).
    numbers = {c.name: int(c.value) for c in zring.ErrorCode.__members__.values()}
    assert numbers == {
        "invalid_argument": 0, "size_mismatch": 1, "count_mismatch": 2, "missing_tensor": 3,
        "no_communicator": 4, "malformed_message": 5, "unsupported_version": 6,
        "config_invalid": 7, "manifest_mismatch": 8, "timeout": 9, "peer_lost": 10,
        "connection_failed": 11, "aborted": 12, "resource_limit": 13, "internal": 14,
        "system_error": 15, "ring_changed": 16,
    }


@pytest.mark.parametrize("endpoint", ["bogus://somewhere", "tcp://127.0.0.1"])
def test_connect_to_an_endpoint_zeromq_cannot_use_is_a_zring_error(endpoint):
    # ZeroMQ's own exception used to reach Python as a bare RuntimeError.
    with pytest.raises(zring.Error) as caught:
        zring.CompressedAllReduce.connect(endpoint, "none")
    assert caught.value.kind == "invalid_argument"
    assert caught.value.message.startswith(f"connect: '{endpoint}' is not an endpoint ZeroMQ can connect to (")


def test_connect_without_a_daemon_is_connection_failed(tmp_path):
    with pytest.raises(zring.Error) as caught:
        zring.CompressedAllReduce.connect(f"ipc://{tmp_path}/none.sock", "none")
    assert caught.value.kind == "connection_failed" and "zringd" in caught.value.message
    # A socket path nobody answers on: the connect deadline, then connection_failed.
    (tmp_path / "silent.sock").write_text("")
    with pytest.raises(zring.Error) as caught:
        zring.CompressedAllReduce.connect(f"ipc://{tmp_path}/silent.sock", "none", timeout_ms=200)
    assert caught.value.kind == "connection_failed"
    with pytest.raises(zring.Error, match="timeout_ms"):
        zring.CompressedAllReduce.connect(f"ipc://{tmp_path}/silent.sock", "none", timeout_ms=0)


def test_help_shows_the_docs():
    import pydoc

    text = pydoc.render_doc(zring, renderer=pydoc.plaintext)
    for needle in ("CompressedAllReduce", "all_reduce_with_peers", "CompressionMethod",
                   "daemon_status", "connect"):
        assert needle in text
    assert "local_rank" in zring.CompressedAllReduce.connect.__doc__
