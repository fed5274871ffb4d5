#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# AF_MRC sockets: creation and close in a loop, errors for what MRC does
# not provide, module references held by open sockets, and autoloading of
# the module by socket().

. "$(dirname "$0")/mrc_lib.sh"
mrc_require_root
mrc_unload
mrc_load

mrc_check "create/close loop" "created 2000" "$($MRC_UTIL create-loop 2000)"
mrc_check "refcount back to 0 after loop" 0 "$(mrc_refcnt)"
mrc_run "socket() errors: ESOCKTNOSUPPORT, EPROTONOSUPPORT" $MRC_UTIL errors
mrc_check "each open socket holds two module references (ops, proto)" "rmmod_while_open refused
held 128 after 0" "$($MRC_UTIL hold 64 --try-rmmod)"
mrc_check "module still loaded after refused rmmod" 1 "$(lsmod | grep -c '^mrc ')"
mrc_run "rmmod after the sockets closed" rmmod mrc

# Autoload: socket(AF_MRC) makes the kernel ask modprobe for net-pf-23.
# Install the module in a private module tree and point the kernel's
# modprobe helper at it.
tree=$(mktemp -d)
old_helper=$(cat /proc/sys/kernel/modprobe)
kver=$(uname -r)
mkdir -p "$tree/lib/modules/$kver/extra"
cp "$MRC_KO" "$tree/lib/modules/$kver/extra/"
touch "$tree/lib/modules/$kver/modules.order" "$tree/lib/modules/$kver/modules.builtin"
depmod -b "$tree" "$kver"
cat >"$tree/modprobe" <<EOS
#!/bin/sh
exec /sbin/modprobe -d $tree "\$@"
EOS
chmod +x "$tree/modprobe"
echo "$tree/modprobe" >/proc/sys/kernel/modprobe
out=$($MRC_UTIL create 2>&1)
echo "$old_helper" >/proc/sys/kernel/modprobe
mrc_check "socket(AF_MRC) autoloads mrc.ko" "created 1" "$out"
mrc_check "module loaded by autoload" 1 "$(lsmod | grep -c '^mrc ')"
rm -rf "$tree"
mrc_unload

mrc_exit
