"""rocksdcp_demo's model (examples/demo.cc), regenerated in NumPy: what a
checkpoint the C++ demo saved must hold, for the tests that load one in
Python (test_torch_dcp.py under torch 1.13, torch2/test_interop.py under
torch 2.x)."""

import json

import numpy as np
import torch

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
SEED = 0x5EEDF00DCAFE2024


def splitmix64(state, n):
    """The n outputs of splitmix64 from `state`, as examples/demo.cc draws them."""
    with np.errstate(over="ignore"):
        z = np.uint64(state) + np.arange(1, n + 1, dtype=np.uint64) * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def fnv1a(name):
    h = 0xCBF29CE484222325
    for c in name.encode():
        h = ((h ^ c) * 0x100000001B3) & (2**64 - 1)
    return h


def demo_tensor(fqn, dtype, shape, trainable, step):
    """Tensor `fqn` of rocksdcp_demo's model at `step`, regenerated in numpy."""
    n = int(np.prod(shape))
    state = SEED ^ fnv1a(fqn) ^ ((step * 0xD1B54A32D192ED03) & (2**64 - 1) if trainable else 0)
    if dtype == torch.int64:
        return torch.arange(n, dtype=torch.int64).reshape(shape)
    if dtype == torch.bfloat16:
        words = splitmix64(state, n // 4)
        bits = np.stack([(words >> np.uint64(16 * k)) & np.uint64(0xFFFF) for k in range(4)],
                        axis=1).reshape(-1)
        exponent = np.uint64(120) + (bits >> np.uint64(8)) % np.uint64(6)
        values = (bits & np.uint64(0x8000)) | (exponent << np.uint64(7)) | (bits & np.uint64(0x7F))
        return torch.from_numpy(values.astype(np.int16)).view(torch.bfloat16).reshape(shape)
    words = splitmix64(state, n // 2)
    halves = np.stack([words & np.uint64(0xFFFFFFFF), words >> np.uint64(32)], axis=1).reshape(-1)
    f = ((halves >> np.uint64(9)) | np.uint64(0x3F800000)).astype(np.uint32).view(np.float32)
    norm = fqn.endswith("norm.weight")
    scale, offset = (np.float32(0.05), np.float32(1.0)) if norm else (np.float32(0.02), np.float32(0))
    values = offset + (f - np.float32(1.5)) * np.float32(2.0) * scale
    return torch.from_numpy(values.astype(np.float32)).reshape(shape)


def assert_demo_state(state, step):
    """``state`` (fqn -> tensor or bytes, as loaded) is the demo's model
    at ``step``, bit for bit."""
    tensors = [k for k, v in state.items() if isinstance(v, torch.Tensor)]
    assert len(tensors) == 67
    for fqn in tensors:
        layer = fqn.split(".")[2] if ".layers." in fqn else None
        trainable = fqn.endswith("norm.weight") or (layer is not None and int(layer) >= 4)
        shape = list(state[fqn].shape)
        transposed = fqn == "model.layers.7.mlp.down_proj.weight"
        expected = demo_tensor(fqn, state[fqn].dtype, shape[::-1] if transposed else shape,
                               trainable, step)
        if transposed:
            expected = expected.t()
        assert torch.equal(state[fqn].view(torch.int16) if state[fqn].dtype == torch.bfloat16
                           else state[fqn],
                           expected.view(torch.int16) if expected.dtype == torch.bfloat16
                           else expected), fqn
    assert state["optimizer/step"] == (step).to_bytes(8, "little")
    assert json.loads(state["dataloader/position"]) == {"epoch": 0, "batch": step,
                                                       "samples_seen": step * 256}
    rng = splitmix64(SEED ^ step, 5056) & np.uint64(0xFF)
    assert state["rng_state"] == rng.astype(np.uint8).tobytes()
