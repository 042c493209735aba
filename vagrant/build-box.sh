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
out=$PWD/mptcp-testbed-bookworm.box
base="" apt_cache="" pip_cache=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --base) base=$(realpath "$2"); shift 2 ;;
    --apt-cache) apt_cache=$(realpath -m "$2"); shift 2 ;;
    --pip-cache) pip_cache=$(realpath -m "$2"); shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-box.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "build-box.sh: run as root (debootstrap, chroot, mounts)" >&2; exit 1; }
for tool in debootstrap mkfs.ext4 qemu-img git; do
  command -v "$tool" >/dev/null || { echo "build-box.sh: $tool is missing (./setup.sh --vagrant installs it)" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/testbed-box.XXXXXX)
root=$work/root
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -R -l "${mounts[i]}" 2>/dev/null || true; done
  rm -rf "$work"
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
# build only: removed again below, the box keeps none of it.
borrowed=(etc/resolv.conf etc/pip.conf etc/ssl/certs/ca-certificates.crt etc/apt/apt.conf.d/99artifact-registry)
for name in "${borrowed[@]}"; do
  if [ -f "/$name" ]; then rm -f "$root/$name"; mkdir -p "$(dirname "$root/$name")"; cp "/$name" "$root/$name"; fi
done
[ -d /usr/local/share/ca-certificates ] && cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
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
  | (cd "$here" && xargs -0 cp --parents -t "$root/vagrant" 2>/dev/null || true)
in_root /vagrant/setup.sh --no-vm
ln -sf /opt/mptcp-testbed/venv/bin/run-scenario "$root/usr/local/bin/run-scenario"
# the share hides these at boot; the box need not carry a copy
find "$root/vagrant" -mindepth 1 -delete

log "the vagrant user, ssh, the network and the root file system"
in_root useradd -m -s /bin/bash vagrant
echo 'vagrant:vagrant' | in_root chpasswd
echo 'vagrant ALL=(ALL) NOPASSWD: ALL' > "$root/etc/sudoers.d/vagrant"; chmod 440 "$root/etc/sudoers.d/vagrant"
install -d -m 700 -o 1000 -g 1000 "$root/home/vagrant/.ssh"
insecure=$(ls /usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub /opt/vagrant/embedded/gems/gems/vagrant-*/keys/vagrant.pub 2>/dev/null | head -1 || true)
[ -n "$insecure" ] || { echo "build-box.sh: Vagrant's insecure public key is not found: is vagrant installed?" >&2; exit 1; }
install -m 600 -o 1000 -g 1000 "$insecure" "$root/home/vagrant/.ssh/authorized_keys"
echo 'UseDNS no' > "$root/etc/ssh/sshd_config.d/vagrant.conf"
printf '[Match]\nName=e*\n\n[Network]\nDHCP=yes\n' > "$root/etc/systemd/network/80-dhcp.network"
in_root systemctl enable systemd-networkd >/dev/null 2>&1
echo 'mptcp-testbed' > "$root/etc/hostname"
echo '/dev/vda / ext4 defaults 0 1' > "$root/etc/fstab"

in_root apt-get clean
for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -R -l "${mounts[i]}"; done
mounts=()
rm -f "$root/usr/sbin/policy-rc.d"
for name in "${borrowed[@]}"; do rm -f "$root/$name"; done

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
