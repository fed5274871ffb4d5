// SPDX-License-Identifier: GPL-2.0
/*
 * Module parameters and one-line wrappers for static inline kernel
 * functions, which Rust cannot call. No logic lives here.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/net.h>
#include <linux/seq_file_net.h>
#include <linux/skbuff.h>
#include <net/genetlink.h>
#include <net/net_namespace.h>
#include <net/ip.h>
#include <net/ipv6_stubs.h>
#include <net/route.h>
#include <net/udp.h>
#include <net/udp_tunnel.h>
#include <net/netns/generic.h>
#include <net/sock.h>
#include <linux/sock_diag.h>
#include <linux/hrtimer.h>
#include <linux/workqueue.h>
#include <linux/sched/signal.h>
#include <linux/poll.h>
#include <linux/sockptr.h>
#include <linux/uaccess.h>
#include <linux/highmem.h>

#include "include/uapi/linux/mrc.h"
#include "include/mrc_helpers.h"

static int family = MRC_DEFAULT_FAMILY;
module_param(family, int, 0444);
MODULE_PARM_DESC(family, "Address family number of AF_MRC (default 23, the retired IrDA slot)");

static ushort port = MRC_DEFAULT_UDP_PORT;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "UDP port of the per-namespace MRC tunnel socket (default 4796)");

static bool pacing = true;
module_param(pacing, bool, 0644);
MODULE_PARM_DESC(pacing, "Pace each path's data at its congestion controller's rate (default Y; read when a connection opens)");

static bool gso = true;
module_param(gso, bool, 0644);
MODULE_PARM_DESC(gso, "Send runs of same-sized data packets to one path as one UDP GSO packet (default Y)");

/*
 * Receive memory: the truesize of every packet MRC sockets hold (out of
 * order, parts of messages, messages not yet read), charged to the socket's
 * sk_rmem_alloc and to the total of all MRC sockets, like UDP's udp_mem.
 */
static atomic_long_t mrc_rmem_total = ATOMIC_LONG_INIT(0);
static unsigned long mrc_rmem_auto;
static unsigned long rmem_max;
module_param(rmem_max, ulong, 0644);
MODULE_PARM_DESC(rmem_max, "Bytes of received packets all MRC sockets together may hold (default 0: an eighth of the memory free at load)");

static uint rst_rate = 1000;
module_param(rst_rate, uint, 0644);
MODULE_PARM_DESC(rst_rate, "RSTs per second a namespace sends in answer to packets for unknown sessions (default 1000, as icmp_msgs_per_sec)");

static uint rst_burst = 50;
module_param(rst_burst, uint, 0644);
MODULE_PARM_DESC(rst_burst, "RSTs for unknown sessions a namespace may send back to back (default 50, as icmp_msgs_burst)");

static uint fin_timeout_ms = 60000;
module_param(fin_timeout_ms, uint, 0644);
MODULE_PARM_DESC(fin_timeout_ms, "How long a closed socket's connection waits for the peer to finish the close before it resets it (default 60000, as tcp_fin_timeout; read when a connection opens)");

static uint max_orphans = 1024;
module_param(max_orphans, uint, 0644);
MODULE_PARM_DESC(max_orphans, "Connections of closed sockets that may finish in the background at once; more are reset at close (default 1024, as tcp_max_orphans)");

/* socket(AF_MRC, ...) loads the module on demand. */
MODULE_ALIAS_NETPROTO(MRC_DEFAULT_FAMILY);

int mrc_param_family(void) { return family; }
u16 mrc_param_port(void) { return port; }
bool mrc_param_pacing(void) { return READ_ONCE(pacing); }
bool mrc_param_gso(void) { return READ_ONCE(gso); }
u32 mrc_param_rst_rate(void) { return READ_ONCE(rst_rate); }
u32 mrc_param_fin_timeout_ms(void) { return READ_ONCE(fin_timeout_ms); }
u32 mrc_param_max_orphans(void) { return READ_ONCE(max_orphans); }
u32 mrc_param_rst_burst(void) { return READ_ONCE(rst_burst); }

