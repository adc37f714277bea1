#!/usr/bin/env bash
# gpu-bundle.sh BUILD_DIR BUNDLE_DIR: packs what examples/gpu-check.sh needs on a bare GPU
# machine (CUDA, PyTorch and Python only: no Open MPI, no Debian packages):
#   BUNDLE_DIR/bin/   cleave, libcleave_cuda.so, test_cuda from BUILD_DIR (a CUDA build)
#   BUNDLE_DIR/lib/   every shared library they load here except glibc's own and the CUDA
#                     libraries (which the GPU machine brings: driver, and the Python
#                     environment's nvidia-* packages): Open MPI and its dependencies, libstdc++
#   BUNDLE_DIR/ompi/  Open MPI's components and help files, laid out under usr/ as Debian
#                     installs them, for OPAL_PREFIX=BUNDLE_DIR/ompi/usr
# These are this machine's Debian 12 files: the same files `apt-get download` + `dpkg -x` of the
# Open MPI packages would give, without the network.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 BUILD_DIR BUNDLE_DIR" >&2; exit 2; }
build="$1"
bundle="$2"
mkdir -p "$bundle/bin" "$bundle/lib"
cp -f "$build/cleave" "$build/libcleave_cuda.so" "$bundle/bin/"
[[ -x "$build/tests/cuda/test_cuda" ]] && cp -f "$build/tests/cuda/test_cuda" "$bundle/bin/"
multiarch=/usr/lib/x86_64-linux-gnu
ompi_src="$multiarch/openmpi"
objs=("$bundle"/bin/*)
if [[ -d "$ompi_src" ]]; then
    mkdir -p "$bundle/ompi/usr/lib/x86_64-linux-gnu" "$bundle/ompi/usr/share"
    cp -a "$ompi_src" "$bundle/ompi/usr/lib/x86_64-linux-gnu/"
    [[ -d /usr/share/openmpi ]] && cp -a /usr/share/openmpi "$bundle/ompi/usr/share/"
    [[ -d /etc/openmpi ]] && mkdir -p "$bundle/ompi/etc" && cp -a /etc/openmpi "$bundle/ompi/etc/"
    mapfile -t -O "${#objs[@]}" objs < <(find "$bundle/ompi" -name '*.so*' -type f)
fi
# Every library those objects need, resolved here; glibc and CUDA stay behind.
for o in "${objs[@]}"; do
    ldd "$o" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libcuda.so*|libcudart*|libcublas*|libnccl*|libnvidia*) ;;
        *) cp -fL "$lib" "$bundle/lib/" ;;
    esac
done
du -sh "$bundle" | awk '{ print "# gpu-bundle: " $1 " in " $2 }'
