#!/usr/bin/env bash
# Build, on this CPU machine, what the GPU harness carries to the H100/H200 for one SGLang release
# (all ignored by git):
#   .carry-site/site.tar.xz   a cp312 site folder: sglang RELEASE, its sglang-kernel (Hopper parts
#                             only: FlashAttention-3, sm100 and FlashMLA dropped; the harness serves
#                             with --attention-backend triton), the packages the GPU image lacks,
#                             and none of what the image already has (its torch 2.11, triton...)
#   .carry-fi/fidata.tar.xz   flashinfer's JIT sources and headers (its norm kernels build on first use)
#   .carry-lib/libnuma.so.1   Debian's libnuma1 (sgl_kernel links it; the image may not have it)
#   .carry-site/RELEASE       the release the site holds (run_h200.sh's setup stage reads it)
# Usage (from the repository root): bash bench/gpu/build_carry.sh [RELEASE]   (default 0.5.12;
#   skips what is already built for that release; FORCE=1 rebuilds)
# Releases: 0.5.12 0.5.13 0.5.14 0.5.15 0.5.16 0.5.17 (their wheels pin torch 2.11.0, the image's),
#   and 0.5.18 / 0.5.23 (they pin torch 2.13 / 2.14.1: carried without that pin, to see whether they
#   load on the image's torch at all).
# The whole travelling tree (checkout + carry) must stay under the device tool's 64 MiB: the script
# prints the sum. The JIT caches of a finished run come back as $OUT/jitcache.tgz; copy it to
# .carry-jit/ to skip the ~60 s of kernel compilation on the next machine.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RELEASE=${1:-0.5.12}
WORK=${WORK:-/tmp/patchkit-gpu-carry-$RELEASE}
cd "$ROOT"
if [ -s .carry-site/site.tar.xz ] && [ -s .carry-fi/fidata.tar.xz ] && [ -z "${FORCE:-}" ] \
   && [ "$(cat .carry-site/RELEASE 2>/dev/null)" = "$RELEASE" ]; then
  echo "carry set for sglang $RELEASE already built (FORCE=1 rebuilds):"; ls -la .carry-site .carry-fi .carry-lib 2>/dev/null; exit 0
fi
# Each release's own pins (from its wheel's Requires-Dist): sglang-kernel, flashinfer, tvm-ffi,
# transformers; xgrammar (0.5.13+ imports it at start: a pydantic field type, so no stand-in) and
# sgl-deep-gemm (0.5.13+ imports it when capturing the speculative CUDA graphs).
case $RELEASE in
  0.5.12) PINS=(sglang-kernel==0.4.2.post2 flashinfer_python==0.6.11.post1 apache-tvm-ffi==0.1.9 transformers==5.6.0) ;;
  0.5.13) PINS=(sglang-kernel==0.4.3 flashinfer_python==0.6.12 apache-tvm-ffi==0.1.9 transformers==5.8.1
                xgrammar==0.2.1 sgl-deep-gemm==0.1.2) ;;
  0.5.14|0.5.15|0.5.16|0.5.17|0.5.18|0.5.23)
    meta=$(python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
             --platform manylinux_2_34_x86_64 -d "$WORK/meta" "sglang==$RELEASE" >/dev/null 2>&1 \
           && unzip -p "$WORK"/meta/sglang-*.whl '*/METADATA')
    pin() { echo "$meta" | sed -n "s/^Requires-Dist: \($1\)\(\[[a-z0-9]*\]\)\{0,1\}==\([^ ;]*\).*/\1==\3/p" | head -n 1; }
    PINS=()
    for p in sglang-kernel flashinfer_python apache-tvm-ffi transformers xgrammar sgl-deep-gemm; do
      v=$(pin "$p"); [ -n "$v" ] && PINS+=("$v")
    done ;;
  *) echo "build_carry.sh: no pins for sglang $RELEASE (known: 0.5.12-0.5.18, 0.5.23)" >&2; exit 2 ;;
