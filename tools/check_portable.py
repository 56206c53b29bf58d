#!/usr/bin/env python3
"""Checks that a program is portable: no AVX instruction (any VEX/EVEX
encoded one: AVX, AVX2, FMA, AVX-512) outside the per-instruction-set builds
of the CPU kernels, which sim/nc_cpu_dispatch.c only calls on a CPU that has
them.  So -march=native (or any -mavx flag) cannot come back into the default
build unnoticed.  Prints TAP.

usage: check_portable.py PROGRAM KERNEL_LIB... [--native]
  PROGRAM      the linked executable to disassemble (objdump -d)
  KERNEL_LIB   the static libraries of the dispatched builds (libnccpu_*.a):
               their functions are the only ones allowed to use AVX
  --native     the build was configured with -Dnative_arch=true: skip
"""
import re
import subprocess
import sys

FUNCTION = re.compile(r'^[0-9a-f]+ <([^>]+)>:$')
INSTRUCTION = re.compile(r'^\s+[0-9a-f]+:\s+(\S+)\s*(.*)$')
# VEX/EVEX-encoded instructions all start with "v" in AT&T syntax (vaddps,
# vfmadd231ps, vzeroupper, ...); x86-64's baseline has none but verr/verw.
# AVX-512 mask registers (%k0-%k7) and 256/512-bit registers mark the rest.
AVX_OPERAND = re.compile(r'%[yz]mm\d+|%k[0-7]\b')


def base_name(symbol):
    """foo.part.0 / foo.cold / foo.constprop.0 → foo."""
    return symbol.split('.')[0]


def defined_functions(lib):
    out = subprocess.run(['nm', '--defined-only', lib], capture_output=True, text=True, check=True).stdout
    return {base_name(line.split()[2]) for line in out.splitlines()
            if len(line.split()) == 3 and line.split()[1] in 'tT'}


def avx_functions(program):
    """{function: first AVX instruction} of every function that uses one."""
    out = subprocess.run(['objdump', '-d', '--no-show-raw-insn', program],
                         capture_output=True, text=True, check=True).stdout
    found, current = {}, None
    for line in out.splitlines():
        m = FUNCTION.match(line)
        if m:
            current = m.group(1)
            continue
        m = INSTRUCTION.match(line)
        if not m or current is None or current in found:
            continue
        mnemonic, operands = m.group(1), m.group(2)
        if (mnemonic.startswith('v') and mnemonic not in ('verr', 'verw')) or AVX_OPERAND.search(operands):
            found[current] = f'{mnemonic} {operands}'.strip()
    return found


def main(argv):
    args = [a for a in argv[1:] if a != '--native']
    if '--native' in argv:
        print('1..0 # SKIP built with -Dnative_arch=true: the program is for this machine only')
        return 0
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    program, libs = args[0], args[1:]
    allowed = set()
    for lib in libs:
        allowed |= defined_functions(lib)
    used = avx_functions(program)
    outside = sorted(f for f in used if base_name(f) not in allowed)
    inside = sorted(f for f in used if base_name(f) in allowed)
    ok1 = not outside
    print(f'{"ok" if ok1 else "not ok"} 1 - no AVX instruction outside the dispatched kernel builds')
    for f in outside[:20]:
        print(f'#   {f}: {used[f]}')
    if len(outside) > 20:
        print(f'#   ... and {len(outside) - 20} more functions')
    # The check can fail: the AVX2/AVX-512 builds really are in the program
    # and really do use the wider units.
    ok2 = bool(inside)
    print(f'{"ok" if ok2 else "not ok"} 2 - the dispatched builds are linked in and use AVX '
          f'({len(inside)} functions)')
    print('1..2')
    return 0 if ok1 and ok2 else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
