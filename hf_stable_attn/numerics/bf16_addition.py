"""The paper's BF16 addition example (Appendix B / Section 3.3.2) and its 2-bit rounding table.

Adding two same-sign numbers of the same binade overflows the significand (``1.x + 1.y = 10.z``);
the renormalising right shift pushes one bit out of the 7-bit BF16 fraction. That bit and any
nonzero bits below it (the *sticky* bits, present when the FP32 accumulator already holds small
contributions of other tokens) decide the rounding. Everything here uses PyTorch's own
FP32 -> BF16 conversion (round to nearest, ties to even), the same rounding a kernel applies.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import torch


def float_bits(x: float, dtype: torch.dtype) -> str:
    """Sign, exponent and fraction bits of ``x`` stored as ``dtype`` (bfloat16 or float32)."""
    if dtype not in (torch.bfloat16, torch.float32):
        raise TypeError(f"float_bits supports bfloat16 and float32, got {dtype}")
    (word,) = struct.unpack(">I", struct.pack(">f", float(torch.tensor(x, dtype=dtype).float())))
    bits = f"{word:032b}"
    return bits[:16] if dtype == torch.bfloat16 else bits


@dataclass(frozen=True)
class Addition:
    """One FP32 + BF16 addition whose result is stored in BF16."""

    acc_fp32: float  # the running FP32 accumulator (a BF16 value plus small residuals)
    addend_bf16: float  # the next BF16 term
    exact: float  # the sum in float64 (exact for these operands)
    sum_fp32: float  # the sum rounded to FP32
    sum_bf16: float  # the sum rounded to BF16 (what a BF16 output stores)

    @property
    def error(self) -> float:
        """Rounding error of the stored BF16 result, ``sum_bf16 - exact``."""
        return self.sum_bf16 - self.exact


def add_to_bf16(acc_fp32: float, addend_bf16: float) -> Addition:
    """Add an FP32 accumulator and a BF16 term in FP32, then round the result to BF16.

    Raises if the operands are not representable in their stated formats (so the example cannot
    silently use different numbers than it claims).
    """
    acc = torch.tensor(acc_fp32, dtype=torch.float64)
    term = torch.tensor(addend_bf16, dtype=torch.float64)
    if acc.float().double().item() != acc.item():
        raise ValueError(f"{acc_fp32!r} is not an FP32 value")
    if term.bfloat16().double().item() != term.item():
        raise ValueError(f"{addend_bf16!r} is not a BF16 value")
    sum32 = acc.float() + term.float()
    return Addition(
        acc_fp32=acc.item(),
        addend_bf16=term.item(),
        exact=(acc + term).item(),
        sum_fp32=sum32.item(),
        sum_bf16=sum32.bfloat16().item(),
    )


def appendix_b_example() -> Addition:
    """The paper's worked example: -2.4071154594421387 (FP32) + -2.296875 (BF16) -> -4.71875."""
    return add_to_bf16(-2.4071154594421387, -2.296875)


@dataclass(frozen=True)
class TwoBitRow:
    """Two negative BF16 numbers in [-2, -1) whose fractions end in ``tail_a``/``tail_b``."""

    tail_a: str  # last two fraction bits of the first operand
    tail_b: str  # last two fraction bits of the second operand
    tail_sum: str  # their sum; its last bit is shifted out by the renormalisation
    shifted_out: int  # the rounding bit
    error_exact: float  # BF16 rounding error of a + b, in units of the result's ulp
    error_sticky: float  # the same with a tiny same-sign FP32 residual added to a first


def two_bit_table(high_bits: int = 0b01100) -> list[TwoBitRow]:
    """All additions of two 2-bit fraction tails (Section 3.3.2), measured in real BF16 rounding.

    The operands are ``-(1 + (high_bits * 4 + tail) / 128)``. A shifted-out 0 is exact; a
    shifted-out 1 is a tie that ties-to-even splits evenly between up and down, unless sticky bits
    (a residual of other tokens in the FP32 accumulator) make it round away from zero: then every
    such addition of negative numbers errs negative.
    """
    if not 0 <= high_bits < 32:
        raise ValueError("high_bits must fit the 5 upper bits of the 7-bit fraction")
    rows = []
    ulp_result = 2.0 ** -6  # results lie in [-4, -2): ulp of a 7-bit fraction there
    residual = -(2.0 ** -20)  # far below the BF16 ulp, inside the FP32 significand
    for ta in range(4):
        for tb in range(ta, 4):
            a = -(1.0 + (high_bits * 4 + ta) / 128.0)
            b = -(1.0 + (high_bits * 4 + tb) / 128.0)
            plain = add_to_bf16(a, b)
            sticky = add_to_bf16(a + residual, b)
            rows.append(
                TwoBitRow(
                    tail_a=f"{ta:02b}",
                    tail_b=f"{tb:02b}",
                    tail_sum=f"{ta + tb:b}".rjust(2, "0"),
                    shifted_out=(ta + tb) & 1,
                    error_exact=plain.error / ulp_result,
                    error_sticky=sticky.error / ulp_result,
                )
            )
    return rows


def format_two_bit_table(rows: list[TwoBitRow]) -> str:
    """The table as aligned text (errors in ulps of the BF16 result)."""
    lines = ["a  + b  = sum  out  err(no sticky)  err(sticky)"]
    for r in rows:
        lines.append(
            f"{r.tail_a} + {r.tail_b} = {r.tail_sum:>3}   {r.shifted_out}   "
            f"{r.error_exact:+14.3f}  {r.error_sticky:+11.3f}"
        )
    return "\n".join(lines)
