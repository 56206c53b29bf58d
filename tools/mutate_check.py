#!/usr/bin/env python3
"""Damaged-file check of the CLI ("done when" of the hardening issue).

Makes COUNT mutated copies of every fixture model and NIR file —
truncations, bit flips, byte overwrites and inflated size fields (protobuf
varints, 4- and 8-byte little-endian integers) — and runs
`neurocuda info COPY` on each.  Every run must end cleanly:

  - exit status 0 (the damage missed anything that matters), or 1 with
    exactly one short line on stderr, "neurocuda: <message>";
  - no signal (crash, abort), no hang (a time limit per run);
  - no sanitizer report (AddressSanitizer, LeakSanitizer, UBSan "runtime
    error") — run it against the sanitizer build to see those.

Files: tests/fixtures/models/*.onnx (a *_dynamo.onnx together with its
.onnx.data, either of which is mutated), assets/models/*.onnx,
tests/fixtures/nir*/*.nir and /work/shared/fixtures/nir/*.nir when present.

  tools/mutate_check.py [--count N] [--cli NEUROCUDA] [--jobs J] [--seed S]
                        [--keep DIR] [--tap] [FILE ...]

Prints one line per file (or TAP with --tap) and a total; failing copies are
kept in --keep (default <cli's build>/mutate-failures).  Exit status 1 if any
run failed.  Python standard library only."""
import argparse
import concurrent.futures
import glob
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SANITIZER_MARKS = ('AddressSanitizer', 'LeakSanitizer', 'runtime error:', 'UndefinedBehaviorSanitizer',
                   'ERROR: libFuzzer', '==ERROR')
MAX_MESSAGE = 2000  # "short": one line of at most this many bytes


def fixture_files():
    files = sorted(glob.glob(os.path.join(ROOT, 'tests/fixtures/models/*.onnx')))
    files += sorted(glob.glob(os.path.join(ROOT, 'assets/models/*.onnx')))
    files += sorted(glob.glob(os.path.join(ROOT, 'tests/fixtures/nir*/*.nir')))
    files += sorted(glob.glob('/work/shared/fixtures/nir/*.nir'))
    return files


# ---- mutations -----------------------------------------------------------------

def truncate(rng, data):
    if len(data) < 2:
        return data[:0]
    # half of the cuts near the end, where trailers and last tensors are
    cut = rng.randrange(len(data)) if rng.random() < 0.5 else rng.randrange(max(0, len(data) - 4096), len(data))
    return data[:cut]


def bit_flips(rng, data):
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4, 8, 32))):
        k = rng.randrange(len(out))
        out[k] ^= 1 << rng.randrange(8)
    return bytes(out)


def overwrite(rng, data):
    out = bytearray(data)
    k = rng.randrange(len(out))
    run = rng.choice((1, 2, 4, 8, 16))
    value = rng.choice((0x00, 0xFF, 0x7F, 0x80))
    for i in range(k, min(len(out), k + run)):
        out[i] = value
    return bytes(out)


def read_varint(data, k):
    value = shift = 0
    for i in range(k, min(len(data), k + 10)):
        value |= (data[i] & 0x7F) << shift
        shift += 7
        if not data[i] & 0x80:
            return value, i + 1
    return None, k


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


HUGE = (2**31 - 1, 2**32 - 1, 2**32, 2**40, 2**62, 2**63 - 1, 2**64 - 1)


def inflate_varint(rng, data):
    """A protobuf length or dimension (a varint after a tag byte) made huge."""
    for _ in range(64):
        k = rng.randrange(1, len(data))
        tag = data[k - 1]
        if tag & 0x07 not in (0, 2) or tag >> 3 == 0 or tag >> 3 > 20:
            continue
        value, end = read_varint(data, k)
        if value is None or value == 0 or end - k > 5:
            continue
        big = rng.choice(HUGE + (value * 1000 + 7, value + 1))
        return data[:k] + varint(big & (2**64 - 1)) + data[end:]
    return bit_flips(rng, data)


