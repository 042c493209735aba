#!/usr/bin/env bash
# Install everything the testbed needs on Debian 12 or 13 (tested) or Ubuntu 22.04+ (not tried), as root:
# distribution packages (Mininet, Open vSwitch, iperf3, mptcpize, iproute2, ...),
# what the VM backend boots (qemu, a distribution kernel), and a venv (.venv)
# with the pinned Python dependencies and `run-scenario`.
#
# Usage: ./setup.sh [--no-vm] [--vagrant]      (re-runs itself with sudo when not root)
#   --no-vm     skip qemu and the guest kernel (native backend only)
#   --vagrant   also libvirt and vagrant-libvirt, to build the project's Vagrant box (vagrant/build-box.sh)
#               and bring it up here; CI's run takes it (tests/vagrant)
#   TESTBED_VENV=/path  put the venv elsewhere than .venv (the Vagrant box does)
# Safe to run again: it only adds what is missing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
with_vm=1
with_vagrant=0
for arg in "$@"; do
  case "$arg" in
    --no-vm) with_vm=0 ;;
    --vagrant) with_vagrant=1 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup.sh: run as root (no sudo here)" >&2; exit 1; }
  exec sudo -E "$0" "$@"
fi

. /etc/os-release
case "${ID:-}:${VERSION_ID:-}" in
  debian:12*|debian:13*|ubuntu:22.04|ubuntu:24.04|ubuntu:2[4-9].*) ;;
  *) echo "setup.sh: warning: made for Debian 12 and 13 and Ubuntu 22.04+, this is ${PRETTY_NAME:-unknown}" >&2 ;;
esac

# Keep in step with runners/backends/programs.py, which names every program a backend runs and its package
# (tests/unit/test_tools.py checks that each of those packages is installed here).
pkgs=(mininet openvswitch-switch iperf3 mptcpize iproute2 iputils-ping ethtool nftables kmod procps psmisc
      dash net-tools python3 python3-venv python3-pip git)
# The test suite checks the Vagrantfile with `vagrant validate` (no box needed), and runs the
# README's commands in clean Debian 12 and 13 roots made by debootstrap (tests/fresh).
pkgs+=(vagrant debootstrap)
# ... and opens each result set's report.html in headless Chromium (tests/unit/test_report_page.py).
pkgs+=(chromium)
# ... and drives `run-scenario shell` in a real terminal with tmux (tests/integration/test_shell.py);
# the shell through the VM backend gives the guest a pty with `script` (util-linux, always there).
pkgs+=(tmux util-linux)
# --capture: tcpdump writes one pcap per interface, tshark reads each run's subflows from them
# (tshark's debconf question about non-root capture is answered "no" by the noninteractive frontend).
pkgs+=(tcpdump tshark)
# os-ken (the maintained Ryu fork) for the controller apps; Debian and Ubuntu ship it.
pkgs+=(python3-os-ken)
# libnftables' Python binding: a namespace's nft counters are set up in the runner's own process, not by
# an `nft` process per host (runners/linux/nftlib.py; without it, nft runs as before).
pkgs+=(python3-nftables)
# The test suite also submits docs/ci.md's Slurm recipe to a one-node Slurm cluster that it starts in a
# folder of its own (tests/cluster). slurmd's and slurmctld's own services wait for an /etc/slurm/slurm.conf,
# which nothing here writes; munge's starts with the package's key, and the test's cluster has a key of its own.
pkgs+=(slurm-wlm munge)
if [ "$with_vm" = 1 ]; then
  # virtme-ng builds the guest's initramfs with busybox, and reads the kernel's version with file
  # (or strings, from binutils); runners/backends/programs.py names each program
  pkgs+=(qemu-system-x86 busybox-static file binutils)
  if [ "$ID" = debian ]; then
    pkgs+=(linux-image-amd64)
  else
    pkgs+=(linux-image-generic)
  fi
fi
if [ "$with_vagrant" = 1 ]; then
  # Opt-in, because a libvirt daemon that a machine's init starts makes its own bridge (virbr0) there.
  # vagrant/build-box.sh makes the ext4 image and qcow2 (e2fsprogs, qemu-utils); `vagrant up --provider
  # libvirt` needs the daemon, its qemu driver, dnsmasq for the VM's DHCP and qemu itself.
  pkgs+=(libvirt-daemon-system libvirt-daemon-driver-qemu vagrant-libvirt dnsmasq-base qemu-utils e2fsprogs
         qemu-system-x86)
fi
if [ "$ID" = ubuntu ]; then
  # Ubuntu keeps sch_netem in linux-modules-extra; without it delay and loss cannot be shaped.
  pkgs+=("linux-modules-extra-$(uname -r)")
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian 12: also Linux 6.12 from bookworm-backports for the VM backend (newer MPTCP: scenarios
# select it with `requires: {kernel: ">=6.12"}` or --kernel). Installed beside the stable 6.1 kernel.
if [ "$with_vm" = 1 ] && [ "$ID" = debian ] && [ "${VERSION_CODENAME:-}" = bookworm ] \
   && ! ls /boot/vmlinuz-6.12* >/dev/null 2>&1; then
  if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
    cat > /etc/apt/sources.list.d/bookworm-backports.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  kpkg=$(apt-cache depends -t bookworm-backports linux-image-amd64 2>/dev/null \
         | awk '/Depends: linux-image-6\.12/ {print $2; exit}')
  if [ -n "$kpkg" ]; then
    echo "setup.sh: installing $kpkg from bookworm-backports (VM kernel 6.12)"
    apt-get install -y -qq --no-install-recommends -t bookworm-backports "$kpkg" >/dev/null
  else
    echo "setup.sh: warning: no 6.12 kernel in bookworm-backports; the VM backend keeps Debian's 6.1" >&2
  fi
fi

# The venv uses the distribution's python3 so that Mininet and os-ken, which
# come from the distribution, are importable (--system-site-packages).
py=/usr/bin/python3
venv=${TESTBED_VENV:-$here/.venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import mininet, yaml' 2>/dev/null; then
  rm -rf "$venv"
  "$py" -m venv --system-site-packages "$venv"
fi
# pip runs only when the venv was not installed from this checkout with these very files: a second run
# needs no network (the Vagrant box is provisioned offline), and pip's editable build would fetch setuptools.
stamp="$venv/.testbed-installed"
# (with the venv's Python and the checkout's top-level packages: the editable install maps each by name)
want="$here $("$venv/bin/python" -V) $(ls -d "$here"/*/__init__.py | xargs -n1 dirname | xargs -n1 basename | tr '\n' ' ')"
want="$want$(cat "$here/requirements.txt" "$here/setup.py" "$here/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -x "$venv/bin/run-scenario" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -e "$here"
  echo "$want" > "$stamp"
fi
# Byte-compile the checkout, and build matplotlib's font cache once where runners/analysis/plots.py finds it:
# the micro-VM sees both read-only and would otherwise redo them on every boot (~20 s under TCG).
"$venv/bin/python" -m compileall -q "$here/runners" "$here/scenarios" "$here/topologies" "$here/controller" \
  "$here/bench" "$here/tests" >/dev/null
mkdir -p "$venv/share/testbed-mplconfig"
MPLCONFIGDIR="$venv/share/testbed-mplconfig" "$venv/bin/python" -c 'import matplotlib.font_manager'

echo "setup.sh: done in ${SECONDS} s. kernel $(uname -r); $(iperf3 --version | head -1); run-scenario: $venv/bin/run-scenario"