esac
echo "sglang $RELEASE pins: ${PINS[*]}"
rm -rf "$WORK/wheels" "$WORK/site"; mkdir -p "$WORK/wheels" "$WORK/site"
# what the image (the device tool's package list) lacks, at versions that ran with 0.5.12+
PACKAGES=(
  "sglang==$RELEASE" "${PINS[@]}"
  tokenizers==0.22.2 fastapi==0.136.1 starlette==1.10.0 pydantic==2.13.4
  pydantic_core==2.46.4 annotated-types==0.8.0 typing-inspection==0.4.5 uvicorn==0.47.0
  orjson==3.13.0 pyzmq==27.3.0 setproctitle==1.3.8 pybase64==1.5.1 msgspec==0.23.0
  partial-json-parser==0.2.1.1.post7 openai==2.6.1 jiter==0.19.0 distro==1.9.0 sniffio==1.3.1
  jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
  dill==0.4.1 gguf==0.19.0 compressed-tensors==0.20.1 loguru==0.7.3 ipython==9.18.1
  decorator==5.3.1 jedi==0.20.1 parso==0.8.7 matplotlib-inline==0.2.2 pexpect==4.9.0
  ptyprocess==0.7.0 prompt-toolkit==3.0.53 wcwidth==0.9.4 stack-data==0.6.3 asttokens==3.0.2
  executing==2.3.0 pure-eval==0.2.4 traitlets==5.16.1 ipython-pygments-lexers==1.1.1
  soundfile==0.13.1 cffi==2.1.1 pycparser==3.12 python-multipart==0.0.34 interegular==0.3.3
  datasets==5.2.0 multiprocess==0.70.19
  # patchkit itself (the checkout travels; these are its dependencies)
  invoke==3.0.3 unidiff==1.0.1 GitPython==3.2.1 gitdb==4.0.12 smmap==5.0.3
)
# (tokenizers 0.22.2: transformers 5.6-5.12 refuse the image's 0.23.2 at import)
PLATFORMS=()
for p in manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_24 \
         manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do PLATFORMS+=(--platform "${p}_x86_64"); done
PIPX=(--only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}")
python3 -m pip download -q --no-deps "${PIPX[@]}" -d "$WORK/wheels" ${PACKAGES[@]}
python3 -m pip install -q --no-deps --no-compile --no-index "${PIPX[@]}" --target "$WORK/site" "$WORK"/wheels/*.whl
cd "$WORK/site"
# Dropped, each never loaded by a text-only Llama server on Hopper with the triton backend:
# sgl_kernel's FlashAttention-3 / sm100 / FlashMLA builds and its CPython 3.10 extension (the
# image runs 3.12); xgrammar's static library; deep_gemm's JIT headers (imported, never
# compiled with: the harness uses no FP8 GEMM); sglang's diffusion server (multimodal_gen), its
# gRPC front end. Whatever a run does import and
# lacks fails loudly at the server's start.
rm -rf sgl_kernel/flash_ops.abi3.so sgl_kernel/sm100 sgl_kernel/flashmla_ops.abi3.so sgl_kernel/*cpython-310*.so \
       lib lib64 include share bin jedi/third_party/typeshed _mscclpp*.so xgrammar/lib deep_gemm/include \
       sglang/multimodal_gen sglang/srt/grpc/_core.*.so sglang/test
# (sglang/srt/hardware_backend stays whole: 0.5.17's layers/quantization/unquant.py imports its
# npu modules on every platform)
# (the dist-info RECORD files stay: tvm_ffi finds xgrammar's bindings through them)
# Host-only extensions lose their symbol tables (xgrammar's bindings: 53 MB -> 2 MB); the CUDA
# libraries (sgl_kernel, deep_gemm, flashinfer) are left as built.
find . -name '*.so' -not -path './sgl_kernel/*' -not -path './deep_gemm/*' -not -path './flashinfer/*' \
     -exec strip --strip-unneeded {} + 2>/dev/null || true
mkdir -p "$ROOT/.carry-site" "$ROOT/.carry-fi" "$ROOT/.carry-lib"; rm -f "$ROOT/.carry-site/RELEASE"
FI=(cccl csrc cutlass include spdlog)
tar -C flashinfer/data -cf - "${FI[@]}" 2>/dev/null | xz -T0 -6 > "$ROOT/.carry-fi/fidata.tar.xz"
for d in "${FI[@]}"; do rm -rf "flashinfer/data/$d"; done
find . -name __pycache__ -type d -prune -exec rm -rf {} +
tar -cf - . | xz -T0 -6 > "$ROOT/.carry-site/site.tar.xz"
echo "$RELEASE" > "$ROOT/.carry-site/RELEASE"
cd "$WORK"
if [ ! -s "$ROOT/.carry-lib/libnuma.so.1" ]; then
  if apt-get download libnuma1 >/dev/null 2>&1; then
    dpkg -x libnuma1_*.deb numa && cp -L numa/usr/lib/x86_64-linux-gnu/libnuma.so.1 "$ROOT/.carry-lib/"
  else echo "note: libnuma1 not downloaded (only needed where the GPU image lacks libnuma.so.1)"; fi
fi
cd "$ROOT"; du -sh .carry-site .carry-fi .carry-lib
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -n 1 | cut -f1)
carry=$(du -cb .carry-site .carry-fi .carry-lib | tail -n 1 | cut -f1)
echo "travels: checkout $((tree >> 20)) MiB + carry $((carry >> 20)) MiB = $(((tree + carry) >> 20)) MiB (limit 64)"
