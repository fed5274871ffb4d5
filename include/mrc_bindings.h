/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Input of the module's own bindgen run (see Kbuild): the kernel headers
 * whose types and functions mrc_sys.rs wraps, and the C helpers for
 * static inline functions that Rust cannot call directly.
 */
#include <linux/errno.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/seq_file_net.h>
#include <linux/skbuff.h>
#include <linux/socket.h>
#include <linux/timer.h>
#include <net/genetlink.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/sock.h>
#include <net/ip6_route.h>
#include <net/ipv6_stubs.h>
#include <net/route.h>
#include <net/udp_tunnel.h>
#include <linux/hrtimer.h>
#include <linux/workqueue.h>
#include <linux/random.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>

#include "uapi/linux/mrc.h"
#include "uapi/linux/mrc_netlink.h"
#include "../netlink/mrc_nl_gen.h"
#include "mrc_helpers.h"
