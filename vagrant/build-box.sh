#!/usr/bin/env bash
# Build the project's own Vagrant box for the libvirt provider: a clean Debian 12 root with this checkout's
# `setup.sh --no-vm` already run, so that `vagrant up` provisions it with no network, booted straight into
# its own kernel (no bootloader: the box hands libvirt its vmlinuz and initrd).
#
# Usage (as root):  vagrant/build-box.sh [--out FILE] [--base TARBALL] [--apt-cache DIR] [--pip-cache DIR]
#   --out FILE        the box file to write (default: mptcp-testbed-bookworm.box here)
#   --base TARBALL    a tarball of `debootstrap --variant=minbase bookworm` to start from (default: run
#                     debootstrap now, from Debian's mirror)
#   --apt-cache DIR   keep downloaded .debs in DIR between builds; --pip-cache DIR: the same for pip
# Then:  vagrant box add --name mptcp-testbed/bookworm mptcp-testbed-bookworm.box
# and `vagrant up --provider libvirt` uses it (see the Vagrantfile and docs/backends.md).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
args=("$@")   # as given: the script runs itself again in a mount namespace of its own, below
out=$PWD/mptcp-testbed-bookworm.box
base="" apt_cache="" pip_cache=""
need() { [ $# -ge 2 ] || { echo "build-box.sh: $1 needs a value (see --help)" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out|--base|--apt-cache|--pip-cache) need "$@" ;;&
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --base) base=$(realpath "$2"); shift 2 ;;
    --apt-cache) apt_cache=$(realpath -m "$2"); shift 2 ;;
    --pip-cache) pip_cache=$(realpath -m "$2"); shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-box.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "build-box.sh: run as root (debootstrap, chroot, mounts)" >&2; exit 1; }
# Every mount below is made in a mount namespace of this script's own: however it ends, even killed,
# none of them stays on the machine (and no later rm of the work folder can reach through a /dev bind).
if [ -z "${TESTBED_BOX_PRIVATE_MOUNTS:-}" ]; then
  export TESTBED_BOX_PRIVATE_MOUNTS=1
  exec unshare --mount --propagation private -- "$0" "${args[@]}"
fi
for tool in debootstrap mkfs.ext4 qemu-img git; do
  command -v "$tool" >/dev/null || { echo "build-box.sh: $tool is missing (./setup.sh --vagrant installs it)" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/testbed-box.XXXXXX)
root=$work/root
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -R -l "${mounts[i]}" 2>/dev/null || true; done
  rm -f "$out.tmp"
  # a mount that something inside left is not followed: its folder stays, and says so
  if grep -q " $work/" /proc/self/mountinfo; then
    echo "build-box.sh: mounts still under $work; left in place" >&2
  else
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log() { echo "build-box.sh [$(date +%H:%M:%S)] $*"; }
mnt() { mkdir -p "$root/$2"; mount "${@:3}" "$1" "$root/$2"; mounts+=("$root/$2"); }

mkdir -p "$root"
if [ -n "$base" ]; then
  log "unpacking $base"
  tar -C "$root" -xf "$base"
else
  log "debootstrap --variant=minbase bookworm"
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
fi

# This machine's own way to its package registries (resolver, proxy CAs, pip's and apt's settings), for the
# build only: each is removed again below (the CA bundle is then made anew from Debian's CAs alone), so the
# box trusts and uses none of this machine's settings.
borrowed=(etc/resolv.conf etc/pip.conf etc/ssl/certs/ca-certificates.crt etc/apt/apt.conf.d/99artifact-registry)
for name in "${borrowed[@]}"; do
  if [ -f "/$name" ]; then rm -f "$root/$name"; mkdir -p "$(dirname "$root/$name")"; cp "/$name" "$root/$name"; fi
