"""Memory the judge owns and lends to a runner: how tensors travel between processes without files.

Each buffer is one dedicated allocation (cuMemAlloc on a GPU, a sealed memfd on the cpu target)
holding one tensor, so a runner that maps it can reach that tensor's bytes and nothing else of
the judge's. The judge allocates every buffer, so no runner can free or shrink memory the judge
reads: a runner only ever writes into what it was lent.

Judge side: `allocate`, `SharedBuffer.export`. Runner side: `open_lent`.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import mmap
import os

import torch

from gpu_workers.harness import settings

_IPC_HANDLE_BYTES = 64
_LAZY_ENABLE_PEER_ACCESS = 1


class _IpcHandle(ctypes.Structure):
    # bytes, not c_char: a c_char array reads as a string cut at its first NUL
    _fields_ = [("reserved", ctypes.c_ubyte * _IPC_HANDLE_BYTES)]


# Every driver call we make, typed: ctypes passes an undeclared integer argument as a C int, so a
# size of 6 GiB reached cuMemAlloc as its low 32 bits (a KernelBench activation's 6.4 GB input
# failed with "out of memory", an 8 GiB one with "invalid argument").
_SIGNATURES = {
    "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int],
    "cuCtxSetCurrent": [ctypes.c_void_p],
    "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuMemAlloc_v2": [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t],
    "cuMemFree_v2": [ctypes.c_uint64],
    "cuIpcGetMemHandle": [ctypes.POINTER(_IpcHandle), ctypes.c_uint64],
    "cuIpcOpenMemHandle_v2": [ctypes.POINTER(ctypes.c_uint64), _IpcHandle, ctypes.c_uint],
    "cuIpcCloseMemHandle": [ctypes.c_uint64],
}


def typed_driver(lib):
    """`lib` with the argument and result types of every call this module makes."""
    for name, argtypes in _SIGNATURES.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = argtypes, ctypes.c_int
    return lib


@functools.cache
def _driver():
    """The CUDA driver API, in the primary context torch itself uses (so torch can read the
    memory), made current on the calling thread by `_current_context`."""
    lib = typed_driver(ctypes.CDLL("libcuda.so.1"))
    torch.cuda.init()
    settings.check_judge_on_its_gpu(torch.cuda.current_device())
    device = ctypes.c_int()
    _check(lib, lib.cuDeviceGet(ctypes.byref(device), torch.cuda.current_device()), "cuDeviceGet")
    context = ctypes.c_void_p()
    _check(
        lib,
        lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device),
        "cuDevicePrimaryCtxRetain",
    )
    return lib, context


def _current_context():
    lib, context = _driver()
    _check(lib, lib.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    return lib


# CUDA_ERROR_OUT_OF_MEMORY
_OUT_OF_MEMORY = 2


class DeviceMemoryExhausted(RuntimeError):
    """The judge's own allocation found the device full (the runs sharing a GPU hold its memory
    too): the machine's failure, never the candidate's or the problem's."""


def _check(lib, status: int, what: str) -> None:
    if status != 0:
        text = ctypes.c_char_p()
        lib.cuGetErrorString(status, ctypes.byref(text))
        error = DeviceMemoryExhausted if status == _OUT_OF_MEMORY else RuntimeError
        raise error(f"{what} failed: {(text.value or b'').decode()} ({status})")


class _DeviceMemory:
    """A raw device pointer presented to torch through the CUDA array interface."""

    def __init__(self, pointer: int, nbytes: int):
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (pointer, False),
            "version": 3,
            "strides": None,
        }


