/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C side of mrc.ko: module parameters (C macros) and one-line wrappers
 * around static inline kernel functions. Everything else is Rust.
 */
#ifndef _MRC_HELPERS_H
#define _MRC_HELPERS_H

#include <linux/types.h>
#include <linux/ipv6.h>
#include <linux/netdevice.h>
#include <linux/netlink.h>
#include <net/genetlink.h>
#include <linux/udp.h>
#include <linux/eventpoll.h>
#include <linux/skbuff.h>
#include <linux/sockptr.h>
#include <linux/spinlock_types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

/* Room in front of an outgoing datagram for UDP, IPv6 and link headers. */
enum {
	MRC_TX_HEADROOM = LL_MAX_HEADER + sizeof(struct ipv6hdr) + sizeof(struct udphdr),
	/* Length of a netlink attribute header (NLA_HDRLEN). */
	MRC_NLA_HDRLEN = NLA_ALIGN(sizeof(struct nlattr)),
	/* poll() event bits (typed __poll_t, which bindgen cannot evaluate). */
	MRC_EPOLLIN = (__force int)EPOLLIN,
	MRC_EPOLLOUT = (__force int)EPOLLOUT,
	MRC_EPOLLERR = (__force int)EPOLLERR,
	MRC_EPOLLHUP = (__force int)EPOLLHUP,
	MRC_EPOLLRDNORM = (__force int)EPOLLRDNORM,
	MRC_EPOLLWRNORM = (__force int)EPOLLWRNORM,
	MRC_EPOLLRDHUP = (__force int)EPOLLRDHUP,
	/* Bytes of skb->cb. */
	MRC_SKB_CB_LEN = sizeof_field(struct sk_buff, cb),
	/* Joining the events group needs CAP_NET_ADMIN (a BIT() macro). */
	MRC_GENL_MCAST_CAP_NET_ADMIN = GENL_MCAST_CAP_NET_ADMIN,
	/* An entry of a split ops table that is a doit (a BIT() macro). */
	MRC_GENL_CMD_CAP_DO = GENL_CMD_CAP_DO,
};

struct dst_entry;
struct genl_info;
struct netlink_callback;
struct nlattr;
struct net;
struct sk_buff;
struct sock;
struct seq_file;
struct file;
struct socket;
struct hrtimer;
struct work_struct;
struct workqueue_struct;
struct msghdr;
struct page;
struct sk_buff_head;
struct poll_table_struct;

int mrc_param_family(void);
u16 mrc_param_port(void);
bool mrc_param_pacing(void);
bool mrc_param_gso(void);
u32 mrc_param_rst_rate(void);
u32 mrc_param_fin_timeout_ms(void);
u32 mrc_param_max_orphans(void);
u32 mrc_param_rst_burst(void);

void mrc_rmem_init(void);
unsigned long mrc_rmem_limit(void);
long mrc_rmem_total_read(void);
int mrc_sk_rmem_alloc(const struct sock *sk);
int mrc_sock_rcvbuf(const struct sock *sk);
int mrc_sock_sndbuf(const struct sock *sk);
bool mrc_sock_task_frag(const struct sock *sk);
u32 mrc_skb_truesize(const struct sk_buff *skb);
bool mrc_skb_charge_rx(struct sk_buff *skb, struct sock *sk);
void mrc_sock_inherit(struct sock *sk, const struct sock *parent);
bool mrc_sock_addr_is_local(const struct sock *sk, const u8 *addr, bool v6);
bool mrc_sock_port_denied(const struct sock *sk, u16 port);

void *mrc_net_generic(const struct net *net, unsigned int id);
struct net *mrc_sock_net(const struct sock *sk);
void *mrc_sk_user_data(const struct sock *sk);
void mrc_sk_clear_user_data(struct sock *sk);
void mrc_udp_sock_setup(struct sock *sk, void *user_data, void (*ready)(struct sock *sk));
struct sk_buff *mrc_udp_dequeue(struct sock *sk, u32 *bad_csum, u32 *unsplit);
void mrc_kfree_skb_list(struct sk_buff *segs);
bool mrc_pskb_may_pull(struct sk_buff *skb, unsigned int len);
void mrc_kfree_skb(struct sk_buff *skb);
void mrc_sock_orphan(struct sock *sk);
void mrc_sock_put(struct sock *sk);
void mrc_sock_hold(struct sock *sk);
struct net *mrc_seq_file_single_net(struct seq_file *seq);
unsigned char *mrc_skb_network_header(const struct sk_buff *skb);
void mrc_skb_reserve(struct sk_buff *skb, int len);
void *mrc_skb_put_data(struct sk_buff *skb, const void *data, unsigned int len);
int mrc_msg_copy_piece(struct sock *sk, struct msghdr *msg, unsigned int len,
		       struct page **page, unsigned int *off);
void mrc_put_page(struct page *page);
bool mrc_skb_add_page(struct sk_buff *skb, struct page *page, unsigned int off,
		      unsigned int len);
