#!/usr/bin/env bash
# The README's Vagrant commands against a libvirt daemon of the test's own (tests/vagrant).
#
# Run as: ip netns exec NS unshare --mount --propagation private -- in_private_libvirt.sh WORK BOX CHECKOUT
# In that namespace pair, libvirtd's folders (/run/libvirt, /var/lib/libvirt, ...) are folders of WORK bound
# over the machine's, so the daemon, its vagrant-libvirt network (bridge, dnsmasq, NAT rules) and the VM
# live in the test's network namespace only: nothing of them reaches the machine or beyond it.
# Prints `phase NAME SECONDS` lines for the test; exits non-zero on the first failure.
set -euo pipefail
work=$1 box=$2 checkout=$3
export VAGRANT_HOME=$work/vagrant.d VAGRANT_DOTFILE_PATH=$work/dot TESTBED_LIBVIRT_DRIVER=qemu
export VAGRANT_CHECKPOINT_DISABLE=1 VAGRANT_DEFAULT_PROVIDER=libvirt

destroyed=1   # nothing to destroy until `vagrant up` starts
stop() {  # on any exit: the VM and the daemon go (the test also kills what is left in its namespace)
  [ "$destroyed" = 1 ] || timeout 300 vagrant destroy -f >/dev/null 2>&1 || true
  [ -f "$work/libvirtd.pid" ] && kill "$(cat "$work/libvirtd.pid")" 2>/dev/null || true
  if [ -f "$work/made-dirs" ]; then
    while read -r d; do umount -l "$d" 2>/dev/null; rmdir "$d" 2>/dev/null || true; done < "$work/made-dirs"
  fi
}
trap stop EXIT

for d in run/libvirt var/lib/libvirt var/log/libvirt var/cache/libvirt etc/libvirt; do
  mkdir -p "$work/$d"
done
# A configuration of the test's own, not the machine's (its domains, networks, pools or qemu settings):
# the daemon's defaults, and qemu as root without a security driver: it reads the box's kernel and writes
# the 9p share as the test's root does; its console and log go to files (no virtlogd to start)
cat > "$work/etc/libvirt/qemu.conf" <<'EOF'
user = "root"
group = "root"
dynamic_ownership = 0
security_driver = "none"
stdio_handler = "file"
EOF
touch "$work/etc/libvirt/libvirtd.conf"
for d in run/libvirt var/lib/libvirt var/log/libvirt var/cache/libvirt etc/libvirt; do
  # /run/libvirt, which the packages leave to the daemon to make: an empty folder, removed again on exit
  [ -d "/$d" ] || { mkdir "/$d"; echo "/$d" >> "$work/made-dirs"; }
  mount --bind "$work/$d" "/$d"
done
ip link set lo up

libvirtd --daemon --pid-file "$work/libvirtd.pid"
for _ in $(seq 100); do [ -S /run/libvirt/libvirt-sock ] && break; sleep 0.2; done
[ -S /run/libvirt/libvirt-sock ] || { echo "libvirtd did not open its socket"; exit 1; }

phase() {  # phase NAME COMMAND...: run it, print its time
  local name=$1 t0=$SECONDS
  shift
  "$@"
  echo "phase $name $((SECONDS - t0))"
}
phase box-add vagrant box add --name mptcp-testbed/bookworm "$box"
cd "$checkout"
destroyed=0
phase up vagrant up --provider libvirt
phase run vagrant ssh -c 'cd /vagrant && sudo run-scenario scenarios/two-paths.yaml'
phase destroy vagrant destroy -f
destroyed=1