void mrc_rmem_init(void) { mrc_rmem_auto = (nr_free_buffer_pages() / 8) << PAGE_SHIFT; }
unsigned long mrc_rmem_limit(void) { return READ_ONCE(rmem_max) ?: mrc_rmem_auto; }
long mrc_rmem_total_read(void) { return atomic_long_read(&mrc_rmem_total); }
int mrc_sk_rmem_alloc(const struct sock *sk) { return atomic_read(&sk->sk_rmem_alloc); }
int mrc_sock_rcvbuf(const struct sock *sk) { return READ_ONCE(sk->sk_rcvbuf); }
int mrc_sock_sndbuf(const struct sock *sk) { return READ_ONCE(sk->sk_sndbuf); }

/*
 * Whether @sk writes through the page fragment of the task that sends
 * (sk_page_frag()): that one is the task's own, and a copy into it needs
 * no lock of the socket's. A socket that does not, a kernel user's, writes
 * through its own (sk->sk_frag), which its lock guards.
 */
bool mrc_sock_task_frag(const struct sock *sk) { return READ_ONCE(sk->sk_use_task_frag); }

u32 mrc_skb_truesize(const struct sk_buff *skb) { return skb->truesize; }

/*
 * Whether @addr (IPv4 in 4 bytes, else IPv6 in 16) is an address of this
 * host in @sk's namespace, as inet_bind() and inet6_bind() require.
 */
bool mrc_sock_addr_is_local(const struct sock *sk, const u8 *addr, bool v6)
{
	struct net *net = sock_net(sk);
	struct net_device *dev;
	struct in6_addr a6;
	__be32 a4;

	if (!v6) {
		memcpy(&a4, addr, sizeof(a4));
		return inet_addr_type(net, a4) == RTN_LOCAL;
	}
	memcpy(&a6, addr, sizeof(a6));
	rcu_read_lock();
	dev = ipv6_stub->ipv6_dev_find(net, &a6, NULL);
	rcu_read_unlock();
	return !IS_ERR_OR_NULL(dev);
}

/*
 * Whether binding MRC port @port needs CAP_NET_BIND_SERVICE that the caller
 * lacks: MRC ports below net.ipv4.ip_unprivileged_port_start are
 * privileged, as TCP's, UDP's and SCTP's.
 */
bool mrc_sock_port_denied(const struct sock *sk, u16 port)
{
	struct net *net = sock_net(sk);

	return inet_port_requires_bind_service(net, port) &&
	       !ns_capable(net->user_ns, CAP_NET_BIND_SERVICE);
}

/* The type of @parent, its SO_RCVBUF and SO_SNDBUF, and whether the user set them. */
void mrc_sock_inherit(struct sock *sk, const struct sock *parent)
{
	sk->sk_type = parent->sk_type;
	WRITE_ONCE(sk->sk_rcvbuf, READ_ONCE(parent->sk_rcvbuf));
	WRITE_ONCE(sk->sk_sndbuf, READ_ONCE(parent->sk_sndbuf));
	sk->sk_userlocks |= parent->sk_userlocks & (SOCK_SNDBUF_LOCK | SOCK_RCVBUF_LOCK);
}

static void mrc_rfree(struct sk_buff *skb)
{
	atomic_sub(skb->truesize, &skb->sk->sk_rmem_alloc);
	atomic_long_sub(skb->truesize, &mrc_rmem_total);
}

/*
 * Detaches @skb from the socket, route and connection tracking it came with
 * (as mrc_skb_clean()), then charges it to @sk's receive memory and to the
 * total of all MRC sockets until it is freed, as skb_set_owner_r() does for
 * the socket alone. False, with nothing charged, if the total would go over
 * its limit. The packet's data is not touched.
 */
bool mrc_skb_charge_rx(struct sk_buff *skb, struct sock *sk)
{
	mrc_skb_clean(skb);
	if (atomic_long_add_return(skb->truesize, &mrc_rmem_total) > mrc_rmem_limit()) {
		atomic_long_sub(skb->truesize, &mrc_rmem_total);
		return false;
	}
	skb->sk = sk;
	skb->destructor = mrc_rfree;
	atomic_add(skb->truesize, &sk->sk_rmem_alloc);
	return true;
}