class SharedBuffer:
    def __init__(self, nbytes: int, device: str):
        self.nbytes = max(int(nbytes), 1)
        self.device = device
        self.fd: int | None = None
        self._pointer: int | None = None
        if device == "cuda":
            lib = _current_context()
            pointer = ctypes.c_uint64()
            _check(lib, lib.cuMemAlloc_v2(ctypes.byref(pointer), self.nbytes), "cuMemAlloc")
            self._pointer = pointer.value
            self.bytes = torch.as_tensor(_DeviceMemory(self._pointer, self.nbytes), device="cuda")
        else:
            self.fd = os.memfd_create("kernelarena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(self.fd, self.nbytes)
            # a sealed size: whoever maps it can never make the judge's reads fault
            seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, seals)
            self._map = mmap.mmap(self.fd, self.nbytes)
            self.bytes = torch.frombuffer(self._map, dtype=torch.uint8)

    def tensor(self, dtype: torch.dtype, shape) -> torch.Tensor:
        return view_as(self.bytes, dtype, shape)

    def export(self) -> tuple[dict, int | None]:
        """What a runner needs to map this buffer: a JSON handle and, on cpu, a descriptor."""
        if self.device == "cuda":
            lib = _current_context()
            handle = _IpcHandle()
            _check(
                lib,
                lib.cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(self._pointer)),
                "cuIpcGetMemHandle",
            )
            return {"nbytes": self.nbytes, "ipc": bytes(handle.reserved).hex()}, None
        return {"nbytes": self.nbytes}, self.fd

    def free(self) -> None:
        self.bytes = None
        if self._pointer is not None:
            torch.cuda.synchronize()
            lib = _current_context()
            lib.cuMemFree_v2(ctypes.c_uint64(self._pointer))
            self._pointer = None
        if self.fd is not None:
            self._map.close()
            os.close(self.fd)
            self.fd = None


def allocate(nbytes: int, device: str) -> SharedBuffer:
    return SharedBuffer(nbytes, device)


def view_as(raw: torch.Tensor, dtype: torch.dtype, shape) -> torch.Tensor:
    """The first bytes of a uint8 buffer as a contiguous tensor of `dtype` and `shape`."""
    count = 1
    for size in shape:
        count *= int(size)
    itemsize = torch.empty((), dtype=dtype).element_size()
    used = raw[: count * itemsize]
    if count == 0:
        return torch.empty(tuple(shape), dtype=dtype, device=raw.device)
    if dtype == torch.bool:
        return used.view(torch.bool).view(tuple(shape))
    return used.view(dtype).view(tuple(shape))


class LentBuffer:
    """Runner side: a buffer of the judge's, mapped into this process."""

    def __init__(self, handle: dict, fd: int | None, device: str):
        self.nbytes = int(handle["nbytes"])
        self._pointer = None
        if device == "cuda":
            lib = _current_context()
            raw = bytes.fromhex(handle["ipc"])
            if len(raw) != _IPC_HANDLE_BYTES:
                raise ValueError("a lent buffer came with a malformed handle")
            ipc = _IpcHandle.from_buffer_copy(raw)
            pointer = ctypes.c_uint64()
            _check(
                lib,
                lib.cuIpcOpenMemHandle_v2(ctypes.byref(pointer), ipc, _LAZY_ENABLE_PEER_ACCESS),
                "cuIpcOpenMemHandle",
            )
            self._pointer = pointer.value
            self.bytes = torch.as_tensor(_DeviceMemory(self._pointer, self.nbytes), device="cuda")
        else:
            if fd is None or os.fstat(fd).st_size < self.nbytes:
                raise ValueError("a lent buffer came without its memory")
            self._map = mmap.mmap(fd, self.nbytes)
            os.close(fd)
            self.bytes = torch.frombuffer(self._map, dtype=torch.uint8)

    def tensor(self, dtype: torch.dtype, shape) -> torch.Tensor:
        return view_as(self.bytes, dtype, shape)

    def close(self) -> None:
        self.bytes = None
        if self._pointer is not None:
            torch.cuda.synchronize()
            _current_context().cuIpcCloseMemHandle(ctypes.c_uint64(self._pointer))
            self._pointer = None


def open_lent(handle: dict, fd: int | None, device: str) -> LentBuffer:
    return LentBuffer(handle, fd, device)


DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int8,
        torch.uint8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.bool,
        torch.complex64,
    )
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_of(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unsupported tensor dtype {name!r}") from None
