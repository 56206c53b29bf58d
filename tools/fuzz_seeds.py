#!/usr/bin/python3
"""Makes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/)
from the project's fixtures.  Run once by hand when the fixtures change:

    /usr/bin/python3 tools/fuzz_seeds.py [NEUROCUDA]

NEUROCUDA (default build-hard/app/neurocuda) writes the project, recording and
NIR seeds from tests/fixtures/models/cnn_maxpool.onnx; the HDF5 dataset seeds
need h5py (Debian's python3-h5py, hence /usr/bin/python3).  Multi-file inputs
join their parts with the harnesses' separator (tests/fuzz/fuzz_common.h)."""
import gzip
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, 'tests', 'fuzz', 'corpus')
FIX = os.path.join(ROOT, 'tests', 'fixtures')
SHARED_NIR = '/work/shared/fixtures/nir'
SPLIT = b'@@NC-SPLIT@@'
MAX_SEED = 160 * 1024   # bigger inputs slow the fuzzer down more than they teach it


def put(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), 'wb') as f:
        f.write(data)


def read(path):
    with open(path, 'rb') as f:
        return f.read()


def onnx_seeds():
    bad = os.path.join(FIX, 'onnx_bad')
    for name in sorted(os.listdir(bad)):
        path = os.path.join(bad, name)
        if name.endswith('.onnx'):
            data = read(path)
            if os.path.exists(path + '.data'):   # model, data, the data's file name
                data += SPLIT + read(path + '.data') + SPLIT + (name + '.data').encode()
            put('onnx', name, data)
        elif name.endswith('.pb'):               # TensorProto files
            put('onnx', name, read(path))
    models = os.path.join(FIX, 'models')
    put('onnx', 'cnn_maxpool.onnx', read(os.path.join(models, 'cnn_maxpool.onnx')))
    dyn = os.path.join(models, 'cnn_maxpool_dynamo.onnx')
    put('onnx', 'cnn_maxpool_dynamo.onnx',
        read(dyn) + SPLIT + read(dyn + '.data') + SPLIT + b'cnn_maxpool_dynamo.onnx.data')
    put('onnx', 'mlp_dynamo_no_data.onnx', read(os.path.join(models, 'mlp_dynamo.onnx')))


def nir_seeds(tmp, cli):
    sources = [os.path.join(FIX, 'nir_ours', 'converted_cnn.nir')]
    if os.path.isdir(SHARED_NIR):
        sources += [os.path.join(SHARED_NIR, n) for n in sorted(os.listdir(SHARED_NIR)) if n.endswith('.nir')]
    for path in sources:
        if os.path.getsize(path) <= MAX_SEED:
            put('nir', os.path.basename(path), read(path))
    if cli:
        out = os.path.join(tmp, 'exported.nir')
        subprocess.run([cli, 'export-nir', os.path.join(tmp, 'p.ncsnn'), '-o', out], check=True,
                       stdout=subprocess.DEVNULL)
        if os.path.getsize(out) <= MAX_SEED:
            put('nir', 'exported_cnn_maxpool.nir', read(out))


def cli_made_seeds(tmp, cli):
    model = os.path.join(FIX, 'models', 'cnn_maxpool.onnx')
    project = os.path.join(tmp, 'p.ncsnn')
    subprocess.run([cli, 'convert', model, '-o', project, '--limit', '20', '--calib-images', '64', '--maxpool', 'avg'], check=True,
                   stdout=subprocess.DEVNULL)
    put('project', 'cnn_maxpool.ncsnn', read(project))
    rec = os.path.join(tmp, 'r.h5')
    subprocess.run([cli, 'run', project, '--limit', '6', '-T', '4', '--batch', '3', '--record', rec], check=True,
                   stdout=subprocess.DEVNULL)
    put('record', 'cnn_maxpool_T4.h5', read(rec))


def idx(dims, payload):
    head = bytes([0, 0, 8, len(dims)]) + b''.join(struct.pack('>I', d) for d in dims)
    return head + payload


def idx_seeds():
    fm = '/usr/share/datasets/fashion-mnist'
    with gzip.open(os.path.join(fm, 't10k-images-idx3-ubyte.gz')) as f:
        images = f.read(16 + 3 * 784)[16:]
    with gzip.open(os.path.join(fm, 't10k-labels-idx1-ubyte.gz')) as f:
        labels = f.read(8 + 3)[8:]
    x, y = idx([3, 28, 28], images), idx([3], labels)
    put('idx', 'fmnist3', x + SPLIT + y)
    put('idx', 'fmnist3_gz', gzip.compress(x, mtime=0) + SPLIT + gzip.compress(y, mtime=0))
    put('idx', 'tiny_2x3x2', idx([2, 3, 2], bytes(range(12))) + SPLIT + idx([2], b'\x01\x00'))


