#!/bin/sh
# dpc and libdpcrt start where there is no GPU stack: ldd shows neither linking the CUDA driver,
# the CUDA runtime, cuBLAS or NCCL (the driver is dlopen'd when asked for). libdpcrt must not
# link NVRTC either: only the compiler (libdpc) generates kernels. `dpc devices` then runs and
# says what it found of a driver.
#   ldd_test.sh DPC LIBDPCRT
dpc=$1
rt=$2
fails=0
for f in "$dpc" "$rt"; do
  out=$(ldd "$f") || { echo "FAIL ldd $f"; fails=$((fails + 1)); continue; }
  bad=$(printf '%s\n' "$out" | grep -E 'libcuda\.|libcudart|libcublas|libnccl')
  if [ -n "$bad" ]; then
    echo "FAIL $f links the GPU stack:"
    printf '%s\n' "$bad"
    fails=$((fails + 1))
  else
    echo "ok   $f: no libcuda, libcudart, libcublas or libnccl"
  fi
done
if ldd "$rt" | grep -q libnvrtc; then
  echo "FAIL $rt links NVRTC"
  fails=$((fails + 1))
else
  echo "ok   $rt: no NVRTC"
fi
line=$("$dpc" devices --no-calibrate | grep '^cuda: ')
case $line in
"cuda: no CUDA driver found"* | "cuda: CUDA driver"*) echo "ok   dpc devices: $line" ;;
*)
  echo "FAIL dpc devices says nothing of a CUDA driver: '$line'"
  fails=$((fails + 1))
  ;;
esac
[ "$fails" -eq 0 ]