unsigned int mrc_skb_free_frags(const struct sk_buff *skb);
void *mrc_frag_alloc(unsigned int len);
void mrc_frag_free(void *data);
bool mrc_skb_add_frag(struct sk_buff *skb, void *data, unsigned int len);
u16 mrc_skb_gso_segs(const struct sk_buff *skb);
void mrc_skb_set_udp_gso(struct sk_buff *skb, u16 gso_size, u16 segs);
void mrc_skb_prepare_udp_gso(struct sk_buff *skb);
int mrc_ip4_dst_hoplimit(const struct dst_entry *dst);
struct sk_buff *mrc_genlmsg_new(void);
void mrc_nlmsg_free(struct sk_buff *skb);
void mrc_genlmsg_end(struct sk_buff *skb, void *hdr);
int mrc_genlmsg_reply(struct sk_buff *skb, struct genl_info *info);
int mrc_nla_put_uint(struct sk_buff *skb, int attrtype, u64 value);
struct nlattr *mrc_nla_nest_start(struct sk_buff *skb, int attrtype);
void mrc_nla_nest_end(struct sk_buff *skb, struct nlattr *start);
struct net *mrc_genl_info_net(const struct genl_info *info);
struct net *mrc_genl_dump_net(const struct netlink_callback *cb);
u32 mrc_genl_dump_portid(const struct netlink_callback *cb);
bool mrc_genl_dump_net_admin(const struct netlink_callback *cb);
bool mrc_netlink_net_admin(const struct sk_buff *skb);
void mrc_genl_dump_check_consistent(struct netlink_callback *cb, void *hdr);
void mrc_genlmsg_cancel(struct sk_buff *skb, void *hdr);

void mrc_spin_lock_bh(spinlock_t *lock);
void mrc_spin_unlock_bh(spinlock_t *lock);
void mrc_local_bh_disable(void);
void mrc_local_bh_enable(void);
struct sk_buff *mrc_skb_next(const struct sk_buff *skb);
void mrc_skb_set_next(struct sk_buff *skb, struct sk_buff *next);
void mrc_lock_sock(struct sock *sk);
u64 *mrc_percpu_alloc(unsigned int n);
void mrc_percpu_free(u64 *p);
void mrc_percpu_add(u64 *p, unsigned int i, u64 n);
u64 mrc_percpu_sum(u64 *p, unsigned int i);
void mrc_sock_slock(struct sock *sk);
void mrc_sock_sunlock(struct sock *sk);
bool mrc_sock_owned(const struct sock *sk);
wait_queue_head_t *mrc_sk_sleep(struct sock *sk);
void mrc_init_wait_woken(struct wait_queue_entry *w);
bool mrc_signal_pending(void);
int mrc_sock_intr_errno(long timeo);
long mrc_sock_rcvtimeo(const struct sock *sk, bool noblock);
long mrc_sock_sndtimeo(const struct sock *sk, bool noblock);
int mrc_sock_rcvlowat(const struct sock *sk, bool waitall, int len);
int mrc_sock_error(struct sock *sk);
void mrc_sock_poll_wait(struct file *file, struct socket *sock, struct poll_table_struct *p);
void mrc_sock_graft(struct sock *sk, struct socket *parent);
bool mrc_sock_linger(const struct sock *sk, unsigned long *time);
bool mrc_sock_dead(const struct sock *sk);
void mrc_sk_set_err(struct sock *sk, int err);
void mrc_sk_data_ready(struct sock *sk);
void mrc_sk_write_space(struct sock *sk);
void mrc_sk_set_nospace(struct sock *sk);
void mrc_sk_state_change(struct sock *sk);
void mrc_send_sigpipe(void);
u64 mrc_ktime_get_ns(void);
u64 mrc_ktime_get_real_ns(void);
u64 mrc_skb_rx_stamp(const struct sk_buff *skb);
void mrc_hrtimer_start(struct hrtimer *t, u64 ns, u64 slack);
void mrc_hrtimer_init(struct hrtimer *t);
void mrc_warn(const char *msg);
void mrc_might_sleep(void);
bool mrc_queue_work(struct workqueue_struct *wq, struct work_struct *w);
void mrc_init_work(struct work_struct *w, work_func_t fn);
struct workqueue_struct *mrc_alloc_workqueue(void);
unsigned char *mrc_skb_pull(struct sk_buff *skb, unsigned int len);
void mrc_skb_clean(struct sk_buff *skb);
struct sk_buff *mrc_skb_queue_next(struct sk_buff_head *q, struct sk_buff *skb,
				   struct sk_buff **last);
u32 mrc_skb_queue_len(const struct sk_buff_head *q);
int mrc_skb_copy_datagram_msg(const struct sk_buff *skb, int off, struct msghdr *msg, int len);
bool mrc_skb_csum_partial(const struct sk_buff *skb);
void mrc_skb_queue_purge(struct sk_buff_head *q);
/* consume_skb(), an inline without CONFIG_TRACEPOINTS. */
void mrc_consume_skb(struct sk_buff *skb);
void mrc_skb_list_init(struct sk_buff_head *list);
void mrc_skb_list_tail(struct sk_buff_head *list, struct sk_buff *skb);
void mrc_skb_queue_splice_tail(struct sk_buff_head *list, struct sk_buff_head *q);
void mrc_nla_nest_cancel(struct sk_buff *skb, struct nlattr *start);
u32 mrc_dst_mtu(const struct dst_entry *dst);
struct genl_family;
u64 mrc_sock_cookie(struct sock *sk);
bool mrc_genl_has_listeners(const struct genl_family *family, struct net *net);
struct sk_buff *mrc_genlmsg_new_atomic(void);
int mrc_genlmsg_multicast_netns(const struct genl_family *family, struct net *net, struct sk_buff *skb);
void mrc_genl_events_lost(const struct genl_family *family, struct net *net);
int mrc_copy_from_sockptr(void *dst, sockptr_t src, size_t size);
int mrc_get_user_int(int *dst, int __user *src);
int mrc_put_user_int(int __user *dst, int val);
int mrc_copy_to_user(void __user *dst, const void *src, size_t size);
int mrc_copy_from_user(void *dst, const void __user *src, size_t size);

#endif /* _MRC_HELPERS_H */