def npy(descr, shape, payload):
    shape_text = '(' + ''.join(f'{d}, ' for d in shape).rstrip(' ') + ')' if len(shape) != 1 else f'({shape[0]},)'
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    total = 10 + len(header) + 1
    header += ' ' * ((total + 63) // 64 * 64 - total) + '\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode() + payload


def npy_seeds():
    x_u8 = npy('|u1', (3, 4, 4), bytes(range(48)))
    x_f4 = npy('<f4', (2, 1, 3, 3), struct.pack('<18f', *[i / 17 for i in range(18)]))
    y_i8 = npy('<i8', (3,), struct.pack('<3q', 0, 1, 2))
    y_f8 = npy('<f8', (2,), struct.pack('<2d', 1, 0))
    y_i4 = npy('<i4', (3,), struct.pack('<3i', 2, 2, 1))
    put('npy', 'u8_images', x_u8 + SPLIT + y_i8)
    put('npy', 'f4_nchw', x_f4 + SPLIT + y_f8)
    put('npy', 'u8_i4_labels', x_u8 + SPLIT + y_i4)
    put('npy', 'v2_header', b'\x93NUMPY\x02\x00' + struct.pack('<I', 118) + x_u8[10:] + SPLIT + y_i8)


def h5data_seeds(tmp):
    try:
        import h5py
        import numpy as np
    except ImportError:
        print('fuzz_seeds: no h5py; HDF5 dataset seeds skipped (use /usr/bin/python3)', file=sys.stderr)
        return
    rng = np.random.default_rng(1)
    variants = {
        'u8_nhw': dict(x=rng.integers(0, 255, (3, 6, 6), dtype=np.uint8), y=np.array([0, 1, 2], np.int64)),
        'f4_nchw': dict(x=rng.random((2, 2, 4, 4), dtype=np.float32), y=np.array([1, 0], np.int32)),
    }
    for name, arrays in variants.items():
        path = os.path.join(tmp, name + '.h5')
        with h5py.File(path, 'w') as f:
            for key, value in arrays.items():
                f.create_dataset(key, data=value)
        put('h5data', name, read(path))
    path = os.path.join(tmp, 'chunked.h5')
    with h5py.File(path, 'w', libver='latest') as f:
        f.create_dataset('x', data=rng.random((4, 5, 5), dtype=np.float32), chunks=(1, 5, 5), compression='gzip',
                         fletcher32=True)
        f.create_dataset('y', data=np.array([3, 1, 0, 2], np.uint8), chunks=(2,))
    put('h5data', 'chunked_gzip', read(path))


def cli_seeds():
    args = {
        'info_json': (0, ['model.onnx', '--json']),
        'eval_opts': (1, ['m.onnx', '--data', 'fashion-mnist', '--mean', '0.5', '--std', '0.25,0.5', '--limit', '200',
                          '--batch', '64', '--engine', 'cpu']),
        'convert_opts': (2, ['m.onnx', '-o', 'p.ncsnn', '--threshold', 'p99.9', '--per-channel', '--L', '8', '-T',
                             '16', '--maxpool', 'gated', '--calib-images', '100', '--v0', '0.5', '--reset', 'zero',
                             '--fire', 'gt', '--scale', '1']),
        'run_opts': (3, ['p.ncsnn', '-T', '32', '--encoding', 'poisson', '--seed', '7', '--record', 'r.h5',
                         '--plots', 'plots', '--dt', '0.001', '--json']),
        'sweep_opts': (4, ['m.onnx', '--threshold', 'max,p99', '-T', '1,2,4', '--limit', '10']),
        'export_opts': (5, ['p.ncsnn', '-o', 'g.nir', '--allow-approx']),
        'bench_opts': (6, ['m.onnx', '--repeats', '3', '--warmup', '1', '--batch', '8', '--engine', 'cpu', '-T',
                           '4']),
        'engines': (7, ['--json']),
        'help': (2, ['--help']),
    }
    for name, (cmd, argv) in args.items():
        put('cli', name, bytes([cmd]) + b'\0'.join(a.encode() for a in argv))


def main():
    cli = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, 'build-hard', 'app', 'neurocuda')
    if not os.access(cli, os.X_OK):
        print(f'fuzz_seeds: {cli} not found; project, recording and exported NIR seeds skipped', file=sys.stderr)
        cli = None
    tmp = tempfile.mkdtemp(prefix='nc-seeds-')
    try:
        onnx_seeds()
        if cli:
            cli_made_seeds(tmp, cli)
        nir_seeds(tmp, cli)
        idx_seeds()
        npy_seeds()
        h5data_seeds(tmp)
        cli_seeds()
    finally:
        shutil.rmtree(tmp)
    for target in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, target))
        size = sum(os.path.getsize(os.path.join(CORPUS, target, n)) for n in files)
        print(f'{target}: {len(files)} seeds, {size // 1024} KiB')


if __name__ == '__main__':
    main()
