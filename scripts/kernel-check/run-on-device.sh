#!/bin/bash
# Runs on the GPU machine inside a pack made by prepare.py (plus harness.cpp):
# builds the harness and one cubin per kernel (nvcc when present, else the
# NVRTC cubin from the pack), times the starter against every reference build
# at C = P = 2048, then grades every kernel on the hazard cases. Kernels that
# are expected to hang or crash are graded one case per process, since either
# ends the process that meets it.
set -u
cd "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
g++ -O2 -std=c++17 -fopenmp harness.cpp -o harness -ldl || exit 1
mkdir -p cubin
declare -A geometry expect
while read -r name rows threads smem grid ecase ekind; do
    geometry[$name]="$rows $threads $smem $grid"
    expect[$name]="$ecase $ekind"
    if command -v nvcc >/dev/null; then
        nvcc -cubin -arch=sm_90 -O3 -o "cubin/$name.cubin" "src/$name.cu" > "cubin/$name.log" 2>&1 &
    fi
done < manifest.txt
wait
for name in "${!geometry[@]}"; do
    [ -s "cubin/$name.log" ] && head -5 "cubin/$name.log"
    [ -s "cubin/$name.cubin" ] || cp "nvrtc/$name.cubin" "cubin/$name.cubin"
done
command -v nvcc >/dev/null && nvcc --version | tail -1

echo "== timing at C = P = 2048 (speedup is against the first line)"
timed=(cubin/starter.cubin ${geometry[starter]})
for name in "${!geometry[@]}"; do
    case $name in reference*) timed+=("cubin/$name.cubin" ${geometry[$name]} "nvrtc/$name.cubin" ${geometry[$name]}) ;; esac
done
timeout 120 ./harness time "${timed[@]}"

echo "== hazard cases"
# A kernel that hangs goes last, in case its teardown is slow.
for name in $(grep -v ' timeout$' manifest.txt | cut -d' ' -f1) $(grep ' timeout$' manifest.txt | cut -d' ' -f1); do
    read -r ecase ekind <<< "${expect[$name]}"
    echo "$name (expect: $ecase $ekind)"
    runs=3
    [ "$ekind" = race ] && runs=8
    if [ "$ekind" = timeout ] || [ "$ekind" = crash ]; then
        for c in $(./harness cases); do
            timeout 30 ./harness check "cubin/$name.cubin" ${geometry[$name]} "$c" 2 || echo "  ^ in $c (exit $?)"
        done
    else
        timeout 120 ./harness check "cubin/$name.cubin" ${geometry[$name]} all $runs || echo "  ^ exit $?"
    fi
done