void *mrc_net_generic(const struct net *net, unsigned int id) { return net_generic(net, id); }
struct net *mrc_sock_net(const struct sock *sk) { return sock_net(sk); }
void *mrc_sk_user_data(const struct sock *sk) { return rcu_dereference_sk_user_data(sk); }
bool mrc_pskb_may_pull(struct sk_buff *skb, unsigned int len) { return pskb_may_pull(skb, len); }
void mrc_sk_clear_user_data(struct sock *sk) { rcu_assign_sk_user_data(sk, NULL); }
void mrc_kfree_skb(struct sk_buff *skb) { kfree_skb(skb); }
void mrc_sock_orphan(struct sock *sk) { sock_orphan(sk); }
void mrc_sock_put(struct sock *sk) { sock_put(sk); }
void mrc_sock_hold(struct sock *sk) { sock_hold(sk); }
struct net *mrc_seq_file_single_net(struct seq_file *seq) { return seq_file_single_net(seq); }
unsigned char *mrc_skb_network_header(const struct sk_buff *skb) { return skb_network_header(skb); }
void mrc_skb_reserve(struct sk_buff *skb, int len) { skb_reserve(skb, len); }
void *mrc_skb_put_data(struct sk_buff *skb, const void *data, unsigned int len) { return skb_put_data(skb, data, len); }

/*
 * Memory for one packet being built, @len bytes from the per-CPU page
 * fragment cache (where drivers take their receive buffers): given to an
 * skb by mrc_skb_add_frag(), or back with mrc_frag_free(). Any context but
 * hardirq.
 */
void *mrc_frag_alloc(unsigned int len) { return netdev_alloc_frag(len); }
void mrc_frag_free(void *data) { skb_free_frag(data); }

/*
 * Copies up to @len bytes of @msg's data into the page fragment the socket
 * writes through (the sending task's, sk_page_frag(), as TCP's sendmsg
 * copies a stream), taking a page reference for the piece: sets @page and
 * @off to where it lies. Returns the bytes copied (up to the fragment's
 * end: call again for the rest) or a negative errno. Process context.
 */
int mrc_msg_copy_piece(struct sock *sk, struct msghdr *msg, unsigned int len,
		       struct page **page, unsigned int *off)
{
	struct page_frag *pfrag = sk_page_frag(sk);
	unsigned int n;

	/* The sending task's memory cgroup pays for the pages it fills. */
	if (!skb_page_frag_refill(32U, pfrag, sk->sk_allocation | __GFP_ACCOUNT))
		return -ENOMEM;
	n = min_t(unsigned int, len, pfrag->size - pfrag->offset);
	if (copy_page_from_iter(pfrag->page, pfrag->offset, n, &msg->msg_iter) != n)
		return -EFAULT;
	get_page(pfrag->page);
	*page = pfrag->page;
	*off = pfrag->offset;
	pfrag->offset += n;
	return n;
}

void mrc_put_page(struct page *page) { put_page(page); }

/*
 * Appends @len bytes of @page from @off to @skb as its next fragment,
 * taking a page reference for it. False if @skb has no free slot.
 */
bool mrc_skb_add_page(struct sk_buff *skb, struct page *page, unsigned int off,
		      unsigned int len)
{
	int i = skb_shinfo(skb)->nr_frags;

	if (i >= MAX_SKB_FRAGS)
		return false;
	get_page(page);
	skb_add_rx_frag(skb, i, page, off, len, len);
	return true;
}

/* Free fragment slots of @skb. */
unsigned int mrc_skb_free_frags(const struct sk_buff *skb)
{
	return MAX_SKB_FRAGS - skb_shinfo(skb)->nr_frags;
}

/*
 * Appends @data, @len bytes from mrc_frag_alloc(), to @skb as its next page
 * fragment; @skb then owns the memory and is charged what the cache gave
 * out. False, and @data still the caller's, if @skb has no free slot.
 */
bool mrc_skb_add_frag(struct sk_buff *skb, void *data, unsigned int len)
{
	struct page *page = virt_to_head_page(data);
	int i = skb_shinfo(skb)->nr_frags;

	if (i >= MAX_SKB_FRAGS)
		return false;
	skb_add_rx_frag(skb, i, page, data - page_address(page), len,
			SKB_DATA_ALIGN(len));
	return true;
}
u16 mrc_skb_gso_segs(const struct sk_buff *skb) { return skb_is_gso(skb) ? skb_shinfo(skb)->gso_segs : 1; }

/*
 * Makes @skb, which holds @segs UDP payloads of @gso_size bytes (the last
 * may be shorter), one UDP GSO packet: the stack segments it where the
 * device cannot, and a receiving UDP socket that does not take GSO packets
 * gets the segments one by one.
 */
void mrc_skb_set_udp_gso(struct sk_buff *skb, u16 gso_size, u16 segs)
{
	skb_shinfo(skb)->gso_size = gso_size;
	skb_shinfo(skb)->gso_segs = segs;
	skb_shinfo(skb)->gso_type = SKB_GSO_UDP_L4;
}