done
local_cas=()
if [ -d /usr/local/share/ca-certificates ]; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  for ca in /usr/local/share/ca-certificates/*; do
    [ -e "$ca" ] || continue
    cp -r "$ca" "$root/usr/local/share/ca-certificates/"; local_cas+=("usr/local/share/ca-certificates/$(basename "$ca")")
  done
fi
# no package's service may start on this machine while the root is built
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"; chmod 755 "$root/usr/sbin/policy-rc.d"

mnt proc proc -t proc
mnt sysfs sys -t sysfs
mnt /dev dev --rbind; mount --make-rslave "$root/dev"
[ -n "$apt_cache" ] && { mkdir -p "$apt_cache"; mnt "$apt_cache" var/cache/apt/archives --bind; }
[ -n "$pip_cache" ] && { mkdir -p "$pip_cache"; mnt "$pip_cache" root/.cache/pip --bind; }

in_root() {
  chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive TESTBED_VENV=/opt/mptcp-testbed/venv "$@"
}

# the sources a Debian 12 installer writes (debootstrap names the release alone): the box gets the
# security and point-release updates, its kernel among them
rm -f "$root/etc/apt/sources.list"
cat > "$root/etc/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

log "installing the box's system: systemd, Debian's kernel, ssh, sudo"
in_root apt-get update -qq
in_root apt-get install -y -qq --no-install-recommends systemd-sysv linux-image-amd64 openssh-server sudo \
  kmod udev iproute2 ca-certificates >/dev/null

# The checkout as a clone would hold it, where the Vagrantfile's share puts the user's: setup.sh's venv and
# editable install point at /vagrant, and provisioning finds them done.
log "setup.sh --no-vm, as the Vagrantfile's provisioning runs it"
mkdir -p "$root/vagrant"
git -C "$here" ls-files -z --cached --others --exclude-standard \
  | (cd "$here" && xargs -0 -r cp --parents -t "$root/vagrant")
in_root /vagrant/setup.sh --no-vm
ln -sf /opt/mptcp-testbed/venv/bin/run-scenario "$root/usr/local/bin/run-scenario"
# the share hides these at boot; the box need not carry a copy
find "$root/vagrant" -mindepth 1 -delete

log "the vagrant user, ssh, the network and the root file system"
in_root useradd -m -s /bin/bash vagrant
echo 'vagrant:vagrant' | in_root chpasswd
echo 'vagrant ALL=(ALL) NOPASSWD: ALL' > "$root/etc/sudoers.d/vagrant"; chmod 440 "$root/etc/sudoers.d/vagrant"
insecure=$(ls /usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub /opt/vagrant/embedded/gems/gems/vagrant-*/keys/vagrant.pub 2>/dev/null | head -1 || true)
[ -n "$insecure" ] || { echo "build-box.sh: Vagrant's insecure public key is not found: is vagrant installed?" >&2; exit 1; }
mkdir -p "$root/home/vagrant/.ssh"
cp "$insecure" "$root/home/vagrant/.ssh/authorized_keys"
in_root chown -R vagrant:vagrant /home/vagrant/.ssh
chmod 700 "$root/home/vagrant/.ssh"; chmod 600 "$root/home/vagrant/.ssh/authorized_keys"
echo 'UseDNS no' > "$root/etc/ssh/sshd_config.d/vagrant.conf"
# Each VM of the box its own identity: ssh host keys made at its first boot, and a machine id (systemd
# writes one when the file is empty; networkd's DHCP client id derives from it, so two VMs of one box on
# one network would otherwise share a lease).
rm -f "$root"/etc/ssh/ssh_host_*
cat > "$root/etc/systemd/system/ssh-host-keys.service" <<'EOF'
[Unit]
Description=ssh host keys of this VM
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
EOF
: > "$root/etc/machine-id"
printf '[Match]\nName=e*\n\n[Network]\nDHCP=yes\n' > "$root/etc/systemd/network/80-dhcp.network"
echo 'mptcp-testbed' > "$root/etc/hostname"
echo '/dev/vda / ext4 defaults 0 1' > "$root/etc/fstab"

# name resolution in the VM: systemd-resolved's stub, fed by the DHCP server (installed last, as the link
# replaces the machine's resolver, which the build needed until here)
in_root apt-get install -y -qq --no-install-recommends systemd-resolved >/dev/null
ln -sf ../run/systemd/resolve/stub-resolv.conf "$root/etc/resolv.conf"
in_root systemctl enable systemd-networkd systemd-resolved ssh-host-keys >/dev/null 2>&1
# the machine's CAs out, the bundle made anew from Debian's; the machine's settings out
for ca in "${local_cas[@]}"; do rm -rf "${root:?}/$ca"; done
for name in etc/pip.conf etc/apt/apt.conf.d/99artifact-registry; do rm -f "$root/$name"; done
in_root update-ca-certificates --fresh >/dev/null
# the downloads stay where --apt-cache keeps them; without it, the box carries none
[ -n "$apt_cache" ] || in_root apt-get clean
for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -R -l "${mounts[i]}"; done
mounts=()
rm -f "$root/usr/sbin/policy-rc.d"

log "image: ext4, made into qcow2"
box=$work/box
mkdir -p "$box"
cp "$(ls "$root"/boot/vmlinuz-* | sort -V | tail -1)" "$box/vmlinuz"
cp "$(ls "$root"/boot/initrd.img-* | sort -V | tail -1)" "$box/initrd.img"
used_mb=$(du -sm "$root" | cut -f1)
size_mb=$(( used_mb * 13 / 10 + 2048 ))   # room for results, logs and a setup.sh that adds a package
mkfs.ext4 -q -F -L testbed-root -d "$root" "$work/root.img" "${size_mb}M"
qemu-img convert -O qcow2 "$work/root.img" "$box/box.img"
rm -f "$work/root.img"
virtual_gb=$(( (size_mb + 1023) / 1024 ))
printf '{"provider": "libvirt", "format": "qcow2", "virtual_size": %d}\n' "$virtual_gb" > "$box/metadata.json"
cat > "$box/Vagrantfile" <<'EOF'
# The project's own box (vagrant/build-box.sh): Debian 12 with its kernel booted directly.
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |lv|
    lv.kernel = File.join(File.dirname(__FILE__), "vmlinuz")
    lv.initrd = File.join(File.dirname(__FILE__), "initrd.img")
    lv.cmd_line = "root=/dev/vda rw console=ttyS0"
  end
end
EOF
mkdir -p "$(dirname "$out")"
tar -C "$box" -cf "$out.tmp" metadata.json Vagrantfile vmlinuz initrd.img box.img
mv "$out.tmp" "$out"
log "wrote $out ($(du -h "$out" | cut -f1), kernel $(basename "$(ls "$root"/boot/vmlinuz-* | sort -V | tail -1)"), in ${SECONDS} s"
