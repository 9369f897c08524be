#!/bin/busybox sh
# PID 1 of the session microVM. It mounts the kernel's filesystems, loads the virtio and 9p
# modules, brings up loopback (the VM has no other network device), then runs the guest agent,
# which mounts the shared directories and serves the host's requests. When the agent ends (the
# host asked, or closed the channel), the VM powers off: the host sees the port close and QEMU
# exit.
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# bash's process substitution (`diff <(a) <(b)`) opens /dev/fd/N.
ln -s /proc/self/fd /dev/fd
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
# A command must not power off, reboot or crash the VM through SysRq (`echo o >
# /proc/sysrq-trigger`): the trigger becomes /dev/null, and commands lack CAP_SYS_ADMIN to undo it.
mount --bind /dev/null /proc/sysrq-trigger
for m in $(cat /modules/order); do
  insmod /modules/$m.ko || echo "init: insmod $m failed" >&2
done
ip link set lo up
hostname abhed-vm
# The agent is also the `abhed-job` command (background jobs: kill, status, list).
ln -s /sbin/abhed-guest /bin/abhed-job
cd /
/sbin/abhed-guest
echo "init: the guest agent exited ($?); powering off" >&2
sync
poweroff -f