/*
 * Before udp_tunnel_xmit_skb() or udp_tunnel6_xmit_skb() pushes the UDP
 * header in front of @skb's data: a GSO packet's checksum is left to the
 * segmentation (udp_set_csum() only seeds it with the pseudo-header), which
 * needs CHECKSUM_PARTIAL starting at the UDP header, as udp_send_skb() sets
 * it for a UDP socket's GSO packets.
 */
void mrc_skb_prepare_udp_gso(struct sk_buff *skb)
{
	if (!skb_is_gso(skb))
		return;
	skb->ip_summed = CHECKSUM_PARTIAL;
	skb->csum_start = skb_headroom(skb) - sizeof(struct udphdr);
	skb->csum_offset = offsetof(struct udphdr, check);
}

int mrc_ip4_dst_hoplimit(const struct dst_entry *dst) { return ip4_dst_hoplimit(dst); }
struct sk_buff *mrc_genlmsg_new(void) { return genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL); }
void mrc_nlmsg_free(struct sk_buff *skb) { nlmsg_free(skb); }
void mrc_genlmsg_end(struct sk_buff *skb, void *hdr) { genlmsg_end(skb, hdr); }
int mrc_genlmsg_reply(struct sk_buff *skb, struct genl_info *info) { return genlmsg_reply(skb, info); }
int mrc_nla_put_uint(struct sk_buff *skb, int attrtype, u64 value) { return nla_put_uint(skb, attrtype, value); }
struct nlattr *mrc_nla_nest_start(struct sk_buff *skb, int attrtype) { return nla_nest_start(skb, attrtype); }
void mrc_nla_nest_end(struct sk_buff *skb, struct nlattr *start) { nla_nest_end(skb, start); }
struct net *mrc_genl_info_net(const struct genl_info *info) { return genl_info_net(info); }
struct net *mrc_genl_dump_net(const struct netlink_callback *cb) { return sock_net(cb->skb->sk); }
u32 mrc_genl_dump_portid(const struct netlink_callback *cb) { return NETLINK_CB(cb->skb).portid; }
bool mrc_genl_dump_net_admin(const struct netlink_callback *cb) { return netlink_net_capable(cb->skb, CAP_NET_ADMIN); }
bool mrc_netlink_net_admin(const struct sk_buff *skb) { return netlink_net_capable(skb, CAP_NET_ADMIN); }
void mrc_genl_dump_check_consistent(struct netlink_callback *cb, void *hdr) { genl_dump_check_consistent(cb, hdr); }
void mrc_genlmsg_cancel(struct sk_buff *skb, void *hdr) { genlmsg_cancel(skb, hdr); }
void mrc_spin_lock_bh(spinlock_t *lock) { spin_lock_bh(lock); }
void mrc_spin_unlock_bh(spinlock_t *lock) { spin_unlock_bh(lock); }
void mrc_local_bh_disable(void) { local_bh_disable(); }
void mrc_local_bh_enable(void) { local_bh_enable(); }
struct sk_buff *mrc_skb_next(const struct sk_buff *skb) { return skb->next; }
void mrc_skb_set_next(struct sk_buff *skb, struct sk_buff *next) { skb->next = next; }
void mrc_lock_sock(struct sock *sk) { lock_sock(sk); }
u64 *mrc_percpu_alloc(unsigned int n) { return (u64 *)__alloc_percpu_gfp(n * sizeof(u64), sizeof(u64), GFP_KERNEL); }
void mrc_percpu_free(u64 *p) { free_percpu((u64 __percpu *)p); }
void mrc_percpu_add(u64 *p, unsigned int i, u64 n) { this_cpu_add(((u64 __percpu *)p)[i], n); }
u64 mrc_percpu_sum(u64 *p, unsigned int i)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += *per_cpu_ptr(&((u64 __percpu *)p)[i], cpu);
	return sum;
}
void mrc_sock_slock(struct sock *sk) { spin_lock_bh(&sk->sk_lock.slock); }
void mrc_sock_sunlock(struct sock *sk) { spin_unlock_bh(&sk->sk_lock.slock); }
bool mrc_sock_owned(const struct sock *sk) { return sock_owned_by_user(sk); }
wait_queue_head_t *mrc_sk_sleep(struct sock *sk) { return sk_sleep(sk); }
/* @w as DEFINE_WAIT_FUNC(w, woken_wake_function) makes it, for wait_woken(). */
void mrc_init_wait_woken(struct wait_queue_entry *w)
{
	*w = (struct wait_queue_entry){ .private = current, .func = woken_wake_function };
	INIT_LIST_HEAD(&w->entry);
}
bool mrc_signal_pending(void) { return signal_pending(current); }
int mrc_sock_intr_errno(long timeo) { return sock_intr_errno(timeo); }
long mrc_sock_rcvtimeo(const struct sock *sk, bool noblock) { return sock_rcvtimeo(sk, noblock); }
long mrc_sock_sndtimeo(const struct sock *sk, bool noblock) { return sock_sndtimeo(sk, noblock); }
int mrc_sock_rcvlowat(const struct sock *sk, bool waitall, int len) { return sock_rcvlowat(sk, waitall, len); }
int mrc_sock_error(struct sock *sk) { return sock_error(sk); }
void mrc_sock_poll_wait(struct file *file, struct socket *sock, poll_table *p) { sock_poll_wait(file, sock, p); }
void mrc_sock_graft(struct sock *sk, struct socket *parent) { sock_graft(sk, parent); }
bool mrc_sock_linger(const struct sock *sk, unsigned long *time) { *time = READ_ONCE(sk->sk_lingertime); return sock_flag(sk, SOCK_LINGER); }
bool mrc_sock_dead(const struct sock *sk) { return sock_flag(sk, SOCK_DEAD); }
void mrc_sk_set_err(struct sock *sk, int err) { WRITE_ONCE(sk->sk_err, err); sk_error_report(sk); }
void mrc_sk_data_ready(struct sock *sk) { sk->sk_data_ready(sk); }
/*
 * As sk_stream_write_space(): writers are woken only if one found no room
 * (SOCK_NOSPACE, set by mrc_sk_set_nospace()). A task asleep on the socket
 * for another reason, a reader waiting for a reply, say, is not woken
 * whenever an acknowledgement frees a message.
 */
