"""torch 2.x's driver saves tensors of another device than the CPU, and
loads into them, as torch's FileSystemWriter / FileSystemReader do: copied
to the CPU on save, copied in on load.

This machine has no GPU. The device here is torch's PrivateUse1 key set up
as a backend written in Python (torch's own hook for that), which changes
torch's view of the process's accelerator for good: these tests run in a
process of their own (their own file; ctest runs each file alone)."""

import pytest
import torch

import rocksdcp.torch as rt
from conftest import dcp

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def save(path, cid, state):
    dcp.save(state, storage_writer=rt.StorageWriter(path), checkpoint_id=cid)


def load(path, cid, state):
    dcp.load(state, storage_reader=rt.StorageReader(path), checkpoint_id=cid)


# Another device, for a machine without a GPU: torch's PrivateUse1 device
# key, set up as a backend written in Python (torch's own hook for that,
# with a device guard that does nothing), named "rdcpdev".
torch.utils.backend_registration._setup_privateuseone_for_python_backend("rdcpdev")


class OtherDevice(torch.Tensor):
    """A tensor on another device ("rdcpdev"): its data is a CPU tensor
    that only a copy reaches, as a GPU's memory is reached only by a copy.
    Every op on it runs on that data and gives another such tensor, except
    the copies to and from the CPU."""

    @staticmethod
    def __new__(cls, data):
        t = torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=data.dtype,
                                                device="rdcpdev", strides=data.stride())
        t.data_ = data
        return t

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        unwrap = lambda x: x.data_ if isinstance(x, OtherDevice) else x  # noqa: E731
        if func is torch.ops.aten.copy_.default:
            dst, src = args[0], args[1]
            (dst.data_ if isinstance(dst, OtherDevice) else dst).copy_(unwrap(src))
            return dst
        if func is torch.ops.aten._to_copy.default and kwargs.get("device") == torch.device("cpu"):
            kwargs = {k: v for k, v in kwargs.items() if k != "device"}
            return func(unwrap(args[0]), **kwargs)
        out = func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()})
        if isinstance(out, torch.Tensor) and not isinstance(out, OtherDevice):
            return OtherDevice(out)
        return out


def test_tensors_on_another_device_are_copied_to_the_cpu_on_save(tmp_path):
    w = torch.randn(32, 8)
    state = {"w": OtherDevice(w.clone())}
    assert state["w"].device.type == "rdcpdev"
    save(tmp_path / "store", "c", state)
    into = {"w": torch.zeros(32, 8)}
    load(tmp_path / "store", "c", into)
    assert torch.equal(into["w"], w)


def test_loads_copy_into_destinations_on_another_device(tmp_path):
    w = torch.randn(32, 8)
    save(tmp_path / "store", "c", {"w": w, "v": torch.arange(5.0)})
    into = {"w": OtherDevice(torch.zeros(32, 8)), "v": torch.zeros(5)}
    load(tmp_path / "store", "c", into)
    assert torch.equal(into["w"].data_, w) and torch.equal(into["v"], torch.arange(5.0))
