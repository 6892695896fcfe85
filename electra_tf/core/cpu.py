"""What the CPU multiplies natively, read from the operating system (Linux)."""

from __future__ import annotations

# CPU flags (/proc/cpuinfo) of native bfloat16 products: oneDNN uses them for
# bfloat16 matrix products, and emulates those products with float32 instructions
# on a CPU without either.
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def emulates_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """True where the CPU's flags were read and hold neither of NATIVE_BF16_FLAGS; False
    where they hold one, or where nothing could be read (not Linux: nothing is known)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            flags = {word for line in f if line.startswith("flags")
                     for word in line.split(":", 1)[-1].split()}
    except OSError:
        return False
    return bool(flags) and not flags & NATIVE_BF16_FLAGS