void mrc_sk_write_space(struct sock *sk)
{
	struct socket *sock = READ_ONCE(sk->sk_socket);

	if (sock && test_and_clear_bit(SOCK_NOSPACE, &sock->flags))
		sk->sk_write_space(sk);
}
void mrc_sk_set_nospace(struct sock *sk)
{
	struct socket *sock = READ_ONCE(sk->sk_socket);

	if (sock)
		set_bit(SOCK_NOSPACE, &sock->flags);
}
void mrc_sk_state_change(struct sock *sk) { sk->sk_state_change(sk); }
void mrc_send_sigpipe(void) { send_sig(SIGPIPE, current, 0); }
u64 mrc_ktime_get_ns(void) { return ktime_get_ns(); }
u64 mrc_ktime_get_real_ns(void) { return ktime_get_real_ns(); }

/*
 * When @skb entered the receive stack, in CLOCK_REALTIME nanoseconds; 0 if
 * it was not stamped then, or carries a delivery time of another clock
 * (a sender's EDT) instead.
 */
u64 mrc_skb_rx_stamp(const struct sk_buff *skb)
{
	if (skb->tstamp_type != SKB_CLOCK_REALTIME)
		return 0;
	return ktime_to_ns(skb->tstamp);
}
void mrc_hrtimer_start(struct hrtimer *t, u64 ns, u64 slack) { hrtimer_start_range_ns(t, ns_to_ktime(ns), slack, HRTIMER_MODE_ABS_SOFT); }
void mrc_hrtimer_init(struct hrtimer *t) { hrtimer_init(t, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT); }
void mrc_warn(const char *msg) { WARN(1, "mrc: %s\n", msg); }
void mrc_might_sleep(void) { might_sleep(); }
bool mrc_queue_work(struct workqueue_struct *wq, struct work_struct *w) { return queue_work(wq, w); }
void mrc_init_work(struct work_struct *w, work_func_t fn) { INIT_WORK(w, fn); }
struct workqueue_struct *mrc_alloc_workqueue(void) { return alloc_workqueue("mrc", 0, 0); }
unsigned char *mrc_skb_pull(struct sk_buff *skb, unsigned int len) { return skb_pull(skb, len); }
void mrc_skb_clean(struct sk_buff *skb) { skb_orphan(skb); skb_dst_drop(skb); nf_reset_ct(skb); }
u32 mrc_skb_queue_len(const struct sk_buff_head *q) { return skb_queue_len_lockless(q); }
int mrc_skb_copy_datagram_msg(const struct sk_buff *skb, int off, struct msghdr *msg, int len) { return skb_copy_datagram_msg(skb, off, msg, len); }
void mrc_skb_queue_purge(struct sk_buff_head *q) { skb_queue_purge(q); }