def inflate_integer(rng, data):
    """A 4- or 8-byte little-endian integer that looks like a size (HDF5
    lengths, dims, addresses; .npy/IDX counts) made huge."""
    width = rng.choice((4, 8))
    for _ in range(256):
        k = rng.randrange(0, max(1, len(data) - width)) // width * width
        value = int.from_bytes(data[k:k + width], 'little')
        if not 1 <= value <= max(len(data), 1 << 20):
            continue
        big = rng.choice(HUGE + (value * 4096, value + 1)) & (2**(8 * width) - 1)
        return data[:k] + big.to_bytes(width, 'little') + data[k + width:]
    return bit_flips(rng, data)


MUTATIONS = (('truncate', truncate), ('bit-flip', bit_flips), ('overwrite', overwrite),
             ('inflate-varint', inflate_varint), ('inflate-int', inflate_integer))


def mutate(rng, data, is_onnx):
    weights = (3, 3, 1, 3 if is_onnx else 0, 1 if is_onnx else 3)
    name, fn = rng.choices(MUTATIONS, weights=weights)[0]
    if not data:
        return name, data
    return name, fn(rng, data)


# ---- running the CLI -----------------------------------------------------------

def sanitizer_env():
    env = dict(os.environ)
    env.setdefault('ASAN_OPTIONS', 'detect_leaks=1:abort_on_error=1')
    env.setdefault('UBSAN_OPTIONS', 'print_stacktrace=1:halt_on_error=1')
    env.setdefault('LSAN_OPTIONS', f'suppressions={ROOT}/tests/lsan.supp:print_suppressions=0')
    env.setdefault('OPENBLAS_NUM_THREADS', '1')
    return env


def judge(proc_rc, stderr):
    """None when the run ended cleanly, else why not."""
    text = stderr.decode('utf-8', 'replace')
    for mark in SANITIZER_MARKS:
        if mark in text:
            return f'sanitizer report ({mark})'
    if proc_rc < 0:
        return f'killed by signal {-proc_rc} ({signal.Signals(-proc_rc).name})'
    if proc_rc == 0:
        return None
    if proc_rc != 1:
        return f'exit status {proc_rc} (expected 0 or 1)'
    lines = text.splitlines()
    if len(lines) != 1:
        return f'{len(lines)} lines on stderr, expected one'
    if not lines[0].startswith('neurocuda: ') or len(lines[0]) > MAX_MESSAGE:
        return 'the error line is not a short "neurocuda: ..." message'
    return None


