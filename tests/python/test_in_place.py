"""Reducing without copies, standalone (no daemon): all_reduce_in_place of
dicts (numpy and torch, contiguous or not), all_reduce_in_place_packed,
zring.SharedTensors, and their errors. test_ring.py checks the same paths on
a real ring against the C++ client's bits."""

import gc

import numpy as np
import pytest
import torch

import zring

LOSSY = ["fp16", "quant:4", "topk:10%", "sign", "ef:topk:10%"]

# Ways to take a view of a (24, 10) array: contiguous or not.
LAYOUTS = {
    "contiguous": lambda a: a[3:7],
    "transposed": lambda a: a.T,
    "stepped": lambda a: a[::3, ::2],
    "reversed": lambda a: a[::-1],
    "column": lambda a: a[:, 4],
    "element": lambda a: a[5, 5, ...],
    "empty": lambda a: a[:, 3:3],
}


def values(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def fresh(method):
    return zring.CompressedAllReduce(method, 1)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("method", LOSSY)
def test_in_place_equals_all_reduce_and_writes_only_the_view(method, kind, layout):
    if kind == "torch" and layout == "reversed":
        pytest.skip("torch has no negative strides")
    take = LAYOUTS[layout]
    base = values(240, 1).reshape(24, 10)
    if kind == "torch":
        base = torch.from_numpy(base)
    view = take(base)
    assert np.shares_memory(np.asarray(view), np.asarray(base)) or layout == "empty"
    expected = fresh(method).all_reduce({"v": view})["v"]
    inside = np.zeros((24, 10), bool)
    take(inside)[...] = True
    before = np.array(base)

    fresh(method).all_reduce_in_place({"v": view})

    got = np.asarray(view)
    assert got.tobytes() == np.asarray(expected).tobytes()
    assert np.array_equal(np.asarray(base)[~inside], before[~inside]), "wrote outside the view"
    if got.size > 10:
        assert not np.array_equal(np.asarray(base)[inside], before[inside]), "nothing was written"


def test_in_place_of_many_tensors_is_one_op_with_the_bits_of_all_reduce():
    tensors = {"w": values(300, 1).reshape(20, 15).T, "b": torch.from_numpy(values(15, 2)),
               "s": values(1, 3).reshape(()), "e": np.zeros(0, np.float32)}
    expected = fresh("ef:topk:10%").all_reduce(tensors)
    ar = fresh("ef:topk:10%")
    ar.all_reduce_in_place(tensors)
    assert ar.traffic.ops == 1
    for name, value in tensors.items():
        assert np.asarray(value).tobytes() == np.asarray(expected[name]).tobytes(), name
    assert isinstance(tensors["b"], torch.Tensor)


def test_views_of_one_array_that_share_no_element_are_fine():
    base = values(60, 4).reshape(6, 10)
    left, right = base[:, :4], base[:, 4:]
    expected = fresh("topk:3").all_reduce({"l": left, "r": right})
    fresh("topk:3").all_reduce_in_place({"l": left, "r": right})
    assert left.tobytes() == expected["l"].tobytes() and right.tobytes() == expected["r"].tobytes()


def test_a_torch_parameter_is_reduced_where_it_is():
    w = torch.nn.Parameter(torch.ones(3, 3))
    pointer = w.data_ptr()
    fresh("none").all_reduce_in_place({"w": w})
    assert w.data_ptr() == pointer and torch.equal(w.detach(), torch.ones(3, 3))


def test_the_dict_may_change_its_tensors_between_ops():
    ar, reference = fresh("ef:topk:50%"), fresh("ef:topk:50%")
    tensors = {}
    for step, shape in enumerate([(6,), (2, 3), (8,), (6,)]):
        tensors["w"] = values(int(np.prod(shape)), step).reshape(shape)
        if step == 2:
            tensors["extra"] = values(5, 9)
        expected = reference.all_reduce(tensors)
        ar.all_reduce_in_place(tensors)
        for name in tensors:
            assert tensors[name].shape == expected[name].shape
            assert tensors[name].tobytes() == expected[name].tobytes(), (step, name)


def bad_arrays():
    readonly = values(4)
    readonly.setflags(write=False)
    overlapping = np.lib.stride_tricks.as_strided(values(4), (3, 2), (4, 4), writeable=True)
    return [
        ("read-only", readonly, "read-only"),
        ("broadcast", np.broadcast_to(values(3), (2, 3)), "read-only"),
        ("expanded", torch.ones(3, 1).expand(3, 4), "share memory"),
        ("overlapping strides", overlapping, "share memory"),
        ("float64", np.zeros(3), "dtype float64"),
        ("int32", np.zeros(3, np.int32), "dtype int32"),
        ("torch float64", torch.zeros(3, dtype=torch.float64), "torch.float64"),
        ("negated view", torch._neg_view(torch.ones(3)), "negative bit"),
        ("list", [1.0, 2.0], "list"),
    ]


@pytest.mark.parametrize("case,bad,needle", bad_arrays(), ids=[c[0] for c in bad_arrays()])
def test_arrays_it_cannot_write_over_are_invalid_argument_naming_them(case, bad, needle):
    good = values(5)
    before = good.copy()
    with pytest.raises(zring.Error) as caught:
        fresh("quant:4").all_reduce_in_place({"good": good, "bad": bad})
    assert caught.value.kind == "invalid_argument", case
    assert "'bad'" in caught.value.message and needle in caught.value.message, caught.value
    assert caught.value.message.startswith("all_reduce_in_place: ")
    assert np.array_equal(good, before), "refused, yet something was written"


def test_tensors_that_share_memory_are_refused_naming_both():
    x = values(40).reshape(4, 10)
    for tensors in ({"a": x, "b": x}, {"a": x, "b": x[2]}, {"a": x[:, :6], "b": x[:, 5:]}):
        with pytest.raises(zring.Error) as caught:
            fresh("none").all_reduce_in_place(tensors)
        assert caught.value.kind == "invalid_argument"
        assert "'a' and 'b' share memory" in caught.value.message


def test_views_of_a_parameter_are_told_apart_without_torchs_numpy():
    # Strided views of a tensor that requires grad (torch's numpy() refuses
    # those): interleaved columns share no element and are reduced where they
    # are; overlapping ones are refused naming both.
    p = torch.nn.Parameter(torch.from_numpy(values(40, 5).reshape(4, 10)))
    even, odd = p[:, ::2], p[:, 1::2]
    expected = fresh("topk:25%").all_reduce({"e": even, "o": odd})
    fresh("topk:25%").all_reduce_in_place({"e": even, "o": odd})
    assert even.detach().numpy().tobytes() == expected["e"].numpy().tobytes()
    assert odd.detach().numpy().tobytes() == expected["o"].numpy().tobytes()
    with pytest.raises(zring.Error) as caught:
        fresh("none").all_reduce_in_place({"a": p[:, ::2], "b": p[:, ::4]})
    assert caught.value.kind == "invalid_argument"
    assert "'a' and 'b' share memory" in caught.value.message


def test_all_reduce_in_place_takes_a_dict_or_shared_tensors():
    with pytest.raises(TypeError, match="SharedTensors"):
        fresh("none").all_reduce_in_place([values(3)])
    with pytest.raises(zring.Error, match="names must be str"):
        fresh("none").all_reduce_in_place({1: values(3)})
    with pytest.raises(zring.Error) as caught:
        zring.CompressedAllReduce("none", 2).all_reduce_in_place({"x": values(3)})
    assert caught.value.kind == "no_communicator"
    closed = fresh("none")
    closed.close()
    with pytest.raises(zring.Error, match="closed"):
        closed.all_reduce_in_place({"x": values(3)})


@pytest.mark.parametrize("method", ["none", "topk:2", "ef:quant:2"])
def test_packed_buffer_is_reduced_per_tensor(method):
    layout = [("a", (2, 3)), ("b", (4,)), ("s", ()), ("z", (0, 5))]
    parts = {"a": values(6, 1).reshape(2, 3), "b": values(4, 2), "s": values(1, 3).reshape(()),
             "z": np.zeros((0, 5), np.float32)}
    expected = fresh(method).all_reduce(parts)
    for kind in ("numpy", "torch"):
        buffer = np.concatenate([parts[name].reshape(-1) for name, _ in layout])
        given = torch.from_numpy(buffer) if kind == "torch" else buffer
        fresh(method).all_reduce_in_place_packed(given, layout)
        assert buffer.tobytes() == b"".join(expected[name].tobytes() for name, _ in layout), kind


def test_packed_buffer_errors():
    ar = fresh("none")
    cases = [
        (values(10), [("a", (3,))], "covers 3 values but the buffer has 10"),
        (values(10), [("a", (3,)), ("b", (8,))], "'b' ends past it"),
        (values(20)[::2], [("a", (10,))], "C-contiguous"),
        (values(10), [("a", "ten")], "shape 'ten'"),
        (values(10), [("a", (-1,))], "shape (-1,)"),
        (values(10), "a", "(name, shape) pairs"),
        (values(10), [("a", (5,)), ("a", (5,))], "named twice"),
    ]
    for buffer, layout, needle in cases:
        with pytest.raises(zring.Error) as caught:
            ar.all_reduce_in_place_packed(buffer, layout)
        assert caught.value.kind == "invalid_argument" and needle in caught.value.message, needle
    readonly = values(3)
    readonly.setflags(write=False)
    with pytest.raises(zring.Error, match="read-only"):
        ar.all_reduce_in_place_packed(readonly, [("a", (3,))])


def test_all_reduce_still_returns_new_arrays_and_leaves_its_input():
    x = values(1000).reshape(10, 100).T
    before = x.copy()
    out = fresh("quant:4").all_reduce({"x": x, "t": torch.from_numpy(values(7))})
    assert np.array_equal(x, before) and not np.shares_memory(out["x"], x)
    assert out["x"].flags.c_contiguous and out["x"].flags.writeable
    assert isinstance(out["t"], torch.Tensor) and out["t"].shape == (7,)


# --- SharedTensors ----------------------------------------------------------------


def test_shared_tensors_are_views_of_one_block():
    ar = fresh("none")
    shared = ar.make_shared_tensors({"w": (3, 4), "b": 4, "s": (), "e": [0]})
    assert isinstance(shared, zring.SharedTensors)
    assert shared.names == ["b", "e", "s", "w"] == list(shared) and len(shared) == 4
    assert shared.shapes == {"b": (4,), "e": (0,), "s": (), "w": (3, 4)}
    assert shared.numel == 17 and "w" in shared and "x" not in shared
    assert not shared.zero_copy  # standalone: ordinary memory
    flat = shared.values
    assert flat.shape == (17,) and not flat.any()
    w, b = shared["w"], shared["b"]
    assert w.shape == (3, 4) and w.dtype == np.float32 and w.flags.writeable
    assert w.base is not None
    # In name order, one after another: b, e, s, w.
    assert b.ctypes.data == flat.ctypes.data and w.ctypes.data == flat.ctypes.data + 4 * 5
    w[1, 2] = 7.0
    assert flat[5 + 6] == 7.0 and shared["w"][1, 2] == 7.0
    t = shared.torch("w")
    assert isinstance(t, torch.Tensor) and t.data_ptr() == w.ctypes.data and t[1, 2] == 7.0


def test_what_is_written_through_the_views_is_what_is_reduced():
    grads = {"w": values(200, 5).reshape(10, 20), "b": values(20, 6)}
    expected = fresh("quant:4").all_reduce(grads)
    ar = fresh("quant:4")
    shared = ar.make_shared_tensors({name: g.shape for name, g in grads.items()})
    w, b = shared["w"], shared.torch("b")
    w[...] = grads["w"]
    b.copy_(torch.from_numpy(grads["b"]))
    ar.all_reduce_in_place(shared)
    assert w.tobytes() == expected["w"].tobytes()
    assert b.numpy().tobytes() == expected["b"].tobytes()
    assert ar.traffic.ops == 1


def test_closed_shared_tensors_are_refused_but_their_views_stay_valid():
    ar = fresh("none")
    with ar.make_shared_tensors({"w": (100,)}) as shared:
        view = shared["w"]
        view[...] = 3.0
        ar.all_reduce_in_place(shared)
    assert shared.closed and "closed" in repr(shared)
    for attempt in (lambda: ar.all_reduce_in_place(shared), lambda: shared["w"],
                    lambda: shared.values, lambda: shared.names):
        with pytest.raises(zring.Error) as caught:
            attempt()
        assert caught.value.kind == "invalid_argument" and "closed" in caught.value.message
    assert np.all(view == 3.0)
    view[...] = 4.0  # still memory of its own
    del shared, ar
    gc.collect()
    assert np.all(view == 4.0)


def test_a_view_keeps_the_memory_when_everything_else_is_gone():
    ar = fresh("none")
    shared = ar.make_shared_tensors({"w": (1000,)})
    view = shared.torch("w")
    view.fill_(2.0)
    ar.close()
    del shared, ar
    gc.collect()
    assert torch.equal(view, torch.full((1000,), 2.0))
    view.add_(1.0)
    assert float(view.sum()) == 3000.0


def test_shared_tensors_of_a_closed_object_are_reduced_by_another():
    maker = fresh("none")
    shared = maker.make_shared_tensors({"w": (10,)})
    shared["w"][...] = 5.0
    maker.close()
    with pytest.raises(zring.Error, match="closed"):
        maker.all_reduce_in_place(shared)
    other = fresh("none")
    other.all_reduce_in_place(shared)
    assert np.all(shared["w"] == 5.0) and other.traffic.ops == 1


def test_make_shared_tensors_errors():
    ar = fresh("none")
    with pytest.raises(zring.Error) as caught:
        ar.make_shared_tensors({"w": (3, -1)})
    assert caught.value.kind == "invalid_argument" and "'w'" in caught.value.message
    with pytest.raises(zring.Error, match="tuple of non-negative ints"):
        ar.make_shared_tensors({"w": (3.5,)})
    with pytest.raises(zring.Error, match="names must be str"):
        ar.make_shared_tensors({3: (3,)})
    with pytest.raises(zring.Error, match="too many values"):
        ar.make_shared_tensors({"w": (1 << 40, 1 << 30)})
    shared = ar.make_shared_tensors({"w": (2,)})
    with pytest.raises(zring.Error) as caught:
        shared["nope"]
    assert caught.value.kind == "missing_tensor" and "'nope'" in caught.value.message
    assert "'w'" in caught.value.message
    empty = ar.make_shared_tensors({})
    assert empty.names == [] and empty.numel == 0
    ar.all_reduce_in_place(empty)