void mrc_consume_skb(struct sk_buff *skb) { consume_skb(skb); }
void mrc_skb_list_init(struct sk_buff_head *list) { __skb_queue_head_init(list); }
void mrc_skb_list_tail(struct sk_buff_head *list, struct sk_buff *skb) { __skb_queue_tail(list, skb); }

/* Appends a private list to a queue under the queue's lock, all at once. */
void mrc_skb_queue_splice_tail(struct sk_buff_head *list, struct sk_buff_head *q)
{
	unsigned long flags;

	spin_lock_irqsave(&q->lock, flags);
	skb_queue_splice_tail_init(list, q);
	spin_unlock_irqrestore(&q->lock, flags);
}

/*
 * The packet of @q after @skb, a packet of @q (the first packet if @skb is
 * NULL), or NULL at the end; and in *@last the queue's last packet then.
 * Read under the queue's lock, against appends that link new packets
 * after the last one.
 */
struct sk_buff *mrc_skb_queue_next(struct sk_buff_head *q, struct sk_buff *skb,
				   struct sk_buff **last)
{
	struct sk_buff *next;
	unsigned long flags;

	spin_lock_irqsave(&q->lock, flags);
	next = skb ? skb->next : q->next;
	if (next == (struct sk_buff *)q)
		next = NULL;
	*last = skb_peek_tail(q);
	spin_unlock_irqrestore(&q->lock, flags);
	return next;
}

/* The socket's cookie, allocated on first use as SO_COOKIE and sock_diag
 * do (__sock_gen_cookie itself is not exported).
 */
u64 mrc_sock_cookie(struct sock *sk)
{
	__u32 c[2];

	sock_diag_save_cookie(sk, c);
	return (u64)c[1] << 32 | c[0];
}
bool mrc_genl_has_listeners(const struct genl_family *family, struct net *net) { return genl_has_listeners(family, net, 0); }
struct sk_buff *mrc_genlmsg_new_atomic(void) { return genlmsg_new(NLMSG_GOODSIZE, GFP_ATOMIC); }
int mrc_genlmsg_multicast_netns(const struct genl_family *family, struct net *net, struct sk_buff *skb) { return genlmsg_multicast_netns(family, net, skb, 0, 0, GFP_ATOMIC); }
/* An event could not be sent: its listeners in @net get ENOBUFS, as on an overrun. */
void mrc_genl_events_lost(const struct genl_family *family, struct net *net) { genl_set_err(family, net, 0, 0, -ENOBUFS); }
void mrc_nla_nest_cancel(struct sk_buff *skb, struct nlattr *start) { nla_nest_cancel(skb, start); }
u32 mrc_dst_mtu(const struct dst_entry *dst) { return dst_mtu(dst); }
int mrc_copy_from_sockptr(void *dst, sockptr_t src, size_t size) { return copy_from_sockptr(dst, src, size) ? -EFAULT : 0; }
int mrc_get_user_int(int *dst, int __user *src) { return get_user(*dst, src); }
int mrc_put_user_int(int __user *dst, int val) { return put_user(val, dst); }
int mrc_copy_to_user(void __user *dst, const void *src, size_t size) { return copy_to_user(dst, src, size) ? -EFAULT : 0; }
int mrc_copy_from_user(void *dst, const void __user *src, size_t size) { return copy_from_user(dst, src, size) ? -EFAULT : 0; }

/*
 * Receive memory of the tunnel socket's own queue. Batches wait there only
 * from their arrival to the data_ready callback that takes them, but both
 * CPUs may queue GRO trains of up to 64 datagrams at once.
 */
#define MRC_UDP_RCVBUF (4 << 20)

