#!/bin/bash
# usage: run.sh NAME [ENV=VAL ...]
name=$1; shift
cd /work/emu
start=$(date +%s.%N)
rm -f /tmp/emu_runs/$name.dump; env NC_EMU_DUMP=/tmp/emu_runs/$name.dump "$@" ./build-emu/app/neurocuda run /tmp/emu_vgg_bn.ncsnn --data /usr/share/datasets/fashion-mnist -T 8 --batch 256 --json > /tmp/emu_runs/$name.out 2> /tmp/emu_runs/$name.err
rc=$?
end=$(date +%s.%N)
grep '^{' /tmp/emu_runs/$name.out | tail -1 > /tmp/emu_runs/$name.json
echo "$name rc=$rc $(echo "$end - $start" | bc) s env: $*" >> /tmp/emu_runs/log.txt
