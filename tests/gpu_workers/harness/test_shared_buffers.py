"""The driver calls of shared_buffers.py carry 64-bit sizes and pointers whole.

libcuda cannot run here, so a C library with the same entry points (compiled by gcc) stands in
for it and reports what it was given."""

import ctypes
import subprocess

import pytest

from gpu_workers.harness.judge import shared_buffers

STAND_IN = r"""
#include <stddef.h>
#include <stdint.h>
static size_t last_size; static uint64_t last_pointer;
int cuDeviceGet(int *d, int o) { *d = o; return 0; }
int cuDevicePrimaryCtxRetain(void **c, int d) { *c = 0; return 0; }
int cuCtxSetCurrent(void *c) { return 0; }
int cuGetErrorString(int s, const char **t) { *t = "stand-in"; return 0; }
int cuMemAlloc_v2(uint64_t *p, size_t n) { last_size = n; *p = 0x7f0000000000ull + n; return 0; }
int cuMemFree_v2(uint64_t p) { last_pointer = p; return 0; }
int cuIpcGetMemHandle(void *h, uint64_t p) { last_pointer = p; return 0; }
typedef struct { unsigned char reserved[64]; } handle_t;
int cuIpcOpenMemHandle_v2(uint64_t *p, handle_t h, unsigned f) { *p = h.reserved[63]; return 0; }
int cuIpcCloseMemHandle(uint64_t p) { last_pointer = p; return 0; }
size_t seen_size(void) { return last_size; }
uint64_t seen_pointer(void) { return last_pointer; }
"""

SIZES = [2**31 + 1, 2**32, 6 * 2**30 + 5]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    folder = tmp_path_factory.mktemp("driver")
    (folder / "driver.c").write_text(STAND_IN)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(folder / "driver.so"), str(folder / "driver.c")],
        check=True,
    )
    return folder / "driver.so"


def _reports(lib):
    lib.seen_size.restype = ctypes.c_size_t
    lib.seen_pointer.restype = ctypes.c_uint64
    return lib


@pytest.mark.parametrize("nbytes", SIZES)
def test_sizes_over_a_c_int_reach_the_driver_whole(library, nbytes):
    lib = _reports(shared_buffers.typed_driver(ctypes.CDLL(str(library))))
    pointer = ctypes.c_uint64()
    assert lib.cuMemAlloc_v2(ctypes.byref(pointer), nbytes) == 0
    assert lib.seen_size() == nbytes
    lib.cuMemFree_v2(pointer.value)
    assert lib.seen_pointer() == 0x7F0000000000 + nbytes


@pytest.mark.parametrize("nbytes", SIZES)
def test_known_bad_an_untyped_call_cuts_the_size_to_a_c_int(library, nbytes):
    lib = _reports(ctypes.CDLL(str(library)))  # no argtypes: the bug this module had
    lib.cuMemAlloc_v2(ctypes.byref(ctypes.c_uint64()), nbytes)
    assert lib.seen_size() != nbytes


def test_an_ipc_handle_goes_by_value(library):
    lib = shared_buffers.typed_driver(ctypes.CDLL(str(library)))
    handle = shared_buffers._IpcHandle()
    handle.reserved[63] = 42
    pointer = ctypes.c_uint64()
    assert lib.cuIpcOpenMemHandle_v2(ctypes.byref(pointer), handle, 1) == 0
    assert pointer.value == 42