def run_one(cli, path, timeout, env):
    t0 = time.monotonic()
    try:
        proc = subprocess.run([cli, 'info', path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=timeout, env=env)
        return proc.returncode, proc.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        return 'timeout', e.stderr or b'', time.monotonic() - t0


def make_copy(i, name, original, extra, data_name, seed, is_onnx, work):
    """Mutated copy i (the same for the same seed): (which, how, folder, path)."""
    rng = random.Random(f'{seed}:{name}:{i}')
    which = 'data' if extra is not None and rng.random() < 0.3 else 'model'
    how, mutated = mutate(rng, extra if which == 'data' else original, is_onnx)
    folder = os.path.join(work, f'{i:04d}')
    os.mkdir(folder)
    target = os.path.join(folder, name)
    with open(target, 'wb') as f:
        f.write(mutated if which == 'model' else original)
    if extra is not None:
        with open(os.path.join(folder, data_name), 'wb') as f:
            f.write(mutated if which == 'data' else extra)
    return which, how, folder, target


def check_file(cli, path, count, seed, jobs, timeout, keep, env):
    """Returns (runs, failure descriptions, exit-code histogram)."""
    name = os.path.basename(path)
    data_path = path + '.data' if path.endswith('.onnx') and os.path.exists(path + '.data') else None
    original = open(path, 'rb').read()
    extra = open(data_path, 'rb').read() if data_path else None
    data_name = os.path.basename(data_path) if data_path else None
    work = tempfile.mkdtemp(prefix='nc-mutate-', dir='/dev/shm' if os.access('/dev/shm', os.W_OK) else None)
    histogram, failures = {}, []

    def one(i):
        which, how, folder, target = make_copy(i, name, original, extra, data_name, seed, path.endswith('.onnx'),
                                               work)
        rc, stderr, _ = run_one(cli, target, timeout, env)
        why = f'hang (over {timeout:g} s)' if rc == 'timeout' else judge(rc, stderr)
        if why:
            kept = os.path.join(keep, f'{name}-{i:04d}-{which}-{how}')
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(folder, kept)
            first = stderr.decode('utf-8', 'replace').strip().splitlines()[:3]
            why = (f'{name} copy {i} ({how} of the {which} file): {why}; kept in {kept}; '
                   f'stderr: {" | ".join(first)[:300]}')
        shutil.rmtree(folder, ignore_errors=True)
        return rc, why

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for rc, why in pool.map(one, range(count)):
                histogram[rc] = histogram.get(rc, 0) + 1
                if why:
                    failures.append(why)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return count, failures, histogram


def default_cli():
    for build in ('build-asan', 'build'):
        cli = os.path.join(ROOT, build, 'app', 'neurocuda')
        if os.access(cli, os.X_OK):
            return cli
    return os.path.join(ROOT, 'build', 'app', 'neurocuda')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--count', type=int, default=1000, help='mutated copies per file (default 1000)')
    ap.add_argument('--cli', default=None, help='the neurocuda to run (default build-asan, else build)')
    ap.add_argument('--jobs', type=int, default=2, help='runs at the same time (default 2)')
    ap.add_argument('--seed', default='1', help='random seed (default 1): the same copies every time')
    ap.add_argument('--timeout', type=float, default=120, help='seconds one run may take (default 120)')
    ap.add_argument('--keep', default=None, help='folder for failing copies')
    ap.add_argument('--tap', action='store_true', help='TAP output (for meson)')
    ap.add_argument('files', nargs='*', help='files to mutate (default: the fixtures)')
    args = ap.parse_args()
    cli = os.path.abspath(args.cli or default_cli())
    if not os.access(cli, os.X_OK):
        print(f'mutate_check: {cli} is not an executable; build first', file=sys.stderr)
        return 2
    keep = args.keep or os.path.join(os.path.dirname(os.path.dirname(cli)), 'mutate-failures')
    os.makedirs(keep, exist_ok=True)
    files = args.files or fixture_files()
    env = sanitizer_env()
    total_runs = total_failures = 0
    started = time.monotonic()
    if args.tap:
        print(f'# {cli}, {args.count} copies per file, seed {args.seed}')
    for n, path in enumerate(files, 1):
        t0 = time.monotonic()
        runs, failures, histogram = check_file(cli, path, args.count, args.seed, args.jobs, args.timeout, keep, env)
        total_runs += runs
        total_failures += len(failures)
        codes = ', '.join(f'exit {k}: {v}' for k, v in sorted(histogram.items(), key=lambda kv: str(kv[0])))
        line = (f'{os.path.relpath(path, ROOT) if path.startswith(ROOT) else path}: {runs} copies, '
                f'{len(failures)} failed ({codes}; {time.monotonic() - t0:.0f} s)')
        if args.tap:
            print(f'{"not ok" if failures else "ok"} {n} - {line}')
            for f in failures[:10]:
                print(f'# {f}')
        else:
            print(line)
            for f in failures[:10]:
                print(f'  FAILED {f}')
        sys.stdout.flush()
    if args.tap:
        print(f'1..{len(files)}')
    print(f'{"# " if args.tap else ""}total: {total_runs} runs of `{os.path.basename(cli)} info` on damaged copies of '
          f'{len(files)} files, {total_failures} failed, {time.monotonic() - started:.0f} s')
    return 1 if total_failures else 0


if __name__ == '__main__':
    sys.exit(main())
