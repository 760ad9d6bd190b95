"""How many programs of a compiled kernel an sm_90 SM holds at once, from its registers, warps and shared memory.

The arithmetic benchmarks/sass_counts.py applies to kernels it compiles on the CPU and benchmarks/probe_long_slices.py
to the kernels it launches: one place, so that both report residency the same way.
"""

from __future__ import annotations

#: An SM's 32-bit registers, and the unit a warp's registers are allocated in (sm_90).
SM_REGISTERS = 65536
WARP_REGISTER_UNIT = 256
#: An SM's most resident threads (sm_90).
SM_THREADS = 2048
#: An SM's shared memory a program may hold, in bytes (sm_90: 228 KB per SM, 1 KB of it reserved per program).
SM_SHARED_BYTES = 228 * 1024
SHARED_RESERVED_BYTES = 1024


def blocks_per_sm(registers: int, warps: int, shared_bytes: int = 0) -> int:
    """Programs of ``warps`` warps an SM holds at once as registers, threads and (when given) shared memory allow."""
    per_warp = -(-registers * 32 // WARP_REGISTER_UNIT) * WARP_REGISTER_UNIT
    by_registers = min(SM_REGISTERS // (per_warp * warps), SM_THREADS // (32 * warps))
    if not shared_bytes:
        return by_registers
    return min(by_registers, SM_SHARED_BYTES // (shared_bytes + SHARED_RESERVED_BYTES))