/*
 * Makes @sk, a fresh kernel UDP socket, hand MRC whole batches. GSO packets
 * and GRO trains are queued on it unsplit (udp_allow_gso); GRO_ENABLED lets
 * UDP GRO aggregate its datagrams, and the GRO socket lookup needs the
 * encapsulation key that udp_tunnel_encap_enable() turns on. @ready runs
 * after each packet is queued, in softirq. No encap_rcv: a socket with one
 * gets every GSO packet split first (udp_unexpected_gso()). @user_data is
 * the socket's RCU user data. Packets are stamped when they enter the
 * receive stack (netif_rx() or netif_receive_skb(), net_timestamp_check()),
 * as for a socket with SO_TIMESTAMP, so that MRC can time a round trip
 * from there (mrc_skb_rx_stamp()); the socket's destructor turns the
 * stamps off again.
 */
void mrc_udp_sock_setup(struct sock *sk, void *user_data, void (*ready)(struct sock *sk))
{
	sock_enable_timestamps(sk);
	inet_clear_bit(MC_LOOP, sk);
	rcu_assign_sk_user_data(sk, user_data);
	udp_allow_gso(sk);
	udp_set_bit(GRO_ENABLED, sk);
	udp_tunnel_encap_enable(sk);
	WRITE_ONCE(sk->sk_rcvbuf, MRC_UDP_RCVBUF);
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_data_ready = ready;
	write_unlock_bh(&sk->sk_callback_lock);
}

/*
 * Takes the packet queued first on the UDP socket @sk: one datagram, or a
 * GSO packet or GRO train, which is split here into its datagrams as
 * udp_queue_rcv_skb() would split it. Returns the datagrams linked by
 * ->next, each with data at its UDP header and a checksum known good; adds
 * to *@bad_csum those with a bad checksum, and to *@unsplit those of a GSO
 * packet or GRO train that could not be split (for want of memory). NULL
 * with both unchanged: the queue is empty.
 */
struct sk_buff *mrc_udp_dequeue(struct sock *sk, u32 *bad_csum, u32 *unsplit)
{
	struct sk_buff *skb, *segs, *seg, *next;
	int off = 0, err;
	bool csum_ok;
	u16 n;

	skb = __skb_recv_udp(sk, MSG_DONTWAIT, &off, &err);
	if (!skb)
		return NULL;
	/* Queued datagrams keep udp_dev_scratch where the device pointer was;
	 * it is read once and cleared, so nothing takes it for a device.
	 */
	csum_ok = udp_skb_csum_unnecessary(skb);
	skb->dev = NULL;
	if (!skb_is_gso(skb)) {
		/* As udp_recvmsg(): the checksum is checked on the way out. */
		if (!csum_ok && __udp_lib_checksum_complete(skb)) {
			__UDP_INC_STATS(sock_net(sk), UDP_MIB_CSUMERRORS, 0);
			(*bad_csum)++;
			kfree_skb_reason(skb, SKB_DROP_REASON_UDP_CSUM);
			return NULL;
		}
		/* __skb_recv_udp() unlinked it: its ->next is NULL. */
		__skb_push(skb, sizeof(struct udphdr));
		return skb;
	}
	n = skb_shinfo(skb)->gso_segs;
	/* A GSO packet of this host, or a GRO train, is CHECKSUM_PARTIAL with
	 * its checksum known good (csum_valid), until UDP pulls its header
	 * (udp_csum_pull_header()): the checksum start is then behind the
	 * data, and skb_postpull_rcsum() makes it CHECKSUM_NONE. Split as
	 * such, skb_segment() would compute the checksum of every byte in
	 * software. It is set back, as udp_rcv_segment() does for a looped
	 * packet: the segments are CHECKSUM_PARTIAL, as they were sent.
	 */
	if (skb->ip_summed == CHECKSUM_NONE && skb->csum_valid &&
	    skb_checksum_start(skb) == skb_transport_header(skb) &&
	    skb->csum_offset == offsetof(struct udphdr, check))
		skb->ip_summed = CHECKSUM_PARTIAL;
	__skb_push(skb, -skb_mac_offset(skb));
	segs = udp_rcv_segment(sk, skb, skb->protocol == htons(ETH_P_IP));
	if (!segs) {
		*unsplit += n;
		return NULL;
	}
	skb_list_walk_safe(segs, seg, next) {
		__skb_pull(seg, skb_transport_offset(seg));
		udp_post_segment_fix_csum(seg);
	}
	return segs;
}

/* ip_summed is a bitfield. */
bool mrc_skb_csum_partial(const struct sk_buff *skb)
{
	return skb->ip_summed == CHECKSUM_PARTIAL;
}

void mrc_kfree_skb_list(struct sk_buff *segs) { kfree_skb_list(segs); }
